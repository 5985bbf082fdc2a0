//! The one shape of a refusal for load: the queue is full, the caller
//! creates too fast, the server has no stream or connection left, or it
//! drains before it stops (a load balancer sends the retry elsewhere).
//!
//! JSON-RPC has no code for "busy, come back later", and MCP reserves
//! -32000 to -32099, so the error is -32603 (internal error) with `data`:
//! `{"reason": "...", "retryAfterMs": N, ...}`, plus what the reason adds
//! (the bound that was reached). Over HTTP the serving recipe answers such
//! a refusal with status 503 and `Retry-After` (whole seconds, rounded up),
//! so proxies and clients back off.
//!
//! Inside the runtime a refusal is a [`Refusal`] (the reason and the retry
//! hint), never the wire's error: it becomes one at the edge, once, in
//! [`Refusal::into_error`], which also marks the HTTP request through the
//! [`RetryMark`] the recipe put in its extensions; the recipe's front
//! (`transport/http/front.rs`) turns that mark into the 503. An answer that is an
//! event stream (a 2025-11-25 session's) has sent its status already and
//! carries the error alone.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::Extensions;
use serde_json::{Map, Value, json};

/// Why a request was refused for load; `data.reason` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The caller has as many unfinished tasks as it may.
    CallerTasks,
    /// The queue of tasks waiting to run is full.
    QueueFull,
    /// The caller creates tasks faster than its rate allows.
    RateLimited,
    /// No listen stream is left, server-wide or for this caller.
    ListenStreams,
    /// No connection is left.
    Connections,
    /// The server drains before it stops: it takes no new task.
    Draining,
}

impl Reason {
    /// The `cause` label of its refusals in the metrics.
    pub(crate) fn cause(self) -> &'static str {
        match self {
            Reason::CallerTasks => "cap",
            Reason::QueueFull => "queue",
            Reason::RateLimited => "rate",
            Reason::ListenStreams => "listen_streams",
            Reason::Connections => "connections",
            Reason::Draining => "draining",
        }
    }

    /// The name in `data.reason`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::CallerTasks => "callerTasks",
            Reason::QueueFull => "queueFull",
            Reason::RateLimited => "rateLimited",
            Reason::ListenStreams => "listenStreams",
            Reason::Connections => "connections",
            Reason::Draining => "draining",
        }
    }
}

/// A request refused for load, as the runtime's parts say it: why, what a
/// person reads, when to try again, and what the reason adds (the bound
/// that was reached). It stays this type through the runtime and becomes
/// the wire's JSON-RPC error only at the edge ([`Refusal::into_error`]),
/// where the serving recipe's [`RetryMark`] turns it into HTTP's 503.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    reason: Reason,
    message: String,
    retry_after: Duration,
    extra: Map<String, Value>,
}

impl Refusal {
    /// A refusal for `reason`, telling the caller `message` and to try
    /// again after `retry_after`; `extra` goes into the error's `data`.
    pub(crate) fn new(
        reason: Reason,
        message: impl Into<String>,
        retry_after: Duration,
        extra: Map<String, Value>,
    ) -> Self {
        Self {
            reason,
            message: message.into(),
            retry_after,
            extra,
        }
    }

