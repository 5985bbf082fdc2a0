//! Reopening a file: finished tasks stay, unfinished ones fail.

use mcp_tasks::TaskStatus;
use mcp_tasks::store::{Change, RESTARTED_MESSAGE, TaskRecord, TaskStore};
use mcp_tasks_sqlite::SqliteStore;
use serde_json::json;

const BEFORE: u64 = 1_000;
const REOPENED: u64 = 50_000;
const RETENTION: u64 = 10_000;
const LONG: u64 = 1_000_000;

fn task(id: &str) -> TaskRecord {
    TaskRecord::new(id, "owner-a", BEFORE, Some(60_000), Some(100))
}

/// The four tasks a server left behind: two unfinished, two finished.
fn left_behind() -> Vec<TaskRecord> {
    // A `working` task whose input request is still outstanding.
    let mut working = task("working")
        .apply(&Change::StatusMessage("halfway".into()), BEFORE, LONG)
        .expect("status message");
    working
        .input_requests
        .insert("k".into(), json!({"method": "roots/list"}));
    working.issued_keys.insert("k".into());
    let input_required = task("input_required")
        .apply(
            &Change::RequestInput {
                key: "q".into(),
                request: json!({"method": "elicitation/create"}),
            },
            BEFORE,
            LONG,
        )
        .expect("request input");
    let completed = task("completed")
        .apply(
            &Change::Complete(json!({"content": [{"type": "text", "text": "42"}]})),
            BEFORE,
            LONG,
        )
        .expect("complete");
    let failed = task("failed")
        .apply(
            &Change::Fail(json!({"code": -32000, "message": "the tool broke"})),
            BEFORE,
            LONG,
        )
        .expect("fail");
    assert_eq!(working.status, TaskStatus::Working);
    assert_eq!(input_required.status, TaskStatus::InputRequired);
    vec![working, input_required, completed, failed]
}

async fn read_all(store: &SqliteStore, ids: &[&str]) -> Vec<TaskRecord> {
    let mut records = Vec::new();
    for id in ids {
        records.push(
            store
                .get(id)
                .await
                .expect("get")
                .expect("the record is still there"),
        );
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_fails_unfinished_tasks_and_keeps_finished_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let before = left_behind();
    {
        let store = SqliteStore::open_at(&path, BEFORE, LONG).expect("open a new file");
        assert_eq!(
            store.abandoned_at_open(),
            0,
            "a new file has nothing to fail"
        );
        for record in &before {
            store.create(record.clone()).await.expect("create");
        }
    }

    let store = SqliteStore::open_at(&path, REOPENED, RETENTION).expect("reopen");
    assert_eq!(
        store.abandoned_at_open(),
        2,
        "the working and input_required tasks"
    );
    let ids = ["working", "input_required", "completed", "failed"];
    let after = read_all(&store, &ids).await;

    assert_eq!(after[2], before[2], "a completed task is unchanged");
    assert_eq!(
        after[2].result,
        Some(json!({"content": [{"type": "text", "text": "42"}]}))
    );
    assert_eq!(after[3], before[3], "a failed task is unchanged");

    for (was, now) in before[..2].iter().zip(&after[..2]) {
        assert_eq!(now.status, TaskStatus::Failed);
        assert_eq!(now.status_message.as_deref(), Some(RESTARTED_MESSAGE));
        assert_eq!(
            now.error,
            Some(json!({"code": -32603, "message": "server restarted before the task finished"}))
        );
        assert!(
            now.input_requests.is_empty(),
            "no input is awaited from a failed task"
        );
        assert_eq!(now.version, was.version + 1);
        assert_eq!(now.updated_at_ms, REOPENED);
        assert_eq!(
            now.expires_at_ms,
            Some(REOPENED + RETENTION),
            "kept for the retention"
        );
        assert_eq!(
            Some(now),
            was.apply(&Change::Abandon, REOPENED, RETENTION)
                .ok()
                .as_ref(),
            "the change is exactly TaskRecord::apply(Abandon)"
        );
    }
    assert_eq!(
        store
            .expired(REOPENED + RETENTION, 10)
            .await
            .expect("expired"),
        ["input_required", "working"],
        "the expiry index follows the failed tasks"
    );
    drop(store);

    // The file persists: a second reopen, on the system clock, finds the same data.
    let again = SqliteStore::open(&path).expect("reopen again");
    assert_eq!(again.abandoned_at_open(), 0, "nothing is left unfinished");
    assert_eq!(read_all(&again, &ids).await, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_this_build_does_not_know_is_failed_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let mut paused = task("paused");
    paused.status = TaskStatus::Unknown("paused".into());
    {
        let store = SqliteStore::open_at(&path, BEFORE, LONG).expect("open");
        store.create(paused).await.expect("create");
    }
    let store = SqliteStore::open_at(&path, REOPENED, RETENTION).expect("reopen");
    assert_eq!(store.abandoned_at_open(), 1);
    let read = store.get("paused").await.expect("get").expect("record");
    assert_eq!(read.status, TaskStatus::Failed);
    assert_eq!(read.status_message.as_deref(), Some(RESTARTED_MESSAGE));
}

#[test]
fn the_file_is_in_wal_mode_with_a_schema_version() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.path(), path);
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    let mode: String = raw
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let version: i64 = raw
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("user_version");
    assert_eq!(version, 1);
}

#[test]
fn a_file_from_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    drop(SqliteStore::open(&path).expect("open"));
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    raw.pragma_update(None, "user_version", 2)
        .expect("set user_version");
    drop(raw);
    let err = SqliteStore::open(&path).expect_err("a newer schema is refused");
    assert!(err.to_string().contains("schema version 2"), "{err}");
}

#[test]
fn a_file_with_a_foreign_tasks_table_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("other.sqlite3");
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    raw.execute_batch("CREATE TABLE tasks (title TEXT)")
        .expect("foreign table");
    drop(raw);
    assert!(
        SqliteStore::open(&path).is_err(),
        "another application's table is not adopted"
    );
}
