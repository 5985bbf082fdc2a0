//! A raw 2025-11-25 client, for the exact wire of the server's legacy
//! tasks: newline-delimited JSON-RPC over an in-process pipe to a server
//! served with `StdioTransport`, or JSON-RPC POSTs in an `Mcp-Session-Id`
//! session over Streamable HTTP (SSE answers read event by event). It
//! opens with `initialize`, sends requests, answers the server's own
//! requests with a script, and keeps every notification it is sent.

use std::time::Duration;

use mcp_tasks::server::StdioTransport;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::RuntimeServer;

/// How long any one answer may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// Answers the server's requests: the request, its answer (a result).
pub type Answerer = Box<dyn FnMut(&Value) -> Value + Send>;

/// How the messages travel.
enum Wire {
    /// Lines over a pipe: written here, read by a reader task into `incoming`.
    Lines {
        write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
        incoming: mpsc::UnboundedReceiver<Value>,
    },
    /// POSTs in a session; each answer's messages are pushed to `incoming`.
    Http {
        url: String,
        session: Option<String>,
        authorization: Option<String>,
        http: reqwest::Client,
        sender: mpsc::UnboundedSender<Value>,
        incoming: mpsc::UnboundedReceiver<Value>,
    },
}

/// A raw initialize-era client.
pub struct OldClient {
    wire: Wire,
    next_id: u64,
    /// Notifications received, in order.
    pub notifications: Vec<Value>,
    /// The server's requests, in order.
    pub asked: Vec<Value>,
    answer: Answerer,
    /// The `InitializeResult`.
    pub initialized: Value,
}

