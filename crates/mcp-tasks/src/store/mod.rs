//! Where a server keeps its tasks: the [`TaskStore`] trait, the one
//! transition function every store's changes go through, and the
//! [`MemoryStore`].
//!
//! A store holds [`TaskRecord`]s and offers six things: atomic create,
//! read, compare-and-set, delete, two indexes (records whose
//! [`TaskRecord::expires_at`] has passed; each owner's records in id
//! order, for `tasks/list`), and a change feed (the ids of records that
//! changed) that wakes waiters. Every change is computed by
//! [`TaskRecord::apply`], the transition function, and the only thing
//! [`TaskStore::compare_and_swap`] accepts is the [`Transition`] it returns:
//! so a terminal state cannot be left whatever the backend, and a store
//! shared by several server processes fits the same trait.
//!
//! Idempotent creation ([`TaskStore::create_keyed`], [`TaskStore::find_keyed`])
//! keeps an index from a hash of a record's owner and idempotency key to the
//! record, atomically with the record.
//!
//! A store shared by several server processes also offers [`Replicas`]
//! (leases, feed gaps and seats; see [`replicas`]) through [`TaskStore::replicas`];
//! the others answer `None` there and need write nothing for it.
//!
//! This module is the cargo feature `store`, which a backend crate can
//! depend on without the server runtime; `contract` adds the test suite.

pub mod feed_cache;
mod hash_key;
mod keyed;
mod memory;
mod packed;
mod record;
pub mod replicas;

#[cfg(feature = "contract")]
pub mod contract;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

pub use feed_cache::{CacheTicket, FeedCache};
pub use hash_key::{HASH_KEY_LEN, HashKey};
pub use keyed::call_fingerprint;
pub use memory::MemoryStore;
pub use packed::PackedRecord;
pub use record::{
    CANCELLED_BY_CALLER_MESSAGE, CANCELLED_BY_OPERATOR_MESSAGE, Change, EXPIRED_CODE,
    EXPIRED_MESSAGE, HANDED_OFF_MESSAGE, Principal, RESTARTED_MESSAGE, RESUMED_MESSAGE,
    STOPPED_MESSAGE, TaskRecord, Transition, TransitionError,
};
pub use replicas::{
    FairTurn, Orphan, RateBucket, RateTake, Replicas, RunnerId, STORED_NAME_LEN, SeatId, SeatPool,
    Seating, stored_name,
};

use crate::idempotency::IdempotencyKey;
use crate::task::{TaskId, UnixMillis};

/// The hash map of the hot paths (the memory store, the runtime's
/// bookkeeping of live tasks, waiters and admission): foldhash, seeded at
/// random per map, where std's SipHash took about 3 % of a task
/// creation's CPU (docs/benchmarks-history.md, issue 31). Their keys are task ids
/// (random), idempotency slots (SHA-256), principals and tool names: a
/// caller cannot aim at collisions without the seed.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The hash set of the hot paths; see [`FastMap`].
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A failure of the store itself (I/O, a lost connection, corrupt data).
#[derive(Debug, thiserror::Error)]
#[error("task store failure: {message}")]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// What kind of failure a [`StoreError`] is, for the runtime's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The store has no room left (a full disk, a size limit): nothing can
    /// be created or changed until room is made.
    Full,
    /// The store cannot be reached now (a lost connection); it may come back.
    Unavailable,
    /// Another process holds the store (a SQLite file a running server
    /// has open): only that process may use it.
    InUse,
    /// Any other failure.
    Other,
}

impl StoreError {
    /// A store failure with a cause.
    pub fn new(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            kind: StoreErrorKind::Other,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A store failure described by a message only.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            kind: StoreErrorKind::Other,
            message: message.into(),
            source: None,
        }
    }

    /// This failure, of `kind`.
    #[must_use]
    pub fn with_kind(mut self, kind: StoreErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// What failed, in words (what [`Display`](std::fmt::Display) shows
    /// after "task store failure: "), without the cause.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// What [`TaskStore::create_keyed`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Keyed {
    /// The record was stored.
    Created,
    /// A record of the same owner holds the key: nothing was stored; here
    /// it is.
    Existing(Box<TaskRecord>),
}

/// The slot of `key` for `owner`: the hex SHA-256 of both, the name of the
/// key's entry in a store's index (so neither is in plain sight), and what
/// [`TaskRecord::idempotency_slot`] holds.
pub fn idempotency_slot(owner: &Principal, key: &IdempotencyKey) -> String {
    keyed::slot(owner.as_str(), key)
}

