//! A scripted MCP server over an in-process tokio duplex: raw JSON-RPC lines,
//! so that tests can send what no real server would (hostile intervals,
//! flapping statuses, malformed tasks). Every message the client sends is
//! recorded with the (paused) tokio time it arrived at.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::client::{LineCheck, ListenChannel};
use mcp_tasks::{TaskId, TasksClient};
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use crate::Handler;

/// What the script answers to one request.
#[allow(dead_code)]
pub enum Reply {
    /// A JSON-RPC result.
    Result(Value),
    /// A JSON-RPC error `{code, message, data?}`.
    Error(Value),
    /// No answer at all.
    Silence,
    /// These messages instead of an answer, with every string `"$id"`
    /// in them replaced by the request's id (a listen stream: its
    /// acknowledgement, notifications, perhaps its result).
    Notify(Vec<Value>),
    /// These lines as they are, with every `$id` in them replaced by the
    /// request's id as JSON: garbage, or garbage then the answer.
    Lines(Vec<String>),
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub message: Value,
}

impl Received {
    pub fn method(&self) -> &str {
        self.message["method"].as_str().unwrap_or_default()
    }
    pub fn params(&self) -> &Value {
        &self.message["params"]
    }
}

type Script = Box<dyn FnMut(&str, &Value) -> Reply + Send>;

/// The server's log of received messages.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Received>>>);

impl Log {
    /// Records a message the server received, at the current (paused) time.
    pub fn push(&self, message: Value) {
        self.0.lock().unwrap().push(Received {
            at: Instant::now(),
            message,
        });
    }
    pub fn all(&self) -> Vec<Received> {
        self.0.lock().unwrap().clone()
    }
    pub fn of(&self, method: &str) -> Vec<Received> {
        self.all()
            .into_iter()
            .filter(|r| r.method() == method)
            .collect()
    }
    /// The gaps between successive `method` requests, and from `start` to the first.
    pub fn gaps(&self, method: &str, start: Instant) -> Vec<Duration> {
        let mut last = start;
        self.of(method)
            .into_iter()
            .map(|r| {
                let gap = r.at - last;
                last = r.at;
                gap
            })
            .collect()
    }
}

/// The discover result of a server that supports the extension (or not).
pub fn discover_result(tasks: bool) -> Value {
    let extensions = if tasks {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    json!({
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "extensions": extensions},
        "ttlMs": 0, "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "0"}}
    })
}

/// A task object in wire shape, with `extra` fields merged over the defaults.
pub fn task(status: &str, extra: Value) -> Value {
    let mut base = json!({
        "taskId": "task-secret-1", "status": status,
        "createdAt": "2026-07-28T10:30:00Z", "lastUpdatedAt": "2026-07-28T10:30:00Z",
        "ttlMs": 60000, "pollIntervalMs": 1000
    });
    if let (Value::Object(base), Value::Object(extra)) = (&mut base, extra) {
        base.extend(extra);
    }
    base
}

/// A `tasks/get` result.
pub fn got(status: &str, extra: Value) -> Reply {
    let mut value = task(status, extra);
    value["resultType"] = json!("complete");
    Reply::Result(value)
}

/// A `CreateTaskResult`.
pub fn created(extra: Value) -> Reply {
    let mut value = task("working", extra);
    value["resultType"] = json!("task");
    Reply::Result(value)
}

/// The empty ack of `tasks/update` and `tasks/cancel`.
pub fn ack() -> Reply {
    Reply::Result(json!({"resultType": "complete"}))
}

/// A text tool result.
pub fn text_result(text: &str) -> Value {
    json!({"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": false})
}

/// An elicitation form asking for a name.
pub fn name_form() -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}})
}

/// Starts the scripted server and a client connected to it (discover lifecycle).
pub async fn connect(
    handler: Handler,
    script: impl FnMut(&str, &Value) -> Reply + Send + 'static,
) -> (TasksClient<Handler>, Log) {
    connect_with(handler, discover_result(true), script).await
}

/// Starts the scripted server with `discover` as its `server/discover`
/// result: the client's end of the pipe, and the server's log.
fn start(
    script: impl FnMut(&str, &Value) -> Reply + Send + 'static,
    discover: Value,
) -> (tokio::io::DuplexStream, Log) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let log = Log::default();
    tokio::spawn(serve(server_io, Box::new(script), discover, log.clone()));
    (client_io, log)
}

