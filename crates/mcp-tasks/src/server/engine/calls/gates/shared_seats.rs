//! On a shared store with bounds (a cap per caller, a bound on running or
//! queued tasks), the seats the task needs there: taken as it is stored
//! (`create.rs`), where the store refuses it when they are full. `None` on
//! a store of one process, or when nothing is bounded.

use std::sync::Arc;

use super::Ask;
use crate::server::engine::admission::shared::TaskSeats;
use crate::server::engine::lease::Lease;

/// The seats the task takes in the shared store, if any.
pub(super) fn plan(ask: &Ask<'_>, lease: Option<&Arc<Lease>>) -> Option<TaskSeats> {
    lease?;
    let inner = &ask.runtime.inner;
    TaskSeats::plan(
        &inner.store,
        inner.admission.limits(),
        inner.settings.max_tasks_per_caller,
        ask.caller,
        ask.tool,
    )
}