/// The answer of a compare-and-set.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Swap {
    /// The record was replaced.
    Swapped,
    /// The record changed since it was read; here it is now.
    Conflict(Box<TaskRecord>),
    /// There is no such record.
    Missing,
}

/// A boxed future, for the object-safe [`DynStore`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a server keeps its tasks. See the module docs for the contract;
/// `store::contract` (feature `contract`) tests it.
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new record; fails if the id exists. Once this returns, a
    /// [`TaskStore::get`] from any process sharing the store finds it.
    fn create(&self, record: TaskRecord) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The record, if there is one.
    fn get(
        &self,
        id: &TaskId,
    ) -> impl Future<Output = Result<Option<TaskRecord>, StoreError>> + Send;

    /// Replaces the record with the transition's if the stored record still
    /// has [`Transition::expected_version`], and announces the id on the
    /// change feed.
    fn compare_and_swap(
        &self,
        transition: Transition,
    ) -> impl Future<Output = Result<Swap, StoreError>> + Send;

    /// Deletes a record; deleting a missing one is not an error.
    fn delete(&self, id: &TaskId) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Ids of records whose [`TaskRecord::expires_at`] is at or before
    /// `now`, soonest first, at most `limit`: from an index, not a scan.
    fn expired(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskId>, StoreError>> + Send;

    /// Up to `limit` records owned by `owner` whose ids sort after `after`
    /// (from the first when `None`), in the byte order of their ids (new ids
    /// begin with their creation time, so this is creation order).
    ///
    /// Every record [`TaskStore::get`] finds is listed, finished and
    /// retained ones too; deleted ones never are. `after` is a position,
    /// not a record: an id that is not (or no longer) stored works as
    /// well. From an index per owner, not a scan of every record.
    fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskRecord>, StoreError>> + Send;

    /// The change feed: ids of records created or changed from now on.
    /// A lagging receiver may miss ids; waiters re-read on lag. A store
    /// shared by replicas tells each of the changes any replica made, and
    /// may tell of a creation only the replica that made it: no other can
    /// wait for a task, nor hold it, before its id exists.
    fn changes(&self) -> broadcast::Receiver<TaskId>;

    /// Up to `limit` records of any owner whose ids sort after `after`
    /// (from the first when `None`), in the byte order of their ids: what
    /// an operator's `mcp-tasks admin ls` reads, a page at a time, from an
    /// index (never the whole store at once). As [`TaskStore::list_owned`]
    /// otherwise. The default says the store cannot.
    fn list_all(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskRecord>, StoreError>> + Send {
        let _ = (after, limit);
        std::future::ready(Err(StoreError::msg(
            "this store cannot list every caller's tasks",
        )))
    }

    /// The record, packed ([`PackedRecord`]): what the server reads to
    /// answer `tasks/get` and to check who owns a task. A store that keeps
    /// packed records in memory hands out its own without copying it; the
    /// default packs what [`TaskStore::get`] returns.
    fn get_packed(
        &self,
        id: &TaskId,
    ) -> impl Future<Output = Result<Option<Arc<PackedRecord>>, StoreError>> + Send {
        let read = self.get(id);
        async move {
            Ok(read
                .await?
                .map(|record| Arc::new(PackedRecord::pack(record))))
        }
    }

    /// Stores `record`, made with [`TaskRecord::with_idempotency`], unless
    /// a record of the same owner already holds its idempotency key: then
    /// nothing is stored and that record is returned
    /// ([`Keyed::Existing`]). Atomic: of several creations with one key at
    /// once, from any process sharing the store, exactly one stores its
    /// record. The key's index entry lives as long as the record (a delete
    /// removes it). A record without a key is created as by
    /// [`TaskStore::create`].
    ///
    /// The default, for a store that keeps no key index, is
    /// [`TaskStore::create`]: the key is ignored (as the extension lets a
    /// server ignore it) and a call sent again makes a second task.
    fn create_keyed(
        &self,
        record: TaskRecord,
    ) -> impl Future<Output = Result<Keyed, StoreError>> + Send {
        let created = self.create(record);
        async move { created.await.map(|()| Keyed::Created) }
    }

    /// The record `owner` created under the idempotency key `key`, while it
    /// is stored. The default, for a store that keeps no key index (see
    /// [`TaskStore::create_keyed`]), finds none.
    fn find_keyed(
        &self,
        owner: &Principal,
        key: &IdempotencyKey,
    ) -> impl Future<Output = Result<Option<TaskRecord>, StoreError>> + Send {
        let _ = (owner, key);
        std::future::ready(Ok(None))
    }

    /// True when the store keeps an index of idempotency keys
    /// ([`TaskStore::create_keyed`] and [`TaskStore::find_keyed`] do what
    /// they say): then a runtime on it runs every `tools/call` with a key
    /// at most once and may declare so
    /// ([`TaskRuntime::declare_idempotency`](https://docs.rs/mcp-tasks/latest/mcp_tasks/server/struct.TaskRuntime.html#method.declare_idempotency)).
    /// `false`, the default, for a store that keeps no key index.
    fn keeps_keys(&self) -> bool {
        false
    }

    /// Leases and feed gaps, for a store that several server processes
    /// share (see [`replicas`]). `None` (the default): one process owns
    /// the store, and the runtime runs without leases.
    fn replicas(&self) -> Option<&dyn Replicas> {
        None
    }

    /// The key of the task hashes that name tasks in logs, metrics and
    /// traces (see [`HashKey`]): made at the first call and the same at
    /// every later one, from this handle or any other on the same store.
    /// A store that outlives its process keeps it with its tasks; the
    /// default, for one that does not, is the process's own random key
    /// ([`HashKey::per_process`]).
    fn hash_key(&self) -> impl Future<Output = Result<HashKey, StoreError>> + Send {
        std::future::ready(HashKey::per_process())
    }

    /// The unfinished resumable tasks (those that keep their call:
    /// [`TaskRecord::resumable_call`]) that the last process on a store
    /// that outlives it left behind: a runtime built on the store runs them
    /// again from their last checkpoint, or fails them. Listed once, to the
    /// first caller; a store opened while no process runs (an operator's
    /// `mcp-tasks admin`) leaves them to the next server. The default (a
    /// store that does not outlive its process, or a shared one, whose
    /// replicas take tasks over through leases) lists none.
    fn left_unfinished(&self) -> impl Future<Output = Result<Vec<TaskId>, StoreError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }

    /// True when the tasks outlive this process: the next process on the
    /// store finds them (a file, a server). A drain then stops a resumable
    /// task without failing it, to continue at the next start. `false`
    /// (the default): the tasks go with the process, as in memory.
    fn outlives_process(&self) -> bool {
        false
    }
}

