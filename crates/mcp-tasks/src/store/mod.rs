//! Where a server keeps its tasks: the [`TaskStore`] trait, the one
//! transition function every store's changes go through, and the
//! [`MemoryStore`].
//!
//! A store holds [`TaskRecord`]s and offers five things: atomic create,
//! read, compare-and-set on a record's `version`, delete, an expiry index
//! (records whose `expires_at_ms` has passed), and a change feed (the ids
//! of records that changed) that wakes waiters. Every change is computed by
//! [`TaskRecord::apply`] and written with [`TaskStore::compare_and_swap`],
//! so a terminal state cannot be left whatever the backend, and a store
//! shared by several server processes (Redis) fits the same trait.

mod memory;

#[cfg(feature = "contract")]
pub mod contract;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;

pub use memory::MemoryStore;

use crate::task::TaskStatus;

/// The JSON-RPC error of a task that ran past its TTL.
pub const EXPIRED_CODE: i64 = -32603;
/// The message of a task that ran past its TTL.
pub const EXPIRED_MESSAGE: &str = "task expired";
/// The status message of tasks a restarted server found unfinished.
pub const RESTARTED_MESSAGE: &str = "server restarted before the task finished";

/// One task as a store keeps it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskRecord {
    /// The task id (a bearer token: never logged).
    pub id: String,
    /// The principal that created the task; every `tasks/*` request must come from it.
    pub owner: String,
    /// The status.
    pub status: TaskStatus,
    /// A message for people about the current state.
    pub status_message: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: u64,
    /// Time of the last change, Unix milliseconds.
    pub updated_at_ms: u64,
    /// TTL from creation in milliseconds; `None`: unlimited.
    pub ttl_ms: Option<u64>,
    /// The suggested poll interval in milliseconds.
    pub poll_interval_ms: Option<u64>,
    /// When the sweeper acts on the record: a working task past it fails
    /// ("task expired"); a finished one is deleted. `None`: never.
    pub expires_at_ms: Option<u64>,
    /// Outstanding input requests by key (`{method, params}` objects).
    pub input_requests: BTreeMap<String, Value>,
    /// Every input key ever issued: keys are unique for the task's lifetime.
    pub issued_keys: BTreeSet<String>,
    /// Answers received for issued keys, waiting for the tool code to read them.
    pub input_responses: BTreeMap<String, Value>,
    /// The tool's result (`completed`).
    pub result: Option<Value>,
    /// The JSON-RPC error (`failed`).
    pub error: Option<Value>,
    /// `tasks/cancel` was received.
    pub cancel_requested: bool,
    /// Bumped on every change; compare-and-set compares it.
    pub version: u64,
}

impl std::fmt::Debug for TaskRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskRecord")
            .field("id", &"<redacted>")
            .field("status", &self.status)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// A change to a task, applied by [`TaskRecord::apply`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// Set the status message.
    StatusMessage(String),
    /// Ask for input under a key never used before in this task.
    RequestInput {
        /// The key.
        key: String,
        /// The `{method, params}` request.
        request: Value,
    },
    /// Answers from `tasks/update`: keys that are not outstanding are ignored.
    ProvideInput(BTreeMap<String, Value>),
    /// `tasks/cancel` was received.
    RequestCancel,
    /// Keep a working task alive: its expiry becomes at least `now + by_ms`.
    ExtendTtl {
        /// Milliseconds from now.
        by_ms: u64,
    },
    /// The tool returned a result (even `isError: true`).
    Complete(Value),
    /// The tool ended with a JSON-RPC error.
    Fail(Value),
    /// The task was cancelled.
    Cancel,
    /// The TTL passed: a working task fails with "task expired".
    Expire,
    /// The process that ran the task is gone.
    Abandon,
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The task is finished; finished tasks never change.
    #[error("the task is finished ({0}) and cannot change")]
    Terminal(TaskStatus),
    /// The input key was used before in this task.
    #[error("input key {0:?} was already used in this task")]
    DuplicateKey(String),
}

impl TaskRecord {
    /// A new `working` task created at `now_ms` by `owner`.
    pub fn new(
        id: impl Into<String>,
        owner: impl Into<String>,
        now_ms: u64,
        ttl_ms: Option<u64>,
        poll_interval_ms: Option<u64>,
    ) -> Self {
        Self {
            id: id.into(),
            owner: owner.into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            ttl_ms,
            poll_interval_ms,
            expires_at_ms: ttl_ms.map(|ttl| now_ms.saturating_add(ttl)),
            input_requests: BTreeMap::new(),
            issued_keys: BTreeSet::new(),
            input_responses: BTreeMap::new(),
            result: None,
            error: None,
            cancel_requested: false,
            version: 0,
        }
    }

