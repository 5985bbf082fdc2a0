//! Group commit and the read cache: concurrent writes share transactions,
//! yet each caller gets its own outcome, and what a caller was told is
//! written is in the file (read behind the store's back while it is open).

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::store::{Change, Principal, Swap, TaskRecord, TaskStore};
use mcp_tasks::{TaskId, TaskStatus, Ttl, UnixMillis};
use mcp_tasks_sqlite::{SqliteOptions, SqliteStore};
use serde_json::json;

fn record(n: usize) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(format!("task-{n}")),
        Principal::new("owner"),
        UnixMillis::new(1_000),
        Ttl::from_millis(60_000),
        None,
    )
}

/// `(status, version)` of each row, read from the file by another connection.
fn in_file(path: &std::path::Path, n: usize) -> Option<(String, i64)> {
    let raw = rusqlite::Connection::open(path).expect("raw connection");
    raw.query_row(
        "SELECT status, version FROM tasks WHERE id = ?1",
        [format!("task-{n}")],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_are_each_answered_and_each_acknowledged_one_is_in_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let store = Arc::new(SqliteStore::open(&path).expect("open"));
    const N: usize = 300;
    // Every create at once, one of them twice: that one alone is refused.
    let mut creates = Vec::new();
    for n in (0..N).chain([7]) {
        let store = Arc::clone(&store);
        creates.push(tokio::spawn(async move { store.create(record(n)).await }));
    }
    let mut refused = 0;
    for create in creates {
        if create.await.expect("joined").is_err() {
            refused += 1;
        }
    }
    assert_eq!(refused, 1, "only the duplicate create is refused");
    for n in 0..N {
        assert_eq!(in_file(&path, n), Some(("working".to_owned(), 0)), "{n}");
    }
    // Every swap at once; a second swap from the same version is stale.
    let mut swaps = Vec::new();
    for n in (0..N).chain([3]) {
        let store = Arc::clone(&store);
        swaps.push(tokio::spawn(async move {
            let next = record(n)
                .apply(
                    &Change::Complete(json!({"content": []})),
                    UnixMillis::new(2_000),
                    Duration::from_secs(60),
                )
                .expect("applies");
            store.compare_and_swap(next).await.expect("swap")
        }));
    }
    let mut swapped = 0;
    for swap in swaps {
        match swap.await.expect("joined") {
            Swap::Swapped => swapped += 1,
            Swap::Conflict(current) => assert_eq!(current.status(), &TaskStatus::Completed),
            other => panic!("every task exists: {other:?}"),
        }
    }
    assert_eq!(swapped, N, "one swap per task wins");
    for n in 0..N {
        assert_eq!(in_file(&path, n), Some(("completed".to_owned(), 1)), "{n}");
        let read = store.get(record(n).id()).await.expect("get").expect("kept");
        assert_eq!(read.status(), &TaskStatus::Completed);
        assert_eq!(read.version(), 1);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_small_cache_reads_what_it_dropped_from_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let options = SqliteOptions::default().with_cache(2, usize::MAX);
    let store = SqliteStore::open_with(&path, &options).expect("open");
    for n in 0..10 {
        store.create(record(n)).await.expect("create");
    }
    for n in 0..10 {
        let read = store.get(record(n).id()).await.expect("get").expect("kept");
        assert_eq!(read, record(n));
    }
    store.delete(record(0).id()).await.expect("delete");
    assert!(store.get(record(0).id()).await.expect("get").is_none());
    assert_eq!(in_file(&path, 0), None);
    let uncached = SqliteStore::open_with(
        dir.path().join("none.sqlite3"),
        &SqliteOptions::default().with_cache(0, 0),
    )
    .expect("open");
    uncached.create(record(1)).await.expect("create");
    assert_eq!(
        uncached.get(record(1).id()).await.expect("get"),
        Some(record(1))
    );
}

/// Creates `count` records from `first` on, 64 at a time.
async fn create_many(store: &Arc<SqliteStore>, first: usize, count: usize) {
    let mut pending = Vec::new();
    for n in first..first + count {
        let store = Arc::clone(store);
        pending.push(tokio::spawn(async move { store.create(record(n)).await }));
        if pending.len() == 64 {
            for create in pending.drain(..) {
                create.await.expect("joined").expect("created");
            }
        }
    }
    for create in pending {
        create.await.expect("joined").expect("created");
    }
}

fn size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |meta| meta.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_copied_back_beside_the_writes_and_stays_bounded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let wal = dir.path().join("tasks.sqlite3-wal");
    let store = Arc::new(SqliteStore::open(&path).expect("open"));
    let empty = size(&path);
    // Far fewer pages than the writer's own checkpoint waits for: only the
    // checkpointer thread copies these back into the file.
    create_many(&store, 0, 500).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while size(&path) < empty + 64 * 1024 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing was copied back into the file: {} bytes, WAL {} bytes",
            size(&path),
            size(&wal)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Sustained writes: the WAL starts over rather than growing with them
    // (each create dirties a random page of the id index: a frame each).
    let mut largest = 0;
    for round in 0..10 {
        create_many(&store, 1_000 + round * 2_000, 2_000).await;
        largest = largest.max(size(&wal));
    }
    assert!(
        largest < 48 << 20,
        "the WAL grew to {largest} bytes over 20,000 writes"
    );
    assert_eq!(in_file(&path, 20_999), Some(("working".to_owned(), 0)));
}
