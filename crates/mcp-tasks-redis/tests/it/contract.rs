//! The contract suite every store backend runs, and the one of stores
//! shared by several processes, on one real `redis-server`: each store gets
//! a key prefix of its own, so each starts empty.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcp_tasks::store::{SharedStore, contract};
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_redis::{RedisOptions, RedisStore};

async fn stores(server: &RedisServer, run: &str, replicas: bool) {
    let made = AtomicUsize::new(0);
    let make = || {
        let prefix = format!("{run}-{}:", made.fetch_add(1, Ordering::Relaxed));
        let url = server.url();
        async move {
            let options = RedisOptions::default().with_key_prefix(prefix);
            Arc::new(
                RedisStore::connect_with(&url, options)
                    .await
                    .expect("connect to the test's redis-server"),
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
async fn redis_store_passes_the_contract() {
    let server = RedisServer::start();
    stores(&server, "all", false).await;
}

#[tokio::test(flavor = "current_thread")]
async fn redis_store_passes_the_contract_on_a_current_thread_runtime() {
    let server = RedisServer::start();
    stores(&server, "current", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_passes_the_contract_of_shared_stores() {
    let server = RedisServer::start();
    stores(&server, "replicas", true).await;
}

/// Two connections with one prefix read one task hash key (written once
/// with `SET NX`); another prefix has its own.
#[tokio::test]
async fn replicas_share_the_hash_key() {
    let server = RedisServer::start();
    let connect = |prefix: &'static str| {
        let url = server.url();
        async move {
            Arc::new(
                RedisStore::connect_with(&url, RedisOptions::default().with_key_prefix(prefix))
                    .await
                    .expect("connect"),
            ) as SharedStore
        }
    };
    let first = connect("shared:").await;
    let other = connect("other:").await;
    let key = first.hash_key().await.expect("hash_key");
    contract::hash_key_is_shared(first, || connect("shared:")).await;
    assert_ne!(
        other.hash_key().await.expect("hash_key"),
        key,
        "another prefix, another key"
    );
}
