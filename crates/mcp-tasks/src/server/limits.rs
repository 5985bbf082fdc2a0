//! How many unfinished tasks each caller may have at once: the count, and
//! the seat a task holds while its tool runs.
//!
//! The count is this process's: each replica of a server counts the tasks
//! its own tools run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::ErrorData;

use super::admission::refusal::{RetryMark, caller_tasks};
use super::principal::Principal;

/// The unfinished tasks of each principal in this process.
#[derive(Debug, Default)]
pub(crate) struct LiveTasks {
    by_principal: Mutex<HashMap<Principal, usize>>,
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
    /// already: then the refusal, which marks the HTTP request's `mark`.
    pub(crate) fn take(
        self: &Arc<Self>,
        principal: &Principal,
        limit: Option<usize>,
        mark: Option<&RetryMark>,
    ) -> Result<Seat, ErrorData> {
        let mut counts = self.by_principal.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(principal.clone()).or_default();
        if let Some(limit) = limit
            && *count >= limit
        {
            return Err(caller_tasks(mark, u64::try_from(limit).unwrap_or(u64::MAX)));
        }
        *count += 1;
        Ok(Seat {
            live: self.clone(),
            principal: principal.clone(),
        })
    }

    /// How many unfinished tasks `principal` has.
    pub(crate) fn count(&self, principal: &Principal) -> usize {
        let counts = self.by_principal.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(principal).copied().unwrap_or(0)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut counts = self
            .live
            .by_principal
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.principal);
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
        let first = live.take(&alice, Some(2), None).unwrap();
        let second = live.take(&alice, Some(2), None).unwrap();
        let refused = live.take(&alice, Some(2), None).unwrap_err();
        assert!(refused.message.contains("at most 2"), "{}", refused.message);
        assert_eq!(
            refused.data,
            Some(json!({"maxTasksPerCaller": 2, "reason": "callerTasks", "retryAfterMs": 1000}))
        );
        let _bob = live
            .take(&bob, Some(2), None)
            .expect("another caller is served");
        drop(first);
        assert_eq!(live.count(&alice), 1);
        let _third = live
            .take(&alice, Some(2), None)
            .expect("a freed seat is taken again");
        drop(second);
        assert!(live.take(&alice, None, None).is_ok(), "no limit");
    }
}
