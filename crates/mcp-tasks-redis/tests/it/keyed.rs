//! Idempotent creation across replicas on one Redis: the same call sent
//! under one idempotency key to two replicas, one after the other or at
//! once, makes one task, also when creations take seats
//! (`Replicas::create_seated`); the seat of a creation that found the key
//! is not kept.

use mcp_tasks::store::{Principal, SeatPool};
use mcp_tasks::{CallOptions, CallResponse, IdempotencyKey, TaskId, TasksClient};
use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;

use crate::support::{capped_replica, client, replica};

async fn keyed_call(client: &TasksClient<()>, key: &str) -> TaskId {
    let key = IdempotencyKey::new(key).expect("a key");
    let options = CallOptions::default().with_idempotency_key(&key);
    match client
        .call_tool("sleep", json!({"ms": 60_000}), options)
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state.id,
        other => panic!("a task, got {other:?}"),
    }
}

async fn one_task_for_one_key(capped: bool) {
    let redis = RedisServer::start();
    let prefix = if capped { "keyed-capped:" } else { "keyed:" };
    let (a, b) = if capped {
        (
            capped_replica(&redis.url(), prefix, "a").await,
            capped_replica(&redis.url(), prefix, "b").await,
        )
    } else {
        let period = std::time::Duration::from_secs(10);
        (
            replica(&redis.url(), prefix, "a", period).await,
            replica(&redis.url(), prefix, "b", period).await,
        )
    };
    let store = a.runtime.store().clone();
    let (on_a, on_b) = (client(a.clone()).await, client(b.clone()).await);
    let first = keyed_call(&on_a, "one-key").await;
    assert_eq!(
        keyed_call(&on_b, "one-key").await,
        first,
        "the same task on B"
    );
    let (x, y) = tokio::join!(keyed_call(&on_a, "raced"), keyed_call(&on_b, "raced"));
    assert_eq!(x, y, "two replicas racing with one key make one task");
    let stored = store.list_all(None, 10).await.expect("list_all");
    assert_eq!(stored.len(), 2, "one task per key");
    if capped {
        let seats = store
            .replicas()
            .expect("a shared store")
            .seats_taken(&SeatPool::caller(&Principal::new("process")))
            .await
            .expect("seats_taken");
        assert_eq!(seats, 2, "one seat per task, none kept by a repeat");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_makes_one_task_across_replicas() {
    one_task_for_one_key(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_makes_one_task_across_replicas_that_take_seats() {
    one_task_for_one_key(true).await;
}
