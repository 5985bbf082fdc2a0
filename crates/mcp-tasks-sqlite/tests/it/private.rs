//! The store's files are private: a new file and the WAL and shared-memory
//! files SQLite makes beside it are `0600`; an existing wider file is left
//! as it is (and reported by `mcp_tasks::private_files`).
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mcp_tasks::store::{Principal, TaskRecord, TaskStore};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_sqlite::SqliteStore;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn beside(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

async fn create(store: &SqliteStore, id: &str) {
    let record = TaskRecord::new(
        TaskId::new(id),
        Principal::new("owner-a"),
        UnixMillis::now(),
        Ttl::Unlimited,
        None,
    );
    store.create(record).await.expect("create");
}

#[tokio::test]
async fn a_new_store_and_its_wal_and_shm_files_are_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let store = SqliteStore::open(&path).expect("open");
    create(&store, "private-1").await;
    for file in [path.clone(), beside(&path, "-wal"), beside(&path, "-shm")] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    drop(store);
    // Reopened: still private, nothing widened.
    let store = SqliteStore::open(&path).expect("reopen");
    create(&store, "private-2").await;
    assert_eq!(mode(&path), 0o600);
}

#[tokio::test]
async fn an_existing_wider_file_is_reported_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    drop(SqliteStore::open(&path).expect("create"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = SqliteStore::open(&path).expect("open a file the operator widened");
    assert_eq!(mode(&path), 0o644, "the operator's choice stays");
    assert_eq!(
        mcp_tasks::private_files::exposure(&path).unwrap(),
        Some(0o044),
        "and is what the warning reports"
    );
    drop(store);
}