/// The capabilities the client declares unless told otherwise.
pub fn capabilities() -> Value {
    json!({"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}})
}

impl OldClient {
    /// A client of `server` over an in-process pipe, initialized.
    pub async fn stdio(server: RuntimeServer) -> Self {
        Self::start(Self::pipe(server, true), capabilities()).await
    }

    /// [`OldClient::stdio`], declaring `capabilities` in `initialize`.
    pub async fn stdio_declaring(server: RuntimeServer, capabilities: Value) -> Self {
        Self::start(Self::pipe(server, true), capabilities).await
    }

    /// A raw connection to `server` over an in-process pipe that sends no
    /// `initialize`: what a 2026-07-28 client would see, request by request.
    pub fn stdio_uninitialized(server: RuntimeServer) -> Self {
        Self::unstarted(Self::pipe(server, true))
    }

    /// [`OldClient::stdio_uninitialized`], the server reading plain calls
    /// ahead of rmcp or not (see `StdioTransport::with_read_ahead`).
    pub fn stdio_reading_ahead(server: RuntimeServer, read_ahead: bool) -> Self {
        Self::unstarted(Self::pipe(server, read_ahead))
    }

    fn pipe(server: RuntimeServer, read_ahead: bool) -> Wire {
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        let runtime = server.runtime.clone();
        tokio::spawn(async move {
            let (read, write) = tokio::io::split(server_io);
            let transport = StdioTransport::with_read_ahead(&runtime, read, write, read_ahead);
            if let Ok(running) = server.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        let (read, write) = tokio::io::split(client_io);
        let (sender, incoming) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message = serde_json::from_str(&line).expect("the server writes JSON lines");
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        Wire::Lines { write, incoming }
    }

    /// A client of the Streamable HTTP endpoint `url`, initialized in a
    /// session, sending `authorization` on every request.
    pub async fn http(url: &str, authorization: Option<&str>) -> Self {
        Self::http_declaring(url, authorization, capabilities()).await
    }

    /// [`OldClient::http`], declaring `capabilities` in `initialize`.
    pub async fn http_declaring(
        url: &str,
        authorization: Option<&str>,
        capabilities: Value,
    ) -> Self {
        let (sender, incoming) = mpsc::unbounded_channel();
        Self::start(
            Wire::Http {
                url: url.to_owned(),
                session: None,
                authorization: authorization.map(str::to_owned),
                http: reqwest::Client::new(),
                sender,
                incoming,
            },
            capabilities,
        )
        .await
    }

    fn unstarted(wire: Wire) -> Self {
        Self {
            wire,
            next_id: 0,
            notifications: Vec::new(),
            asked: Vec::new(),
            answer: Box::new(|_| json!({"action": "decline"})),
            initialized: Value::Null,
        }
    }

    async fn start(wire: Wire, capabilities: Value) -> Self {
        let mut client = Self::unstarted(wire);
        let initialized = client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                    "clientInfo": {"name": "old-client", "version": "1"}}),
            )
            .await
            .expect("initialize");
        client.initialized = initialized;
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    /// Answers the server's requests with `answer` from now on.
    pub fn answering(&mut self, answer: impl FnMut(&Value) -> Value + Send + 'static) {
        self.answer = Box::new(answer);
    }

    async fn send(&mut self, message: Value) {
        match &mut self.wire {
            Wire::Lines { write, .. } => {
                let mut line = message.to_string().into_bytes();
                line.push(b'\n');
                write.write_all(&line).await.expect("write to the server");
            }
            Wire::Http {
                url,
                session,
                authorization,
                http,
                sender,
                ..
            } => {
                let mut post = http
                    .post(url.as_str())
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(message.to_string());
                if let Some(session) = session.as_deref() {
                    post = post
                        .header("mcp-session-id", session)
                        .header("mcp-protocol-version", "2025-11-25");
                }
                if let Some(authorization) = authorization.as_deref() {
                    post = post.header("authorization", authorization);
                }
                let response = post.send().await.expect("POST");
                if let Some(id) = response.headers().get("mcp-session-id") {
                    *session = Some(id.to_str().expect("a session id").to_owned());
                }
                let status = response.status();
                let sse = response
                    .headers()
                    .get("content-type")
                    .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
                let sender = sender.clone();
                // The answer streams while the server works: read it aside.
                tokio::spawn(async move {
                    if sse {
                        read_events(response, &sender).await;
                    } else {
                        let body = response.bytes().await.unwrap_or_default();
                        if let Ok(message) = serde_json::from_slice::<Value>(&body) {
                            let _ = sender.send(message);
                        } else {
                            assert!(
                                status.is_success() && body.is_empty(),
                                "HTTP {status}: {}",
                                String::from_utf8_lossy(&body)
                            );
                        }
                    }
                });
            }
        }
    }

    /// Writes `messages` to the pipe in one write, a line each, so that the
    /// server reads them together (over a pipe only).
    pub async fn send_at_once(&mut self, messages: &[Value]) {
        let Wire::Lines { write, .. } = &mut self.wire else {
            panic!("only a pipe writes lines");
        };
        let lines: Vec<u8> = messages
            .iter()
            .flat_map(|message| format!("{message}\n").into_bytes())
            .collect();
        write.write_all(&lines).await.expect("write to the server");
    }

    /// The next message the server sends within `patience`, if any.
    pub async fn next_within(&mut self, patience: Duration) -> Option<Value> {
        let incoming = match &mut self.wire {
            Wire::Lines { incoming, .. } | Wire::Http { incoming, .. } => incoming,
        };
        tokio::time::timeout(patience, incoming.recv())
            .await
            .ok()
            .flatten()
    }

    async fn next_message(&mut self) -> Value {
        let incoming = match &mut self.wire {
            Wire::Lines { incoming, .. } | Wire::Http { incoming, .. } => incoming,
        };
        tokio::time::timeout(PATIENCE, incoming.recv())
            .await
            .expect("the server answers in time")
            .expect("the connection is open")
    }

    /// Sends a request; its result, or its error object. Meanwhile the
    /// server's requests are answered and its notifications kept.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.next_message().await;
            if message.get("method").is_some() {
                if let Some(request_id) = message.get("id").cloned() {
                    self.asked.push(message.clone());
                    let result = (self.answer)(&message);
                    self.send(json!({"jsonrpc": "2.0", "id": request_id, "result": result}))
                        .await;
                } else {
                    self.notifications.push(message);
                }
                continue;
            }
            if message.get("id") == Some(&json!(id)) {
                return match message.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(message["result"].clone()),
                };
            }
        }
    }

    /// Waits until `count` notifications have arrived (or fails).
    pub async fn notifications_until(&mut self, count: usize) -> &[Value] {
        while self.notifications.len() < count {
            let message = self.next_message().await;
            if message.get("method").is_some() && message.get("id").is_none() {
                self.notifications.push(message);
            }
        }
        &self.notifications
    }

    /// Opens the session's standalone stream (`GET`), where the server's
    /// messages without a request of their own arrive (HTTP only).
    pub async fn open_stream(&mut self) {
        let Wire::Http {
            url,
            session,
            authorization,
            http,
            sender,
            ..
        } = &self.wire
        else {
            return;
        };
        let mut get = http
            .get(url.as_str())
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session.as_deref().expect("a session"))
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(authorization) = authorization.as_deref() {
            get = get.header("authorization", authorization);
        }
        let response = get.send().await.expect("GET");
        assert!(response.status().is_success(), "GET: {}", response.status());
        let sender = sender.clone();
        tokio::spawn(async move { read_events(response, &sender).await });
    }

    /// The session id (HTTP only).
    pub fn session(&self) -> Option<&str> {
        match &self.wire {
            Wire::Http { session, .. } => session.as_deref(),
            Wire::Lines { .. } => None,
        }
    }
}

/// Pushes the JSON of every SSE event of `response` until it ends.
async fn read_events(response: reqwest::Response, sender: &mpsc::UnboundedSender<Value>) {
    use futures::StreamExt;
    let mut body = response.bytes_stream();
    let mut pending = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.windows(2).position(|pair| pair == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let data: String = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if let Ok(message) = serde_json::from_str::<Value>(&data)
                && sender.send(message).is_err()
            {
                return;
            }
        }
    }
}
