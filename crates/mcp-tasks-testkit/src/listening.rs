//! Clients that can listen, on both transports, and a raw listen stream
//! over HTTP for checking what the server sends.

use std::time::Duration;

use futures::StreamExt;
use mcp_tasks::TasksClient;
use mcp_tasks::client::ListenChannel;
use mcp_tasks::server::listen::ListenReader;
use rmcp::ServiceExt;
use rmcp::service::serve_client_with_lifecycle;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::{Handler, RuntimeServer, lifecycle};

/// The two transports the listen tests run on.
#[derive(Debug, Clone, Copy)]
pub enum Transport {
    /// Newline-delimited JSON-RPC over an in-process pipe: the stdio
    /// framing, with the server's reader wrapped in `ListenReader` and the
    /// client's in `ListenChannel::stdio`.
    Stdio,
    /// Streamable HTTP on 127.0.0.1 with the library's serving recipe.
    Http,
}

pub const TRANSPORTS: [Transport; 2] = [Transport::Stdio, Transport::Http];

/// A listening client of `server` over `transport`.
pub async fn client(server: &RuntimeServer, transport: Transport) -> TasksClient<Handler> {
    client_with(server, transport, Handler::default()).await
}

/// [`client`] with a chosen handler.
pub async fn client_with(
    server: &RuntimeServer,
    transport: Transport,
    handler: Handler,
) -> TasksClient<Handler> {
    match transport {
        Transport::Stdio => stdio_client(server.clone(), handler).await,
        Transport::Http => {
            let url = crate::runtime_server::serve_http(server.clone()).await;
            http_client(&url, None, handler).await
        }
    }
}

/// A client of `server` over an in-process newline-delimited pipe.
pub async fn stdio_client(server: RuntimeServer, handler: Handler) -> TasksClient<Handler> {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_io);
        if let Ok(running) = server.serve((ListenReader::new(read), write)).await {
            let _ = running.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(client_io);
    let (channel, read) = ListenChannel::stdio(read);
    let running = serve_client_with_lifecycle(handler, (read, write), lifecycle())
        .await
        .expect("connect in process");
    TasksClient::new(running).with_listen(channel)
}

/// A listening client of the HTTP endpoint `url`, with a bearer `token`.
pub async fn http_client(url: &str, token: Option<&str>, handler: Handler) -> TasksClient<Handler> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let channel = ListenChannel::http(reqwest::Client::new(), &config);
    let transport = StreamableHttpClientTransport::from_config(config);
    let running = serve_client_with_lifecycle(handler, transport, lifecycle())
        .await
        .expect("connect over HTTP");
    TasksClient::new(running).with_listen(channel)
}

/// A `subscriptions/listen` request for `task_ids`, declaring the
/// extension when `declare`.
pub fn listen_request(id: Value, task_ids: &[&str], declare: bool) -> Value {
    let extensions = if declare {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    let mut request = json!({"jsonrpc": "2.0", "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}},
        "notifications": {"taskIds": task_ids}}});
    request["id"] = id;
    request
}

/// A raw HTTP listen stream: the messages of its SSE response.
pub struct RawStream {
    /// The response's status and headers.
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    body: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    text: String,
    /// Comment lines seen so far.
    pub comments: usize,
}

impl RawStream {
    /// POSTs `message` to `url` with a bearer `token`.
    pub async fn open(url: &str, token: Option<&str>, message: &Value) -> Self {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(message.to_string());
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = request.send().await.expect("the listen POST is answered");
        Self {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.bytes_stream().boxed(),
            text: String::new(),
            comments: 0,
        }
    }

    /// The next JSON-RPC message, or `None` when the response ended or
    /// nothing came within `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<Value> {
        tokio::time::timeout(within, self.next())
            .await
            .ok()
            .flatten()
    }

    /// The next JSON-RPC message, or `None` when the response ended.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                let mut data = String::new();
                for line in event.lines() {
                    if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.trim_start());
                    } else if line.starts_with(':') {
                        self.comments += 1;
                    }
                }
                if !data.is_empty() {
                    return Some(serde_json::from_str(&data).expect("SSE data is JSON"));
                }
                continue;
            }
            match self.body.next().await {
                Some(Ok(bytes)) => self.text.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// The whole body of a plain (non-SSE) answer.
    pub async fn json(mut self) -> Value {
        let mut text = String::new();
        while let Some(Ok(bytes)) = self.body.next().await {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
        serde_json::from_str(&text).expect("a JSON body")
    }
}

/// A server that suggests polling every 10 minutes: a wait on it that ends
/// within seconds heard its notifications.
pub fn patient_server() -> RuntimeServer {
    RuntimeServer::new(
        crate::runtime_server::runtime_on(mcp_tasks::store::MemoryStore::new())
            .with_poll_interval(Duration::from_secs(600))
            .build(),
    )
}

/// Waits that allow the server's 10 minutes, listen as `mode`, and end after 20 s.
pub fn listening(mode: mcp_tasks::ListenMode) -> mcp_tasks::AwaitOptions {
    mcp_tasks::AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_interval_bounds(Duration::from_millis(10), Duration::from_secs(600))
        .with_listen(mode)
}

/// Waits until `server` has no open listen stream; fails after 10 s.
pub async fn until_closed(server: &RuntimeServer) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while server.runtime.open_subscriptions() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every stream closes");
}
