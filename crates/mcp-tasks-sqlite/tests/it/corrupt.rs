//! A corrupt row is an error, never a panic.

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, Swap, TaskRecord, TaskStore, Transition};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_sqlite::SqliteStore;

fn record(id: &str) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new("o"),
        UnixMillis::new(1),
        Ttl::Unlimited,
        None,
    )
}

/// A transition from version `from` to `from + 1` of task `id`.
fn transition(id: &str, from: u64) -> Transition {
    let mut current = record(id);
    for _ in 0..from {
        current = current
            .apply(&Change::RequestCancel, UnixMillis::new(2), Duration::ZERO)
            .expect("applies")
            .into_record();
    }
    current
        .apply(&Change::RequestCancel, UnixMillis::new(2), Duration::ZERO)
        .expect("applies")
}

/// Writes a row behind the store's back, as damage or a hand edit would.
fn write_raw(path: &std::path::Path, id: &str, status: &str, version: i64, json: &str) {
    let raw = rusqlite::Connection::open(path).expect("raw connection");
    raw.execute(
        "INSERT INTO tasks (id, owner, status, version, expires_at_ms, record) VALUES (?1, 'o', ?2, ?3, 5, ?4)",
        rusqlite::params![id, status, version, json],
    )
    .expect("raw insert");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_row_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let store = SqliteStore::open(&path).expect("open");
    store.create(record("good")).await.expect("create");
    write_raw(&path, "bad", "working", 0, "{not json");
    // Valid JSON, but another task's record.
    let other = serde_json::to_string(&record("other")).expect("json");
    write_raw(&path, "mismatched", "completed", 0, &other);

    let err = store
        .get(&TaskId::new("bad"))
        .await
        .expect_err("a corrupt row is an error");
    let text = err.to_string();
    assert!(
        text.contains("corrupt") && text.contains("not a task record"),
        "{text}"
    );
    assert!(
        !text.contains("bad"),
        "the message does not print the id: {text}"
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "the JSON error is the source"
    );

    let err = store
        .get(&TaskId::new("mismatched"))
        .await
        .expect_err("a row disagreeing with its JSON");
    assert!(err.to_string().contains("disagrees"), "{err}");

    // A swap that finds the corrupt row (at another version) reports it too.
    assert!(store.compare_and_swap(transition("bad", 7)).await.is_err());

    // The rest of the store works, and the corrupt row can be removed.
    assert!(
        store
            .get(&TaskId::new("good"))
            .await
            .expect("get")
            .is_some()
    );
    let due: Vec<String> = store
        .expired(UnixMillis::new(10), 10)
        .await
        .expect("expired")
        .into_iter()
        .map(TaskId::into_inner)
        .collect();
    assert_eq!(due, ["bad", "mismatched"]);
    store
        .delete(&TaskId::new("mismatched"))
        .await
        .expect("delete");
    assert_eq!(
        store
            .compare_and_swap(transition("mismatched", 0))
            .await
            .expect("cas"),
        Swap::Missing
    );
    drop(store);

    // Reopening must fail the unfinished tasks, and cannot read this one.
    let err = SqliteStore::open(&path).expect_err("an unreadable unfinished task stops the open");
    assert!(err.to_string().contains("corrupt"), "{err}");
}