/// A store behind an `Arc` is the same store.
impl<S: TaskStore> TaskStore for Arc<S> {
    fn create(&self, record: TaskRecord) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::create(self, record)
    }
    fn create_keyed(
        &self,
        record: TaskRecord,
    ) -> impl Future<Output = Result<Keyed, StoreError>> + Send {
        S::create_keyed(self, record)
    }
    fn find_keyed(
        &self,
        owner: &Principal,
        key: &IdempotencyKey,
    ) -> impl Future<Output = Result<Option<TaskRecord>, StoreError>> + Send {
        S::find_keyed(self, owner, key)
    }
    fn get(
        &self,
        id: &TaskId,
    ) -> impl Future<Output = Result<Option<TaskRecord>, StoreError>> + Send {
        S::get(self, id)
    }
    fn compare_and_swap(
        &self,
        transition: Transition,
    ) -> impl Future<Output = Result<Swap, StoreError>> + Send {
        S::compare_and_swap(self, transition)
    }
    fn delete(&self, id: &TaskId) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::delete(self, id)
    }
    fn expired(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskId>, StoreError>> + Send {
        S::expired(self, now, limit)
    }
    fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskRecord>, StoreError>> + Send {
        S::list_owned(self, owner, after, limit)
    }
    fn changes(&self) -> broadcast::Receiver<TaskId> {
        S::changes(self)
    }
    fn list_all(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<TaskRecord>, StoreError>> + Send {
        S::list_all(self, after, limit)
    }
    fn get_packed(
        &self,
        id: &TaskId,
    ) -> impl Future<Output = Result<Option<Arc<PackedRecord>>, StoreError>> + Send {
        S::get_packed(self, id)
    }
    fn keeps_keys(&self) -> bool {
        S::keeps_keys(self)
    }
    fn replicas(&self) -> Option<&dyn Replicas> {
        S::replicas(self)
    }
    fn hash_key(&self) -> impl Future<Output = Result<HashKey, StoreError>> + Send {
        S::hash_key(self)
    }
    fn left_unfinished(&self) -> impl Future<Output = Result<Vec<TaskId>, StoreError>> + Send {
        S::left_unfinished(self)
    }
    fn outlives_process(&self) -> bool {
        S::outlives_process(self)
    }
}

/// The object-safe form of [`TaskStore`], for a store chosen at run time.
/// Every [`TaskStore`] is one.
pub trait DynStore: Send + Sync + 'static {
    /// See [`TaskStore::create`].
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    /// See [`TaskStore::create_keyed`].
    fn create_keyed(&self, record: TaskRecord) -> BoxFuture<'_, Result<Keyed, StoreError>>;
    /// See [`TaskStore::find_keyed`].
    fn find_keyed<'a>(
        &'a self,
        owner: &'a Principal,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>>;
    /// See [`TaskStore::get`].
    fn get<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>>;
    /// See [`TaskStore::compare_and_swap`].
    fn compare_and_swap(&self, transition: Transition) -> BoxFuture<'_, Result<Swap, StoreError>>;
    /// See [`TaskStore::delete`].
    fn delete<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`TaskStore::expired`].
    fn expired(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<TaskId>, StoreError>>;
    /// See [`TaskStore::list_owned`].
    fn list_owned<'a>(
        &'a self,
        owner: &'a Principal,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreError>>;
    /// See [`TaskStore::changes`].
    fn changes(&self) -> broadcast::Receiver<TaskId>;
    /// See [`TaskStore::list_all`].
    fn list_all<'a>(
        &'a self,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreError>>;
    /// See [`TaskStore::get_packed`].
    fn get_packed<'a>(
        &'a self,
        id: &'a TaskId,
    ) -> BoxFuture<'a, Result<Option<Arc<PackedRecord>>, StoreError>> {
        Box::pin(async move {
            Ok(self
                .get(id)
                .await?
                .map(|record| Arc::new(PackedRecord::pack(record))))
        })
    }
    /// See [`TaskStore::keeps_keys`].
    fn keeps_keys(&self) -> bool {
        false
    }
    /// See [`TaskStore::replicas`].
    fn replicas(&self) -> Option<&dyn Replicas>;
    /// [`Replicas::compare_and_swap_freeing`] of [`DynStore::replicas`]
    /// (an error on a store without them): a wrapper may measure it as the
    /// swap it is.
    fn compare_and_swap_freeing<'a>(
        &'a self,
        transition: Transition,
        seat: &'a SeatId,
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Swap, StoreError>> {
        match self.replicas() {
            Some(replicas) => replicas.compare_and_swap_freeing(transition, seat, free),
            None => Box::pin(std::future::ready(Err(StoreError::msg(
                "the store has no seats to free",
            )))),
        }
    }
    /// See [`TaskStore::hash_key`].
    fn hash_key(&self) -> BoxFuture<'_, Result<HashKey, StoreError>>;
    /// See [`TaskStore::left_unfinished`].
    fn left_unfinished(&self) -> BoxFuture<'_, Result<Vec<TaskId>, StoreError>>;
    /// See [`TaskStore::outlives_process`].
    fn outlives_process(&self) -> bool {
        false
    }
}

