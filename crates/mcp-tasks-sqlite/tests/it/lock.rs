//! An open store holds its file: a second open fails with
//! `StoreErrorKind::InUse` and succeeds once the first is dropped; SQLite
//! readers are not affected; a child process being started does not make a
//! released file look held.

use mcp_tasks::store::{StoreErrorKind, TaskStore};
use mcp_tasks_sqlite::SqliteStore;

#[tokio::test]
async fn a_held_file_is_refused_until_it_is_closed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("held.sqlite3");
    let first = SqliteStore::open(&path).expect("open");
    let key = first.hash_key().await.expect("hash_key");
    let refused = SqliteStore::open(&path).expect_err("a second open of a held file");
    assert_eq!(refused.kind(), StoreErrorKind::InUse);
    assert!(
        refused
            .to_string()
            .contains("another process holds the task store"),
        "{refused}"
    );
    // A plain SQLite reader still reads the file.
    let reader =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("read-only open");
    let rows: i64 = reader
        .query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))
        .expect("count");
    assert_eq!(rows, 0);
    drop(first);
    let again = SqliteStore::open(&path).expect("open after the first closed");
    assert_eq!(again.hash_key().await.expect("hash_key"), key);
}

/// An `flock` is shared with a child from its fork to its `exec`: a store
/// dropped and opened again while this process starts children must not
/// find its own released lock held. Before the lock waited (`lock::WAIT`),
/// most of these reopens failed with `InUse` (262 of 307 in one run).
#[cfg(unix)]
#[test]
fn reopening_while_children_start_is_not_refused() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let spawner = {
        let (stop, started) = (Arc::clone(&stop), Arc::clone(&started));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let status = std::process::Command::new("true")
                    .status()
                    .expect("`true` runs");
                assert!(status.success());
                started.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("reopened.sqlite3");
    let mut opens = 0;
    // Until enough children have started beside the opens to have failed
    // them without the wait.
    while opens < 100 || started.load(Ordering::Relaxed) < 30 {
        let store = SqliteStore::open(&path);
        opens += 1;
        if let Err(error) = store {
            stop.store(true, Ordering::Relaxed);
            panic!(
                "open {opens}, beside {} children: {error}",
                started.load(Ordering::Relaxed)
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    spawner.join().expect("the spawner ends");
}
