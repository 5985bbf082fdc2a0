//! The caller's creation rate, when the runtime limits it
//! ([`TaskRuntimeBuilder::with_rate_per_caller`](crate::server::TaskRuntimeBuilder::with_rate_per_caller)):
//! refused with a hint of when the next creation is served.

use super::Ask;
use crate::server::engine::admission::refusal::Refusal;

/// Counts one creation for the caller; the refusal when it creates too fast.
pub(super) fn pass(ask: &Ask<'_>) -> Result<(), Refusal> {
    match &ask.runtime.inner.rate {
        Some(rate) => rate.check(ask.caller),
        None => Ok(()),
    }
}
