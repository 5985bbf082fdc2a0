//! The 2025-11-25 era over real Streamable HTTP on 127.0.0.1: a scripted
//! server with a stateful session answers every POST either with a plain
//! JSON body (as the TypeScript SDK's `enableJsonResponse` does) or with an
//! SSE stream, and the client, connected with `TasksClient::connect` (the
//! legacy handler and its tap on the transport's `reqwest::Client`), runs
//! the same tasks alike both ways. (The same against
//! the real TypeScript SDK runs in `interop/ts-sdk`: it needs the npm install.)

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use mcp_tasks::error::ProtocolViolation;
use mcp_tasks::{
    CallOptions, CallResponse, ConnectOptions, Endpoint, Era, Error, TaskOutcome, TaskStatus,
    TasksClient, Ttl,
};
use serde_json::{Value, json};

use crate::support::{Handler, completed_text, options};

const SESSION: &str = "session-1";

/// How the server answers a POST that carries a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answers {
    Json,
    Sse,
}

#[derive(Default)]
struct Seen {
    /// The messages received, in order.
    messages: Vec<Value>,
    /// The Content-Type of every answer to a request.
    content_types: HashSet<&'static str>,
    /// `tasks/get`s answered, by task.
    gets: HashMap<String, usize>,
    cancelled: HashSet<String>,
    created: usize,
    /// `tasks/result`s answered with something that is not JSON-RPC.
    garbled: usize,
}

#[derive(Clone)]
struct Scripted {
    answers: Answers,
    seen: Arc<Mutex<Seen>>,
}

fn task(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 30000, "pollInterval": 20})
}

/// The status of a task after this many `tasks/get`: working twice, then
/// ended (`fails` tasks with a tool error), unless cancelled.
fn status_of(seen: &Seen, id: &str) -> &'static str {
    if seen.cancelled.contains(id) {
        "cancelled"
    } else if seen.gets.get(id).copied().unwrap_or(0) < 2 {
        "working"
    } else if id.starts_with("fails") {
        "failed"
    } else {
        "completed"
    }
}

fn payload(id: &str) -> Value {
    let mut result = if id.starts_with("fails") {
        json!({"content": [{"type": "text", "text": "it broke"}], "isError": true})
    } else {
        json!({"content": [{"type": "text", "text": "researched"}]})
    };
    result["_meta"] = json!({"io.modelcontextprotocol/related-task": {"taskId": id}});
    result
}

