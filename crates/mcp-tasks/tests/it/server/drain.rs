//! `TaskRuntime::drain`: no new task while it drains (a JSON-RPC refusal
//! in process, 503 with `Retry-After` over HTTP), `tasks/get`,
//! `tasks/update` and `tasks/cancel` still answered, the tools that end
//! within the timeout recorded as they ended, the others failed with an
//! honest message, and the report's counts. In process under a paused
//! clock, and over real HTTP on 127.0.0.1.

use std::time::Duration;

use mcp_tasks::server::{DrainReport, TokioClock};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{CallOptions, TaskStatus, UnixMillis};
use serde_json::{Value, json};

use crate::support::runtime_server::{runtime_on, serve_http};
use crate::support::{RuntimeServer, in_process, task_of};

fn server() -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(UnixMillis::new(1_767_225_600_000)))
            .build(),
    )
}

/// Checks `error` (`code`, `data`) is the refusal of a draining server.
fn draining_refusal(code: i64, data: Option<&Value>) {
    assert_eq!(code, -32603);
    let data = data.expect("data");
    assert_eq!(data["reason"], "draining", "{data}");
    assert_eq!(data["retryAfterMs"], 3000, "{data}");
}

#[tokio::test(start_paused = true)]
async fn a_drain_refuses_new_tasks_answers_the_others_and_ends_what_outlives_it() {
    let server = server();
    let runtime = server.runtime.clone();
    let client = in_process(server.clone()).await;
    let quick = task_of(&client, "slow", json!({"ms": 500})).await;
    let asking = task_of(&client, "ask", json!({})).await;
    let gated = task_of(&client, "gated", json!({})).await;
    let stuck = task_of(&client, "forever", json!({"ms": 100})).await;
    assert!(!runtime.is_draining());

    let start = tokio::time::Instant::now();
    let drain = tokio::spawn({
        let runtime = runtime.clone();
        async move { runtime.drain(Duration::from_secs(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(runtime.is_draining());

    // No new task, with the refusal a load balancer retries elsewhere.
    let refused = client
        .call_tool("forever", (), CallOptions::default())
        .await
        .unwrap_err();
    let rpc = refused.rpc_error().expect("a JSON-RPC error");
    assert!(rpc.message.contains("shutting down"), "{}", rpc.message);
    draining_refusal(rpc.code, rpc.data.as_ref());

    // What exists is still answered: get, update, cancel.
    assert_eq!(
        client.get(&stuck.id).await.unwrap().status,
        TaskStatus::Working
    );
    assert_eq!(
        client.get(&asking.id).await.unwrap().status,
        TaskStatus::InputRequired
    );
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    client
        .update(&asking.id, [("name".to_owned(), answer)].into())
        .await
        .unwrap();
    client.cancel(&gated.id).await.unwrap();

    let report = drain.await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(5),
        "waited the timeout"
    );
    let mut expected = DrainReport::default();
    expected.waited = Duration::from_secs(5);
    expected.finished = 3;
    expected.failed = 1;
    assert_eq!(report, expected);
    assert_eq!(report.total(), 4);

    // Each ended the way it did: the drain touched only the one that outlived it.
    let status = |id| {
        let client = &client;
        async move { client.get(id).await.unwrap() }
    };
    assert_eq!(status(&quick.id).await.status, TaskStatus::Completed);
    assert_eq!(status(&asking.id).await.status, TaskStatus::Completed);
    assert_eq!(status(&gated.id).await.status, TaskStatus::Cancelled);
    let failed = status(&stuck.id).await;
    assert_eq!(failed.status, TaskStatus::Failed);
    let error = failed.error.expect("its error");
    assert_eq!(
        error.message,
        "the server shut down before the task finished (it waited 5 s for the task to end)"
    );
    assert_eq!(runtime.load(), Default::default(), "nothing runs any more");
    // Still refused after the drain.
    assert!(
        client
            .call_tool("forever", (), CallOptions::default())
            .await
            .is_err()
    );
}

#[tokio::test(start_paused = true)]
async fn a_drain_with_nothing_running_returns_at_once_and_a_zero_timeout_does_not_wait() {
    let idle = server();
    let report = idle.runtime.drain(Duration::from_secs(30)).await;
    assert_eq!(report, DrainReport::default());

    let busy = server();
    let client = in_process(busy.clone()).await;
    let stuck = task_of(&client, "forever", json!({})).await;
    let start = tokio::time::Instant::now();
    let report = busy.runtime.drain(Duration::ZERO).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!((report.failed, report.finished, report.total()), (1, 0, 1));
    let error = client.get(&stuck.id).await.unwrap().error.unwrap();
    assert!(error.message.contains("waited 0 ms"), "{}", error.message);
}

#[tokio::test(start_paused = true)]
async fn a_queued_task_the_drain_outwaits_fails_without_running() {
    use mcp_tasks::server::AdmissionLimits;
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(UnixMillis::new(1_767_225_600_000)))
            .with_admission(AdmissionLimits::default().with_max_running(Some(1)))
            .build(),
    );
    let client = in_process(server.clone()).await;
    let running = task_of(&client, "forever", json!({})).await;
    let queued = task_of(&client, "gated", json!({})).await;
    let report = server.runtime.drain(Duration::from_secs(1)).await;
    assert_eq!((report.failed, report.total()), (2, 2));
    for id in [&running.id, &queued.id] {
        assert_eq!(client.get(id).await.unwrap().status, TaskStatus::Failed);
    }
    assert!(
        !server.events().iter().any(|event| event == "gated started"),
        "the queued tool never ran"
    );
}

/// A 2026-07-28 `tools/call` of `forever` posted as is.
async fn post_call(url: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "forever")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "forever", "arguments": {},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities":
                        {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
            .to_string(),
        )
        .send()
        .await
        .expect("the server answers")
}

/// A 2026-07-28 `tasks/get` of `id` posted as is.
async fn post_get(url: &str, id: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tasks/get")
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {
                "taskId": id,
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities":
                        {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
            .to_string(),
        )
        .send()
        .await
        .expect("the server answers")
}

#[tokio::test]
async fn over_http_a_draining_server_answers_creation_503_with_retry_after_and_polls_200() {
    let server = RuntimeServer::in_memory();
    let runtime = server.runtime.clone();
    let url = serve_http(server).await;
    let created = post_call(&url).await;
    assert_eq!(created.status(), 200);
    let body: Value = created.json().await.unwrap();
    let id = body["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();

    let drain = tokio::spawn(async move { runtime.drain(Duration::from_secs(30)).await });
    let refused = loop {
        let answer = post_call(&url).await;
        if answer.status() != 200 {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "3");
    let body: Value = refused.json().await.unwrap();
    let error = &body["error"];
    draining_refusal(error["code"].as_i64().unwrap(), Some(&error["data"]));

    let polled = post_get(&url, &id).await;
    assert_eq!(polled.status(), 200);
    let body: Value = polled.json().await.unwrap();
    assert_eq!(body["result"]["status"], "working", "{body}");
    assert!(!drain.is_finished(), "the drain waits for the task");
    drain.abort();
}

#[tokio::test(start_paused = true)]
async fn on_the_memory_store_a_resumable_task_the_drain_outwaits_fails_rather_than_waits() {
    // Nothing outlives the process: a resumable task cannot continue later.
    let server = RuntimeServer::resuming(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(UnixMillis::new(1_767_225_600_000))),
    );
    let runtime = server.runtime.clone();
    let client = in_process(server.clone()).await;
    let steps = task_of(&client, "steps", json!({"n": 100, "ms": 1000})).await;
    let report = runtime.drain(Duration::from_secs(2)).await;
    assert_eq!(
        (report.suspended, report.handed_off, report.failed),
        (0, 0, 1),
        "{report:?}"
    );
    let state = client.get(&steps.id).await.unwrap();
    assert_eq!(state.status, TaskStatus::Failed);
    assert!(
        state
            .error
            .as_ref()
            .is_some_and(|error| error.message.contains("shut down before the task finished")),
        "{state:?}"
    );
}
