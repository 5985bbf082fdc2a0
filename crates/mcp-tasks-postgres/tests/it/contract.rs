//! The contract suite every store backend runs, and the one of stores
//! shared by several processes, on one real PostgreSQL: each store gets a
//! schema of its own, so each starts empty.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_tasks::store::{SharedStore, contract};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};

async fn stores(server: &PostgresServer, run: &str, replicas: bool) {
    let made = AtomicUsize::new(0);
    let make = || {
        let schema = format!("{run}_{}", made.fetch_add(1, Ordering::Relaxed));
        let url = server.url();
        async move {
            let options = PostgresOptions::default().with_schema(schema);
            Arc::new(
                PostgresStore::connect_with(&url, options)
                    .await
                    .expect("connect to the test's PostgreSQL"),
            ) as SharedStore
        }
    };
    if replicas {
        contract::run_replicas(make).await;
    } else {
        contract::run_all(make).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_contract() {
    let server = PostgresServer::start();
    stores(&server, "all", false).await;
}

#[tokio::test(flavor = "current_thread")]
async fn postgres_store_passes_the_contract_on_a_current_thread_runtime() {
    let server = PostgresServer::start();
    stores(&server, "current", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_contract_of_shared_stores() {
    let server = PostgresServer::start();
    stores(&server, "replicas", true).await;
}

/// Two stores on one schema read one task hash key; another schema has
/// its own.
#[tokio::test]
async fn replicas_share_the_hash_key() {
    let server = PostgresServer::start();
    let connect = |schema: &'static str| {
        let url = server.url();
        async move {
            Arc::new(
                PostgresStore::connect_with(&url, PostgresOptions::default().with_schema(schema))
                    .await
                    .expect("connect"),
            ) as SharedStore
        }
    };
    let first = connect("shared").await;
    let other = connect("other").await;
    let key = first.hash_key().await.expect("hash_key");
    contract::hash_key_is_shared(first, || connect("shared")).await;
    assert_ne!(
        other.hash_key().await.expect("hash_key"),
        key,
        "another schema, another key"
    );
}

/// Replicas that start together on a new schema all ask for the hash key
/// at once: each gets it (none "vanished" because another replica's
/// insert committed after its statement began) and all get the same one.
/// A rolling restart's test lost a task's step from the logs this way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_read_one_hash_key() {
    let server = PostgresServer::start();
    for round in 0..5 {
        let schema = format!("together_{round}");
        let mut stores = Vec::new();
        for _ in 0..8 {
            let options = PostgresOptions::default().with_schema(schema.clone());
            stores.push(
                PostgresStore::connect_with(&server.url(), options)
                    .await
                    .expect("connect"),
            );
        }
        let keys =
            futures::future::join_all(stores.iter().map(mcp_tasks::store::TaskStore::hash_key))
                .await;
        let keys: Vec<_> = keys
            .into_iter()
            .map(|key| key.expect("every replica reads the hash key"))
            .collect();
        assert!(
            keys.windows(2).all(|pair| pair[0] == pair[1]),
            "replicas read different hash keys"
        );
    }
}
