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

use std::fs::File;
use std::path::Path;

use mcp_tasks::store::{StoreError, StoreErrorKind};

/// The lock on a store file, held while it lives.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

/// Takes the lock of the store file `path`, or fails at once if another
/// process (or another store in this one) holds it. In-memory databases
/// and `file:` URIs take none.
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
    // Called through the trait: std's inherent `File::try_lock` is 1.89+.
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(Some(FileLock { _file: file })),
        Err(fs4::TryLockError::WouldBlock) => Err(StoreError::msg(format!(
            "another process holds the task store {} (a running server?)",
            path.display()
        ))
        .with_kind(StoreErrorKind::InUse)),
        Err(fs4::TryLockError::Error(err)) => {
            Err(StoreError::new("cannot lock the store's lock file", err))
        }
    }
}
