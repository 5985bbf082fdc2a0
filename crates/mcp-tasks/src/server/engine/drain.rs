//! Draining a runtime before its process stops ([`TaskRuntime::drain`]),
//! so that a deploy fails no task it need not fail: no new task is
//! admitted, the running ones are given time to end, and what still runs
//! at the end is ended the honest way for each task.
//!
//! A floor above the runtime's handle (`runtime.rs`): the state the drain
//! shares with each task's supervision is in `draining.rs`, the closed
//! seats that refuse new tasks in `limits.rs`.

use std::time::Duration;

use super::draining::{DrainReport, ENDING_GRACE, HAND_OFF_GRACE};
use crate::server::engine::tasks::runtime::TaskRuntime;

impl TaskRuntime {
    /// Drains the runtime before its process stops. From the call on, no
    /// new task is admitted: every creation (a `tools/call` that would
    /// become a task, on any path and of either era, the gateway's too) is
    /// refused with -32603 and `data.reason` `"draining"`, which the HTTP
    /// serving recipe answers with status 503 and `Retry-After`, so a load
    /// balancer sends it to another replica. `tasks/get`, `tasks/update`,
    /// `tasks/cancel`, `tasks/list` and listen streams keep working.
    ///
    /// It then waits, up to `timeout`, for the tasks of this process to end
    /// (running tools, queued tasks, tasks waiting for input); what still
    /// runs after `timeout` is ended, its tool dropped first:
    ///
    /// * a task of a resumable tool ([`ToolTasks::with_resumable`]) whose
    ///   runtime can resume it ([`TaskRuntimeBuilder::with_resume`]) on a
    ///   store that outlives the process
    ///   ([`TaskStore::outlives_process`], SQLite) is left unfinished, its
    ///   status message saying that it continues from its last checkpoint
    ///   when the server starts again;
    /// * any other task fails, its error saying that the server shut down
    ///   before it finished and how long the drain waited.
    ///
    /// On a store shared by several replicas (Redis, PostgreSQL), resumable tasks do
    /// not wait for `timeout`: each is handed to the other replicas at
    /// once, at its tool's next [`TaskContext::checkpoint`] within a short
    /// grace (the checkpoint is written, the task handed off, and the call
    /// returns an error that ends the tool: no step is lost or run twice),
    /// or, for a tool that makes none in time, a task waiting for input or
    /// a queued task, stopped (its tool dropped first) and handed off at
    /// the end of the grace. The next scan of a live replica resumes it
    /// from its last checkpoint, as after a crash. Its status message says
    /// so meanwhile ([`HANDED_OFF_MESSAGE`]). A resumable task marked
    /// [`ToolTasks::drain_wait`] (a tool that starts over when resumed) is
    /// waited for like one that is not resumable, and handed off (or left
    /// unfinished) only at `timeout`.
    ///
    /// Takeovers of other replicas' tasks stop too. The runtime stays
    /// usable for reading; creating tasks stays refused. Calling it again
    /// waits again; the report counts since the first call.
    ///
    /// [`ToolTasks::with_resumable`]: crate::server::ToolTasks::with_resumable
    /// [`ToolTasks::drain_wait`]: crate::server::ToolTasks::drain_wait
    /// [`TaskRuntimeBuilder::with_resume`]: crate::server::TaskRuntimeBuilder::with_resume
    /// [`TaskStore::outlives_process`]: crate::store::TaskStore::outlives_process
    /// [`TaskContext::checkpoint`]: crate::server::TaskContext::checkpoint
    /// [`HANDED_OFF_MESSAGE`]: crate::store::HANDED_OFF_MESSAGE
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        let live = &self.inner.live;
        let began = tokio::time::Instant::now();
        let at_start = live.close();
        // On a shared store, resumable tasks go to the other replicas at
        // once (at their next checkpoint, or after a short grace).
        if self.inner.store.replicas().is_some() && self.inner.resumes {
            self.inner.draining.hand_off(HAND_OFF_GRACE.min(timeout));
        }
        let settled = tokio::time::timeout(timeout, live.until_none())
            .await
            .is_ok();
        let waited = began.elapsed().min(timeout);
        if settled {
            return self.inner.draining.report(at_start, waited, 0);
        }
        self.inner.draining.end_all(waited);
        // Each ended task writes how it ended; a store that cannot be
        // written leaves it to the store's own recovery.
        let _ = tokio::time::timeout(ENDING_GRACE, live.until_none()).await;
        self.inner.draining.report(at_start, waited, live.total())
    }

    /// True once [`TaskRuntime::drain`] was called: no new task is admitted.
    pub fn is_draining(&self) -> bool {
        self.inner.live.is_closed()
    }
}
