//! Wall-clock time for task timestamps, TTLs and retention: [`Clock`], and
//! the clocks tests inject ([`ManualClock`], [`TokioClock`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::task::UnixMillis;

/// Where the runtime reads the time for every timestamp and every TTL,
/// retention and expiry decision. Injected through the runtime's builder.
pub trait Clock: Send + Sync + 'static {
    /// The time now.
    fn now(&self) -> UnixMillis;
}

/// The system clock (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        UnixMillis::now()
    }
}

/// A clock that moves only when told to: [`ManualClock::advance`] and
/// [`ManualClock::set`]. Clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: UnixMillis) -> Self {
        Self(Arc::new(AtomicU64::new(at.as_millis())))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = crate::task::saturating_millis(by);
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            });
    }

    /// Sets the clock to `at` (also backwards: the runtime never lets a
    /// task's `lastUpdatedAt` go back).
    pub fn set(&self, at: UnixMillis) {
        self.0.store(at.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMillis {
        UnixMillis::new(self.0.load(Ordering::SeqCst))
    }
}

/// A wall clock that follows tokio's clock: it starts at a given time and
/// moves as `tokio::time::Instant` does. Under a paused tokio clock
/// (`#[tokio::test(start_paused = true)]`, `tokio::time::advance`) the
/// runtime's TTLs then run exactly and instantly with the tool's sleeps.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    start: UnixMillis,
    base: tokio::time::Instant,
}

impl TokioClock {
    /// A clock at `start` now; it moves with tokio's clock from here.
    pub fn starting_at(start: UnixMillis) -> Self {
        Self {
            start,
            base: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> UnixMillis {
        self.start.saturating_add(self.base.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_when_told() {
        let clock = ManualClock::new(UnixMillis::new(1_000));
        let shared = clock.clone();
        clock.advance(Duration::from_millis(250));
        assert_eq!(shared.now(), UnixMillis::new(1_250));
        shared.set(UnixMillis::new(5));
        assert_eq!(clock.now(), UnixMillis::new(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_follows_paused_time() {
        let clock = TokioClock::starting_at(UnixMillis::new(10_000));
        assert_eq!(clock.now(), UnixMillis::new(10_000));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(clock.now(), UnixMillis::new(13_000));
    }
}
