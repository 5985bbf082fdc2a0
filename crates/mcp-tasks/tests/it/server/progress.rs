//! `TaskContext::progress` heard by a real client: the status message of a
//! task (`tasks/get`), and `notifications/progress` for a caller that sent a
//! `progressToken`, on a synchronous call only (2026-07-28 tasks get none),
//! over Streamable HTTP and an in-process connection. The 2025-11-25 era's
//! tasks, whose token stays valid, are in `legacy_server.rs`. And a
//! cancelled task's message, which says who cancelled it instead of its
//! last progress.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::server::admin::Admin;
use mcp_tasks::store::{CANCELLED_BY_CALLER_MESSAGE, CANCELLED_BY_OPERATOR_MESSAGE};
use mcp_tasks::{
    CallOptions, CallResponse, ConnectOptions, Endpoint, TaskId, TaskOutcome, TaskStatus,
    TasksClient,
};
use rmcp::ClientHandler;
use rmcp::ServiceExt;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{NotificationContext, RoleClient, serve_client_with_lifecycle};
use serde_json::{Value, json};

use crate::support::runtime_server::serve_http;
use crate::support::{RuntimeServer, args, completed_text, lifecycle, options};

/// A client handler that keeps every progress notification it hears.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for Heard {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

impl Heard {
    /// `(token, progress, total)` of each notification heard so far.
    fn heard(&self) -> Vec<(String, f64, Option<f64>)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|params| {
                (
                    token_text(&params.progress_token),
                    params.progress,
                    params.total,
                )
            })
            .collect()
    }

    /// Waits (5 s at most) until `count` notifications have been heard.
    async fn until(&self, count: usize) -> Vec<(String, f64, Option<f64>)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.heard().len() < count && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.heard()
    }
}

fn token_text(token: &ProgressToken) -> String {
    match serde_json::to_value(token).unwrap() {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// A client of its own server over HTTP, and what it heard.
async fn over_http() -> (TasksClient<mcp_tasks::client::legacy::Handler>, Heard) {
    let heard = Heard::default();
    let url = serve_http(RuntimeServer::in_memory()).await;
    let client = TasksClient::connect(Endpoint::url(url), heard.clone(), ConnectOptions::default())
        .await
        .expect("connect over HTTP");
    (client, heard)
}

/// A client of its own server over an in-process pipe, and what it heard.
async fn in_process() -> (TasksClient<Heard>, Heard) {
    let heard = Heard::default();
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = RuntimeServer::in_memory().serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let running = serve_client_with_lifecycle(heard.clone(), client_io, lifecycle())
        .await
        .expect("connect in process");
    (TasksClient::new(running), heard)
}

/// A 2026-07-28 synchronous `counts` call of 3 steps posted as is, with
/// `_meta` extended by `meta`: the answer's `Content-Type` and body.
async fn post_counts(url: &str, meta: Value) -> (String, String) {
    let answer = post_counts_as(url, meta, "counts").await;
    (answer.header("content-type"), answer.body)
}

/// An answer's status, headers and body.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }
}

/// [`post_counts`] with `mcp_name` as its `Mcp-Name` header: the plain
/// name takes the recipe's fast path, the Base64 form of it rmcp's own.
async fn post_counts_as(url: &str, meta: Value, mcp_name: &str) -> Answer {
    let arguments = json!({"n": 3, "ms": 5, "sync": true});
    post_counts_with(url, arguments, meta, mcp_name).await
}

/// A 2026-07-28 `counts` call of `arguments`, as [`post_counts_as`] posts it.
async fn post_counts_with(url: &str, arguments: Value, meta: Value, mcp_name: &str) -> Answer {
    let mut call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "counts", "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    for (key, value) in meta.as_object().unwrap() {
        call["params"]["_meta"][key] = value.clone();
    }
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", mcp_name)
        .body(call.to_string())
        .send()
        .await
        .expect("the server answers");
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap(),
    }
}

/// `counts` as rmcp's service reads the `Mcp-Name` header in Base64: the
/// recipe's fast path leaves such a call to rmcp.
const COUNTS_IN_BASE64: &str = "=?base64?Y291bnRz?=";

/// The JSON-RPC messages of an answer: one JSON body, or SSE `data:` lines.
fn messages(body: &str) -> Vec<Value> {
    match serde_json::from_str(body) {
        Ok(one) => vec![one],
        Err(_) => body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter(|data| !data.trim().is_empty())
            .map(|data| serde_json::from_str(data.trim()).expect("an SSE event of JSON"))
            .collect(),
    }
}