    /// When the caller may try again.
    pub(crate) fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The JSON-RPC error: -32603 with the message, and in `data` the
    /// reason, `retryAfterMs` and the reason's own fields. Counted in the
    /// metrics as it is answered (a refused connection is counted as it is
    /// refused: its answer is written once, ahead of time), and sets the
    /// HTTP request's `mark`, if the serving recipe put one (see
    /// [`RetryMark::of`]), so that it answers 503.
    pub(crate) fn into_error(self, mark: Option<&RetryMark>) -> ErrorData {
        if let Some(mark) = mark {
            mark.set(self.retry_after);
        }
        if self.reason != Reason::Connections {
            crate::telemetry::metrics::refused(self.reason.cause());
        }
        let data = data(self.reason, self.retry_after, self.extra);
        ErrorData::internal_error(self.message, Some(data))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A step of a creation that did not go through: refused for load, or
/// failed (a store that cannot be reached, a lease lost).
#[derive(Debug)]
pub(crate) enum Denial {
    /// Refused for load: the caller may try again later.
    Refused(Refusal),
    /// Failed, with the wire's error.
    Failed(ErrorData),
}

impl From<Refusal> for Denial {
    fn from(refusal: Refusal) -> Self {
        Self::Refused(refusal)
    }
}

impl From<ErrorData> for Denial {
    fn from(error: ErrorData) -> Self {
        Self::Failed(error)
    }
}

/// How long a caller refused for its cap or a full queue is told to wait.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// The refusal of a caller that has `limit` unfinished tasks already.
pub(crate) fn caller_tasks(limit: u64) -> Refusal {
    let mut extra = Map::new();
    extra.insert("maxTasksPerCaller".into(), json!(limit));
    Refusal::new(
        Reason::CallerTasks,
        format!(
            "too many unfinished tasks for this caller (at most {limit}): wait for some to \
             finish, or cancel them, then call again"
        ),
        BUSY_RETRY,
        extra,
    )
}

/// The refusal of a creation when `max` tasks wait to run already.
pub(crate) fn queue_full(max: u64) -> Refusal {
    let mut extra = Map::new();
    extra.insert("maxQueued".into(), json!(max));
    Refusal::new(
        Reason::QueueFull,
        format!("the server is busy: {max} tasks wait to run already; try again in a moment"),
        BUSY_RETRY,
        extra,
    )
}

/// How long a creation refused by a draining server is told to wait: long
/// enough for a load balancer to mark this replica down, short enough for
/// a client without one to find the restarted server soon.
pub(crate) const DRAINING_RETRY: Duration = Duration::from_secs(3);

/// The refusal of a creation while the runtime drains.
pub(crate) fn draining() -> Refusal {
    Refusal::new(
        Reason::Draining,
        "the server is shutting down and takes no new task; call again (another replica or the \
         restarted server takes it)",
        DRAINING_RETRY,
        Map::new(),
    )
}

/// `data` of a refusal.
pub(crate) fn data(reason: Reason, retry_after: Duration, extra: Map<String, Value>) -> Value {
    let mut data = extra;
    data.insert("reason".into(), json!(reason.as_str()));
    data.insert(
        "retryAfterMs".into(),
        json!(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)),
    );
    Value::Object(data)
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))] // for HTTP's Retry-After
pub(crate) fn retry_after_secs(retry_after: Duration) -> u64 {
    u64::try_from(retry_after.as_millis().div_ceil(1000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Put by the HTTP serving recipe in a request's extensions: set when the
/// request is refused for load, so the answer becomes a 503 with
/// `Retry-After`.
#[derive(Debug, Clone, Default)]
pub(crate) struct RetryMark(Arc<OnceLock<Duration>>);

impl RetryMark {
    /// The mark of the HTTP request whose parts are in `extensions`.
    pub(crate) fn of(extensions: &Extensions) -> Option<&RetryMark> {
        extensions
            .get::<::http::request::Parts>()?
            .extensions
            .get::<RetryMark>()
    }

    /// Marks the request refused, to retry after `retry_after`.
    pub(crate) fn set(&self, retry_after: Duration) {
        let _ = self.0.set(retry_after);
    }

    /// When to retry, if the request was refused.
    #[cfg_attr(not(feature = "http-server"), allow(dead_code))] // for HTTP's Retry-After
    pub(crate) fn get(&self) -> Option<Duration> {
        self.0.get().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
    }

    #[test]
    fn a_refusal_carries_its_reason_and_hint_and_marks_the_request() {
        let (mut parts, ()) = ::http::Request::builder().body(()).unwrap().into_parts();
        let mark = RetryMark::default();
        parts.extensions.insert(mark.clone());
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        let mut extra = Map::new();
        extra.insert("maxQueued".into(), json!(10));
        let error = Refusal::new(
            Reason::QueueFull,
            "the queue is full",
            Duration::from_millis(1500),
            extra,
        )
        .into_error(RetryMark::of(&extensions));
        assert_eq!(error.code.0, -32603);
        assert_eq!(
            error.data,
            Some(json!({"reason": "queueFull", "retryAfterMs": 1500, "maxQueued": 10}))
        );
        assert_eq!(mark.get(), Some(Duration::from_millis(1500)));
    }
}
