//! A [`TaskStore`] for [mcp-tasks](mcp_tasks) that keeps tasks in one
//! SQLite file, so they outlive the server process.
//!
//! [`SqliteStore::open`] creates or opens the file (WAL journal,
//! `synchronous=NORMAL`, a 5 s busy timeout). Tasks that the previous
//! process left unfinished (`working`, `input_required` or a status this
//! library does not know) cannot finish any more: opening fails them through
//! [`TaskRecord::apply`] with [`Change::Abandon`](mcp_tasks::store::Change::Abandon)
//! ("server restarted before the task finished"), and
//! [`SqliteStore::abandoned_at_open`] says how many there were.
//!
//! # One file, one server process
//!
//! Opening is restart recovery: it fails every unfinished task in the file.
//! A second server process opening the same file would fail the first one's
//! running tasks, and the change feed ([`TaskStore::changes`]) only reaches
//! waiters in the process that made the change. So one SQLite file serves
//! one server process; several replicas need a store built for sharing. Other
//! processes may read the file (the `sqlite3` shell, a backup) while the
//! server runs.
//!
//! # The client journal
//!
//! With the feature `journal`, [`SqliteJournal`] keeps a client's task
//! journal (`mcp_tasks::client::journal`) in a SQLite file that several
//! client processes may share, created private to its user.
//!
//! # Quick start
//!
//! ```
//! use std::sync::Arc;
//!
//! use mcp_tasks::store::{Principal, SharedStore, TaskRecord, TaskStore};
//! use mcp_tasks::{TaskId, Ttl, UnixMillis};
//! use mcp_tasks_sqlite::SqliteStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("tasks.sqlite3");
//! let store = SqliteStore::open(&path)?;
//! assert_eq!(store.abandoned_at_open(), 0, "a new file has no unfinished task");
//!
//! let id = TaskId::new("task-1");
//! let record = TaskRecord::new(id.clone(), Principal::new("owner-a"), UnixMillis::now(), Ttl::Unlimited, None);
//! store.create(record).await?;
//! assert!(store.get(&id).await?.is_some());
//!
//! // The server runtime takes the store chosen at run time as a `SharedStore`.
//! let shared: SharedStore = Arc::new(store);
//! # drop(shared);
//! # Ok(())
//! # }
//! ```
//!
//! # Errors
//!
//! Every failure is a [`StoreError`]: SQLite errors are its source, and a
//! row whose JSON is not a task record (or disagrees with the row's id or
//! version columns) is reported as corrupt, never a panic. Error messages
//! never contain a task id: ids are bearer tokens.
//!
//! # Cancel safety
//!
//! Each operation runs to completion on tokio's blocking pool. Dropping its
//! future does not undo it: a create or swap that started is written and
//! announced on the change feed.

#[cfg(feature = "journal")]
mod journal;
mod schema;

#[cfg(feature = "journal")]
pub use journal::SqliteJournal;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mcp_tasks::store::{StoreError, Swap, TaskRecord, TaskStore, Transition};
use mcp_tasks::{TaskId, UnixMillis};
use rusqlite::Connection;
use tokio::sync::broadcast;

/// How long [`SqliteStore::open`] keeps a task it failed at open: one hour.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(60 * 60);

/// How many ids the change feed buffers for a slow receiver.
const FEED_CAPACITY: usize = 1024;

/// How [`SqliteStore::open_with`] opens a file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// The time of the restart recovery (default: the system clock's).
    pub now: Option<UnixMillis>,
    /// How long tasks failed at open are kept (default [`DEFAULT_RETENTION`]).
    pub retention: Duration,
    /// The largest the file may grow, in bytes (default: no limit). Past
    /// it, creating or changing a task fails with a [`StoreError`] of kind
    /// [`StoreErrorKind::Full`](mcp_tasks::store::StoreErrorKind::Full), as on a full disk.
    pub max_size_bytes: Option<u64>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            now: None,
            retention: DEFAULT_RETENTION,
            max_size_bytes: None,
        }
    }
}

impl SqliteOptions {
    /// The time of the restart recovery.
    pub fn with_now(mut self, now: UnixMillis) -> Self {
        self.now = Some(now);
        self
    }

    /// How long tasks failed at open are kept.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The largest the file may grow, in bytes.
    pub fn with_max_size_bytes(mut self, bytes: u64) -> Self {
        self.max_size_bytes = Some(bytes);
        self
    }
}

/// A [`TaskStore`] on one SQLite file in WAL mode. See the [crate docs](crate).
///
/// Its operations run on tokio's blocking pool, so they must be awaited
/// inside a tokio runtime (either flavor).
#[derive(Debug)]
pub struct SqliteStore {
    shared: Arc<Shared>,
    path: PathBuf,
    abandoned_at_open: usize,
}

