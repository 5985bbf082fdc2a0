//! TTLs, heartbeats, TTLs that follow activity, the maximum lifetime and
//! retention, under a paused tokio clock that the runtime's injected
//! `TokioClock` follows: a TTL of a second is tested to the millisecond,
//! instantly. The sweeper is checked on the store itself,
//! so lazy expiry on read cannot hide a broken sweeper.

use std::time::Duration;

use mcp_tasks::server::TokioClock;
use mcp_tasks::store::{EXPIRED_MESSAGE, MemoryStore};
use mcp_tasks::{TaskId, TaskStatus, Ttl, UnixMillis};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::runtime_server::runtime_on;
use crate::support::{RuntimeServer, in_process, task_of};

/// 2026-01-01T00:00:00Z.
const START: UnixMillis = UnixMillis::new(1_767_225_600_000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A server whose runtime reads the paused tokio clock, sweeping every 100 ms.
fn server(retention: Duration, sweep: Duration) -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(START))
            .with_retention(retention)
            .with_sweep_interval(sweep)
            .build(),
    )
}

/// The task's status as the store holds it (no `tasks/get`, no lazy expiry).
async fn stored_status(server: &RuntimeServer, id: &TaskId) -> Option<TaskStatus> {
    let record = server.runtime.store().get(id).await.expect("store read");
    record.map(|record| record.status().clone())
}

/// Sleeps until `at` after `start` on the paused clock.
async fn until(start: Instant, at: Duration) {
    tokio::time::sleep_until(start + at).await;
}

#[tokio::test(start_paused = true)]
async fn the_sweeper_fails_a_task_exactly_at_its_ttl_without_any_read() {
    let start = Instant::now();
    let server = server(Duration::from_secs(3600), ms(100));
    let client = in_process(server.clone()).await;
    let state = task_of(
        &client,
        "forever",
        json!({"ttl_ms": 1000, "from_creation": true}),
    )
    .await;
    assert_eq!(state.ttl, Some(Ttl::from_millis(1000)));
    assert_eq!(
        state.created_at.as_ref().map(|at| at.as_str()),
        Some("2026-01-01T00:00:00.000Z"),
        "timestamps come from the injected clock"
    );
    assert_eq!(
        state.id.expose()[..12],
        format!("{:012x}", START.as_millis()),
        "so does the time in front of the id"
    );
    until(start, ms(999)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Working)
    );
    until(start, ms(1001)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Failed),
        "the sweeper's tick at 1000 ms failed it"
    );
    let read = client.get(&state.id).await.unwrap();
    let error = read.error.expect("a failed task has its error");
    assert_eq!(
        (error.code, error.message.as_str()),
        (-32603, EXPIRED_MESSAGE)
    );
    assert_eq!(read.status_message.as_deref(), Some(EXPIRED_MESSAGE));
    assert_eq!(
        read.last_updated_at.as_ref().map(|at| at.as_str()),
        Some("2026-01-01T00:00:01.000Z")
    );
}

