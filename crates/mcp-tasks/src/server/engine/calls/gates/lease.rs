//! On a store shared by several processes, this process's lease: checked
//! (renewed if due) before a task names it, so that no task is created by
//! a process another one may take over from; `None` on a store of one
//! process.

use std::sync::Arc;

use rmcp::ErrorData;

use super::Ask;
use crate::server::engine::lease::Lease;

/// The lease the task names, checked.
pub(super) async fn check(ask: &Ask<'_>) -> Result<Option<Arc<Lease>>, ErrorData> {
    ask.runtime.checked_lease().await
}
