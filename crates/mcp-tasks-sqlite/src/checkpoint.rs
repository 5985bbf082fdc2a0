//! The checkpointer: a second thread, on its own connection, that copies
//! the WAL back into the file (`PRAGMA wal_checkpoint(PASSIVE)`) every
//! [`EVERY`], beside the committer's writes.
//!
//! Only a checkpoint the writer runs itself can start the WAL over (one
//! running beside writes never quite catches up), so the committer's
//! connection keeps SQLite's automatic checkpoint, at [`WRITER_PAGES`]; by
//! then this thread has copied back (and synced) nearly every frame, and
//! the committer's checkpoint has little left to do before the WAL starts
//! over. Without this thread (it could not start or open the file) the
//! writer's checkpoint does it all, as SQLite does by default.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How often the WAL is copied back.
const EVERY: Duration = Duration::from_millis(100);

/// The committer's automatic checkpoint, in pages (about 16 MiB of WAL).
pub(crate) const WRITER_PAGES: i64 = 4_000;

/// The running checkpointer; dropping it stops it and waits for it.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the store file at `path` (which exists, in WAL
    /// mode). `None` when the thread cannot start: the writer's own
    /// checkpoint then does the copying.
    pub(crate) fn start(path: PathBuf) -> Option<Self> {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("mcp-tasks-sqlite-checkpoint".to_owned())
            .spawn(move || run(&path, &stopped))
            .ok()?;
        Some(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(path: &PathBuf, stopped: &mpsc::Receiver<()>) {
    // Never creates the file: the store made it.
    let Ok(conn) = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) else {
        return;
    };
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
        // A failed or partial checkpoint is tried again at the next tick.
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    }
}
