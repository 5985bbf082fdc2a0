//! The in-memory store: a hash map for O(1) lookups and an ordered expiry
//! index, behind one short-held lock. Tasks live as long as the process.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::broadcast;

use super::{StoreError, Swap, TaskRecord, TaskStore, Transition};
use crate::task::{TaskId, UnixMillis};

/// Keeps tasks in this process's memory.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    feed: broadcast::Sender<TaskId>,
}

#[derive(Debug, Default)]
struct Inner {
    records: HashMap<TaskId, TaskRecord>,
    /// `(expires_at, id)` of every record that expires.
    expiry: BTreeSet<(UnixMillis, TaskId)>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Mutex::default(),
            feed: broadcast::channel(1024).0,
        }
    }

    /// The number of records held.
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written record:
        // every write is a single insert or remove.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn announce(&self, id: TaskId) {
        // No receiver is not an error.
        let _ = self.feed.send(id);
    }
}

impl Inner {
    /// Moves `id` in the expiry index from `old` to `new`.
    fn index(&mut self, id: &TaskId, old: Option<UnixMillis>, new: Option<UnixMillis>) {
        if old != new {
            if let Some(at) = old {
                self.expiry.remove(&(at, id.clone()));
            }
            if let Some(at) = new {
                self.expiry.insert((at, id.clone()));
            }
        }
    }
}

impl TaskStore for MemoryStore {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        let id = record.id().clone();
        {
            let mut inner = self.lock();
            if inner.records.contains_key(&id) {
                return Err(StoreError::msg("a task with this id exists"));
            }
            inner.index(&id, None, record.expires_at());
            inner.records.insert(id.clone(), record);
        }
        self.announce(id);
        Ok(())
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.lock().records.get(id).cloned())
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        let id = transition.record().id().clone();
        {
            let mut inner = self.lock();
            let Some(current) = inner.records.get(&id) else {
                return Ok(Swap::Missing);
            };
            if current.version() != transition.expected_version() {
                return Ok(Swap::Conflict(Box::new(current.clone())));
            }
            let old = current.expires_at();
            let record = transition.into_record();
            inner.index(&id, old, record.expires_at());
            inner.records.insert(id.clone(), record);
        }
        self.announce(id);
        Ok(Swap::Swapped)
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if let Some(old) = inner.records.remove(id) {
            inner.index(id, old.expires_at(), None);
        }
        Ok(())
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .expiry
            .iter()
            .take_while(|(at, _)| *at <= now)
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect())
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.feed.subscribe()
    }
}

#[cfg(all(test, feature = "contract"))]
mod tests {
    use std::sync::Arc;

    use super::MemoryStore;
    use crate::store::{SharedStore, contract};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_store_passes_the_contract() {
        contract::run_all(|| async { Arc::new(MemoryStore::new()) as SharedStore }).await;
    }
}
