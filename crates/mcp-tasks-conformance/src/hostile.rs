//! A hostile task server, for the reliability tests of the client: it
//! speaks just enough MCP 2026-07-28 (`server/discover`, `tools/list` with
//! one tool, a `tools/call` that makes a task, `tasks/update`, `tasks/cancel`
//! and `ping` acks) and answers
//! `tasks/get` as one [`Scenario`] says, over Streamable HTTP
//! ([`serve_http`]) or stdio ([`serve_stdio`], the `hostile-server` binary).
//! It counts every request by method, so a test can assert how many the
//! client sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The task id this server hands out.
pub const TASK_ID: &str = "hostile-task-0001";

/// How `tasks/get` misbehaves.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Scenario {
    /// Working forever, suggesting this `pollIntervalMs` (any JSON: 0, -5, 120.7, 1e15, "x").
    PollInterval(Value),
    /// Completed with a result, then working again, then completed again.
    Flap,
    /// Completed, but never with a `result`.
    TerminalWithoutPayload,
    /// HTTP 200 with a body that is not JSON (stdio: a line that is not JSON).
    NotJson,
    /// A result with a `resultType` no one knows.
    UnknownResultType,
    /// `input_required` with the same request, whatever the answer.
    InputForever,
    /// `input_required` under one key, `working` after the answer, then the same key again.
    KeysReused,
    /// No answer to `tasks/get`, ever.
    NeverAnswers,
    /// The first `tasks/get` is answered `working`; then the connection drops
    /// (HTTP: the answer is cut off until `recover_after` requests have
    /// failed, then the task completes; stdio: the process exits).
    Drop {
        /// How many `tasks/get` fail before the task is reachable again.
        recover_after: usize,
    },
    /// Completed with a result of this many bytes of text.
    BigResult(usize),
    /// A JSON answer whose result text holds bytes that are not UTF-8.
    InvalidUtf8,
}

impl Scenario {
    /// Reads a scenario from its name, as the `hostile-server` binary takes it
    /// (`poll=VALUE`, `flap`, `terminal-without-payload`, `not-json`,
    /// `unknown-result-type`, `input-forever`, `keys-reused`, `never-answers`,
    /// `drop=N`, `big-result=BYTES`, `invalid-utf8`).
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.split_once('=') {
            Some(("poll", value)) => Self::PollInterval(serde_json::from_str(value).ok()?),
            Some(("drop", n)) => Self::Drop {
                recover_after: n.parse().ok()?,
            },
            Some(("big-result", n)) => Self::BigResult(n.parse().ok()?),
            Some(_) => return None,
            None => match name {
                "flap" => Self::Flap,
                "terminal-without-payload" => Self::TerminalWithoutPayload,
                "not-json" => Self::NotJson,
                "unknown-result-type" => Self::UnknownResultType,
                "input-forever" => Self::InputForever,
                "keys-reused" => Self::KeysReused,
                "never-answers" => Self::NeverAnswers,
                "invalid-utf8" => Self::InvalidUtf8,
                _ => return None,
            },
        })
    }
}

/// What the server does with one request.
#[derive(Debug)]
enum Answer {
    /// A JSON-RPC result.
    Result(Value),
    /// These bytes as the whole answer (HTTP body, or one stdio line), and
    /// whether they claim to be JSON (over HTTP, the content type).
    Raw(Vec<u8>, bool),
    /// Nothing, ever.
    Silence,
    /// Cut the connection (HTTP) or end the process (stdio).
    Drop,
}

/// The hostile server: its scenario and what it received. Clones share the count.
#[derive(Debug, Clone)]
pub struct Hostile {
    scenario: Scenario,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Hostile {
    /// A server for `scenario`.
    pub fn new(scenario: Scenario) -> Self {
        Self {
            scenario,
            counts: Arc::default(),
        }
    }

    /// How many `method` requests it received.
    pub fn count(&self, method: &str) -> usize {
        self.lock().get(method).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the request and decides its answer; `n` is 1 for the first of its method.
    fn answer(&self, method: &str) -> Answer {
        let n = {
            let mut counts = self.lock();
            let count = counts.entry(method.to_owned()).or_default();
            *count += 1;
            *count
        };
        match method {
            "server/discover" => Answer::Result(json!({
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "0"}}})),
            "tools/call" => Answer::Result(with_type(task("working", json!({})), "task")),
            "tasks/update" | "tasks/cancel" | "ping" => {
                Answer::Result(json!({"resultType": "complete"}))
            }
            // One tool, so that a gateway can serve it.
            "tools/list" => Answer::Result(json!({"resultType": "complete", "tools": [
                {"name": "job", "inputSchema": {"type": "object"}}]})),
            "tasks/get" => self.get(n),
            _ => Answer::Raw(Vec::new(), true),
        }
    }

