//! The task-event hook: a recording observer hears every task's life from
//! the runtime (created, each status change, its end with its outcome,
//! duration and time in `input_required`, its removal), under a paused
//! tokio clock that the runtime's `TokioClock` follows, so the times are
//! exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::server::{TaskEnded, TaskObserver, TokioClock};
use mcp_tasks::store::{MemoryStore, TaskRecord};
use mcp_tasks::{TaskId, TaskStatus, UnixMillis};
use serde_json::json;
use tokio::time::Instant;

use crate::support::runtime_server::runtime_on;
use crate::support::{RuntimeServer, in_process, task_of};

/// 2026-01-01T00:00:00Z.
const START: UnixMillis = UnixMillis::new(1_767_225_600_000);

/// Every event heard, one line each, with the task named by `(id)`'s place
/// in the order tasks were created (never by its id).
#[derive(Default)]
struct Recorder {
    ids: Mutex<Vec<TaskId>>,
    events: Mutex<Vec<String>>,
}

impl Recorder {
    fn name(&self, id: &TaskId) -> usize {
        let mut ids = self.ids.lock().unwrap();
        if let Some(at) = ids.iter().position(|known| known == id) {
            return at;
        }
        ids.push(id.clone());
        ids.len() - 1
    }

    fn push(&self, event: String) {
        self.events.lock().unwrap().push(event);
    }

    /// The events of task `n` (its place in creation order).
    fn of(&self, n: usize) -> Vec<String> {
        let prefix = format!("#{n} ");
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|event| event.strip_prefix(&prefix).map(str::to_owned))
            .collect()
    }
}

impl TaskObserver for Recorder {
    fn task_created(&self, record: &TaskRecord, tool: &str) {
        let n = self.name(record.id());
        self.push(format!("#{n} created {tool} {}", record.status()));
    }

    fn status_changed(&self, before: &TaskStatus, record: &TaskRecord) {
        let n = self.name(record.id());
        self.push(format!("#{n} {before} -> {}", record.status()));
    }

    fn task_ended(&self, ended: &TaskEnded<'_>) {
        let n = self.name(ended.record.id());
        self.push(format!(
            "#{n} ended {} {} after {} ms, {} ms of input",
            ended.tool.unwrap_or("?"),
            ended.outcome,
            ended.duration.as_millis(),
            ended.input_required.as_millis()
        ));
    }

    fn task_removed(&self, id: &TaskId) {
        let n = self.name(id);
        self.push(format!("#{n} removed"));
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A server on the paused clock, sweeping every 100 ms, keeping finished
/// tasks 5 s, heard by `recorder` (twice: two observers both hear everything).
fn server(recorder: &Arc<Recorder>, second: &Arc<Recorder>) -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(START))
            .with_retention(Duration::from_secs(5))
            .with_sweep_interval(ms(100))
            .with_observer(recorder.clone())
            .with_observer(second.clone())
            .build(),
    )
}

async fn status_of(
    client: &mcp_tasks::client::TasksClient<crate::support::Handler>,
    id: &TaskId,
) -> TaskStatus {
    client.get(id).await.unwrap().status
}

#[tokio::test(start_paused = true)]
async fn an_observer_hears_each_task_from_creation_to_removal() {
    let start = Instant::now();
    let (recorder, second) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let server = server(&recorder, &second);
    let client = in_process(server.clone()).await;

    // #0 asks for input after 100 ms, is answered at 400 ms, completes.
    let asking = task_of(&client, "ask", json!({"after_ms": 100})).await;
    // #1 runs until cancelled at 400 ms.
    let cancelled = task_of(&client, "forever", json!({"ms": 50})).await;
    // #2 expires at its TTL, 1 s after its creation.
    task_of(
        &client,
        "forever",
        json!({"ms": 50, "ttl_ms": 1000, "from_creation": true}),
    )
    .await;
    // #3 fails in its first step: stored first (the client sends an
    // idempotency key, so its tool runs only once its record holds it).
    task_of(&client, "rpc_error", json!({})).await;

    tokio::time::sleep_until(start + ms(400)).await;
    assert_eq!(
        status_of(&client, &asking.id).await,
        TaskStatus::InputRequired
    );
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    client
        .update(&asking.id, [("name".to_owned(), answer)].into())
        .await
        .unwrap();
    client.cancel(&cancelled.id).await.unwrap();
    tokio::time::sleep_until(start + ms(1_200)).await;

    assert_eq!(
        recorder.of(0),
        [
            "created ask working",
            "working -> input_required",
            "input_required -> working",
            "working -> completed",
            "ended ask completed after 400 ms, 300 ms of input",
        ]
    );
    assert_eq!(
        recorder.of(1),
        [
            "created forever working",
            "working -> cancelled",
            "ended forever cancelled after 400 ms, 0 ms of input",
        ]
    );
    assert_eq!(
        recorder.of(2),
        [
            "created forever working",
            "working -> failed",
            "ended forever expired after 1000 ms, 0 ms of input",
        ]
    );
    assert_eq!(
        recorder.of(3),
        [
            "created rpc_error working",
            "working -> failed",
            "ended rpc_error failed after 0 ms, 0 ms of input",
        ]
    );

    // Each finished task is removed by the sweeper past its 5 s retention.
    tokio::time::sleep_until(start + ms(6_300)).await;
    for n in 0..4 {
        assert_eq!(
            recorder.of(n).last().map(String::as_str),
            Some("removed"),
            "#{n}"
        );
    }
    assert_eq!(
        *second.events.lock().unwrap(),
        *recorder.events.lock().unwrap(),
        "every observer hears every event, in the same order"
    );
}
