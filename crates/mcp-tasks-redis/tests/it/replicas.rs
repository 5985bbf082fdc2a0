//! Several replicas on one Redis, in one process: each has its own store
//! (connections, subscription) and runtime, as separate server processes
//! have. Changes made through one wake the tools and waiters of another.

use std::time::Duration;

use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;
use tokio::time::Instant;

use crate::support::{answer, client, replica, result_text, start, status, until};

const PERIOD: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_on_one_replica_wakes_the_tool_parked_on_another() {
    let redis = RedisServer::start();
    let a = replica(&redis.url(), "wake:", "a", PERIOD).await;
    let b = replica(&redis.url(), "wake:", "b", PERIOD).await;
    let on_a = client(a.clone()).await;
    let id = start(&on_a, "ask", json!({})).await;
    let asked = until(&b.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "input_required"
    })
    .await;
    assert!(asked["inputRequests"]["v"].is_object(), "{asked}");
    let answered = Instant::now();
    answer(&b.runtime, &id, "v", "yes").await;
    let done = until(&b.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&done), "a got yes", "the tool ran on A: {done}");
    // The tool's own fallback re-read is 5 s: this was the change feed.
    assert!(
        answered.elapsed() < Duration::from_secs(2),
        "took {:?}",
        answered.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_one_replica_stops_the_tool_on_another() {
    let redis = RedisServer::start();
    let a = replica(&redis.url(), "cancel:", "a", PERIOD).await;
    let c = replica(&redis.url(), "cancel:", "c", PERIOD).await;
    let on_a = client(a.clone()).await;
    let id = start(&on_a, "sleep", json!({})).await;
    until(&c.runtime, &id, Duration::from_secs(5), |task| {
        task["statusMessage"] == "a sleeping"
    })
    .await;
    let cancelled = Instant::now();
    c.runtime
        .cancel_task_as(&id, &crate::support::process())
        .await
        .expect("tasks/cancel");
    let done = until(&c.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "cancelled"
    })
    .await;
    assert_eq!(done["status"], "cancelled");
    // A hears the cancel on the change feed and stops its tool, a moment
    // after C's write: wait for that, within the same 2 s (A's supervision
    // re-reads on its own only every 30 s).
    while a.runtime.unfinished_tasks_of(&crate::support::process()) != 0
        && cancelled.elapsed() < Duration::from_secs(2)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(cancelled.elapsed() < Duration::from_secs(2));
    assert_eq!(a.runtime.unfinished_tasks_of(&crate::support::process()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_on_one_replica_is_read_and_finished_on_another() {
    let redis = RedisServer::start();
    let a = replica(&redis.url(), "read:", "a", PERIOD).await;
    let b = replica(&redis.url(), "read:", "b", PERIOD).await;
    let on_a = client(a.clone()).await;
    let on_b = client(b.clone()).await;
    let id = start(&on_a, "steps", json!({"steps": 2, "ms": 10})).await;
    // B's client reads it, and its record names A's runner.
    let state = on_b.get(&id).await.expect("tasks/get on B");
    assert_eq!(state.id, id);
    let record = b
        .runtime
        .store()
        .get(&id)
        .await
        .expect("get")
        .expect("record");
    assert!(
        record.runner().is_some(),
        "a task on Redis names its runner"
    );
    assert!(record.resumable_call().is_some(), "steps is resumable");
    until(&b.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "input_required"
    })
    .await;
    answer(&b.runtime, &id, "confirm", "ok").await;
    let done = until(&a.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&done), "a finished after ok");
    // Another deployment's prefix sees nothing of it.
    let other = replica(&redis.url(), "other:", "x", PERIOD).await;
    assert!(
        other
            .runtime
            .get_task_as(&id, &crate::support::process())
            .await
            .is_err()
    );
}
