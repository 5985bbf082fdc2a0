//! A store that runs out of room: a size limit (`max_page_count`) stands in
//! for a full disk. Creating and changing tasks fails with a clear error of
//! kind `Full`; every write acknowledged before is kept; the file is not
//! corrupt, and works again once it has room.

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, StoreErrorKind, TaskRecord, TaskStore, modify};
use mcp_tasks::{TaskId, TaskStatus, Ttl, UnixMillis};
use mcp_tasks_sqlite::{SqliteOptions, SqliteStore};
use serde_json::json;

fn record(n: usize) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(format!("task-{n:04}")),
        Principal::new("owner"),
        UnixMillis::new(1_000),
        Ttl::Unlimited,
        None,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_refuses_writes_clearly_and_keeps_what_it_acknowledged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let limited = SqliteOptions::default().with_max_size_bytes(96 * 1024);
    let store = SqliteStore::open_with(&path, &limited).expect("open");
    let big = json!({"content": [{"type": "text", "text": "x".repeat(6_000)}]});
    let mut acknowledged = Vec::new();
    let full = loop {
        let n = acknowledged.len();
        assert!(n < 1_000, "the size limit never bit");
        match store.create(record(n)).await {
            Ok(()) => {}
            Err(error) => break error,
        }
        // Completing with a large result fills the file fast.
        match modify(
            &store,
            record(n).id(),
            &Change::Complete(big.clone()),
            UnixMillis::new(2_000),
            Duration::from_secs(60),
        )
        .await
        {
            Ok(_) => acknowledged.push(n),
            Err(error) => break error,
        }
    };
    assert_eq!(full.kind(), StoreErrorKind::Full, "{full}");
    let text = full.to_string();
    assert!(text.contains("SQLite could not"), "{text}");
    assert!(
        std::error::Error::source(&full).is_some_and(|source| source.to_string().contains("full")),
        "the cause says the database is full: {full:?}"
    );
    assert!(acknowledged.len() >= 3, "{} tasks fit", acknowledged.len());
    // Reads still work.
    for n in &acknowledged {
        let read = store
            .get(record(*n).id())
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(read.status(), &TaskStatus::Completed);
    }
    drop(store);

    // Reopened without the limit: the file is intact, nothing acknowledged is lost.
    let store = SqliteStore::open(&path).expect("reopen");
    let check: String = rusqlite::Connection::open(&path)
        .expect("raw connection")
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    for n in &acknowledged {
        let read = store
            .get(record(*n).id())
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(read.result(), Some(&big));
    }
    store
        .create(record(9_999))
        .await
        .expect("with room again, writes work");
}
