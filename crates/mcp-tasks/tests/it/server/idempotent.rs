//! Idempotent creation (`_meta` "io.github.mcp-tasks/idempotency-key") on
//! the server, over real HTTP on 127.0.0.1: the same call sent again under
//! its key gets its task back and never runs the tool twice, concurrent
//! sends make one task, other arguments under the key are -32602, the key
//! is scoped to its principal, and a repeat is not counted by the rate.

use std::num::NonZeroU32;

use mcp_tasks::IDEMPOTENCY_KEY_META;
use mcp_tasks::server::CreationRate;
use mcp_tasks::store::MemoryStore;
use serde_json::{Value, json};

use crate::support::RuntimeServer;
use crate::support::runtime_server::{runtime_on, serve_http};

pub(crate) const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

/// A 2026-07-28 `tools/call` posted as is, with `token` and `key` (any JSON
/// value, or none): the JSON-RPC answer.
pub(crate) async fn call(
    url: &str,
    token: &str,
    tool: &str,
    arguments: Value,
    key: Option<Value>,
) -> Value {
    let mut meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    if let Some(key) = key {
        meta[IDEMPOTENCY_KEY_META] = key;
    }
    let answer = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .header("authorization", format!("Bearer {token}"))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": meta}})
            .to_string(),
        )
        .send()
        .await
        .expect("the server answers")
        .text()
        .await
        .expect("a body");
    // A JSON body, or an SSE stream whose data line is the answer.
    let json = answer
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .unwrap_or(&answer);
    serde_json::from_str(json.trim()).unwrap_or_else(|_| panic!("not JSON-RPC: {answer}"))
}

