//! The in-memory store: a hash set of packed records for O(1) lookups, an
//! ordered expiry index and an ordered set of ids per owner, behind one
//! short-held lock. Tasks live as long as the process.
//!
//! Records are kept as [`PackedRecord`]s behind an `Arc`: a read hands out
//! the `Arc` ([`TaskStore::get_packed`]) or unpacks a copy
//! ([`TaskStore::get`]); the hash set and both indexes share the id the
//! record holds, so a finished task costs a few hundred bytes beyond its
//! result's text.

use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast;

use super::{
    FastMap, FastSet, Keyed, PackedRecord, Principal, StoreError, Swap, TaskRecord, TaskStore,
    Transition, idempotency_slot,
};
use crate::idempotency::IdempotencyKey;
use crate::task::{TaskId, UnixMillis};

/// Keeps tasks in this process's memory.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    feed: broadcast::Sender<TaskId>,
}

#[derive(Debug, Default)]
struct Inner {
    records: FastSet<Entry>,
    /// `(expires_at, id)` of every record that expires.
    expiry: BTreeSet<(UnixMillis, Arc<str>)>,
    /// The ids of each owner's records, in byte order; an owner with none
    /// has no entry.
    owned: FastMap<Principal, BTreeSet<Arc<str>>>,
    /// Every id, in byte order (for the admin command's listing).
    all: BTreeSet<Arc<str>>,
    /// The id of the record holding each idempotency slot.
    keyed: FastMap<Box<str>, Arc<str>>,
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
    /// Enters a new record in the owner index.
    fn own(&mut self, record: &PackedRecord) {
        let id = Arc::clone(record.shared_id());
        self.all.insert(Arc::clone(&id));
        match self.owned.get_mut(record.owner()) {
            Some(ids) => {
                ids.insert(id);
            }
            None => {
                self.owned
                    .insert(record.owner().clone(), BTreeSet::from([id]));
            }
        }
    }

    /// The record holding idempotency slot `slot`, if any.
    fn holding(&self, slot: &str) -> Option<Arc<PackedRecord>> {
        let id = self.keyed.get(slot)?;
        self.records.get(&**id).map(|entry| entry.0.clone())
    }

    /// Stores a new record and enters it in every index; false (and
    /// nothing stored) when its id exists.
    fn insert(&mut self, packed: PackedRecord) -> bool {
        if self.records.contains(packed.id()) {
            return false;
        }
        self.index(packed.shared_id(), None, packed.expires_at());
        self.own(&packed);
        if let Some(slot) = packed.idempotency_slot() {
            self.keyed
                .insert(slot.into(), Arc::clone(packed.shared_id()));
        }
        self.records.insert(Entry(Arc::new(packed)));
        true
    }

    /// Takes a removed record out of the owner index.
    fn disown(&mut self, record: &PackedRecord) {
        if let Some(slot) = record.idempotency_slot()
            && self.keyed.get(slot).is_some_and(|id| **id == *record.id())
        {
            self.keyed.remove(slot);
        }
        self.all.remove(record.id());
        if let Some(ids) = self.owned.get_mut(record.owner()) {
            ids.remove(record.id());
            if ids.is_empty() {
                self.owned.remove(record.owner());
            }
        }
    }

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
        if !self.lock().insert(packed) {
            return Err(StoreError::msg("a task with this id exists"));
        }
        self.announce(id);
        Ok(())
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        let id = record.id().clone();
        let packed = PackedRecord::pack(record);
        {
            let mut inner = self.lock();
            if let Some(existing) = packed
                .idempotency_slot()
                .and_then(|slot| inner.holding(slot))
            {
                drop(inner);
                return Ok(Keyed::Existing(Box::new(existing.unpack())));
            }
            if !inner.insert(packed) {
                return Err(StoreError::msg("a task with this id exists"));
            }
        }
        self.announce(id);
        Ok(Keyed::Created)
    }
    fn keeps_keys(&self) -> bool {
        true
    }

    async fn find_keyed(
        &self,
        owner: &Principal,
        key: &IdempotencyKey,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let slot = idempotency_slot(owner, key);
        let found = self.lock().holding(&slot);
        Ok(found.map(|packed| packed.unpack()))
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
            inner.disown(&old.0);
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

    async fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let from = after.map_or(Bound::Unbounded, |id| Bound::Excluded(id.expose()));
        // The records are taken under the lock and unpacked after it.
        let listed: Vec<Arc<PackedRecord>> = {
            let inner = self.lock();
            let Some(ids) = inner.owned.get(owner) else {
                return Ok(Vec::new());
            };
            ids.range::<str, _>((from, Bound::Unbounded))
                .take(limit)
                .filter_map(|id| inner.records.get(&**id).map(|entry| entry.0.clone()))
                .collect()
        };
        Ok(listed.iter().map(|packed| packed.unpack()).collect())
    }

    async fn list_all(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let from = after.map_or(Bound::Unbounded, |id| Bound::Excluded(id.expose()));
        let listed: Vec<Arc<PackedRecord>> = {
            let inner = self.lock();
            inner
                .all
                .range::<str, _>((from, Bound::Unbounded))
                .take(limit)
                .filter_map(|id| inner.records.get(&**id).map(|entry| entry.0.clone()))
                .collect()
        };
        Ok(listed.iter().map(|packed| packed.unpack()).collect())
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.feed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::MemoryStore;
    use crate::store::{Principal, TaskRecord, TaskStore};
    use crate::task::{TaskId, Ttl, UnixMillis};

    #[cfg(feature = "contract")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_store_passes_the_contract() {
        use crate::store::{SharedStore, contract};

        contract::run_all(|| async { Arc::new(MemoryStore::new()) as SharedStore }).await;
        let store = Arc::new(MemoryStore::new()) as SharedStore;
        let again = Arc::clone(&store);
        contract::hash_key_is_shared(store, || async { again }).await;
    }

    /// The owner index costs one shared id per record, and an owner whose
    /// records are all deleted leaves nothing behind.
    #[tokio::test]
    async fn the_owner_index_shares_ids_and_forgets_owners_without_records() {
        let store = MemoryStore::new();
        for (id, owner, ttl) in [
            ("a1", "a", Ttl::from_millis(1_000)),
            ("a2", "a", Ttl::Unlimited),
            ("b1", "b", Ttl::Unlimited),
        ] {
            let record = TaskRecord::new(
                TaskId::new(id),
                Principal::new(owner),
                UnixMillis::new(1),
                ttl,
                None,
            );
            store.create(record).await.expect("create");
        }
        {
            let inner = store.lock();
            assert_eq!(inner.owned.len(), 2);
            let a1 = inner.records.get("a1").expect("a1").0.shared_id().clone();
            // The record, the expiry index, the owner index, the index of
            // all, and `a1` here.
            assert_eq!(Arc::strong_count(&a1), 5, "one id, shared");
        }
        for id in ["a1", "b1", "a2"] {
            store.delete(&TaskId::new(id)).await.expect("delete");
        }
        assert!(store.lock().owned.is_empty(), "no owner without records");
        assert!(store.lock().all.is_empty(), "no id without its record");
        assert!(store.lock().keyed.is_empty(), "no key without its record");
    }
}
