//! Per-task wake-ups from the store's change feed: one listener for the
//! process, so a change wakes only the waiters of its own task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::task::TaskId;

/// The waiters of every task, by id.
#[derive(Default)]
pub(crate) struct Waiters {
    by_id: Mutex<HashMap<TaskId, Weak<watch::Sender<u64>>>>,
}

/// A registration in [`Waiters`]. It remembers which changes it has seen,
/// so a change that lands between a read and the next wait is not missed.
pub(crate) struct Waiter {
    _sender: Arc<watch::Sender<u64>>,
    changes: watch::Receiver<u64>,
}

impl Waiter {
    /// Waits for a change not seen yet, or `at_most` (a safety net for a
    /// lossy feed).
    pub(crate) async fn wait(&mut self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.changes.changed()).await;
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
            _sender: sender,
            changes,
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
}
