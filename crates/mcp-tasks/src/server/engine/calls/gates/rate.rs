//! The caller's creation rate, when the runtime limits it
//! ([`TaskRuntimeBuilder::with_rate_per_caller`](crate::server::TaskRuntimeBuilder::with_rate_per_caller)):
//! refused with a hint of when the next creation is served. Counted in
//! the store for all replicas when it can (one round trip), else here.

use super::Ask;
use crate::server::engine::admission::refusal::Denial;

/// Counts one creation for the caller; the refusal when it creates too
/// fast, or the store's failure.
pub(super) async fn pass(ask: &Ask<'_>) -> Result<(), Denial> {
    let inner = &ask.runtime.inner;
    match &inner.rate {
        Some(rate) => rate.check_in(&inner.store, ask.caller).await,
        None => Ok(()),
    }
}
