//! The one deadline of a call or a wait ([`AwaitOptions::deadline`](super::AwaitOptions::deadline)):
//! started once, then handed to every step (each request, each MRTR round,
//! each input handler or resolver, each pause, the journal write), which
//! runs only as long as it leaves.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::error::{Error, Stage};
use super::state::TaskState;
use crate::task::TaskId;

/// How long one request waits for its answer when nothing else bounds it:
/// [`TasksClient::get`](super::TasksClient::get),
/// [`update`](super::TasksClient::update) and
/// [`cancel`](super::TasksClient::cancel) called on their own (a wait bounds
/// its requests by [`AwaitOptions::request_timeout`](super::AwaitOptions::request_timeout)
/// and its deadline instead). Not a `tools/call`: a synchronous tool
/// answers when it is done, and only the call's deadline bounds it (see
/// [`CallOptions::timeout`](super::CallOptions::timeout)).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// When a call or a wait started, and when it must end (`None`: never).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    started: Instant,
    at: Option<Instant>,
}

impl Deadline {
    /// A deadline `limit` from now (`None`: no limit).
    pub(crate) fn start(limit: Option<Duration>) -> Self {
        let started = Instant::now();
        Self {
            started,
            at: limit.map(|limit| started + limit),
        }
    }

    /// How long since it started.
    pub(crate) fn waited(&self) -> Duration {
        self.started.elapsed()
    }

    /// True once it has passed.
    pub(crate) fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// The instant it passes, if it does.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// The timeout of one request whose own limit is `own`: the shorter
    /// of `own` and the time left. `Err(())` when no time is left.
    pub(crate) fn cut(&self, own: Option<Duration>) -> Result<Option<Duration>, ()> {
        let Some(at) = self.at else {
            return Ok(own);
        };
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(());
        }
        Ok(Some(own.map_or(left, |own| own.min(left))))
    }

    /// Runs `work` until it ends or the deadline passes, whichever comes
    /// first: `None` at the deadline (and `work` is dropped: cancelled).
    /// Work that is ready at once ends even past the deadline.
    pub(crate) async fn within<F: Future>(&self, work: F) -> Option<F::Output> {
        match self.at {
            None => Some(work.await),
            Some(at) => tokio::time::timeout_at(at, work).await.ok(),
        }
    }

    /// [`Error::Timeout`]: `stage` ran out, on `task_id` (when a task
    /// exists) whose last state read is `last_state`.
    pub(crate) fn timeout(
        &self,
        stage: Stage,
        task_id: Option<&TaskId>,
        last_state: Option<&TaskState>,
    ) -> Error {
        Error::Timeout {
            task_id: task_id.cloned(),
            waited: self.waited(),
            last_state: last_state.cloned().map(Box::new),
            stage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_get_the_time_left_when_it_is_shorter() {
        let deadline = Deadline::start(Some(Duration::from_secs(3)));
        let own = Some(Duration::from_secs(2));
        assert_eq!(deadline.cut(own), Ok(own));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(deadline.cut(own), Ok(Some(Duration::from_millis(1500))));
        assert_eq!(deadline.cut(None), Ok(Some(Duration::from_millis(1500))));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(deadline.passed());
        assert_eq!(deadline.cut(own), Err(()));
        let unlimited = Deadline::start(None);
        assert_eq!(unlimited.cut(None), Ok(None));
        assert!(!unlimited.passed());
    }

    #[tokio::test(start_paused = true)]
    async fn work_is_cut_off_at_the_deadline_to_the_instant() {
        let deadline = Deadline::start(Some(Duration::from_millis(700)));
        let started = Instant::now();
        assert_eq!(deadline.within(std::future::pending::<()>()).await, None);
        assert_eq!(started.elapsed(), Duration::from_millis(700));
        assert_eq!(deadline.waited(), Duration::from_millis(700));
        assert_eq!(
            deadline.within(async { 5 }).await,
            Some(5),
            "work that is ready at once ends even past the deadline"
        );
    }
}
