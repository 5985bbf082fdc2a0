//! A new record, for both ways the runtime keeps a call: a task
//! (`create.rs`) and a synchronous call run once under its key (`once.rs`).

use rmcp::ErrorData;

use crate::server::engine::admission::caller::Caller;
use crate::server::engine::policy::ToolTasks;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::new_task_id;
use crate::store::TaskRecord;
use crate::task::UnixMillis;

impl TaskRuntime {
    /// A new record of `caller`'s call of `tool`, with the tool's TTL (or
    /// the runtime's) and the runtime's bound on a task's life, and the
    /// time it was made at (one reading of the clock for the id's time and
    /// `createdAt`). A task's record (`task`) carries its poll interval,
    /// and its life counts from its last activity unless the tool counts
    /// it from creation; a synchronous call's has neither.
    pub(super) fn fresh_record(
        &self,
        caller: &Caller,
        tool: &str,
        tasks: &ToolTasks,
        task: bool,
    ) -> Result<(TaskRecord, UnixMillis), ErrorData> {
        let settings = &self.inner.settings;
        let now = self.inner.clock.now();
        let poll_interval = tasks.poll_interval.unwrap_or(settings.poll_interval);
        let record = TaskRecord::new(
            new_task_id(now)?,
            caller.principal.clone(),
            now,
            tasks.ttl.unwrap_or(settings.default_ttl),
            task.then_some(poll_interval),
        )
        .with_lifetime(settings.max_lifetime, task && !tasks.ttl_from_creation)
        .with_tool(tool);
        Ok((record, now))
    }
}