    /// The answer to the `n`th `tasks/get`.
    fn get(&self, n: usize) -> Answer {
        let got =
            |status: &str, extra: Value| Answer::Result(with_type(task(status, extra), "complete"));
        let done = || json!({"result": text_result("done")});
        match &self.scenario {
            Scenario::PollInterval(interval) => got("working", json!({"pollIntervalMs": interval})),
            Scenario::Flap => match n % 3 {
                1 => got("completed", done()),
                2 => got("working", json!({"pollIntervalMs": 50})),
                _ => got("completed", json!({"result": text_result("again")})),
            },
            Scenario::TerminalWithoutPayload => got("completed", json!({"pollIntervalMs": 50})),
            Scenario::NotJson => Answer::Raw(b"<html>surprise</html>".to_vec(), false),
            Scenario::UnknownResultType => {
                Answer::Result(with_type(task("working", json!({})), "later"))
            }
            Scenario::InputForever => got("input_required", name_request("name")),
            Scenario::KeysReused => {
                if n % 2 == 1 {
                    got("input_required", name_request("name"))
                } else {
                    got("working", json!({"pollIntervalMs": 50}))
                }
            }
            Scenario::NeverAnswers => Answer::Silence,
            Scenario::Drop { recover_after } => match n {
                1 => got("working", json!({"pollIntervalMs": 50})),
                n if n <= recover_after + 1 => Answer::Drop,
                _ => got("completed", done()),
            },
            Scenario::BigResult(bytes) => got(
                "completed",
                json!({"result": text_result(&"x".repeat(*bytes))}),
            ),
            Scenario::InvalidUtf8 => {
                let mut body =
                    br#"{"jsonrpc":"2.0","id":ID,"result":{"resultType":"complete","taskId":""#
                        .to_vec();
                body.extend_from_slice(TASK_ID.as_bytes());
                body.extend_from_slice(br#"","status":"working","statusMessage":"bad "#);
                body.extend_from_slice(&[0xff, 0xfe, 0xc3]);
                body.extend_from_slice(br#"","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttlMs":null}}"#);
                Answer::Raw(body, true)
            }
        }
    }
}

fn task(status: &str, extra: Value) -> Value {
    let mut task = json!({
        "taskId": TASK_ID, "status": status,
        "createdAt": "2026-07-28T00:00:00Z", "lastUpdatedAt": "2026-07-28T00:00:00Z",
        "ttlMs": 60000, "pollIntervalMs": 50
    });
    if let (Value::Object(task), Value::Object(extra)) = (&mut task, extra) {
        task.extend(extra);
    }
    task
}

fn with_type(mut value: Value, result_type: &str) -> Value {
    value["resultType"] = json!(result_type);
    value
}

fn text_result(text: &str) -> Value {
    json!({"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": false})
}

fn name_request(key: &str) -> Value {
    json!({"pollIntervalMs": 50, "inputRequests": {key: {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}})
}

/// What goes back for one message.
enum Reply {
    /// These bytes, and whether they claim to be JSON.
    Bytes(Vec<u8>, bool),
    /// Nothing, ever.
    Silence,
    /// Cut the connection, or end the process.
    Drop,
}

/// The reply to `message`; `None` for a notification.
fn respond(hostile: &Hostile, message: &Value) -> Option<Reply> {
    let id = message.get("id")?;
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(match hostile.answer(method) {
        Answer::Result(result) => Reply::Bytes(
            json!({"jsonrpc": "2.0", "id": id, "result": result})
                .to_string()
                .into_bytes(),
            true,
        ),
        // Raw answers keep an `ID` placeholder for the request's id.
        Answer::Raw(bytes, json) => Reply::Bytes(replace_id(&bytes, id), json),
        Answer::Silence => Reply::Silence,
        Answer::Drop => Reply::Drop,
    })
}

fn replace_id(bytes: &[u8], id: &Value) -> Vec<u8> {
    let placeholder = b"\"id\":ID";
    match bytes
        .windows(placeholder.len())
        .position(|w| w == placeholder)
    {
        Some(at) => {
            let mut out = bytes[..at].to_vec();
            out.extend_from_slice(format!("\"id\":{id}").as_bytes());
            out.extend_from_slice(&bytes[at + placeholder.len()..]);
            out
        }
        None => bytes.to_vec(),
    }
}

/// Serves `hostile` over HTTP at `/mcp` on `listener` until the process ends.
pub async fn serve_http(
    hostile: Hostile,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let router = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |body: Bytes| {
            let hostile = hostile.clone();
            async move { http_answer(&hostile, &body).await }
        }),
    );
    axum::serve(listener, router).await
}

async fn http_answer(hostile: &Hostile, body: &[u8]) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return status(400);
    };
    match respond(hostile, &message) {
        None => status(202),
        Some(Reply::Bytes(bytes, json)) => {
            let mut response = Response::new(Body::from(bytes));
            let content_type = if json {
                "application/json"
            } else {
                "text/html"
            };
            response.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static(content_type),
            );
            response
        }
        Some(Reply::Silence) => std::future::pending().await,
        // A body that fails mid-way: hyper cuts the connection.
        Some(Reply::Drop) => Response::new(Body::from_stream(futures::stream::once(async {
            Err::<Bytes, _>(std::io::Error::other(
                "the hostile server drops the connection",
            ))
        }))),
    }
}

fn status(code: u16) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = axum::http::StatusCode::from_u16(code).unwrap_or_default();
    response
}

/// Serves `hostile` on stdin and stdout, one JSON-RPC message a line, until
/// stdin closes (or a [`Scenario::Drop`] ends the process).
pub async fn serve_stdio(hostile: Hostile) -> std::io::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match respond(&hostile, &message) {
            None | Some(Reply::Silence) => {}
            Some(Reply::Bytes(mut bytes, _)) => {
                bytes.push(b'\n');
                stdout.write_all(&bytes).await?;
                stdout.flush().await?;
            }
            Some(Reply::Drop) => std::process::exit(0),
        }
    }
    Ok(())
}
