//! Per-task wake-ups from the store's change feed: one listener for the
//! process, so a change wakes only the waiters of its own task. Many
//! waiters of one task share one channel; the last one to go removes it.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::store::FastMap;
use crate::task::TaskId;

type ById = Mutex<FastMap<TaskId, Weak<watch::Sender<u64>>>>;

/// The waiters of every task, by id.
#[derive(Default)]
pub(crate) struct Waiters {
    by_id: Arc<ById>,
}

/// A registration in [`Waiters`]. It remembers which changes it has seen,
/// so a change that lands between a read and the next wait is not missed.
pub(crate) struct Waiter {
    sender: Option<Arc<watch::Sender<u64>>>,
    changes: watch::Receiver<u64>,
    id: TaskId,
    by_id: Weak<ById>,
}

impl Waiter {
    /// Waits for a change not seen yet, or `at_most` (a safety net for a
    /// lossy feed).
    pub(crate) async fn wait(&mut self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.changed()).await;
    }

    /// Waits for a change not seen yet.
    pub(crate) async fn changed(&mut self) {
        // The sender lives as long as this waiter: this cannot fail.
        let _ = self.changes.changed().await;
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        drop(self.sender.take());
        let Some(by_id) = self.by_id.upgrade() else {
            return;
        };
        let mut by_id = by_id.lock().unwrap_or_else(|p| p.into_inner());
        // The last waiter of this task removes its entry. Under the lock a
        // new waiter can only have replaced a dead entry with a live one.
        if by_id
            .get(&self.id)
            .is_some_and(|weak| weak.strong_count() == 0)
        {
            by_id.remove(&self.id);
        }
    }
}

impl Waiters {
    pub(crate) fn register(&self, id: &TaskId) -> Waiter {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let sender = match by_id.get(id).and_then(Weak::upgrade) {
            Some(sender) => sender,
            None => {
                let sender = Arc::new(watch::channel(0).0);
                by_id.insert(id.clone(), Arc::downgrade(&sender));
                sender
            }
        };
        let changes = sender.subscribe();
        Waiter {
            sender: Some(sender),
            changes,
            id: id.clone(),
            by_id: Arc::downgrade(&self.by_id),
        }
    }

    pub(crate) fn wake(&self, id: &TaskId) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        match by_id.get(id).map(Weak::upgrade) {
            Some(Some(sender)) => sender.send_modify(|seen| *seen = seen.wrapping_add(1)),
            Some(None) => {
                by_id.remove(id);
            }
            None => {}
        }
    }

    pub(crate) fn wake_all(&self) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        by_id.retain(|_, weak| match weak.upgrade() {
            Some(sender) => {
                sender.send_modify(|seen| *seen = seen.wrapping_add(1));
                true
            }
            None => false,
        });
    }

    /// How many tasks have a waiter now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_share_a_channel_and_the_last_one_removes_it() {
        let waiters = Waiters::default();
        let id = TaskId::new("t");
        let mut first = waiters.register(&id);
        let mut second = waiters.register(&id);
        assert_eq!(waiters.len(), 1);
        waiters.wake(&id);
        first.changed().await;
        second.changed().await;
        drop(first);
        assert_eq!(waiters.len(), 1, "one waiter is left");
        drop(second);
        assert_eq!(waiters.len(), 0, "nothing is left behind");
        // A change with no waiter is no error, and a new waiter starts fresh.
        waiters.wake(&id);
        let mut third = waiters.register(&id);
        waiters.wake(&id);
        third.changed().await;
    }
}