fn task_id(answer: &Value) -> String {
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
    answer["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned()
}

fn starts(server: &RuntimeServer) -> usize {
    server
        .events()
        .iter()
        .filter(|event| *event == "gated started")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_under_one_key_gets_its_task_back_and_runs_once() {
    let server = RuntimeServer::in_memory();
    let url = serve_http(server.clone()).await;
    let key = Some(json!("key-1"));
    let first = task_id(&call(&url, ALICE, "gated", json!({"n": 1}), key.clone()).await);
    server.open_gate();
    // The same arguments in another order are the same call.
    let again = call(&url, ALICE, "gated", json!({"n": 1}), key.clone()).await;
    assert_eq!(task_id(&again), first, "the same task back");
    assert_eq!(starts(&server), 1, "the tool ran once");

    let other = call(&url, ALICE, "gated", json!({"n": 2}), key.clone()).await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    let message = other["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("idempotency key") && message.contains("another call"),
        "{message}"
    );
    let other_tool = call(&url, ALICE, "forever", json!({"n": 1}), key.clone()).await;
    assert_eq!(other_tool["error"]["code"], -32602, "{other_tool}");

    let bobs = task_id(&call(&url, BOB, "gated", json!({"n": 1}), key.clone()).await);
    assert_ne!(bobs, first, "a key is scoped to its principal");
    let fresh = task_id(&call(&url, ALICE, "gated", json!({"n": 1}), Some(json!("key-2"))).await);
    assert_ne!(fresh, first, "another key is another task");
    let unkeyed = task_id(&call(&url, ALICE, "gated", json!({"n": 1}), None).await);
    assert_ne!(unkeyed, first, "no key, no idempotency");
    assert_eq!(starts(&server), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_of_one_key_make_one_task_and_one_run() {
    let server = RuntimeServer::in_memory();
    let url = serve_http(server.clone()).await;
    let mut sends = Vec::new();
    for _ in 0..12 {
        let url = url.clone();
        sends.push(tokio::spawn(async move {
            task_id(&call(&url, ALICE, "gated", json!({}), Some(json!("race"))).await)
        }));
    }
    let mut ids = Vec::new();
    for send in sends {
        ids.push(send.await.expect("join"));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "one task: {ids:?}");
    // The winner's tool starts in the background; the losers' never do
    // (they were dropped untouched), so once one started, that is all.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while starts(&server) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the winner's tool starts");
    assert_eq!(starts(&server), 1, "one run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_done_in_its_first_step_is_not_run_again() {
    let server = RuntimeServer::in_memory();
    let url = serve_http(server).await;
    let first = call(&url, ALICE, "is_error", json!({}), Some(json!("k"))).await;
    let again = call(&url, ALICE, "is_error", json!({}), Some(json!("k"))).await;
    assert_eq!(task_id(&again), task_id(&first));
    assert_eq!(
        again["result"]["status"], "completed",
        "as it is now: {again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_not_one_is_refused() {
    let url = serve_http(RuntimeServer::in_memory()).await;
    for bad in [json!(""), json!("x".repeat(256)), json!("tab\t"), json!(42)] {
        let answer = call(&url, ALICE, "gated", json!({}), Some(bad.clone())).await;
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(IDEMPOTENCY_KEY_META), "{message}");
        assert!(message.contains("printable ASCII"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_is_not_counted_by_the_rate() {
    let rate = "1/min"
        .parse::<CreationRate>()
        .expect("rate")
        .with_burst(NonZeroU32::new(1).expect("one"));
    let runtime = runtime_on(MemoryStore::new())
        .with_rate_per_caller(Some(rate))
        .build();
    let url = serve_http(RuntimeServer::new(runtime)).await;
    let first = task_id(&call(&url, ALICE, "gated", json!({}), Some(json!("r"))).await);
    for _ in 0..3 {
        let again = call(&url, ALICE, "gated", json!({}), Some(json!("r"))).await;
        assert_eq!(task_id(&again), first, "{again}");
    }
    let new = call(&url, ALICE, "gated", json!({}), Some(json!("r2"))).await;
    assert!(new.get("error").is_some(), "a new call is counted: {new}");
}

/// A server with the `gated` tool behind a proxy that loses the first
/// `tools/call`'s answer, and a client of it, journaled in `journal`.
async fn behind_a_lossy_proxy(
    journal: Option<std::sync::Arc<mcp_tasks::client::journal::MemoryJournal>>,
) -> (
    RuntimeServer,
    std::sync::Arc<crate::support::lossy_proxy::LossyProxy>,
    mcp_tasks::TasksClient<crate::support::Handler>,
) {
    use rmcp::service::serve_client_with_lifecycle;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let server = RuntimeServer::in_memory();
    let url = serve_http(server.clone()).await;
    let upstream = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let (proxy, address) = crate::support::lossy_proxy::LossyProxy::start(upstream).await;
    let url = format!("http://{address}/mcp");
    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(ALICE);
    let transport = StreamableHttpClientTransport::from_config(config);
    let running = serve_client_with_lifecycle(
        crate::support::Handler::default(),
        transport,
        crate::support::lifecycle(),
    )
    .await
    .expect("connect through the proxy");
    let mut client = mcp_tasks::TasksClient::new(running);
    if let Some(journal) = journal {
        client = client.with_journal(journal, mcp_tasks::client::journal::ServerRef::Url(url));
    }
    (server, proxy, client)
}

/// A call that lost its answer stays in the journal as a pending call,
/// with its key; sent again under that key (as `mcp-tasks call --resume`
/// does, in another process) it finds the task the first send made, and
/// leaves the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journaled_call_keeps_its_key_until_answered_and_finds_its_task_again() {
    use mcp_tasks::client::journal::{Journal, MemoryJournal};
    use mcp_tasks::{CallOptions, CallResponse};

    let journal = std::sync::Arc::new(MemoryJournal::new());
    let (server, proxy, client) = behind_a_lossy_proxy(Some(journal.clone())).await;
    let lost = client
        .call_tool(
            "gated",
            json!({"n": 3}),
            CallOptions::default().with_resend_lost(false),
        )
        .await
        .expect_err("the answer is lost, and not sent again");
    assert!(lost.is_transport(), "{lost}");
    assert!(proxy.lost_one());
    let pending = journal.pending_calls().await.expect("pending calls");
    assert_eq!(pending.len(), 1, "journaled before it was sent");
    assert_eq!(pending[0].tool, "gated");
    assert_eq!(
        pending[0].arguments.as_ref().map(|a| a["n"].clone()),
        Some(json!(3))
    );
    assert!(
        journal.list().await.expect("list").is_empty(),
        "no task known yet"
    );

    let again = CallOptions::default().with_idempotency_key(&pending[0].key);
    let arguments = pending[0].arguments.clone();
    let CallResponse::Task(state) = client
        .call_tool("gated", arguments, again)
        .await
        .expect("sent again")
    else {
        panic!("a task")
    };
    let stored = server
        .runtime
        .store()
        .list_all(None, 10)
        .await
        .expect("list_all");
    assert_eq!(stored.len(), 1, "one task");
    assert_eq!(stored[0].id(), &state.id, "the one the first send made");
    assert!(
        journal.pending_calls().await.expect("pending").is_empty(),
        "answered"
    );
    let tasks = journal.list().await.expect("list");
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].task_id, state.id, "and its task journaled");
    assert_eq!(starts(&server), 1, "one run");
}

/// Through a proxy that loses the answer of the first `tools/call` (it
/// reaches the server, which makes the task; its answer never comes back),
/// our client sends the call again under the same key and gets the task
/// the first send made: one task, one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_whose_answer_was_lost_is_sent_again_and_finds_its_task() {
    use mcp_tasks::{AwaitOptions, CallOptions, CallResponse};

    let (server, proxy, client) = behind_a_lossy_proxy(None).await;
    let options = AwaitOptions::default().with_deadline(Some(std::time::Duration::from_secs(30)));
    let started = client
        .start_tool("gated", json!({"n": 7}), CallOptions::default(), &options)
        .await
        .expect("the call is sent again and answered");
    let CallResponse::Task(state) = started else {
        panic!("a task: {started:?}")
    };
    assert!(proxy.lost_one(), "the first answer was lost");
    assert_eq!(proxy.calls(), 2, "the call went through twice");
    let stored = server
        .runtime
        .store()
        .list_all(None, 10)
        .await
        .expect("list_all");
    assert_eq!(stored.len(), 1, "one task");
    assert_eq!(stored[0].id(), &state.id, "the one the first send made");
    server.open_gate();
    server.open_gate();
    let outcome = client.await_task(&state, &options).await.expect("await");
    assert!(
        matches!(outcome, mcp_tasks::TaskOutcome::Completed(_)),
        "{outcome:?}"
    );
    assert_eq!(starts(&server), 1, "one run");
}