    /// The one transition function: the record after `change` at time
    /// `now_ms`, or why the change is refused. `retention_ms` is how long a
    /// finished task is kept.
    pub fn apply(
        &self,
        change: &Change,
        now_ms: u64,
        retention_ms: u64,
    ) -> Result<TaskRecord, TransitionError> {
        if self.status.is_terminal() {
            return Err(TransitionError::Terminal(self.status.clone()));
        }
        let mut next = self.clone();
        match change {
            Change::StatusMessage(message) => next.status_message = Some(message.clone()),
            Change::RequestInput { key, request } => {
                if !next.issued_keys.insert(key.clone()) {
                    return Err(TransitionError::DuplicateKey(key.clone()));
                }
                next.input_requests.insert(key.clone(), request.clone());
                next.status = TaskStatus::InputRequired;
            }
            Change::ProvideInput(responses) => {
                for (key, response) in responses {
                    if next.input_requests.remove(key).is_some() {
                        next.input_responses.insert(key.clone(), response.clone());
                    }
                }
                if next.input_requests.is_empty() {
                    next.status = TaskStatus::Working;
                }
            }
            Change::RequestCancel => next.cancel_requested = true,
            Change::ExtendTtl { by_ms } => {
                let until = now_ms.saturating_add(*by_ms);
                if let Some(ttl) = next.ttl_ms {
                    let current = next.created_at_ms.saturating_add(ttl);
                    if until > current {
                        next.ttl_ms = Some(until - next.created_at_ms);
                        next.expires_at_ms = Some(until);
                    }
                }
            }
            Change::Complete(result) => {
                next.finish(TaskStatus::Completed, now_ms, retention_ms);
                next.result = Some(result.clone());
            }
            Change::Fail(error) => {
                next.finish(TaskStatus::Failed, now_ms, retention_ms);
                next.error = Some(error.clone());
            }
            Change::Cancel => next.finish(TaskStatus::Cancelled, now_ms, retention_ms),
            Change::Expire | Change::Abandon => {
                let message = if matches!(change, Change::Expire) {
                    EXPIRED_MESSAGE
                } else {
                    RESTARTED_MESSAGE
                };
                next.finish(TaskStatus::Failed, now_ms, retention_ms);
                next.status_message = Some(message.to_owned());
                next.error = Some(serde_json::json!({"code": EXPIRED_CODE, "message": message}));
            }
        }
        next.updated_at_ms = now_ms.max(self.updated_at_ms);
        next.version = self.version + 1;
        Ok(next)
    }

    fn finish(&mut self, status: TaskStatus, now_ms: u64, retention_ms: u64) {
        self.status = status;
        self.input_requests.clear();
        self.input_responses.clear();
        self.expires_at_ms = Some(now_ms.saturating_add(retention_ms));
    }
}

/// A failure of the store itself (I/O, a lost connection, corrupt data).
#[derive(Debug, thiserror::Error)]
#[error("task store failure: {message}")]
pub struct StoreError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// A store failure with a cause.
    pub fn new(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A store failure described by a message only.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }
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
/// [`contract`] (feature `contract`) tests it.
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new record; fails if the id exists. Once this returns, a
    /// [`TaskStore::get`] from any process sharing the store finds it.
    fn create(&self, record: TaskRecord) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The record, if there is one.
    fn get(&self, id: &str) -> impl Future<Output = Result<Option<TaskRecord>, StoreError>> + Send;

    /// Replaces the record if its stored `version` is `expected`, and
    /// announces the id on the change feed.
    fn compare_and_swap(
        &self,
        expected: u64,
        record: TaskRecord,
    ) -> impl Future<Output = Result<Swap, StoreError>> + Send;

    /// Deletes a record; deleting a missing one is not an error.
    fn delete(&self, id: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Ids of records whose `expires_at_ms` is at or before `now_ms`, oldest
    /// first, at most `limit`: from an index, not a scan.
    fn expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

    /// The change feed: ids of records created or changed from now on.
    /// A lagging receiver may miss ids; waiters re-read on lag.
    fn changes(&self) -> broadcast::Receiver<String>;
}

/// The object-safe form of [`TaskStore`], for a store chosen at run time.
pub trait DynStore: Send + Sync + 'static {
    /// See [`TaskStore::create`].
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>>;
    /// See [`TaskStore::get`].
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>>;
    /// See [`TaskStore::compare_and_swap`].
    fn compare_and_swap(
        &self,
        expected: u64,
        record: TaskRecord,
    ) -> BoxFuture<'_, Result<Swap, StoreError>>;
    /// See [`TaskStore::delete`].
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`TaskStore::expired`].
    fn expired(&self, now_ms: u64, limit: usize) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;
    /// See [`TaskStore::changes`].
    fn changes(&self) -> broadcast::Receiver<String>;
}

