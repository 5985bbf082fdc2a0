//! What each caller holds in this process, counted: its unfinished tasks
//! (the count, and the seat a task holds while its tool runs) and its open
//! listen streams ([`Listeners`]; the streams themselves are in `transport/listen/`).
//!
//! The counts are this process's: each replica of a server counts the
//! tasks its own tools run and the streams it serves. Both sit in the
//! runtime's state (`state.rs`), a floor up.
//!
//! A drain ([`LiveTasks::close`]) closes the seats: the check and the
//! count share one lock, so no task slips in after the drain counted what
//! runs, and the drain waits for the count to reach zero
//! ([`LiveTasks::until_none`]).

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::server::auth::principal::Principal;
use crate::server::engine::admission::refusal::{Refusal, caller_tasks, draining};
use crate::store::FastMap;

/// The unfinished tasks of each principal in this process.
#[derive(Debug)]
pub(crate) struct LiveTasks {
    by_principal: Mutex<Counts>,
    /// How many seats are taken, in all.
    total: tokio::sync::watch::Sender<usize>,
}

#[derive(Debug, Default)]
struct Counts {
    per_principal: FastMap<Principal, usize>,
    /// Closed by a drain: no seat is given any more.
    closed: bool,
}

impl Default for LiveTasks {
    fn default() -> Self {
        Self {
            by_principal: Mutex::default(),
            total: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// One unfinished task's place in [`LiveTasks`]; freed when dropped (the
/// tool's supervision ends, however it ends).
#[derive(Debug)]
pub(crate) struct Seat {
    live: Arc<LiveTasks>,
    principal: Principal,
}

impl LiveTasks {
    /// A seat for one more task of `principal`, unless it has `limit`
    /// already or the runtime drains: then the refusal.
    pub(crate) fn take(
        self: &Arc<Self>,
        principal: &Principal,
        limit: Option<usize>,
    ) -> Result<Seat, Refusal> {
        let mut counts = self.by_principal.lock().unwrap_or_else(|p| p.into_inner());
        if counts.closed {
            return Err(draining());
        }
        let count = counts.per_principal.entry(principal.clone()).or_default();
        if let Some(limit) = limit
            && *count >= limit
        {
            return Err(caller_tasks(u64::try_from(limit).unwrap_or(u64::MAX)));
        }
        *count += 1;
        self.total.send_modify(|total| *total += 1);
        Ok(Seat {
            live: self.clone(),
            principal: principal.clone(),
        })
    }

    /// How many unfinished tasks `principal` has.
    pub(crate) fn count(&self, principal: &Principal) -> usize {
        let counts = self.by_principal.lock().unwrap_or_else(|p| p.into_inner());
        counts.per_principal.get(principal).copied().unwrap_or(0)
    }

    /// Gives no seat any more (a drain began); returns how many are taken.
    pub(crate) fn close(&self) -> usize {
        let mut counts = self.by_principal.lock().unwrap_or_else(|p| p.into_inner());
        counts.closed = true;
        *self.total.borrow()
    }

    /// True once [`LiveTasks::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.by_principal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closed
    }

    /// How many seats are taken, in all.
    pub(crate) fn total(&self) -> usize {
        *self.total.borrow()
    }

    /// Completes when no seat is taken.
    pub(crate) async fn until_none(&self) {
        let mut total = self.total.subscribe();
        // The sender lives as long as `self`.
        let _ = total.wait_for(|total| *total == 0).await;
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut counts = self
            .live
            .by_principal
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.per_principal.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.per_principal.remove(&self.principal);
            }
            self.live
                .total
                .send_modify(|total| *total = total.saturating_sub(1));
        }
    }
}

/// What the listen streams of one runtime share.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    /// Open streams, in all and per caller.
    open: Mutex<Open>,
    /// Fired to end every stream open now.
    ending: Mutex<CancellationToken>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_caller: FastMap<Principal, usize>,
}

/// The bound that refused a listen stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamBound {
    /// The caller has as many streams open as it may.
    PerCaller,
    /// The runtime has as many streams open as it may.
    Total,
}

impl Listeners {
    /// Ends every stream open now; later streams are not affected.
    pub(crate) fn end_all(&self) {
        let mut ending = self.ending.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *ending).cancel();
    }

    pub(crate) fn ending(&self) -> CancellationToken {
        self.ending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The number of open streams (for tests and the benchmark).
    pub(crate) fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// Counts one more stream of the caller counted as `quota`, unless it
    /// has `per_caller` open already, or the runtime `total`: then the
    /// bound that refuses it (the caller's is checked first).
    pub(crate) fn enter(
        &self,
        quota: &Principal,
        total: usize,
        per_caller: usize,
    ) -> Result<(), StreamBound> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let mine = open.per_caller.get(quota).copied().unwrap_or(0);
        if mine >= per_caller {
            return Err(StreamBound::PerCaller);
        }
        if open.total >= total {
            return Err(StreamBound::Total);
        }
        open.total += 1;
        *open.per_caller.entry(quota.clone()).or_default() += 1;
        Ok(())
    }

    /// Counts one stream of `quota` less (one [`Listeners::enter`] let in).
    pub(crate) fn leave(&self, quota: &Principal) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.per_caller.get_mut(quota) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.per_caller.remove(quota);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn seats_are_counted_per_principal_and_freed_when_dropped() {
        let live = Arc::new(LiveTasks::default());
        let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
        let first = live.take(&alice, Some(2)).unwrap();
        let second = live.take(&alice, Some(2)).unwrap();
        let refused = live.take(&alice, Some(2)).unwrap_err().into_error(None);
        assert!(refused.message.contains("at most 2"), "{}", refused.message);
        assert_eq!(
            refused.data,
            Some(json!({"maxTasksPerCaller": 2, "reason": "callerTasks", "retryAfterMs": 1000}))
        );
        let _bob = live.take(&bob, Some(2)).expect("another caller is served");
        drop(first);
        assert_eq!(live.count(&alice), 1);
        let _third = live
            .take(&alice, Some(2))
            .expect("a freed seat is taken again");
        drop(second);
        assert!(live.take(&alice, None).is_ok(), "no limit");
    }
}
