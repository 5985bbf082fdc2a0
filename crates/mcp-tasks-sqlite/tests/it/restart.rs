//! Reopening a file: finished tasks stay, unfinished ones fail.

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, RESTARTED_MESSAGE, TaskRecord, TaskStore};
use mcp_tasks::{TaskId, TaskStatus, Ttl, UnixMillis};
use mcp_tasks_sqlite::SqliteStore;
use serde_json::json;

const BEFORE: UnixMillis = UnixMillis::new(1_000);
const REOPENED: UnixMillis = UnixMillis::new(50_000);
const RETENTION: Duration = Duration::from_secs(10);
const LONG: Duration = Duration::from_secs(1_000);

fn task(id: &str) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new("owner-a"),
        BEFORE,
        Ttl::from_millis(60_000),
        Some(Duration::from_millis(100)),
    )
}

fn after(record: &TaskRecord, change: &Change) -> TaskRecord {
    record
        .apply(change, BEFORE, LONG)
        .expect("the change applies")
        .into_record()
}

/// The four tasks a server left behind: two unfinished, two finished.
fn left_behind() -> Vec<TaskRecord> {
    // A `working` task whose input was answered and not yet read by the tool.
    let asked = after(
        &task("working"),
        &Change::RequestInput {
            key: "k".into(),
            request: json!({"method": "roots/list"}),
        },
    );
    let working = after(
        &after(
            &asked,
            &Change::ProvideInput([("k".to_owned(), json!({"roots": []}))].into()),
        ),
        &Change::StatusMessage("halfway".into()),
    );
    let input_required = after(
        &task("input_required"),
        &Change::RequestInput {
            key: "q".into(),
            request: json!({"method": "elicitation/create"}),
        },
    );
    let completed = after(
        &task("completed"),
        &Change::Complete(json!({"content": [{"type": "text", "text": "42"}]})),
    );
    let failed = after(
        &task("failed"),
        &Change::Fail(json!({"code": -32000, "message": "the tool broke"})),
    );
    assert_eq!(working.status(), &TaskStatus::Working);
    assert_eq!(input_required.status(), &TaskStatus::InputRequired);
    vec![working, input_required, completed, failed]
}

async fn read_all(store: &SqliteStore, ids: &[&str]) -> Vec<TaskRecord> {
    let mut records = Vec::new();
    for id in ids {
        records.push(
            store
                .get(&TaskId::new(*id))
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
    let now = read_all(&store, &ids).await;

    assert_eq!(now[2], before[2], "a completed task is unchanged");
    assert_eq!(
        now[2].result(),
        Some(&json!({"content": [{"type": "text", "text": "42"}]}))
    );
    assert_eq!(now[3], before[3], "a failed task is unchanged");

    for (was, now) in before[..2].iter().zip(&now[..2]) {
        assert_eq!(now.status(), &TaskStatus::Failed);
        assert_eq!(now.status_message(), Some(RESTARTED_MESSAGE));
        assert_eq!(
            now.error(),
            Some(&json!({"code": -32603, "message": "server restarted before the task finished"}))
        );
        assert!(
            now.input_requests().is_empty() && now.input_responses().is_empty(),
            "no input is awaited from a failed task"
        );
        assert_eq!(now.version(), was.version() + 1);
        assert_eq!(now.updated_at(), REOPENED);
        assert_eq!(
            now.expires_at(),
            Some(REOPENED.saturating_add(RETENTION)),
            "kept for the retention"
        );
        assert_eq!(
            Some(now),
            was.apply(&Change::Abandon, REOPENED, RETENTION)
                .ok()
                .as_ref()
                .map(|transition| transition.record()),
            "the change is exactly TaskRecord::apply(Abandon)"
        );
    }
    let due: Vec<String> = store
        .expired(REOPENED.saturating_add(RETENTION), 10)
        .await
        .expect("expired")
        .into_iter()
        .map(TaskId::into_inner)
        .collect();
    assert_eq!(
        due,
        ["input_required", "working"],
        "the expiry index follows the failed tasks"
    );
    drop(store);

    // The file persists: a second reopen, on the system clock, finds the same data.
    let again = SqliteStore::open(&path).expect("reopen again");
    assert_eq!(again.abandoned_at_open(), 0, "nothing is left unfinished");
    assert_eq!(read_all(&again, &ids).await, now);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_this_build_does_not_know_is_failed_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    // As a newer build might write it: a status this one does not know.
    let mut json = serde_json::to_value(task("paused")).expect("json");
    json["status"] = json!("paused");
    let paused: TaskRecord = serde_json::from_value(json).expect("a record");
    assert_eq!(paused.status(), &TaskStatus::Unknown("paused".into()));
    {
        let store = SqliteStore::open_at(&path, BEFORE, LONG).expect("open");
        store.create(paused).await.expect("create");
    }
    let store = SqliteStore::open_at(&path, REOPENED, RETENTION).expect("reopen");
    assert_eq!(store.abandoned_at_open(), 1);
    let read = store
        .get(&TaskId::new("paused"))
        .await
        .expect("get")
        .expect("record");
    assert_eq!(read.status(), &TaskStatus::Failed);
    assert_eq!(read.status_message(), Some(RESTARTED_MESSAGE));
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
    assert_eq!(version, 5);
}

#[test]
fn a_file_from_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tasks.sqlite3");
    drop(SqliteStore::open(&path).expect("open"));
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    raw.pragma_update(None, "user_version", 6)
        .expect("set user_version");
    drop(raw);
    let err = SqliteStore::open(&path).expect_err("a newer schema is refused");
    assert!(err.to_string().contains("schema version 6"), "{err}");
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
