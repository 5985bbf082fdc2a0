//! Listening clients of a `RuntimeServer` whose server side counts the
//! requests it receives, by method: over the in-process stdio framing (a
//! tap on the server's reader) and over Streamable HTTP (a layer on the
//! router, which also tracks how many are in flight at once and can refuse
//! `subscriptions/listen` as a server without listen does).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mcp_tasks::TasksClient;
use mcp_tasks::client::ListenChannel;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::listen::ListenReader;
use rmcp::ServiceExt;
use rmcp::service::serve_client_with_lifecycle;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

use crate::listening::{Transport, http_client};
use crate::{Handler, RuntimeServer, lifecycle};

/// The requests a server received, by method.
#[derive(Clone, Default)]
pub struct Counts(Arc<Mutex<Tally>>);

#[derive(Default)]
struct Tally {
    received: HashMap<String, usize>,
    in_flight: HashMap<String, usize>,
    most_in_flight: HashMap<String, usize>,
}

impl Counts {
    /// How many `method` requests came.
    pub fn of(&self, method: &str) -> usize {
        let tally = self.0.lock().unwrap();
        tally.received.get(method).copied().unwrap_or(0)
    }

    /// The most `method` requests in flight at once (HTTP only).
    pub fn most_in_flight(&self, method: &str) -> usize {
        let tally = self.0.lock().unwrap();
        tally.most_in_flight.get(method).copied().unwrap_or(0)
    }

    fn arrived(&self, method: &str) {
        let mut tally = self.0.lock().unwrap();
        *tally.received.entry(method.to_owned()).or_default() += 1;
    }

    fn started(&self, method: &str) {
        let mut tally = self.0.lock().unwrap();
        let now = {
            let count = tally.in_flight.entry(method.to_owned()).or_default();
            *count += 1;
            *count
        };
        let most = tally.most_in_flight.entry(method.to_owned()).or_default();
        *most = (*most).max(now);
    }

    fn ended(&self, method: &str) {
        let mut tally = self.0.lock().unwrap();
        if let Some(count) = tally.in_flight.get_mut(method) {
            *count = count.saturating_sub(1);
        }
    }
}

/// A reader that counts the JSON-RPC requests in the lines it passes on.
struct Tap<R> {
    inner: R,
    counts: Counts,
    line: Vec<u8>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Tap<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &read {
            for &byte in &buf.filled()[before..] {
                if byte != b'\n' {
                    this.line.push(byte);
                    continue;
                }
                let line = std::mem::take(&mut this.line);
                if let Ok(message) = serde_json::from_slice::<Value>(&line)
                    && message.get("id").is_some()
                    && let Some(method) = message.get("method").and_then(Value::as_str)
                {
                    this.counts.arrived(method);
                }
            }
        }
        read
    }
}

/// A listening client of `server` over `transport`, and the server's counts.
pub async fn counted_client(
    server: &RuntimeServer,
    transport: Transport,
) -> (TasksClient<Handler>, Counts) {
    counted_client_with(server, transport, Handler::default(), false).await
}

/// [`counted_client`] with a chosen handler; with `refuse_listen` (HTTP
/// only) the server answers `subscriptions/listen` with -32601.
pub async fn counted_client_with(
    server: &RuntimeServer,
    transport: Transport,
    handler: Handler,
    refuse_listen: bool,
) -> (TasksClient<Handler>, Counts) {
    let counts = Counts::default();
    let client = match transport {
        Transport::Stdio => {
            assert!(!refuse_listen, "refusing listen is for HTTP");
            let (server_io, client_io) = tokio::io::duplex(1 << 20);
            let (server, tap) = (server.clone(), counts.clone());
            tokio::spawn(async move {
                let (read, write) = tokio::io::split(server_io);
                let read = Tap {
                    inner: read,
                    counts: tap,
                    line: Vec::new(),
                };
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
        Transport::Http => {
            let url = serve_counted(server, counts.clone(), refuse_listen).await;
            http_client(&url, None, handler).await
        }
    };
    (client, counts)
}

/// Serves `server` over HTTP on 127.0.0.1 behind a counting layer; returns the URL.
async fn serve_counted(server: &RuntimeServer, counts: Counts, refuse_listen: bool) -> String {
    let router = StreamableHttpServer::new(server.clone(), server.runtime.clone())
        .router()
        .layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let counts = counts.clone();
                async move { count(counts, refuse_listen, request, next).await }
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(mcp_tasks::server::http::serve(listener, router));
    format!("http://{address}/mcp")
}

async fn count(counts: Counts, refuse_listen: bool, request: Request, next: Next) -> Response {
    let method = request
        .headers()
        .get("mcp-method")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if request.method() != axum::http::Method::POST || method.is_empty() {
        return next.run(request).await;
    }
    counts.arrived(&method);
    if refuse_listen && method == "subscriptions/listen" {
        let body = axum::body::to_bytes(request.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        let id = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|message| message.get("id").cloned())
            .unwrap_or(Value::Null);
        let answer = json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found"}});
        return (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            Body::from(answer.to_string()),
        )
            .into_response();
    }
    counts.started(&method);
    let response = next.run(request).await;
    counts.ended(&method);
    response
}
