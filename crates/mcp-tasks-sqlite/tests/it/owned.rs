//! Listing an owner's tasks, in a file this build made and in one an older
//! build left (schema version 1, without the owner index).

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, TaskRecord, TaskStore};
use mcp_tasks::{TaskId, TaskStatus, Ttl, UnixMillis};
use mcp_tasks_sqlite::SqliteStore;
use serde_json::json;

const RETENTION: Duration = Duration::from_secs(600);

fn task(id: &str, owner: &str) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new(owner),
        UnixMillis::new(1_000),
        Ttl::from_millis(600_000),
        None,
    )
}

fn completed(id: &str, owner: &str) -> TaskRecord {
    task(id, owner)
        .apply(
            &Change::Complete(json!({"content": []})),
            UnixMillis::new(2_000),
            RETENTION,
        )
        .expect("completes")
        .into_record()
}

async fn ids(store: &SqliteStore, owner: &str, after: Option<&str>, limit: usize) -> Vec<String> {
    let after = after.map(TaskId::new);
    store
        .list_owned(&Principal::new(owner), after.as_ref(), limit)
        .await
        .expect("list_owned")
        .iter()
        .map(|record| record.id().expose().to_owned())
        .collect()
}

/// The schema of version 1, as the build before the owner index wrote it.
const SCHEMA_V1: &str = "
CREATE TABLE tasks (
    id            TEXT    NOT NULL PRIMARY KEY,
    owner         TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    expires_at_ms INTEGER,
    record        TEXT    NOT NULL
) STRICT;
CREATE INDEX tasks_by_expiry ON tasks (expires_at_ms, id) WHERE expires_at_ms IS NOT NULL;
PRAGMA user_version = 1;
";

/// Writes `records` into a version 1 file, as that build did.
fn write_v1(path: &std::path::Path, records: &[TaskRecord]) {
    let raw = rusqlite::Connection::open(path).expect("raw connection");
    raw.execute_batch(SCHEMA_V1).expect("version 1 schema");
    for record in records {
        raw.execute(
            "INSERT INTO tasks (id, owner, status, version, expires_at_ms, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                record.id().expose(),
                record.owner().as_str(),
                record.status().as_str(),
                i64::try_from(record.version()).expect("version"),
                record
                    .expires_at()
                    .map(|at| i64::try_from(at.as_millis()).expect("time")),
                serde_json::to_string(record).expect("json"),
            ],
        )
        .expect("raw insert");
    }
}

fn user_version(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .expect("raw connection")
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("user_version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_file_is_upgraded_and_lists_its_tasks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("v1.sqlite3");
    write_v1(
        &path,
        &[
            completed("t3", "owner-a"),
            task("t1", "owner-a"),
            completed("t2", "owner-b"),
            completed("t0", "owner-a"),
        ],
    );
    let store = SqliteStore::open_at(&path, UnixMillis::new(3_000), RETENTION).expect("open");
    assert_eq!(store.abandoned_at_open(), 1, "t1 was left working");
    assert_eq!(user_version(&path), 5, "upgraded to the latest version");
    let indexes: Vec<String> = rusqlite::Connection::open(&path)
        .expect("raw connection")
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' ORDER BY name")
        .and_then(|mut select| {
            select
                .query_map([], |row| row.get(0))
                .and_then(Iterator::collect)
        })
        .expect("indexes");
    assert!(
        indexes.iter().any(|name| name == "tasks_by_owner"),
        "{indexes:?}"
    );
    assert!(
        indexes.iter().any(|name| name == "tasks_by_idem_slot"),
        "the upgrade to version 4 made the idempotency index: {indexes:?}"
    );

    assert_eq!(ids(&store, "owner-a", None, 10).await, ["t0", "t1", "t3"]);
    assert_eq!(ids(&store, "owner-a", Some("t0"), 1).await, ["t1"]);
    assert_eq!(ids(&store, "owner-b", None, 10).await, ["t2"]);
    let abandoned = store
        .list_owned(&Principal::new("owner-a"), Some(&TaskId::new("t0")), 1)
        .await
        .expect("list_owned");
    assert_eq!(
        abandoned[0].status(),
        &TaskStatus::Failed,
        "listed as it is now, failed at open"
    );

    // New tasks join the upgraded index; reopening keeps it.
    store.create(task("t4", "owner-a")).await.expect("create");
    drop(store);
    let store = SqliteStore::open_at(&path, UnixMillis::new(4_000), RETENTION).expect("reopen");
    assert_eq!(user_version(&path), 5);
    assert_eq!(ids(&store, "owner-a", Some("t1"), 10).await, ["t3", "t4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_reads_the_file_past_a_small_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("small.sqlite3");
    let options = mcp_tasks_sqlite::SqliteOptions::default().with_cache(2, 1 << 20);
    let store = SqliteStore::open_with(&path, &options).expect("open");
    for n in 0..20 {
        store
            .create(completed(&format!("t{n:02}"), "owner-a"))
            .await
            .expect("create");
    }
    let listed = store
        .list_owned(&Principal::new("owner-a"), None, 100)
        .await
        .expect("list_owned");
    assert_eq!(listed.len(), 20);
    assert_eq!(listed[7], completed("t07", "owner-a"), "the whole record");
}
