//! Admission through the runtime and a real client: the bound on running
//! tools, the queue and its status messages, cancel of a queued task, the
//! refusal of a full queue (503 over HTTP), and the fair share between two
//! callers with tokens over HTTP on 127.0.0.1.

use std::time::Duration;

use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::{AdmissionLimits, TokioClock};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{ConnectOptions, Endpoint, TaskId, TaskStatus, TasksClient, UnixMillis};
use serde_json::json;

use crate::support::runtime_server::{runtime_on, serve_http_with};
use crate::support::{Handler, RuntimeServer, in_process, task_of};

/// A server on a paused clock whose runtime has `limits`.
fn server(limits: AdmissionLimits) -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(UnixMillis::new(1_767_225_600_000)))
            .with_admission(limits)
            .build(),
    )
}

/// The task's status and status message, as `tasks/get` answers.
async fn seen<H: rmcp::ClientHandler>(
    client: &TasksClient<H>,
    id: &TaskId,
) -> (TaskStatus, String) {
    let state = client.get(id).await.expect("tasks/get");
    (state.status, state.status_message.unwrap_or_default())
}

fn started(server: &RuntimeServer) -> usize {
    server
        .events()
        .iter()
        .filter(|event| *event == "gated started")
        .count()
}

#[tokio::test(start_paused = true)]
async fn six_tasks_on_two_slots_never_run_more_than_two_and_all_complete() {
    let server = server(AdmissionLimits::default().with_max_running(Some(2)));
    let client = in_process(server.clone()).await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(task_of(&client, "gated", json!({})).await.id);
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let load = server.runtime.load();
    assert_eq!((load.running, load.queued), (2, 4));
    assert_eq!(started(&server), 2, "only two tools started");
    for (n, id) in ids.iter().enumerate().skip(2) {
        let (status, message) = seen(&client, id).await;
        assert_eq!(status, TaskStatus::Working, "a queued task is working");
        let expected = match n - 2 {
            0 => "queued: next to run".to_owned(),
            1 => "queued: 1 task ahead".to_owned(),
            ahead => format!("queued: {ahead} tasks ahead"),
        };
        assert_eq!(message, expected);
    }

    // Cancel a queued task: it ends cancelled and its tool never runs.
    client.cancel(&ids[3]).await.expect("tasks/cancel");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(seen(&client, &ids[3]).await.0, TaskStatus::Cancelled);
    assert_eq!(server.runtime.load().queued, 3);

    // The last one's place counts down, a second at most after it changes.
    let last = ids[5].clone();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(seen(&client, &last).await.1, "queued: 2 tasks ahead");
    let mut messages = vec![];
    for _ in 0..200 {
        server.open_gate();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let load = server.runtime.load();
        assert!(load.running <= 2, "at most two at once: {load:?}");
        messages.push(seen(&client, &last).await.1);
        let mut done = 0;
        for id in &ids {
            if seen(&client, id).await.0.is_terminal() {
                done += 1;
            }
        }
        if done == 6 {
            break;
        }
    }
    for (n, id) in ids.iter().enumerate() {
        let expected = if n == 3 {
            TaskStatus::Cancelled
        } else {
            TaskStatus::Completed
        };
        assert_eq!(seen(&client, id).await.0, expected, "task {n}");
    }
    assert_eq!(started(&server), 5, "the cancelled task never ran");
    // Its place as it was shown: 2, then 1 ahead (the next step may come
    // before the next report), never back up; then its tool's own steps.
    let places: Vec<usize> = messages
        .iter()
        .filter_map(|m| m.strip_prefix("queued: "))
        .map(|m| m.split(' ').next().unwrap().parse().unwrap_or(0))
        .collect();
    assert!(
        places.contains(&1) && places.windows(2).all(|w| w[0] >= w[1]),
        "the last task's place counted down: {messages:?}"
    );
    assert!(messages.iter().any(|m| m == "step 1"), "{messages:?}");
    assert_eq!(server.runtime.load(), Default::default());
}

#[tokio::test(start_paused = true)]
async fn a_queued_task_expires_at_its_ttl_without_running() {
    let server = server(AdmissionLimits::default().with_max_running(Some(1)));
    let client = in_process(server.clone()).await;
    let _running = task_of(&client, "gated", json!({})).await;
    let queued = task_of(
        &client,
        "slow",
        json!({"ms": 10, "ttl_ms": 2000, "from_creation": true}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, _) = seen(&client, &queued.id).await;
    assert_eq!(status, TaskStatus::Failed, "expired while queued");
    assert_eq!(server.runtime.load().queued, 0, "and out of the queue");
}

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef01";

/// The client `TasksClient::connect` makes.
type Connected = TasksClient<mcp_tasks::client::legacy::Handler>;

/// A client of `url` with `token`.
async fn caller(url: &str, token: &str) -> Connected {
    TasksClient::connect(
        Endpoint::url(url)
            .with_header("Authorization", format!("Bearer {token}"))
            .expect("a URL takes headers"),
        Handler::default(),
        ConnectOptions::default(),
    )
    .await
    .expect("connect over HTTP")
}

/// Waits (real time, 10 s at most) until `id`'s status message is `message`.
async fn until_message(client: &Connected, id: &TaskId, message: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, seen) = seen(client, id).await;
        if seen == message {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {message:?}, still {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn over_http_another_callers_task_runs_second_and_a_full_queue_is_a_503() {
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_admission(
                AdmissionLimits::default()
                    .with_max_running(Some(1))
                    .with_max_queued(Some(10)),
            )
            .build(),
    );
    let tokens = BearerTokens::new()
        .with_token(ALICE, Some("alice"))
        .unwrap()
        .with_token(BOB, Some("bob"))
        .unwrap();
    let url = serve_http_with(server.clone(), |recipe| recipe.with_bearer_tokens(tokens)).await;
    let (alice, bob) = (caller(&url, ALICE).await, caller(&url, BOB).await);
    let mut burst = Vec::new();
    for _ in 0..10 {
        burst.push(task_of(&alice, "gated", json!({})).await.id);
    }
    let single = task_of(&bob, "gated", json!({})).await.id;
    assert_eq!(seen(&bob, &single).await.1, "queued: next to run");
    // Alice's first ends: Bob's task is the second to run.
    until_message(&alice, &burst[0], "step 1").await;
    server.open_gate();
    server.open_gate();
    until_message(&bob, &single, "step 1").await;
    assert!(seen(&alice, &burst[1]).await.1.starts_with("queued"));

    // The queue holds ten (Alice's nine and none of Bob's now): one more
    // is refused, with a 503 and Retry-After over HTTP.
    let _tenth = task_of(&bob, "gated", json!({})).await;
    let response = reqwest::Client::new()
        .post(&url)
        .header("Authorization", format!("Bearer {ALICE}"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "gated")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "gated", "arguments": {},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {
                        "extensions": {"io.modelcontextprotocol/tasks": {}}
                    }
                }
            }})
            .to_string(),
        )
        .send()
        .await
        .expect("the request is answered");
    assert_eq!(response.status(), 503);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()),
        Some("1")
    );
    let body: serde_json::Value = response.json().await.expect("a JSON-RPC answer");
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert_eq!(body["error"]["data"]["reason"], "queueFull", "{body}");
    assert_eq!(body["error"]["data"]["maxQueued"], 10, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("busy")),
        "{body}"
    );
    alice.close().await;
    bob.close().await;
}
