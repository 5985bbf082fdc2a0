//! An open store holds its file: a second open fails at once with
//! `StoreErrorKind::InUse` and succeeds once the first is dropped; SQLite
//! readers are not affected.

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