#[tokio::test]
async fn a_synchronous_call_over_http_hears_progress_only_when_it_asks_for_it() {
    let url = serve_http(RuntimeServer::in_memory()).await;
    // No token: the answer alone, as one JSON body.
    let (kind, body) = post_counts(&url, json!({})).await;
    let plain = messages(&body);
    assert!(kind.starts_with("application/json"), "{kind}: {body}");
    assert_eq!(plain.len(), 1, "{body}");
    assert_eq!(plain[0]["result"]["content"][0]["text"], "counted 3");
    // A token: one notification per step, in order, on the call's own
    // stream before its answer.
    let (kind, body) = post_counts(&url, json!({"progressToken": "p-1"})).await;
    assert!(kind.starts_with("text/event-stream"), "{kind}: {body}");
    let streamed = messages(&body);
    let notes: Vec<Value> = streamed[..streamed.len() - 1].to_vec();
    assert_eq!(
        notes,
        (1..=3)
            .map(
                |done| json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p-1", "progress": done as f64, "total": 3.0}})
            )
            .collect::<Vec<_>>(),
        "{body}"
    );
    let answer = streamed.last().unwrap();
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["content"][0]["text"], "counted 3");
}

/// A call with a `progressToken` that the recipe's fast path answers
/// (plain `Mcp-Name`) gets the very answer rmcp's own path gives (the
/// Base64 one): the same status, the same event stream's headers and
/// bytes, token by token; and a call whose answer comes before any
/// progress (a task, 0 steps) one JSON body from both.
#[tokio::test]
async fn a_call_with_a_progress_token_is_answered_as_rmcps_own_path_answers_it() {
    let url = serve_http(RuntimeServer::in_memory()).await;
    for token in [json!("p-1"), json!(42)] {
        let meta = json!({"progressToken": token});
        let fast = post_counts_as(&url, meta.clone(), "counts").await;
        let rmcp = post_counts_as(&url, meta, COUNTS_IN_BASE64).await;
        assert_eq!(fast.status, 200, "{}", fast.body);
        assert_eq!((fast.status, &fast.body), (rmcp.status, &rmcp.body));
        for header in ["content-type", "cache-control", "x-accel-buffering"] {
            assert_eq!(fast.header(header), rmcp.header(header), "{header}");
        }
        assert!(fast.header("content-type").starts_with("text/event-stream"));
        assert_eq!(messages(&fast.body).len(), 4, "{}", fast.body);
    }
    // No step, so no notification: the answer alone, as JSON.
    let call = |name| {
        post_counts_with(
            &url,
            json!({"n": 0, "sync": true}),
            json!({"progressToken": 5}),
            name,
        )
    };
    let seen = |answer: Answer| (answer.status, answer.header("content-type"), answer.body);
    let fast = seen(call("counts").await);
    assert_eq!(fast, seen(call(COUNTS_IN_BASE64).await));
    assert_eq!(fast.1, "application/json", "{}", fast.2);
}

/// Calls in flight at once with the same `progressToken` (rmcp's clients
/// each count theirs from 0) each hear their own progress and answer,
/// never another's: the fast path holds a token for one call at a time.
#[tokio::test]
async fn calls_in_flight_with_the_same_token_each_hear_only_their_own_progress() {
    let url = serve_http(RuntimeServer::in_memory()).await;
    let calls = (0..8).map(|_| post_counts_as(&url, json!({"progressToken": 0}), "counts"));
    for answer in futures::future::join_all(calls).await {
        let streamed = messages(&answer.body);
        assert_eq!(answer.status, 200, "{}", answer.body);
        let steps: Vec<Value> = streamed
            .iter()
            .map(|m| m["params"]["progress"].clone())
            .collect();
        assert_eq!(
            steps,
            [json!(1.0), json!(2.0), json!(3.0), Value::Null],
            "{}",
            answer.body
        );
        assert_eq!(streamed[3]["result"]["content"][0]["text"], "counted 3");
    }
}

#[tokio::test]
async fn a_synchronous_call_of_an_rmcp_client_hears_its_progress() {
    // rmcp's client puts a progress token on every request it sends.
    let (client, heard) = over_http().await;
    synchronous_progress("http", &client, &heard).await;
    let (client, heard) = in_process().await;
    synchronous_progress("in process", &client, &heard).await;
}

