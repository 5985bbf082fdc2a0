//! The caller's seat among its unfinished tasks: refused when it has as
//! many as it may ([`TaskRuntimeBuilder::with_max_tasks_per_caller`](crate::server::TaskRuntimeBuilder::with_max_tasks_per_caller)),
//! and for everyone once a drain began (the drain closes the seats, under
//! the same lock as the count, so no task is created after it began).

use super::Ask;
use crate::server::engine::admission::limits::Seat;
use crate::server::engine::admission::refusal::Refusal;

/// A seat for the task, held by its supervision until it ends.
pub(super) fn take(ask: &Ask<'_>) -> Result<Seat, Refusal> {
    let inner = &ask.runtime.inner;
    inner
        .live
        .take(&ask.caller.quota, inner.settings.max_tasks_per_caller)
}