impl<S: TaskStore> DynStore for S {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(TaskStore::create(self, record))
    }
    fn create_keyed(&self, record: TaskRecord) -> BoxFuture<'_, Result<Keyed, StoreError>> {
        Box::pin(TaskStore::create_keyed(self, record))
    }
    fn find_keyed<'a>(
        &'a self,
        owner: &'a Principal,
        key: &'a IdempotencyKey,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(TaskStore::find_keyed(self, owner, key))
    }
    fn get<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(TaskStore::get(self, id))
    }
    fn compare_and_swap(&self, transition: Transition) -> BoxFuture<'_, Result<Swap, StoreError>> {
        Box::pin(TaskStore::compare_and_swap(self, transition))
    }
    fn delete<'a>(&'a self, id: &'a TaskId) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(TaskStore::delete(self, id))
    }
    fn expired(
        &self,
        now: UnixMillis,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<TaskId>, StoreError>> {
        Box::pin(TaskStore::expired(self, now, limit))
    }
    fn list_owned<'a>(
        &'a self,
        owner: &'a Principal,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreError>> {
        Box::pin(TaskStore::list_owned(self, owner, after, limit))
    }
    fn changes(&self) -> broadcast::Receiver<TaskId> {
        TaskStore::changes(self)
    }
    fn list_all<'a>(
        &'a self,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, StoreError>> {
        Box::pin(TaskStore::list_all(self, after, limit))
    }
    fn get_packed<'a>(
        &'a self,
        id: &'a TaskId,
    ) -> BoxFuture<'a, Result<Option<Arc<PackedRecord>>, StoreError>> {
        Box::pin(TaskStore::get_packed(self, id))
    }
    fn keeps_keys(&self) -> bool {
        TaskStore::keeps_keys(self)
    }
    fn replicas(&self) -> Option<&dyn Replicas> {
        TaskStore::replicas(self)
    }
    fn hash_key(&self) -> BoxFuture<'_, Result<HashKey, StoreError>> {
        Box::pin(TaskStore::hash_key(self))
    }
    fn left_unfinished(&self) -> BoxFuture<'_, Result<Vec<TaskId>, StoreError>> {
        Box::pin(TaskStore::left_unfinished(self))
    }
    fn outlives_process(&self) -> bool {
        TaskStore::outlives_process(self)
    }
}