/// Like [`connect`] with a chosen `server/discover` result; `Value::Null`
/// makes an initialize-era server (discover is -32601, the script answers
/// `initialize`) and the client falls back to `initialize`.
pub async fn connect_with<H: rmcp::ClientHandler>(
    handler: H,
    discover: Value,
    script: impl FnMut(&str, &Value) -> Reply + Send + 'static,
) -> (TasksClient<H>, Log) {
    let (client_io, log) = start(script, discover);
    let running = serve_client_with_lifecycle(
        handler,
        client_io,
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    )
    .await
    .expect("the client connects to the scripted server");
    (TasksClient::new(running), log)
}

/// Like [`connect`], with the client's reader in a listen channel.
pub async fn connect_listening(
    handler: Handler,
    script: impl FnMut(&str, &Value) -> Reply + Send + 'static,
) -> (TasksClient<Handler>, Log) {
    let (client_io, log) = start(script, discover_result(true));
    let (read, write) = tokio::io::split(client_io);
    let (channel, read) = ListenChannel::stdio(read);
    let running = serve_client_with_lifecycle(
        handler,
        (read, write),
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("the client connects to the scripted server");
    (TasksClient::new(running).with_listen(channel), log)
}

/// Like [`connect`], with a [`LineCheck`] on the client's reader: the
/// client hears of the lines rmcp drops.
pub async fn connect_checked(
    handler: Handler,
    script: impl FnMut(&str, &Value) -> Reply + Send + 'static,
) -> (TasksClient<Handler>, Log) {
    let (client_io, log) = start(script, discover_result(true));
    let (read, write) = tokio::io::split(client_io);
    let (check, read) = LineCheck::stdio(read);
    let running = serve_client_with_lifecycle(handler, (read, write), crate::lifecycle())
        .await
        .expect("the client connects to the scripted server");
    (TasksClient::new(running).with_line_check(check), log)
}

/// `value` with every string `"$id"` replaced by `id`.
fn with_id(value: &Value, id: &Value) -> Value {
    match value {
        Value::String(text) if text == "$id" => id.clone(),
        Value::Array(items) => Value::Array(items.iter().map(|item| with_id(item, id)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, item)| (key.clone(), with_id(item, id)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn serve(io: tokio::io::DuplexStream, mut script: Script, discover: Value, log: Log) {
    let (read, mut write) = tokio::io::split(io);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        log.push(message.clone());
        let Some(id) = message.get("id").cloned() else {
            continue; // a notification
        };
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let reply = if method == "server/discover" && discover.is_null() {
            // An initialize-era server does not know the method.
            Reply::Error(json!({"code": -32601, "message": "Method not found"}))
        } else if method == "server/discover" {
            Reply::Result(discover.clone())
        } else {
            script(&method, &message["params"])
        };
        let lines: Vec<String> = match reply {
            Reply::Result(result) => {
                vec![json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()]
            }
            Reply::Error(error) => {
                vec![json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string()]
            }
            Reply::Silence => continue,
            Reply::Notify(messages) => messages
                .iter()
                .map(|message| with_id(message, &id).to_string())
                .collect(),
            Reply::Lines(lines) => lines
                .iter()
                .map(|line| line.replace("$id", &id.to_string()))
                .collect(),
        };
        let mut text = String::new();
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        if write.write_all(text.as_bytes()).await.is_err() {
            break;
        }
    }
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn task_id() -> TaskId {
    TaskId::new("task-secret-1")
}

/// A script that answers `tasks/get` from a list, repeating the last entry.
pub fn gets(replies: Vec<Value>) -> impl FnMut(&str, &Value) -> Reply + Send + 'static {
    let mut n = 0;
    move |method, _| match method {
        "tasks/get" => {
            let reply = replies[n.min(replies.len() - 1)].clone();
            n += 1;
            Reply::Result(reply)
        }
        "tasks/update" | "tasks/cancel" => ack(),
        "tools/call" => created(json!({})),
        _ => Reply::Error(json!({"code": -32601, "message": "no"})),
    }
}

pub fn get_value(status: &str, extra: Value) -> Value {
    match got(status, extra) {
        Reply::Result(value) => value,
        _ => unreachable!(),
    }
}

pub fn input_required(key: &str, request: Value) -> Value {
    let mut requests = serde_json::Map::new();
    requests.insert(key.to_owned(), request);
    get_value(
        "input_required",
        json!({"pollIntervalMs": 100, "inputRequests": requests}),
    )
}
