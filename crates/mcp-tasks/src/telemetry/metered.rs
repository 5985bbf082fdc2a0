//! [`MeteredStore`]: a [`SharedStore`] whose every operation is timed, and
//! counted when it fails, in the metrics `store`-labelled
//! (see [`metrics`](super::metrics)): one wrapper around whichever store the
//! runtime was given, so every backend is measured the same way.
//!
//! The shared store's own replica operations (leases, seats) go straight to
//! the store, unmeasured, but for a swap that frees seats with it, which is
//! measured as the swap it is.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::broadcast;

use super::metrics::StoreKeys;
use crate::idempotency::IdempotencyKey;
use crate::store::{
    BoxFuture, DynStore, HashKey, Keyed, PackedRecord, Principal, Replicas, SeatId, SeatPool,
    SharedStore, StoreError, Swap, TaskRecord, Transition,
};
use crate::task::{TaskId, UnixMillis};

/// A store whose operations are measured under the label `store` = its
/// name (`memory`, `sqlite`, `redis`, or any a backend chooses).
///
/// ```
/// # use std::sync::Arc;
/// use mcp_tasks::server::MeteredStore;
/// use mcp_tasks::store::{MemoryStore, SharedStore};
///
/// let store: SharedStore = Arc::new(MemoryStore::new());
/// let measured: SharedStore = MeteredStore::shared(store, "memory");
/// ```
pub struct MeteredStore {
    store: SharedStore,
    name: &'static str,
    keys: StoreKeys,
}

impl fmt::Debug for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeteredStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl MeteredStore {
    /// `store`, measured under the label `store` = `name`.
    pub fn new(store: SharedStore, name: &'static str) -> Self {
        Self {
            store,
            name,
            keys: StoreKeys::new(name),
        }
    }

    /// [`MeteredStore::new`], as a [`SharedStore`].
    pub fn shared(store: SharedStore, name: &'static str) -> SharedStore {
        Arc::new(Self::new(store, name))
    }
}

/// Operation indexes of [`StoreKeys`].
const CREATE: usize = 0;
const GET: usize = 1;
const SWAP: usize = 2;
const DELETE: usize = 3;
const EXPIRED: usize = 4;
const LIST: usize = 5;
const LIST_ALL: usize = 6;
const HASH_KEY: usize = 7;

/// Runs `run`, then records how long it took and whether it failed as
/// operation `operation` of `keys`.
async fn measured<T>(
    keys: &StoreKeys,
    operation: usize,
    run: BoxFuture<'_, Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let start = Instant::now();
    let result = run.await;
    keys.record(operation, start.elapsed(), result.is_err());
    result
}

impl DynStore for MeteredStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(measured(&self.keys, CREATE, self.store.create(record)))
    }
    /// Measured as a create.
    fn create_keyed(&self, record: TaskRecord) -> BoxFuture<'_, Result<Keyed, StoreError>> {
        Box::pin(measured(
            &self.keys,
            CREATE,
            self.store.create_keyed(record),
        ))
    }
    fn keeps_keys(&self) -> bool {
        self.store.keeps_keys()
    }
    /// Measured as a read.
    fn find_keyed<'a>(
        &'a self,
        owner: &'a Principal,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(measured(&self.keys, GET, self.store.find_keyed(owner, key)))
    }
    fn get<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(measured(&self.keys, GET, self.store.get(id)))
    }
    fn compare_and_swap(&self, transition: Transition) -> BoxFuture<'_, Result<Swap, StoreError>> {
        Box::pin(measured(
            &self.keys,
            SWAP,
            self.store.compare_and_swap(transition),
        ))
    }
    fn delete<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(measured(&self.keys, DELETE, self.store.delete(id)))
    }
    fn expired(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<TaskId>, StoreError>> {
        Box::pin(measured(
            &self.keys,
            EXPIRED,
            self.store.expired(now, limit),
        ))
    }
    fn list_owned<'a>(
        &'a self,
        owner: &'a Principal,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreError>> {
        Box::pin(measured(
            &self.keys,
            LIST,
            self.store.list_owned(owner, after, limit),
        ))
    }
    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.store.changes()
    }
    fn get_packed<'a>(
        &'a self,
        id: &'a TaskId,
    ) -> BoxFuture<'a, Result<Option<Arc<PackedRecord>>, StoreError>> {
        Box::pin(measured(&self.keys, GET, self.store.get_packed(id)))
    }
    fn replicas(&self) -> Option<&dyn Replicas> {
        self.store.replicas()
    }
    fn compare_and_swap_freeing<'a>(
        &'a self,
        transition: Transition,
        seat: &'a SeatId,
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Swap, StoreError>> {
        // A swap, measured as one; the seats go with it.
        Box::pin(measured(
            &self.keys,
            SWAP,
            self.store.compare_and_swap_freeing(transition, seat, free),
        ))
    }
    fn list_all<'a>(
        &'a self,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreError>> {
        Box::pin(measured(
            &self.keys,
            LIST_ALL,
            self.store.list_all(after, limit),
        ))
    }
    fn hash_key(&self) -> BoxFuture<'_, Result<HashKey, StoreError>> {
        Box::pin(measured(&self.keys, HASH_KEY, self.store.hash_key()))
    }
    // Once, at start: not an operation worth a metric.
    fn left_unfinished(&self) -> BoxFuture<'_, Result<Vec<TaskId>, StoreError>> {
        self.store.left_unfinished()
    }
    fn outlives_process(&self) -> bool {
        self.store.outlives_process()
    }
}