async fn synchronous_progress<H: ClientHandler>(
    transport: &str,
    client: &TasksClient<H>,
    heard: &Heard,
) {
    let answer = client
        .call_tool(
            "counts",
            args(json!({"n": 3, "ms": 5, "sync": true})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    let CallResponse::Complete(result) = answer else {
        panic!("{transport}: a synchronous answer: {answer:?}")
    };
    assert_eq!(result.content[0].as_text().unwrap().text, "counted 3");
    let heard = heard.until(3).await;
    let token = heard
        .first()
        .map(|(token, ..)| token.clone())
        .unwrap_or_default();
    assert_eq!(
        heard,
        (1..=3)
            .map(|done| (token.clone(), done as f64, Some(3.0)))
            .collect::<Vec<_>>(),
        "{transport}"
    );
}

#[tokio::test]
async fn a_task_shows_progress_as_its_status_message_and_sends_no_notification() {
    let (client, heard) = over_http().await;
    task_progress("http", &client, &heard).await;
    let (client, heard) = in_process().await;
    task_progress("in process", &client, &heard).await;
}

async fn task_progress<H: ClientHandler>(transport: &str, client: &TasksClient<H>, heard: &Heard) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = seen.clone();
    let watched = options().with_observer(move |state| {
        kept.lock().unwrap().extend(state.status_message.clone());
    });
    // rmcp's client sends a progress token with the call: no matter.
    let started = client
        .call_tool(
            "counts",
            args(json!({"n": 3, "ms": 60})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    let CallResponse::Task(task) = started else {
        panic!("{transport}: a task: {started:?}")
    };
    let outcome = client.await_task(&task, &watched).await.unwrap();
    assert_eq!(completed_text(&outcome), "counted 3");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|message| message == "2 of 3"),
        "{transport}: the wait read the steps: {seen:?}"
    );
    let got = client.get(&task.id).await.unwrap();
    assert_eq!(got.status_message.as_deref(), Some("3 of 3"), "{transport}");
    // A synchronous call after it hears its own: the task's would have
    // come before them (the extension has no progress for tasks).
    client
        .call_tool(
            "counts",
            args(json!({"n": 1, "sync": true})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    let heard = heard.until(1).await;
    assert_eq!(
        heard.len(),
        1,
        "{transport}: nothing for the task: {heard:?}"
    );
    assert_eq!((heard[0].1, heard[0].2), (1.0, Some(1.0)), "{transport}");
}

/// Reads task `id` until its status message is `wanted` (5 s at most).
async fn until_message<H: ClientHandler>(client: &TasksClient<H>, id: &TaskId, wanted: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let state = client.get(id).await.unwrap();
        if state.status_message.as_deref() == Some(wanted) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{state:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_cancelled_task_says_who_cancelled_it_instead_of_its_last_progress() {
    let server = RuntimeServer::in_memory();
    let admin = Admin::of_runtime(server.runtime.clone()).await.unwrap();
    let url = serve_http(server).await;
    let client = TasksClient::connect(Endpoint::url(url), (), ConnectOptions::default())
        .await
        .unwrap();
    // A long count, as a task.
    let start = || async {
        let long = args(json!({"n": 1000, "ms": 20}));
        match client
            .call_tool("counts", long, CallOptions::default())
            .await
        {
            Ok(CallResponse::Task(task)) => task,
            other => panic!("a task: {other:?}"),
        }
    };
    // By its caller: tasks/cancel.
    let task = start().await;
    until_message(&client, &task.id, "2 of 1000").await;
    let outcome = client.cancel_and_wait(&task.id, &options()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    let got = client.get(&task.id).await.unwrap();
    assert_eq!(got.status, TaskStatus::Cancelled);
    assert_eq!(
        got.status_message.as_deref(),
        Some(CANCELLED_BY_CALLER_MESSAGE)
    );
    // By an operator (`mcp-tasks admin cancel`), named by its hash.
    let task = start().await;
    until_message(&client, &task.id, "2 of 1000").await;
    admin.cancel(&admin.hasher().hash(&task.id)).await.unwrap();
    let outcome = client.await_task(&task.id, &options()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    let got = client.get(&task.id).await.unwrap();
    assert_eq!(
        got.status_message.as_deref(),
        Some(CANCELLED_BY_OPERATOR_MESSAGE)
    );
}