/// What the blocking operations share with the store.
#[derive(Debug)]
struct Shared {
    conn: Mutex<Connection>,
    feed: broadcast::Sender<TaskId>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half-written record:
        // each write is one statement or a transaction that rolls back when
        // dropped.
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn announce(&self, id: TaskId) {
        // No receiver is not an error.
        let _ = self.feed.send(id);
    }
}

impl SqliteStore {
    /// Creates or opens the store at `path` and fails the tasks a previous
    /// process left unfinished, at the system clock's time, keeping them for
    /// [`DEFAULT_RETENTION`].
    ///
    /// Opening takes the file over: only one server process may use a file
    /// (see the [crate docs](crate)), since opening fails the unfinished
    /// tasks of any other. This does blocking file I/O: call it at start-up,
    /// or from [`tokio::task::spawn_blocking`].
    ///
    /// # Errors
    ///
    /// The file cannot be opened or put in WAL mode, it holds a schema newer
    /// than this build knows or a table that is not this store's, or an
    /// unfinished task's row is corrupt (the file needs repair before the
    /// server can own it).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_at(path, UnixMillis::now(), DEFAULT_RETENTION)
    }

    /// [`SqliteStore::open`] with the time and the retention of tasks failed
    /// at open given: for tests (the runtime's injected clock), and for a
    /// server whose retention is not one hour.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub fn open_at(
        path: impl AsRef<Path>,
        now: UnixMillis,
        retention: Duration,
    ) -> Result<Self, StoreError> {
        Self::open_with(
            path,
            &SqliteOptions::default()
                .with_now(now)
                .with_retention(retention),
        )
    }

    /// [`SqliteStore::open`] with every setting of [`SqliteOptions`].
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: &SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut conn = schema::open(&path, options.max_size_bytes)?;
        let now = options.now.unwrap_or_else(UnixMillis::now);
        let abandoned_at_open = schema::abandon_unfinished(&mut conn, now, options.retention)?;
        Ok(Self {
            shared: Arc::new(Shared {
                conn: Mutex::new(conn),
                feed: broadcast::channel(FEED_CAPACITY).0,
            }),
            path,
            abandoned_at_open,
        })
    }

    /// How many unfinished tasks opening found and failed.
    pub fn abandoned_at_open(&self) -> usize {
        self.abandoned_at_open
    }

    /// The file the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `op` on the connection on tokio's blocking pool.
    ///
    /// Why not inline: most operations take microseconds, but a commit that
    /// triggers a WAL checkpoint syncs the file, and a lock held by another
    /// connection (a backup, the `sqlite3` shell) makes SQLite wait up to
    /// the busy timeout. Doing that on a runtime worker would stall every
    /// task scheduled on it, and waiting for the connection's mutex would
    /// too; on the blocking pool only the caller waits. The cost is one
    /// thread hand-off per operation. `op` also announces on the change
    /// feed, so a write that started is announced even if the caller's
    /// future is dropped.
    async fn run<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Shared, &Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || {
            let conn = shared.lock();
            op(&shared, &conn)
        })
        .await
        .map_err(|failed| StoreError::new("a SQLite operation did not finish", failed))?
    }
}

impl TaskStore for SqliteStore {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        let row = schema::Row::encode(&record)?;
        let id = record.id().clone();
        self.run(move |shared, conn| {
            schema::insert(conn, &row)?;
            shared.announce(id);
            Ok(())
        })
        .await
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        let id = id.expose().to_owned();
        self.run(move |_, conn| schema::read(conn, &id)).await
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        let row = schema::Row::encode(transition.record())?;
        let id = transition.record().id().clone();
        // No stored version exceeds i64::MAX (encoding refuses it), so such
        // an `expected` is stale like any other mismatch.
        let expected = i64::try_from(transition.expected_version()).ok();
        self.run(move |shared, conn| {
            if let Some(expected) = expected
                && schema::update(conn, expected, &row)?
            {
                shared.announce(id);
                return Ok(Swap::Swapped);
            }
            // Nothing matched: either the version moved on or there is no
            // such record. The connection's lock is held, so no write of
            // this process comes between the update and this read.
            Ok(match schema::read(conn, &row.id)? {
                Some(current) => Swap::Conflict(Box::new(current)),
                None => Swap::Missing,
            })
        })
        .await
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        let id = id.expose().to_owned();
        self.run(move |_, conn| {
            conn.prepare_cached("DELETE FROM tasks WHERE id = ?1")
                .and_then(|mut delete| delete.execute([&id]))
                .map_err(|err| schema::failure("SQLite could not delete the task", err))?;
            Ok(())
        })
        .await
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        let now_ms = schema::clamp(now);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |_, conn| schema::expired(conn, now_ms, limit))
            .await
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.shared.feed.subscribe()
    }
}