/// A store chosen at run time.
pub type SharedStore = Arc<dyn DynStore>;

/// A store, or a [`SharedStore`] already: what the server runtime's builder takes.
pub trait IntoSharedStore {
    /// The store behind one shared handle.
    fn into_shared(self) -> SharedStore;
}

impl<S: TaskStore> IntoSharedStore for S {
    fn into_shared(self) -> SharedStore {
        Arc::new(self)
    }
}

impl IntoSharedStore for SharedStore {
    fn into_shared(self) -> SharedStore {
        self
    }
}

/// What [`modify`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Modified {
    /// The change was applied; the new record.
    Applied(TaskRecord),
    /// The change was refused; the record as it is.
    Refused(TaskRecord, TransitionError),
    /// There is no such record.
    Missing,
}

/// Applies `change` to record `id` with compare-and-set, re-reading and
/// re-applying on conflict: how the runtime changes records. `now` is the
/// time of the change; a task that finishes is kept `retention` after it.
pub async fn modify(
    store: &dyn DynStore,
    id: &TaskId,
    change: &Change,
    now: UnixMillis,
    retention: Duration,
) -> Result<Modified, StoreError> {
    modify_fenced(store, id, change, None, now, retention, None)
        .await
        .map(|(modified, _)| modified)
}

/// [`modify`] for a change made by (or in the name of) `runner`, through
/// [`TaskRecord::apply_as`]: refused with [`TransitionError::NotRunner`]
/// once the record names another runner. How a runtime on a shared store
/// writes for the tasks it runs, and how it takes over a dead runner's.
pub async fn modify_as(
    store: &dyn DynStore,
    id: &TaskId,
    change: &Change,
    runner: &RunnerId,
    now: UnixMillis,
    retention: Duration,
) -> Result<Modified, StoreError> {
    modify_fenced(store, id, change, Some(runner), now, retention, None)
        .await
        .map(|(modified, _)| modified)
}

/// A seat and the pools to give it up in, with a write.
pub(crate) type Freeing<'a> = (&'a SeatId, &'a [SeatPool]);

/// [`modify`] (with `runner`, [`modify_as`]) that also tells the status
/// the change was applied to: what the runtime's observers hear. With
/// `free`, its swap gives that seat up too
/// ([`DynStore::compare_and_swap_freeing`], for a store that
/// [frees with a swap](Replicas::frees_with_swap)): freed if and only if
/// the answer is [`Modified::Applied`].
#[cfg(feature = "server")]
pub(crate) async fn modify_observed(
    store: &dyn DynStore,
    id: &TaskId,
    change: &Change,
    runner: Option<&RunnerId>,
    now: UnixMillis,
    retention: Duration,
    free: Option<Freeing<'_>>,
) -> Result<(Modified, Option<crate::task::TaskStatus>), StoreError> {
    modify_fenced(store, id, change, runner, now, retention, free).await
}

async fn modify_fenced(
    store: &dyn DynStore,
    id: &TaskId,
    change: &Change,
    runner: Option<&RunnerId>,
    now: UnixMillis,
    retention: Duration,
    free: Option<Freeing<'_>>,
) -> Result<(Modified, Option<crate::task::TaskStatus>), StoreError> {
    let Some(mut current) = store.get(id).await? else {
        return Ok((Modified::Missing, None));
    };
    loop {
        let applied = match runner {
            Some(runner) => current.apply_as(runner, change, now, retention),
            None => current.apply(change, now, retention),
        };
        let transition = match applied {
            Ok(transition) => transition,
            Err(refused) => return Ok((Modified::Refused(current, refused), None)),
        };
        let next = transition.record().clone();
        let swapped = match free {
            Some((seat, pools)) => {
                store
                    .compare_and_swap_freeing(transition, seat, pools)
                    .await?
            }
            None => store.compare_and_swap(transition).await?,
        };
        match swapped {
            Swap::Swapped => return Ok((Modified::Applied(next), Some(current.status().clone()))),
            // A conflict must show a newer record, or retrying could loop forever.
            Swap::Conflict(now) if now.version() != current.version() => current = *now,
            Swap::Conflict(_) => {
                return Err(StoreError::msg(
                    "the store reported a conflict without a newer version",
                ));
            }
            Swap::Missing => return Ok((Modified::Missing, None)),
        }
    }
}
