//! The exclusive lock an open [`SqliteStore`](crate::SqliteStore) holds on
//! its file, so no second process opens it while a server runs on it.
//!
//! The store is not just the file: its read cache is the truth for the
//! records it holds, and opening a file fails the unfinished tasks of any
//! earlier process. A second process writing the same file (a second
//! `serve`, or `mcp-tasks admin --store`) would corrupt what the first
//! believes, so opening a held file fails with a [`StoreError`] of kind
//! [`StoreErrorKind::InUse`]. The lock is an advisory `flock`
//! (`LockFileEx` on Windows) on a file beside the database, `PATH-lock`,
//! taken before the database is opened and released when the store is
//! dropped (or its process dies). Readers that only read the database
//! with SQLite itself (`sqlite3`, `rusqlite`) are not affected.
//!
//! A held lock is tried again for up to [`WAIT`] before opening fails. An
//! `flock` belongs to the open file, and a child process shares the
//! parent's open files from the moment it is forked until it `exec`s (when
//! close-on-exec closes them). A process that starts children (a gateway
//! spawning its stdio upstreams, a test harness) and drops a store then
//! opens it again can find its own released lock still held, for as long
//! as a child takes to reach `exec`: microseconds, or milliseconds on a
//! loaded machine. Failing at once would report a server that does not
//! exist; another process that really holds the file is still refused,
//! [`WAIT`] later.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use mcp_tasks::store::{StoreError, StoreErrorKind};

/// The lock on a store file, held while it lives.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

/// How long a held lock is tried again before opening fails (see the
/// module doc): far longer than a child takes to `exec`, short enough for
/// an operator who started a second server.
pub(crate) const WAIT: Duration = Duration::from_secs(1);

/// Takes the lock of the store file `path`, or fails if another process
/// (or another store in this one) still holds it [`WAIT`] later. In-memory
/// databases and `file:` URIs take none.
pub(crate) fn lock(path: &Path) -> Result<Option<FileLock>, StoreError> {
    let text = path.as_os_str();
    if text.is_empty() || text == ":memory:" || text.to_string_lossy().starts_with("file:") {
        return Ok(None);
    }
    let mut lock_path = text.to_owned();
    lock_path.push("-lock");
    let lock_path = Path::new(&lock_path);
    mcp_tasks::private_files::create_private_file(lock_path)
        .map_err(|err| StoreError::new("cannot create the store's lock file", err))?;
    let file = File::options()
        .read(true)
        .write(true)
        .open(lock_path)
        .map_err(|err| StoreError::new("cannot open the store's lock file", err))?;
    let deadline = Instant::now() + WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        // Called through the trait: std's inherent `File::try_lock` is 1.89+.
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => return Ok(Some(FileLock { _file: file })),
            Err(fs4::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(fs4::TryLockError::WouldBlock) => {
                return Err(StoreError::msg(format!(
                    "another process holds the task store {} (a running server?)",
                    path.display()
                ))
                .with_kind(StoreErrorKind::InUse));
            }
            Err(fs4::TryLockError::Error(err)) => {
                return Err(StoreError::new("cannot lock the store's lock file", err));
            }
        }
    }
}
