//! A replica that stalls (its whole runtime frozen, as a stopped process or
//! a machine under load would be) past its lease: another replica takes its
//! tasks over within one lease period, and once the stalled one wakes, it
//! writes nothing for them (fencing): no task ends twice.
//!
//! Replica A runs on a current-thread runtime of its own thread, so
//! blocking that thread freezes everything of A at once: its tools, its
//! lease renewals, its Redis connections' tasks.

use std::time::Duration;

use mcp_tasks::TasksClient;
use mcp_tasks::store::{RESUMED_MESSAGE, STOPPED_MESSAGE};
use mcp_tasks_redis::testing::RedisServer;
use serde_json::{Value, json};
use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::support::{Tools, answer, replica, result_text, start, status, until};

const PERIOD: Duration = Duration::from_secs(3);

/// Replica A on a thread and runtime of its own, and a client of it.
async fn frozen_replica(url: String, prefix: &'static str) -> (Tools, Handle, TasksClient<()>) {
    let (sent, made) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let tools = replica(&url, prefix, "a", PERIOD).await;
            let _ = sent.send((tools, Handle::current()));
            // Runs until the test process ends.
            std::future::pending::<()>().await;
        });
    });
    let (tools, handle) = made.await.expect("replica A starts");
    // Serve A's client on A's runtime, so A's tools run there.
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let serving = tools.clone();
    handle.spawn(async move {
        use rmcp::ServiceExt;
        if let Ok(running) = serving.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let lifecycle = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let client = TasksClient::new(
        rmcp::service::serve_client_with_lifecycle((), client_io, lifecycle)
            .await
            .expect("connect to A"),
    );
    (tools, handle, client)
}

/// Blocks A's only thread for `long`: all of A stalls.
fn freeze(handle: &Handle, long: Duration) {
    handle.spawn(async move { std::thread::sleep(long) });
}

/// Reads `id` through `tools` every 5 ms for `long`, failing on any state
/// `bad` accepts; the last state.
async fn watch_for(
    tools: &Tools,
    id: &mcp_tasks::TaskId,
    long: Duration,
    bad: impl Fn(&Value) -> bool,
) -> Value {
    let end = Instant::now() + long;
    loop {
        let task = crate::support::read(&tools.runtime, id).await;
        assert!(
            !bad(&task),
            "a stalled replica wrote after losing its lease: {task}"
        );
        if Instant::now() > end {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replicas_task_fails_within_a_lease_period_and_it_writes_nothing_after() {
    let redis = RedisServer::start();
    let b = replica(&redis.url(), "stall:", "b", PERIOD).await;
    let (_a, a_handle, on_a) = frozen_replica(redis.url(), "stall:").await;
    // B claims only after renewing its own lease for half a period.
    tokio::time::sleep(PERIOD).await;
    let id = start(&on_a, "sleep", json!({"ms": 1500})).await;
    until(&b.runtime, &id, Duration::from_secs(5), |task| {
        task["statusMessage"] == "a sleeping"
    })
    .await;
    let frozen = Instant::now();
    freeze(&a_handle, PERIOD * 2);
    let failed = until(&b.runtime, &id, PERIOD * 2, |task| status(task) == "failed").await;
    let took = frozen.elapsed();
    assert_eq!(failed["statusMessage"], STOPPED_MESSAGE, "{failed}");
    assert_eq!(failed["error"]["message"], STOPPED_MESSAGE);
    assert!(
        took <= PERIOD + Duration::from_millis(500),
        "the takeover took {took:?}"
    );
    let version = b
        .runtime
        .store()
        .get(&id)
        .await
        .expect("get")
        .expect("record")
        .version();
    // A wakes (its sleep is over by then) and would write "a woke up" and
    // its result: nothing of it may land.
    let rest = (PERIOD * 2).saturating_sub(frozen.elapsed()) + PERIOD;
    watch_for(&b, &id, rest, |task| {
        task["statusMessage"] != STOPPED_MESSAGE || status(task) != "failed"
    })
    .await;
    let record = b
        .runtime
        .store()
        .get(&id)
        .await
        .expect("get")
        .expect("record");
    assert_eq!(
        record.version(),
        version,
        "nothing was written after the takeover"
    );
    // A took a new lease and serves new tasks.
    let next = start(&on_a, "sleep", json!({"ms": 10})).await;
    let done = until(&b.runtime, &next, Duration::from_secs(5), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&done), "a slept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replicas_resumable_task_runs_again_elsewhere_and_the_stalled_one_is_fenced_off()
{
    let redis = RedisServer::start();
    let b = replica(&redis.url(), "resume:", "b", PERIOD).await;
    let (_a, a_handle, on_a) = frozen_replica(redis.url(), "resume:").await;
    tokio::time::sleep(PERIOD).await;
    let id = start(&on_a, "steps", json!({"steps": 40, "ms": 50})).await;
    until(&b.runtime, &id, Duration::from_secs(5), |task| {
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("a: step 2"))
    })
    .await;
    let frozen = Instant::now();
    freeze(&a_handle, PERIOD * 2);
    let resumed = until(&b.runtime, &id, PERIOD * 2, |task| {
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m == RESUMED_MESSAGE || m.starts_with("b: "))
    })
    .await;
    assert!(
        frozen.elapsed() <= PERIOD + Duration::from_millis(500),
        "took {:?}",
        frozen.elapsed()
    );
    assert_eq!(status(&resumed), "working");
    // While B runs it, and after A wakes, no step of A lands.
    let rest = (PERIOD * 2).saturating_sub(frozen.elapsed()) + PERIOD;
    watch_for(&b, &id, rest, |task| {
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("a: "))
    })
    .await;
    let asked = until(&b.runtime, &id, Duration::from_secs(10), |task| {
        status(task) == "input_required"
    })
    .await;
    assert!(asked["inputRequests"]["confirm"].is_object(), "{asked}");
    answer(&b.runtime, &id, "confirm", "ok").await;
    let done = until(&b.runtime, &id, Duration::from_secs(5), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&done), "b finished after ok", "{done}");
    let record = b
        .runtime
        .store()
        .get(&id)
        .await
        .expect("get")
        .expect("record");
    assert_eq!(record.resumed(), 1);
}
