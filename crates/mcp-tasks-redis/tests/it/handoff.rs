//! A drain on a shared store hands resumable tasks to the other replicas
//! at once: at the tool's next checkpoint (no step lost or run twice), or
//! at the end of a short grace for a task waiting for input; another
//! replica resumes each from its last checkpoint. Non-resumable tasks wait
//! for the drain's timeout like on any store.

use std::time::Duration;

use mcp_tasks::store::HANDED_OFF_MESSAGE;
use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;
use tokio::time::Instant;

use crate::support::{answer, client, replica, result_text, start, status, until};

const PERIOD: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_replica_hands_resumable_tasks_to_another_which_resumes_them() {
    let redis = RedisServer::start();
    let a = replica(&redis.url(), "handoff:", "a", PERIOD).await;
    let b = replica(&redis.url(), "handoff:", "b", PERIOD).await;
    let on_a = client(a.clone()).await;
    // Checkpoints every 200 ms: handed off at the next one.
    let counted = start(&on_a, "counted", json!({"steps": 20, "ms": 200})).await;
    // Resumable, but parked on its question: handed off when the grace ends.
    let asking = start(&on_a, "steps", json!({"steps": 1, "ms": 10})).await;
    // Not resumable: ends by itself within the timeout.
    let sleeping = start(&on_a, "sleep", json!({"ms": 1500})).await;
    until(&a.runtime, &counted, Duration::from_secs(5), |task| {
        task["statusMessage"] == "a: step 3 of 20"
    })
    .await;
    until(&a.runtime, &asking, Duration::from_secs(5), |task| {
        status(task) == "input_required"
    })
    .await;

    let began = Instant::now();
    let draining = tokio::spawn({
        let runtime = a.runtime.clone();
        async move { runtime.drain(Duration::from_secs(30)).await }
    });
    // Handed off at its next checkpoint, well within the grace.
    until(&b.runtime, &counted, Duration::from_secs(2), |task| {
        task["statusMessage"]
            .as_str()
            .is_some_and(|message| message == HANDED_OFF_MESSAGE || message.starts_with("b:"))
    })
    .await;
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    let report = draining.await.unwrap();
    let took = began.elapsed();
    assert_eq!(
        (
            report.handed_off,
            report.finished,
            report.failed,
            report.total()
        ),
        (2, 1, 0, 3),
        "{report:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "the drain did not wait for its timeout: {took:?}"
    );

    // B resumes both, each from where it was.
    let done = until(&b.runtime, &counted, Duration::from_secs(20), |task| {
        status(task) != "working"
    })
    .await;
    assert_eq!(status(&done), "completed", "{done}");
    let text = result_text(&done);
    let from: u64 = text
        .strip_prefix("b ran steps ")
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("run on B: {text}"));
    assert!(
        (4..=20).contains(&from),
        "continued after its checkpoint: {text}"
    );

    let resumed = until(&b.runtime, &asking, Duration::from_secs(20), |task| {
        status(task) == "input_required"
            && task["statusMessage"]
                .as_str()
                .is_some_and(|message| message.starts_with("b:"))
    })
    .await;
    assert!(resumed["inputRequests"]["confirm"].is_object(), "{resumed}");
    answer(&b.runtime, &asking, "confirm", "go").await;
    let finished = until(&b.runtime, &asking, Duration::from_secs(5), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&finished), "b finished after go");

    let slept = until(&b.runtime, &sleeping, Duration::from_secs(1), |task| {
        status(task) == "completed"
    })
    .await;
    assert_eq!(result_text(&slept), "a slept");
}
