//! Redis goes away: requests get a clear error at once instead of hanging,
//! the server keeps running and recovers by itself when Redis is back, and
//! nothing acknowledged before is lost (`redis-server` runs with
//! `appendonly yes`, `appendfsync always`, and is killed with SIGKILL).

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, Replicas, StoreErrorKind, TaskRecord, modify};
use mcp_tasks::{CallOptions, TaskId, Ttl, UnixMillis};
use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;
use tokio::time::Instant;

use crate::support::{answer, client, process, replica, result_text, start, status, store, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_a_clear_error_at_once_and_the_server_recovers_by_itself() {
    let mut redis = RedisServer::start();
    let a = replica(&redis.url(), "outage:", "a", Duration::from_secs(10)).await;
    let on_a = client(a.clone()).await;
    let id = start(&on_a, "ask", json!({})).await;
    until(&a.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "input_required"
    })
    .await;

    redis.kill();
    let asked = Instant::now();
    // The replica's read cache may answer what it knows until its change
    // feed sees the connection close (at once on a kill); then reads fail.
    let error = loop {
        match a.runtime.get_task_as(&id, &process()).await {
            Err(error) => break error,
            Ok(task) => {
                let task = serde_json::to_value(task).expect("json");
                assert_eq!(status(&task), "input_required", "the cached state");
                assert!(
                    asked.elapsed() < Duration::from_secs(1),
                    "still answered {:?} after the kill",
                    asked.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "took {:?}",
        asked.elapsed()
    );
    assert_eq!(error.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
    assert!(
        error.message.contains("task store cannot be reached"),
        "{}",
        error.message
    );
    // Over the protocol too: tasks/get and a new tools/call answer an error.
    let asked = Instant::now();
    let read = on_a.get(&id).await.expect_err("tasks/get fails");
    assert!(read.to_string().contains("cannot be reached"), "{read}");
    let call = on_a.call_tool("ask", (), CallOptions::default()).await;
    assert!(call.is_err(), "tools/call fails: {call:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(6),
        "took {:?}",
        asked.elapsed()
    );

    redis.restart();
    // Recovered by itself: no restart of the server, no reconnect call.
    let back = until(&a.runtime, &id, Duration::from_secs(10), |_| true).await;
    assert_eq!(
        status(&back),
        "input_required",
        "the acknowledged task is intact: {back}"
    );
    // The tool parked across the outage still hears its answer.
    answer(&a.runtime, &id, "v", "after").await;
    let done = until(&a.runtime, &id, Duration::from_secs(10), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&done), "a got after");
    let fresh = start(&on_a, "ask", json!({})).await;
    until(&a.runtime, &fresh, Duration::from_secs(5), |task| {
        status(task) == "input_required"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_a_sigkill_of_redis() {
    let mut redis = RedisServer::start();
    let store = store(&redis.url(), "durable:").await;
    let mut acknowledged = Vec::new();
    for n in 0..200 {
        let id = TaskId::new(format!("task-{n:03}"));
        let record = TaskRecord::new(
            id.clone(),
            Principal::new("o"),
            UnixMillis::new(1),
            Ttl::Unlimited,
            None,
        );
        store.create(record).await.expect("create");
        if n % 2 == 0 {
            mcp_tasks::store::modify(
                &*store,
                &id,
                &mcp_tasks::store::Change::Complete(json!({"content": [], "n": n})),
                UnixMillis::new(2),
                Duration::from_secs(3600),
            )
            .await
            .expect("complete");
        }
        acknowledged.push(id);
    }
    redis.kill();
    let failed = store
        .get(&acknowledged[0])
        .await
        .expect_err("Redis is down");
    assert_eq!(failed.kind(), StoreErrorKind::Unavailable, "{failed}");
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.get(&acknowledged[0]).await.is_err() {
        assert!(Instant::now() < deadline, "the store did not come back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (n, id) in acknowledged.iter().enumerate() {
        let record = store
            .get(id)
            .await
            .expect("get")
            .expect("an acknowledged task survives");
        assert_eq!(
            record.version(),
            u64::from(n % 2 == 0),
            "its last acknowledged change too"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_subscription_is_made_again_and_reported_as_a_gap() {
    let redis = RedisServer::start();
    let store = store(&redis.url(), "gap:").await;
    let replicas: &dyn Replicas = store.replicas().expect("a shared store");
    let mut gaps = replicas.feed_gaps();
    let admin = redis::Client::open(redis.url()).expect("url");
    let mut admin = admin
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut admin)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1, "the store's one subscription");
    tokio::time::timeout(Duration::from_secs(5), gaps.changed())
        .await
        .expect("the gap is reported within 5 s")
        .expect("the store is alive");
    // Subscribed again: changes are announced once more. (A creation is
    // announced by the store itself, not through Redis: the change after it
    // is what comes back on the subscription.)
    let id = TaskId::new("after-the-gap");
    store
        .create(TaskRecord::new(
            id.clone(),
            Principal::new("o"),
            UnixMillis::new(1),
            Ttl::Unlimited,
            None,
        ))
        .await
        .expect("create");
    let mut feed = store.changes();
    modify(
        &*store,
        &id,
        &Change::StatusMessage("after the gap".into()),
        UnixMillis::new(2),
        Duration::from_secs(60),
    )
    .await
    .expect("modify");
    let announced = tokio::time::timeout(Duration::from_secs(5), feed.recv())
        .await
        .expect("announced")
        .expect("open");
    assert_eq!(announced, id);
}
