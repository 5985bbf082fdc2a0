#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod cache;
mod checkpoint;
mod commit;
#[cfg(feature = "journal")]
mod journal;
mod lock;
mod schema;
mod wal;

#[cfg(feature = "journal")]
pub use journal::SqliteJournal;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use mcp_tasks::store::{
    HashKey, Keyed, PackedRecord, Principal, StoreError, Swap, TaskRecord, TaskStore, Transition,
    idempotency_slot,
};
use mcp_tasks::{IdempotencyKey, TaskId, UnixMillis};
use tokio::sync::{broadcast, oneshot};

use crate::cache::Cache;
use crate::checkpoint::Checkpointer;
use crate::commit::{Op, Shared};

/// How long [`SqliteStore::open`] keeps a task it failed at open: one hour.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(60 * 60);

/// How many ids the change feed buffers for a slow receiver.
const FEED_CAPACITY: usize = 1024;

/// Creates the store file `0600` if it is new (see the [crate docs](crate));
/// warns about it or the files SQLite keeps beside it if others may use
/// them. In-memory databases and `file:` URIs are SQLite's business.
fn keep_private(path: &Path) -> Result<(), StoreError> {
    let text = path.as_os_str();
    if text.is_empty() || text == ":memory:" || text.to_string_lossy().starts_with("file:") {
        return Ok(());
    }
    mcp_tasks::private_files::create_private_file(path)
        .map_err(|err| StoreError::new("cannot create the store file", err))?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut beside = text.to_owned();
        beside.push(suffix);
        // A file that cannot be inspected is SQLite's to report.
        let _ = mcp_tasks::private_files::warn_if_exposed(Path::new(&beside));
    }
    Ok(())
}

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
    /// How many records the read cache keeps at most (default 100,000; 0:
    /// none, every read goes to the file).
    pub cache_records: usize,
    /// How many bytes of records the read cache keeps at most (default
    /// 128 MiB), counted as [`PackedRecord::heap_size`].
    pub cache_bytes: usize,
    /// When a commit reaches the disk (default [`SqliteSync::Normal`]).
    pub sync: SqliteSync,
}

/// When a commit reaches the disk: SQLite's `synchronous` pragma, in WAL
/// mode. Both survive the death of the process (`kill -9`, a panic, an
/// out-of-memory kill): a commit is in the operating system's hands before
/// it is acknowledged. They differ on a power loss or a crash of the
/// operating system. RELIABILITY.md says what each keeps; BENCHMARKS.md what
/// each costs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SqliteSync {
    /// `synchronous=NORMAL` (the default): the WAL is synced at each
    /// checkpoint, not at each commit, so a power loss may lose the last
    /// commits (those since the last checkpoint, at most a fraction of a
    /// second with the store's checkpointer), never corrupt the file.
    #[default]
    Normal,
    /// `synchronous=FULL`: the WAL is synced at every commit, so an
    /// acknowledged change survives a power loss too, at the cost of one
    /// `fsync` per group of commits.
    Full,
}

impl SqliteSync {
    /// The pragma's value.
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Full => "FULL",
        }
    }
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            now: None,
            retention: DEFAULT_RETENTION,
            max_size_bytes: None,
            cache_records: 100_000,
            cache_bytes: 128 << 20,
            sync: SqliteSync::Normal,
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

    /// When a commit reaches the disk.
    pub fn with_sync(mut self, sync: SqliteSync) -> Self {
        self.sync = sync;
        self
    }

    /// The bounds of the read cache: at most `records` records and `bytes`
    /// bytes of them (`records` 0: no cache).
    pub fn with_cache(mut self, records: usize, bytes: usize) -> Self {
        self.cache_records = records;
        self.cache_bytes = bytes;
        self
    }
}