impl<S: TaskStore> DynStore for S {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(TaskStore::create(self, record))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(TaskStore::get(self, id))
    }
    fn compare_and_swap(
        &self,
        expected: u64,
        record: TaskRecord,
    ) -> BoxFuture<'_, Result<Swap, StoreError>> {
        Box::pin(TaskStore::compare_and_swap(self, expected, record))
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(TaskStore::delete(self, id))
    }
    fn expired(&self, now_ms: u64, limit: usize) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(TaskStore::expired(self, now_ms, limit))
    }
    fn changes(&self) -> broadcast::Receiver<String> {
        TaskStore::changes(self)
    }
}

/// A store chosen at run time.
pub type SharedStore = Arc<dyn DynStore>;

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
/// re-applying on conflict: the only way records change.
pub async fn modify(
    store: &dyn DynStore,
    id: &str,
    change: &Change,
    now_ms: u64,
    retention_ms: u64,
) -> Result<Modified, StoreError> {
    let Some(mut current) = store.get(id).await? else {
        return Ok(Modified::Missing);
    };
    loop {
        let next = match current.apply(change, now_ms, retention_ms) {
            Ok(next) => next,
            Err(refused) => return Ok(Modified::Refused(current, refused)),
        };
        match store
            .compare_and_swap(current.version, next.clone())
            .await?
        {
            Swap::Swapped => return Ok(Modified::Applied(next)),
            // A conflict must show a newer record, or retrying could loop forever.
            Swap::Conflict(now) if now.version != current.version => current = *now,
            Swap::Conflict(_) => {
                return Err(StoreError::msg(
                    "the store reported a conflict without a newer version",
                ));
            }
            Swap::Missing => return Ok(Modified::Missing),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record() -> TaskRecord {
        TaskRecord::new("t", "o", 1_000, Some(10_000), Some(100))
    }

    #[test]
    fn terminal_states_never_change() {
        let done = record()
            .apply(&Change::Complete(json!({})), 2_000, 500)
            .unwrap();
        assert_eq!(done.status, TaskStatus::Completed);
        assert_eq!(done.expires_at_ms, Some(2_500));
        for change in [
            Change::Cancel,
            Change::Expire,
            Change::Fail(json!({})),
            Change::StatusMessage("x".into()),
            Change::RequestCancel,
        ] {
            assert_eq!(
                done.apply(&change, 3_000, 500),
                Err(TransitionError::Terminal(TaskStatus::Completed))
            );
        }
    }

    #[test]
    fn input_keys_are_unique_and_partial_answers_keep_waiting() {
        let ask = |r: &TaskRecord, key: &str| {
            r.apply(
                &Change::RequestInput {
                    key: key.into(),
                    request: json!({"method": "roots/list"}),
                },
                1_500,
                0,
            )
        };
        let one = ask(&record(), "a").unwrap();
        let two = ask(&one, "b").unwrap();
        assert_eq!(two.status, TaskStatus::InputRequired);
        let partial = two
            .apply(
                &Change::ProvideInput([("a".into(), json!(1)), ("zzz".into(), json!(2))].into()),
                1_600,
                0,
            )
            .unwrap();
        assert_eq!(partial.status, TaskStatus::InputRequired);
        assert_eq!(partial.input_requests.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(partial.input_responses.keys().collect::<Vec<_>>(), ["a"]);
        let all = partial
            .apply(
                &Change::ProvideInput([("b".into(), json!(3))].into()),
                1_700,
                0,
            )
            .unwrap();
        assert_eq!(all.status, TaskStatus::Working);
        assert_eq!(
            ask(&all, "a"),
            Err(TransitionError::DuplicateKey("a".into()))
        );
        assert_eq!(all.version, 4);
    }

    #[test]
    fn expiry_and_heartbeat() {
        let alive = record()
            .apply(&Change::ExtendTtl { by_ms: 20_000 }, 5_000, 0)
            .unwrap();
        assert_eq!(
            (alive.ttl_ms, alive.expires_at_ms),
            (Some(24_000), Some(25_000))
        );
        let shorter = alive
            .apply(&Change::ExtendTtl { by_ms: 1 }, 6_000, 0)
            .unwrap();
        assert_eq!(shorter.expires_at_ms, Some(25_000));
        let expired = alive.apply(&Change::Expire, 30_000, 60_000).unwrap();
        assert_eq!(expired.status, TaskStatus::Failed);
        assert_eq!(
            expired.error,
            Some(json!({"code": -32603, "message": "task expired"}))
        );
        assert_eq!(expired.expires_at_ms, Some(90_000));
    }
}
