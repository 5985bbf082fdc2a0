//! Handing a resumable task to the other replicas of a shared store while
//! this server drains ([`TaskRuntime::drain`](crate::server::TaskRuntime::drain)):
//! the task is moved ([`Change::HandOff`]) to a fresh runner whose lease is
//! taken with a tiny hold and never renewed, so that the next scan of any
//! live replica claims it and resumes the task from its last checkpoint,
//! exactly as after a crash ([`Change::Resume`]: the resumed count and
//! `TaskContext::resumed` work the same), but at once instead of after a
//! lease period.
//!
//! Below what calls it: the tool's context (`context.rs`: a checkpoint
//! made while the drain hands off ends the tool there, so no step is lost
//! or run twice) and supervision (`supervise.rs`: what made no checkpoint
//! within the grace is stopped, then handed off).

use std::sync::Arc;
use std::time::Duration;

use crate::server::engine::draining::Ended;
use crate::server::engine::lease::{Lease, fresh_runner};
use crate::server::engine::state::Inner;
use crate::store::{Change, Modified};
use crate::task::TaskId;

/// How long the fresh runner's lease holds while the hand-off is written:
/// a takeover cannot claim it (and find it without the task) before.
const WRITING_HOLD: Duration = Duration::from_secs(2);

/// How long it holds once the task names it: a moment, never renewed.
const TINY_HOLD: Duration = Duration::from_millis(1);

/// Hands task `id`, run under `lease`, to the other replicas. True when it
/// was handed off (counted for the drain's report); false when it could
/// not be (not resumable, taken over or ended meanwhile, the store failed:
/// the lease then does what it does after a crash).
pub(crate) async fn hand_off(inner: &Inner, id: &TaskId, lease: &Arc<Lease>) -> bool {
    let Some(replicas) = inner.store.replicas() else {
        return false;
    };
    let runner = fresh_runner();
    if let Err(error) = replicas.acquire(&runner, WRITING_HOLD).await {
        tracing::warn!(%error, "handing a task to another server failed");
        return false;
    }
    let change = Change::HandOff(runner.clone());
    match inner.modify_as_runner(id, &change, Some(lease)).await {
        Ok(Modified::Applied(_)) => {}
        Ok(_) => return false,
        Err(error) => {
            tracing::warn!(%error, "handing a task to another server failed");
            return false;
        }
    }
    // Counted at once: the drain may end as soon as the task is gone here.
    inner.draining.count(Ended::HandedOff);
    // Taken again (a claim may have found the runner before the task named
    // it), to run out at once: the next scan finds the task.
    if let Err(error) = replicas.acquire(&runner, TINY_HOLD).await {
        tracing::warn!(%error, "a handed-off task waits for its lease to run out");
    }
    true
}
