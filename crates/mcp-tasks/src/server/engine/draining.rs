//! What a drain ([`TaskRuntime::drain`](crate::server::TaskRuntime::drain)) shares
//! with the supervision of each task: the moment it stops waiting (the
//! tools still running are then ended, each the honest way for its task),
//! how long it had waited, and how many tasks it ended each way, for its
//! [`DrainReport`].
//!
//! A leaf of the runtime's state (`state.rs`): the drain itself, a method
//! of the runtime, lives a floor above in `drain.rs`; whether a seat may be
//! taken while it runs is the seats' own business (`limits.rs`), under
//! their lock.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How long the drain waits, at most, for the tasks it ended to record
/// how they ended (a store write each).
pub(crate) const ENDING_GRACE: Duration = Duration::from_secs(10);

/// What [`TaskRuntime::drain`](crate::server::TaskRuntime::drain) did: how the
/// tasks of this process ended while it drained. No task id is in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// How long the drain waited for the tools to end by themselves.
    pub waited: Duration,
    /// Tasks that ended by themselves while the drain waited (completed,
    /// failed or cancelled, as their tools and callers decided), queued
    /// tasks that ran in that time included.
    pub finished: usize,
    /// Resumable tasks stopped without failing them: their tool was
    /// dropped and the task left working, to continue from its last
    /// checkpoint when the server starts again on the same store.
    pub suspended: usize,
    /// Resumable tasks handed to another replica of a shared store.
    pub handed_off: usize,
    /// Tasks the drain failed: they were still running (or queued) when it
    /// stopped waiting, and nothing could continue them.
    pub failed: usize,
    /// Tasks still not ended when the drain returned (their store could
    /// not be written in time): the store's own recovery ends them.
    pub unsettled: usize,
}

impl DrainReport {
    /// How many tasks ran or waited in this process when the drain began.
    pub fn total(&self) -> usize {
        self.finished + self.suspended + self.handed_off + self.failed + self.unsettled
    }
}

/// How long, on a shared store, a resumable task's tool has to make its
/// next checkpoint (where it is handed off) before it is stopped and
/// handed off all the same.
pub(crate) const HAND_OFF_GRACE: Duration = Duration::from_secs(3);

/// A drain's state, in the runtime's.
#[derive(Debug, Default)]
pub(crate) struct Draining {
    /// Fired when a drain on a shared store begins: resumable tasks are
    /// handed to the other replicas.
    handing_off: CancellationToken,
    /// When the hand-off grace ends, set before `handing_off` fires.
    hand_off_by: OnceLock<tokio::time::Instant>,
    /// Fired when the drain stops waiting: what still runs is ended.
    ending: CancellationToken,
    /// How long the drain waited, set before `ending` fires.
    waited: OnceLock<Duration>,
    suspended: AtomicUsize,
    handed_off: AtomicUsize,
    failed: AtomicUsize,
}

/// How the drain ended one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Suspended,
    HandedOff,
    Failed,
}

impl Draining {
    /// Starts handing resumable tasks off: at their next checkpoint, or
    /// when `grace` has passed.
    pub(crate) fn hand_off(&self, grace: Duration) {
        let _ = self.hand_off_by.set(tokio::time::Instant::now() + grace);
        self.handing_off.cancel();
    }

    /// True once [`Draining::hand_off`] was called.
    pub(crate) fn is_handing_off(&self) -> bool {
        self.handing_off.is_cancelled()
    }

    /// Completes when the hand-off grace has passed; never without a
    /// hand-off.
    pub(crate) async fn hand_off_due(&self) {
        self.handing_off.cancelled().await;
        if let Some(by) = self.hand_off_by.get() {
            tokio::time::sleep_until(*by).await;
        }
    }

    /// Stops the wait: every task still supervised is ended. `waited` is
    /// how long the drain waited.
    pub(crate) fn end_all(&self, waited: Duration) {
        let _ = self.waited.set(waited);
        self.ending.cancel();
    }

    /// True once the drain stopped waiting and ends what still runs.
    pub(crate) fn is_ending(&self) -> bool {
        self.ending.is_cancelled()
    }

    /// Completes when the drain ends what still runs; never without a drain.
    pub(crate) async fn ending(&self) {
        self.ending.cancelled().await;
    }

    /// How long the drain waited before it ended what still ran.
    pub(crate) fn waited(&self) -> Duration {
        self.waited.get().copied().unwrap_or_default()
    }

    /// Counts a task the drain ended.
    pub(crate) fn count(&self, ended: Ended) {
        let counter = match ended {
            Ended::Suspended => &self.suspended,
            Ended::HandedOff => &self.handed_off,
            Ended::Failed => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The report of a drain that found `at_start` tasks, waited `waited`
    /// and left `unsettled` behind.
    pub(crate) fn report(
        &self,
        at_start: usize,
        waited: Duration,
        unsettled: usize,
    ) -> DrainReport {
        let suspended = self.suspended.load(Ordering::Relaxed);
        let handed_off = self.handed_off.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        DrainReport {
            waited,
            finished: at_start.saturating_sub(suspended + handed_off + failed + unsettled),
            suspended,
            handed_off,
            failed,
            unsettled,
        }
    }
}

/// The error of a task the drain failed, after waiting `waited`.
pub(crate) fn shut_down_message(waited: Duration) -> String {
    format!(
        "the server shut down before the task finished (it waited {} for the task to end)",
        humane(waited)
    )
}

/// The status message of a resumable task the drain stopped without
/// failing it, whose status message was `last`.
pub(crate) fn suspended_message(last: Option<&str>) -> String {
    const SUSPENDED: &str = "the server is restarting: the task continues from its last \
         checkpoint when it starts again";
    match last {
        Some(last) if !last.is_empty() => format!("{SUSPENDED} (it was at: {last})"),
        _ => SUSPENDED.to_owned(),
    }
}

/// `waited` for a person: whole seconds, or milliseconds below one.
fn humane(waited: Duration) -> String {
    match waited.as_secs() {
        0 => format!("{} ms", waited.as_millis()),
        secs => format!("{secs} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_counts_what_ended_by_itself_as_the_rest() {
        let draining = Draining::default();
        draining.count(Ended::Failed);
        draining.count(Ended::Suspended);
        draining.count(Ended::Suspended);
        let report = draining.report(10, Duration::from_secs(30), 1);
        assert_eq!(
            (
                report.finished,
                report.suspended,
                report.failed,
                report.unsettled
            ),
            (6, 2, 1, 1)
        );
        assert_eq!(report.total(), 10);
    }

    #[test]
    fn the_message_says_how_long_it_waited() {
        assert_eq!(
            shut_down_message(Duration::from_secs(30)),
            "the server shut down before the task finished (it waited 30 s for the task to end)"
        );
        assert!(shut_down_message(Duration::ZERO).contains("waited 0 ms"));
    }

    #[test]
    fn a_suspended_task_says_where_it_was() {
        assert_eq!(
            suspended_message(Some("step 4 of 8")),
            "the server is restarting: the task continues from its last checkpoint when it \
             starts again (it was at: step 4 of 8)"
        );
        assert!(suspended_message(None).ends_with("when it starts again"));
    }
}