/// A [`TaskStore`] on one SQLite file in WAL mode. See the [crate docs](crate).
///
/// Its operations are answered by its committer thread (or, for a cached
/// record, at once), so they may be awaited on any async runtime; dropping
/// the store lets the committer finish what is queued and waits for it.
#[derive(Debug)]
pub struct SqliteStore {
    shared: Arc<Shared>,
    queue: Option<mpsc::Sender<Op>>,
    committer: Option<JoinHandle<()>>,
    /// Stopped before the committer, whose connection closes last.
    checkpointer: Option<Checkpointer>,
    path: PathBuf,
    abandoned_at_open: usize,
    /// The resumable tasks opening found unfinished, until a runtime takes
    /// them ([`TaskStore::left_unfinished`]).
    resumable_at_open: Mutex<Option<Vec<TaskId>>>,
    /// Read (or made) at open: it never changes.
    hash_key: HashKey,
    /// Held until the committer's connection is closed (see `lock.rs`).
    lock: Option<lock::FileLock>,
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
    /// server can own it). Another open store holds the file (kind
    /// [`StoreErrorKind::InUse`](mcp_tasks::store::StoreErrorKind::InUse)),
    /// still after a second's wait.
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
        let file_lock = lock::lock(&path)?;
        keep_private(&path)?;
        let mut conn = schema::open(&path, options.max_size_bytes, options.sync)?;
        let now = options.now.unwrap_or_else(UnixMillis::now);
        let left = schema::abandon_unfinished(&mut conn, now, options.retention)?;
        let hash_key = schema::hash_key(&conn)?;
        let shared = Arc::new(Shared {
            cache: Mutex::new(Cache::new(options.cache_records, options.cache_bytes)),
            feed: broadcast::channel(FEED_CAPACITY).0,
        });
        let (queue, ops) = mpsc::channel();
        let committer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("mcp-tasks-sqlite".to_owned())
                .spawn(move || commit::run(&conn, &shared, &ops))
                .map_err(|err| StoreError::new("cannot start the SQLite committer thread", err))?
        };
        let checkpointer = Checkpointer::start(path.clone());
        Ok(Self {
            shared,
            queue: Some(queue),
            committer: Some(committer),
            checkpointer,
            path,
            abandoned_at_open: left.abandoned,
            resumable_at_open: Mutex::new(Some(left.resumable)),
            hash_key,
            lock: file_lock,
        })
    }

    /// How many unfinished tasks opening found and failed (the resumable
    /// ones are left for a runtime to run again:
    /// [`TaskStore::left_unfinished`]).
    pub fn abandoned_at_open(&self) -> usize {
        self.abandoned_at_open
    }

    /// The file the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues an operation for the committer and waits for its answer.
    async fn run<T>(
        &self,
        op: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Op,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let queued = self
            .queue
            .as_ref()
            .is_some_and(|queue| queue.send(op(reply)).is_ok());
        if !queued {
            return Err(StoreError::msg("the SQLite committer has stopped"));
        }
        answer
            .await
            .map_err(|_| StoreError::msg("the SQLite committer stopped before answering"))?
    }

    /// The record, from the cache or else from the file.
    async fn packed(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        if let Some(cached) = self.shared.cache().get(id.expose()) {
            return Ok(Some(cached));
        }
        let id = id.expose().to_owned();
        self.run(|reply| Op::Read { id, reply }).await
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        drop(self.checkpointer.take());
        // The committer ends once the queue is closed and drained.
        drop(self.queue.take());
        if let Some(committer) = self.committer.take() {
            let _ = committer.join();
        }
        drop(self.lock.take());
    }
}

impl TaskStore for SqliteStore {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        let row = schema::Row::encode(&record)?;
        let packed = Arc::new(PackedRecord::pack(record));
        self.run(|reply| Op::Create { row, packed, reply }).await
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        let row = schema::Row::encode(&record)?;
        let packed = Arc::new(PackedRecord::pack(record));
        self.run(|reply| Op::CreateKeyed { row, packed, reply })
            .await
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
        let found = self.run(|reply| Op::FindKeyed { slot, reply }).await?;
        Ok(found.map(|packed| packed.unpack()))
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.packed(id).await?.map(|packed| packed.unpack()))
    }

    async fn get_packed(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        self.packed(id).await
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        let row = schema::Row::encode(transition.record())?;
        // No stored version exceeds i64::MAX (encoding refuses it), so such
        // an `expected` is stale like any other mismatch.
        let expected =
            Some(transition.expected_version()).filter(|&version| i64::try_from(version).is_ok());
        let packed = Arc::new(PackedRecord::pack(transition.into_record()));
        self.run(|reply| Op::Swap {
            row,
            packed,
            expected,
            reply,
        })
        .await
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        let id = id.expose().to_owned();
        self.run(|reply| Op::Delete { id, reply }).await
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        let now_ms = schema::clamp(now);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(|reply| Op::Expired {
            now_ms,
            limit,
            reply,
        })
        .await
    }

    async fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let owner = Some(owner.as_str().to_owned());
        let after = after.map(|id| id.expose().to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Read from the file by the committer, in order with the writes
        // queued before it.
        self.run(|reply| Op::ListOwned {
            owner,
            after,
            limit,
            reply,
        })
        .await
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.shared.feed.subscribe()
    }

    async fn list_all(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let after = after.map(|id| id.expose().to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(|reply| Op::ListOwned {
            owner: None,
            after,
            limit,
            reply,
        })
        .await
    }

    async fn hash_key(&self) -> Result<HashKey, StoreError> {
        Ok(self.hash_key.clone())
    }

    async fn left_unfinished(&self) -> Result<Vec<TaskId>, StoreError> {
        let mut left = self
            .resumable_at_open
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Ok(left.take().unwrap_or_default())
    }

    fn outlives_process(&self) -> bool {
        true
    }
}
