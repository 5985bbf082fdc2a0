//! An upstream's health as its connections find it: the [`CircuitBreaker`]
//! of its configuration, fed by every attempt to connect with the
//! gateway's own identity (for a call, a further connection, or the
//! background reconnect). A pool of a caller's identity is not counted: its
//! handshake may fail for that caller's token alone, and one caller must
//! not shut the others out.
//! A hand-written counter rather than a crate's: the breaker needs only a
//! count and a time, and it must count the attempts the gateway makes
//! itself, not the calls wrapped in it, which is what the breaker crates
//! wrap.

use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use tokio::time::Instant;

use super::team::CircuitBreaker;
use crate::telemetry::names::UPSTREAM_BREAKER_OPEN;

/// The name of the gateway's one upstream (of [`Gateway::start`](super::Gateway::start)),
/// its metrics' `upstream` label.
pub(crate) const SINGLE: &str = "upstream";

/// How messages name the upstream `name`: "the upstream NAME", or "the
/// upstream server" for a gateway's one upstream.
pub(crate) fn the_upstream(name: &str) -> String {
    if name == SINGLE {
        "the upstream server".to_owned()
    } else {
        format!("the upstream {name}")
    }
}

/// One upstream's name and breaker.
#[derive(Debug)]
pub(crate) struct Health {
    /// The upstream's name, the `upstream` label of its metrics.
    pub(crate) name: Arc<str>,
    breaker: CircuitBreaker,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Failed attempts in a row.
    failures: u32,
    /// When it last opened (calls fail fast for the cool-down from then).
    opened: Option<Instant>,
}

impl Health {
    pub(crate) fn new(name: impl Into<Arc<str>>, breaker: CircuitBreaker) -> Arc<Self> {
        let health = Arc::new(Self {
            name: name.into(),
            breaker,
            state: Mutex::default(),
        });
        metrics::gauge!(UPSTREAM_BREAKER_OPEN, "upstream" => health.name.to_string()).set(0.0);
        health
    }

    /// A health that counts nothing anyone reads: for a probe whose
    /// failure is an answer, not a failure (whether the upstream speaks
    /// `initialize` too).
    pub(crate) fn unheeded(&self) -> Arc<Self> {
        Arc::new(Self {
            name: self.name.clone(),
            breaker: CircuitBreaker::new(0, self.breaker.cool_down),
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A connection opened: the count starts again, and the breaker closes.
    pub(crate) fn connected(&self) {
        let was_open = {
            let mut state = self.lock();
            state.failures = 0;
            state.opened.take().is_some()
        };
        if was_open {
            tracing::info!(upstream = %self.name, "the upstream is reachable again: calls go through");
            metrics::gauge!(UPSTREAM_BREAKER_OPEN, "upstream" => self.name.to_string()).set(0.0);
        }
    }

    /// An attempt to connect failed: at the bound (and at each further
    /// failure past it) the breaker opens for the cool-down.
    pub(crate) fn failed(&self) {
        if self.breaker.failures == 0 {
            return;
        }
        let opened = {
            let mut state = self.lock();
            state.failures = state.failures.saturating_add(1);
            if state.failures >= self.breaker.failures {
                let first = state.opened.is_none();
                state.opened = Some(Instant::now());
                Some(first)
            } else {
                None
            }
        };
        if opened == Some(true) {
            tracing::warn!(
                upstream = %self.name,
                failures = self.breaker.failures,
                cool_down = ?self.breaker.cool_down,
                "the upstream cannot be reached: its calls fail fast"
            );
            metrics::gauge!(UPSTREAM_BREAKER_OPEN, "upstream" => self.name.to_string()).set(1.0);
        }
    }

    /// Refuses a call while the breaker is open, saying why and for how long.
    pub(crate) fn check(&self) -> Result<(), ErrorData> {
        let state = self.lock();
        match state.opened {
            Some(at) if at.elapsed() < self.breaker.cool_down => Err(ErrorData::internal_error(
                format!(
                    "{} is unavailable: {} connection failures in a row; calls fail fast for {}",
                    the_upstream(&self.name),
                    state.failures,
                    seconds(self.breaker.cool_down)
                ),
                None,
            )),
            _ => Ok(()),
        }
    }
}

/// A duration as a person writes it: `30s`, `1.5s`, `250ms`.
pub(crate) fn seconds(duration: std::time::Duration) -> String {
    if duration.subsec_millis() == 0 && duration.as_secs() > 0 {
        format!("{}s", duration.as_secs())
    } else if duration.as_secs() == 0 {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn it_opens_after_the_failures_in_a_row_and_closes_after_the_cool_down() {
        let health = Health::new("files", CircuitBreaker::new(3, Duration::from_secs(30)));
        health.failed();
        health.failed();
        assert!(health.check().is_ok(), "two failures keep it closed");
        health.connected();
        health.failed();
        health.failed();
        assert!(
            health.check().is_ok(),
            "a connection starts the count again"
        );
        health.failed();
        let refused = health.check().expect_err("open after three");
        assert_eq!(
            refused.message,
            "the upstream files is unavailable: 3 connection failures in a row; calls fail fast \
             for 30s"
        );
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(
            health.check().is_ok(),
            "the cool-down passed: calls try again"
        );
        health.failed();
        assert!(health.check().is_err(), "one more failure opens it again");
        health.connected();
        assert!(health.check().is_ok());
    }

    #[test]
    fn zero_failures_never_opens_it() {
        let health = Health::new("x", CircuitBreaker::new(0, Duration::from_secs(1)));
        for _ in 0..100 {
            health.failed();
        }
        assert!(health.check().is_ok());
    }

    #[test]
    fn durations_read_as_written() {
        assert_eq!(seconds(Duration::from_secs(30)), "30s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5s");
        assert_eq!(seconds(Duration::from_millis(250)), "250ms");
    }
}