#[tokio::test(start_paused = true)]
async fn a_read_past_the_ttl_expires_the_task_before_the_sweeper_runs() {
    let start = Instant::now();
    // The sweeper ticks at 0 and then only after an hour.
    let server = server(Duration::from_secs(3600), Duration::from_secs(3600));
    let client = in_process(server.clone()).await;
    let state = task_of(
        &client,
        "forever",
        json!({"ttl_ms": 500, "from_creation": true}),
    )
    .await;
    until(start, ms(600)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Working)
    );
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::Failed
    );
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Failed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_heartbeat_keeps_a_task_alive_past_its_ttl() {
    let start = Instant::now();
    let server = server(Duration::from_secs(3600), ms(100));
    let client = in_process(server.clone()).await;
    let beating = task_of(
        &client,
        "forever",
        json!({"ttl_ms": 150, "heartbeat": true, "from_creation": true}),
    )
    .await;
    let dying = task_of(
        &client,
        "forever",
        json!({"ttl_ms": 150, "from_creation": true}),
    )
    .await;
    until(start, ms(2_000)).await;
    assert_eq!(
        stored_status(&server, &dying.id).await,
        Some(TaskStatus::Failed)
    );
    let alive = client.get(&beating.id).await.unwrap();
    assert_eq!(
        alive.status,
        TaskStatus::Working,
        "a heartbeat keeps a task alive"
    );
    // Each 50 ms tick extends the TTL to 1 s past that tick.
    assert!(
        matches!(alive.ttl, Some(Ttl::Limited(ttl)) if ttl >= ms(2_900) && ttl <= ms(3_000)),
        "{:?}",
        alive.ttl
    );
    client.cancel(&beating.id).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_running_tool_keeps_its_task_alive_past_its_ttl() {
    let server = server(Duration::from_secs(3600), ms(100));
    let client = in_process(server.clone()).await;
    // A 1 s TTL, a tool that runs 5 s.
    let state = task_of(&client, "slow", json!({"ms": 5_000, "ttl_ms": 1_000})).await;
    assert_eq!(state.ttl, Some(Ttl::from_millis(1000)));
    tokio::time::sleep(ms(4_000)).await;
    let running = client.get(&state.id).await.unwrap();
    assert_eq!(running.status, TaskStatus::Working);
    // ttlMs grows ahead of now: kept alive a TTL past the last keep-alive
    // (one every third of the TTL).
    assert!(
        matches!(running.ttl, Some(Ttl::Limited(ttl)) if ttl > ms(4_000) && ttl <= ms(5_000)),
        "{:?}",
        running.ttl
    );
    tokio::time::sleep(ms(1_100)).await;
    let done = client.get(&state.id).await.unwrap();
    assert_eq!(done.status, TaskStatus::Completed, "{done:?}");
}

#[tokio::test(start_paused = true)]
async fn a_task_left_input_required_expires_a_ttl_after_its_last_change() {
    let start = Instant::now();
    let server = server(Duration::from_secs(3600), ms(100));
    let client = in_process(server.clone()).await;
    // Works 2 s (kept alive), then asks and is left waiting.
    let state = task_of(&client, "ask", json!({"after_ms": 2_000, "ttl_ms": 1_000})).await;
    until(start, ms(2_999)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::InputRequired)
    );
    until(start, ms(3_001)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Failed),
        "expired 1 s after it asked, at the sweeper's 3000 ms tick"
    );
}

#[tokio::test(start_paused = true)]
async fn the_maximum_lifetime_wins_over_every_extension() {
    let start = Instant::now();
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(START))
            .with_sweep_interval(ms(100))
            .with_max_lifetime(Some(Duration::from_secs(3)))
            .build(),
    );
    let client = in_process(server.clone()).await;
    // Kept alive by the runtime and by its own heartbeats (1 s every 50 ms).
    let state = task_of(
        &client,
        "forever",
        json!({"ttl_ms": 1_000, "heartbeat": true}),
    )
    .await;
    until(start, ms(2_999)).await;
    let alive = client.get(&state.id).await.unwrap();
    assert_eq!(alive.status, TaskStatus::Working);
    assert_eq!(alive.ttl, Some(Ttl::from_millis(3_000)), "capped at 3 s");
    until(start, ms(3_001)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Failed)
    );
}

#[tokio::test(start_paused = true)]
async fn an_unlimited_ttl_is_sent_as_null_and_never_expires() {
    let server = server(Duration::from_secs(60), Duration::from_secs(60));
    let client = in_process(server.clone()).await;
    let state = task_of(
        &client,
        "forever",
        json!({"unlimited": true, "ms": 3_600_000}),
    )
    .await;
    assert_eq!(state.ttl, Some(Ttl::Unlimited));
    assert_eq!(
        state.raw["ttlMs"],
        Value::Null,
        "an unlimited TTL is sent as null"
    );
    tokio::time::sleep(Duration::from_secs(10 * 3600)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Working)
    );
    client.cancel(&state.id).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn finished_tasks_are_deleted_once_their_retention_has_passed() {
    let start = Instant::now();
    let server = server(ms(300), ms(100));
    let client = in_process(server.clone()).await;
    // Finishes at 10 ms; kept until 310 ms; the sweeper's 400 ms tick deletes it.
    let state = task_of(&client, "slow", json!({"ms": 10})).await;
    until(start, ms(390)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        Some(TaskStatus::Completed)
    );
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::Completed
    );
    until(start, ms(401)).await;
    assert_eq!(
        stored_status(&server, &state.id).await,
        None,
        "deleted by the sweeper"
    );
    assert!(client.get(&state.id).await.unwrap_err().is_unknown_task());
}
