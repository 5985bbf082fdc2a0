//! The contract suite every store backend runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_tasks::store::{SharedStore, contract};
use mcp_tasks_sqlite::SqliteStore;

/// Runs the suite with a fresh file per store, all in one temp dir.
async fn run_contract() {
    let dir = tempfile::tempdir().expect("temp dir");
    let made = AtomicUsize::new(0);
    contract::run_all(|| {
        let path = dir.path().join(format!(
            "store-{}.sqlite3",
            made.fetch_add(1, Ordering::Relaxed)
        ));
        async move { Arc::new(SqliteStore::open(path).expect("open a new store")) as SharedStore }
    })
    .await;
}

/// The task hash key is kept in the file: a reopened store has it.
#[tokio::test]
async fn the_hash_key_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("key.sqlite3");
    let first = Arc::new(SqliteStore::open(&path).expect("open")) as SharedStore;
    contract::hash_key_is_shared(first, || async {
        Arc::new(SqliteStore::open(&path).expect("reopen")) as SharedStore
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_contract() {
    run_contract().await;
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite_store_passes_the_contract_on_a_current_thread_runtime() {
    run_contract().await;
}