impl Scripted {
    /// The result (or error) for a request.
    async fn answer(&self, message: &Value) -> Value {
        let method = message["method"].as_str().unwrap_or_default();
        let params = &message["params"];
        let id = params["taskId"].as_str().unwrap_or_default().to_owned();
        let result = match method {
            "initialize" => {
                json!({"protocolVersion": "2025-11-25", "serverInfo": {"name": "scripted-http", "version": "0"},
                "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}})
            }
            "tools/list" => json!({"tools": [
                {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
                {"name": "fails", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                {"name": "garbled", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
                {"name": "echo", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "forbidden"}}]}),
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or_default();
                match (name, params.get("task").is_some()) {
                    ("echo", false) => json!({"content": [{"type": "text", "text": "echo: hi"}]}),
                    ("research" | "fails" | "garbled", true) => {
                        let mut seen = self.seen.lock().unwrap();
                        seen.created += 1;
                        json!({"task": task(&format!("{name}-{}", seen.created), "working")})
                    }
                    _ => return json!({"code": -32601, "message": "wrong form of call"}),
                }
            }
            "tasks/get" => {
                let mut seen = self.seen.lock().unwrap();
                *seen.gets.entry(id.clone()).or_default() += 1;
                task(&id, status_of(&seen, &id))
            }
            "tasks/cancel" => {
                let mut seen = self.seen.lock().unwrap();
                seen.cancelled.insert(id.clone());
                task(&id, "cancelled")
            }
            "tasks/result" => loop {
                let status = status_of(&self.seen.lock().unwrap(), &id);
                match status {
                    "completed" | "failed" => break payload(&id),
                    "cancelled" => return json!({"code": -32602, "message": "cancelled"}),
                    _ => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            },
            _ => return json!({"code": -32601, "message": "Method not found"}),
        };
        json!({"result": result})
    }
}

async fn post(State(server): State<Scripted>, headers: HeaderMap, body: Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap();
    server.seen.lock().unwrap().messages.push(message.clone());
    let method = message["method"].as_str();
    if method == Some("server/discover") {
        // What a stateful TypeScript SDK server says to a request before `initialize`.
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}}),
        );
    }
    if method != Some("initialize")
        && headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) != Some(SESSION)
    {
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "no session"}}),
        );
    }
    if message.get("id").is_none() || method.is_none() {
        return Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Body::empty())
            .unwrap();
    }
    if method == Some("tasks/result")
        && message["params"]["taskId"]
            .as_str()
            .is_some_and(|id| id.starts_with("garbled"))
    {
        // What a proxy in the way might answer: not a JSON-RPC message.
        server.seen.lock().unwrap().garbled += 1;
        return Response::builder()
            .header("content-type", "text/html")
            .header("mcp-session-id", SESSION)
            .body(Body::from("<html>502 Bad Gateway</html>"))
            .unwrap();
    }
    let mut answer = json!({"jsonrpc": "2.0", "id": message["id"]});
    let outcome = server.answer(&message).await;
    match outcome.get("result") {
        Some(result) => answer["result"] = result.clone(),
        None => answer["error"] = outcome,
    }
    let (content_type, body) = match server.answers {
        Answers::Json => ("application/json", answer.to_string()),
        Answers::Sse => (
            "text/event-stream",
            format!("event: message\ndata: {answer}\n\n"),
        ),
    };
    server
        .seen
        .lock()
        .unwrap()
        .content_types
        .insert(content_type);
    Response::builder()
        .header("content-type", content_type)
        .header("mcp-session-id", SESSION)
        .body(Body::from(body))
        .unwrap()
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Serves the scripted server on a loopback port; returns its URL.
async fn serve(server: Scripted) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(post)
                .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
                .delete(|| async { StatusCode::OK }),
        )
        .with_state(server);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn tasks_run_alike_over_json_bodies_and_over_sse() {
    for answers in [Answers::Json, Answers::Sse] {
        let server = Scripted {
            answers,
            seen: Arc::default(),
        };
        let url = serve(server.clone()).await;
        // One call: server/discover is refused, initialize succeeds, and the
        // legacy handler and tap are in place.
        let client = TasksClient::connect(
            Endpoint::url(url),
            Handler::default(),
            ConnectOptions::default(),
        )
        .await
        .expect("the client connects");
        assert_eq!(client.era(), Era::Legacy, "{answers:?}");
        assert!(
            !client.can_listen(),
            "{answers:?}: no subscriptions/listen after initialize"
        );
        assert_eq!(
            client.task_methods(),
            Some(vec![
                "tasks/get",
                "tasks/result",
                "tasks/list",
                "tasks/cancel"
            ]),
            "{answers:?}: capabilities.tasks was read"
        );

        // A required tool runs as a task, with the ttl and pollInterval the server gave.
        let CallResponse::Task(state) = client
            .call_tool("research", (), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("{answers:?}: research should be a task");
        };
        assert_eq!(state.ttl, Some(Ttl::Limited(Duration::from_secs(30))));
        assert_eq!(state.poll_interval, Some(Duration::from_millis(20)));
        let outcome = client.await_task(state, &options()).await.unwrap();
        assert_eq!(completed_text(&outcome), "researched", "{answers:?}");

        // An optional tool's isError payload is a failed task.
        let CallResponse::Task(state) = client
            .call_tool("fails", (), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("{answers:?}: fails should be a task");
        };
        match client.await_task(state, &options()).await.unwrap() {
            TaskOutcome::Failed(failure) => assert_eq!(failure.state.status, TaskStatus::Failed),
            other => panic!("{answers:?}: expected a failure, got {other:?}"),
        }

        // A forbidden tool is a plain call.
        let CallResponse::Complete(result) = client
            .call_tool("echo", (), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("{answers:?}: echo should be plain");
        };
        assert_eq!(result.content[0].as_text().unwrap().text, "echo: hi");

        // Cancel: tasks/cancel answers with the cancelled task.
        let CallResponse::Task(state) = client
            .call_tool("research", (), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("{answers:?}: research should be a task");
        };
        client.cancel(&state.id).await.unwrap();
        assert_eq!(
            client.get(&state.id).await.unwrap().status,
            TaskStatus::Cancelled
        );

        let seen = server.seen.lock().unwrap();
        let calls: Vec<(String, bool)> = seen
            .messages
            .iter()
            .filter(|m| m["method"] == "tools/call")
            .map(|m| {
                (
                    m["params"]["name"].as_str().unwrap().to_owned(),
                    m["params"].get("task").is_some(),
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("research".to_owned(), true),
                ("fails".to_owned(), true),
                ("echo".to_owned(), false),
                ("research".to_owned(), true)
            ],
            "{answers:?}"
        );
        let expected = match answers {
            Answers::Json => "application/json",
            Answers::Sse => "text/event-stream",
        };
        assert_eq!(
            seen.content_types,
            HashSet::from([expected]),
            "{answers:?}: every request was answered so"
        );
    }
}

#[tokio::test]
async fn a_tasks_result_answered_with_garbage_ends_the_wait_after_three_answers() {
    let server = Scripted {
        answers: Answers::Json,
        seen: Arc::default(),
    };
    let url = serve(server.clone()).await;
    let client = TasksClient::connect(
        Endpoint::url(url),
        Handler::default(),
        ConnectOptions::default(),
    )
    .await
    .expect("the client connects");
    let CallResponse::Task(state) = client
        .call_tool("garbled", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("garbled should be a task");
    };
    let outcome = client.await_task(state, &options()).await;
    let Err(Error::Protocol {
        violation: ProtocolViolation::UnusableAnswers { method, attempts },
        ..
    }) = &outcome
    else {
        panic!("a protocol error expected, got {outcome:?}")
    };
    assert_eq!((*method, *attempts), ("tasks/result", 3));
    assert_eq!(server.seen.lock().unwrap().garbled, 3);
}
