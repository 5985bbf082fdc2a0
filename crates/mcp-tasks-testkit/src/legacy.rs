//! A scripted 2025-11-25 server over an in-process duplex, for the legacy
//! era's edge cases: it answers `server/discover` with -32601 (or with a
//! given result, for a server of both eras) and `initialize` with a given
//! result, and hands every other message it receives (requests,
//! notifications, and the client's answers to its own requests) to the
//! script, which sends back whatever raw messages it likes. The test can
//! also push messages at any time. The client is built on
//! `legacy::Handler`, with or without a tap on its transport.

use mcp_tasks::TasksClient;
use mcp_tasks::client::legacy;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::Handler;
use crate::scripted::Log;

/// The id of every scripted task.
pub const TASK: &str = "task-secret-1";

type Script = Box<dyn FnMut(&Value) -> Vec<Value> + Send>;

/// How the scripted server is set up.
pub struct Server {
    /// `server/discover` answers this (a server of both eras), else -32601.
    pub discover: Option<Value>,
    /// What `initialize` answers.
    pub initialize: Value,
    /// Whether the client's transport has a tap.
    pub tapped: bool,
}

impl Server {
    /// A 2025-11-25 server with these `capabilities.tasks`, on a tapped transport.
    pub fn legacy(tasks: Value) -> Self {
        Self {
            discover: None,
            initialize: initialize(tasks),
            tapped: true,
        }
    }
}

/// A connected client, the server's log, and a way to push messages.
pub struct Connected {
    pub client: TasksClient<legacy::Handler>,
    pub log: Log,
    push: mpsc::UnboundedSender<Value>,
}

impl Connected {
    /// Sends a raw message from the server now.
    pub fn push(&self, message: Value) {
        self.push.send(message).expect("the scripted server runs");
    }
}

/// The `InitializeResult` of a 2025-11-25 server with these `capabilities.tasks`
/// (`null`: none).
pub fn initialize(tasks: Value) -> Value {
    let mut capabilities = json!({"tools": {"listChanged": true}});
    if !tasks.is_null() {
        capabilities["tasks"] = tasks;
    }
    json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
        "serverInfo": {"name": "scripted-legacy", "version": "0"}})
}

/// The tasks capability of a server that takes task-augmented `tools/call`.
pub fn all_tasks() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Starts the server and a client connected to it.
pub async fn connect(
    server: Server,
    handler: Handler,
    script: impl FnMut(&Value) -> Vec<Value> + Send + 'static,
) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let log = Log::default();
    let (push, pushed) = mpsc::unbounded_channel();
    tokio::spawn(serve(
        server_io,
        server.discover,
        server.initialize,
        Box::new(script),
        log.clone(),
        pushed,
    ));
    let handler = legacy::Handler::new(handler);
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let (read, write) = tokio::io::split(client_io);
    let running = if server.tapped {
        let tap = handler.tap();
        serve_client_with_lifecycle(handler, (tap.read(read), write), lifecycle).await
    } else {
        serve_client_with_lifecycle(handler, (read, write), lifecycle).await
    }
    .expect("the client connects to the scripted server");
    Connected {
        client: TasksClient::new(running),
        log,
        push,
    }
}

async fn serve(
    io: tokio::io::DuplexStream,
    discover: Option<Value>,
    initialize: Value,
    mut script: Script,
    log: Log,
    mut pushed: mpsc::UnboundedReceiver<Value>,
) {
    let (read, mut write) = tokio::io::split(io);
    let mut lines = BufReader::new(read).lines();
    loop {
        let out = tokio::select! {
            line = lines.next_line() => {
                let Ok(Some(line)) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
                log.push(message.clone());
                match message["method"].as_str() {
                    Some("server/discover") => vec![match &discover {
                        Some(result) => reply(&message, result.clone()),
                        None => refuse(&message, -32601, "Method not found"),
                    }],
                    Some("initialize") => vec![reply(&message, initialize.clone())],
                    Some("notifications/initialized") => Vec::new(),
                    _ => script(&message),
                }
            }
            Some(message) = pushed.recv() => vec![message],
        };
        for message in out {
            let mut text = message.to_string();
            text.push('\n');
            if write.write_all(text.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

/// The result `result` for the request `message`.
pub fn reply(message: &Value, result: Value) -> Value {
    let mut reply = json!({"jsonrpc": "2.0", "id": message["id"]});
    reply["result"] = result;
    reply
}

/// What a script sends for a message it has no case for: -32601 for a
/// request, nothing for a notification or an answer.
pub fn unknown(message: &Value) -> Vec<Value> {
    if message.get("method").is_some() && message.get("id").is_some() {
        vec![refuse(message, -32601, "Method not found")]
    } else {
        Vec::new()
    }
}

/// The JSON-RPC error `{code, message}` for the request `message`.
pub fn refuse(message: &Value, code: i64, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": code, "message": text}})
}

/// A 2025-11-25 task with `extra` merged over the defaults (`ttl` 60 s, `pollInterval` 1 s).
pub fn task(status: &str, extra: Value) -> Value {
    let mut base = json!({
        "taskId": TASK, "status": status,
        "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:30:00Z",
        "ttl": 60000, "pollInterval": 1000
    });
    if let (Value::Object(base), Value::Object(extra)) = (&mut base, extra) {
        base.extend(extra);
    }
    base
}

/// A `CreateTaskResult`: the task nested under `task`.
pub fn created(extra: Value) -> Value {
    json!({"task": task("working", extra)})
}

/// A text tool result.
pub fn text(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// A `tools/list` page: `(name, taskSupport)`; `None` leaves `execution` out.
pub fn tools(tools: &[(&str, Option<&str>)]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|(name, support)| {
            let mut tool = json!({"name": name, "inputSchema": {"type": "object"}});
            if let Some(support) = support {
                tool["execution"] = json!({"taskSupport": support});
            }
            tool
        })
        .collect();
    json!({ "tools": tools })
}

/// A server-to-client `elicitation/create` asking for a name, tied to the task.
pub fn elicitation(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": {
        "mode": "form", "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": TASK}}}})
}

/// A `notifications/tasks/status` carrying `task`.
pub fn status(task: Value) -> Value {
    let mut notification = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status"});
    notification["params"] = task;
    notification
}

/// The client's answer to the server's request `id`, if it sent one.
pub fn answer_to(log: &Log, id: &str) -> Option<Value> {
    log.all()
        .into_iter()
        .map(|received| received.message)
        .find(|message| message["id"] == id && message.get("method").is_none())
}
