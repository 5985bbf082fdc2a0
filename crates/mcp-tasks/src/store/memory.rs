//! The in-memory store: a hash set of packed records for O(1) lookups and
//! an ordered expiry index, behind one short-held lock. Tasks live as long
//! as the process.
//!
//! Records are kept as [`PackedRecord`]s behind an `Arc`: a read hands out
//! the `Arc` ([`TaskStore::get_packed`]) or unpacks a copy
//! ([`TaskStore::get`]); the hash set and the expiry index share the id
//! the record holds, so a finished task costs a few hundred bytes beyond
//! its result's text.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;

use super::{PackedRecord, StoreError, Swap, TaskRecord, TaskStore, Transition};
use crate::task::{TaskId, UnixMillis};

/// Keeps tasks in this process's memory.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    feed: broadcast::Sender<TaskId>,
}

#[derive(Debug, Default)]
struct Inner {
    records: HashSet<Entry>,
    /// `(expires_at, id)` of every record that expires.
    expiry: BTreeSet<(UnixMillis, Arc<str>)>,
}

/// A record in the hash set, found by its id.
#[derive(Debug, Clone)]
struct Entry(Arc<PackedRecord>);

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.0.id()
    }
}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id().hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

impl Eq for Entry {}

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

    fn packed(&self, id: &TaskId) -> Option<Arc<PackedRecord>> {
        self.lock()
            .records
            .get(id.expose())
            .map(|entry| entry.0.clone())
    }
}

impl Inner {
    /// Moves `id` in the expiry index from `old` to `new`.
    fn index(&mut self, id: &Arc<str>, old: Option<UnixMillis>, new: Option<UnixMillis>) {
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
        // Packed outside the lock.
        let packed = PackedRecord::pack(record);
        {
            let mut inner = self.lock();
            if inner.records.contains(id.expose()) {
                return Err(StoreError::msg("a task with this id exists"));
            }
            inner.index(packed.shared_id(), None, packed.expires_at());
            inner.records.insert(Entry(Arc::new(packed)));
        }
        self.announce(id);
        Ok(())
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.packed(id).map(|packed| packed.unpack()))
    }

    async fn get_packed(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        Ok(self.packed(id))
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        let id = transition.record().id().clone();
        // Packed outside the lock; the id is shared with the stored record's.
        let Some(current) = self.packed(&id) else {
            return Ok(Swap::Missing);
        };
        if current.version() != transition.expected_version() {
            return Ok(Swap::Conflict(Box::new(current.unpack())));
        }
        let packed = Arc::new(PackedRecord::pack_with_id(
            transition.into_record(),
            current.shared_id().clone(),
        ));
        {
            let mut inner = self.lock();
            // Checked again under the lock: another write may have come first.
            let Some(stored) = inner.records.get(id.expose()).map(|entry| entry.0.clone()) else {
                return Ok(Swap::Missing);
            };
            if !Arc::ptr_eq(&stored, &current) {
                drop(inner);
                return Ok(Swap::Conflict(Box::new(stored.unpack())));
            }
            inner.index(stored.shared_id(), stored.expires_at(), packed.expires_at());
            inner.records.replace(Entry(packed));
        }
        self.announce(id);
        Ok(Swap::Swapped)
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if let Some(old) = inner.records.take(id.expose()) {
            inner.index(old.0.shared_id(), old.0.expires_at(), None);
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
            .map(|(_, id)| TaskId::new(&**id))
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
