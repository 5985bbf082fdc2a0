//! This process's admission: a slot to run now, or a place in the queue
//! of tasks waiting for one; refused when the queue is full
//! ([`AdmissionLimits`](crate::server::AdmissionLimits)).

use super::Ask;
use crate::server::engine::admission::queue::Entry;
use crate::server::engine::admission::refusal::Refusal;

/// The task's slot, or its place in the queue.
pub(super) fn enter(ask: &Ask<'_>) -> Result<Entry, Refusal> {
    ask.runtime.inner.admission.enter(ask.caller, ask.tool)
}
