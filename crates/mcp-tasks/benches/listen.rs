//! Listen mode, measured over Streamable HTTP on 127.0.0.1:
//!
//! 1. the time from a change on the server (a tool setting its status
//!    message) to the client seeing it (the wait's observer), for a wait
//!    that listens and for one that polls a server suggesting
//!    `pollIntervalMs` 1000: p50 and p99 (target: listen p50 under 5 ms);
//! 2. the heap held by 1,000 idle open listen streams (server and a bare
//!    TCP client, in one process), what one stream on 1,000 tasks holds,
//!    how long one change takes to reach all 1,000 streams, and that
//!    closing them gives everything back.
//!
//! It prints the numbers and PASS or MISS for the target; a miss is
//! reported, not asserted. Without `--bench` (as under `cargo test
//! --benches`) it runs a short smoke version whose numbers mean nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks --bench listen
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::alloc::System;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mcp_tasks::client::ListenChannel;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskRuntime, ToolTasks};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, ListenMode, TaskState, TasksClient};
use mcp_tasks_testkit::stats::percentile_duration as percentile;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleServer, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// When each status message was set, by message.
static CHANGED: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Mutex::default);

fn live_bytes() -> i128 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i128 - stats.bytes_deallocated as i128
}

/// The sizes of a run.
struct Scale {
    full: bool,
    /// Waits (tasks) measured at once, and changes per task.
    waits: usize,
    changes: usize,
    streams: usize,
}

/// A server whose `steps` tool sets its status message `changes` times at
/// random moments 1.2–2.2 s apart (longer than the poll interval, so a
/// poll sees every change), and whose `idle` tool never ends.
#[derive(Clone)]
struct Server {
    runtime: TaskRuntime,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        let tag = arguments
            .get("tag")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let changes = arguments
            .get("changes")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let idle = request.name == "idle";
        self.runtime
            .call_tool(
                &request,
                &context,
                &ToolTasks::required(),
                move |task| async move {
                    if idle {
                        task.cancelled().await;
                    }
                    let mut rng = Rng(tag.bytes().fold(0x9e37_79b9_7f4a_7c15, |seed, byte| {
                        seed.rotate_left(5) ^ u64::from(byte)
                    }));
                    for change in 0..changes {
                        let pause = 1_200 + rng.next() % 1_000;
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                        let message = format!("{tag}/{change}");
                        CHANGED
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(message.clone(), Instant::now());
                        task.set_status_message(message).await?;
                    }
                    Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
                },
            )
            .await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// A small xorshift generator: random moments without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn serve(max_streams: usize) -> anyhow::Result<(Server, String)> {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(1000))
        .with_max_listen_streams(max_streams)
        .with_max_listen_streams_per_caller(max_streams)
        .build();
    let server = Server { runtime };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let router = StreamableHttpServer::new(server.clone(), server.runtime.clone()).router();
    tokio::spawn(mcp_tasks::server::http::serve(listener, router));
    Ok((server, url))
}

async fn client(url: &str) -> anyhow::Result<TasksClient<()>> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    let channel = ListenChannel::http(reqwest::Client::new(), &config);
    let transport = StreamableHttpClientTransport::from_config(config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let running = serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .context("connect")?;
    Ok(TasksClient::new(running).with_listen(channel))
}

async fn task(client: &TasksClient<()>, tool: &str, arguments: Value) -> anyhow::Result<TaskState> {
    let Value::Object(arguments) = arguments else {
        anyhow::bail!("arguments must be an object");
    };
    match client
        .call_tool(tool, Some(arguments), CallOptions::default())
        .await?
    {
        CallResponse::Task(state) => Ok(state),
        other => anyhow::bail!("{tool} made no task: {other:?}"),
    }
}

/// How late each change is seen: one wait per task, `scale.waits` at once.
async fn latencies(scale: &Scale, url: &str, mode: ListenMode) -> anyhow::Result<Vec<Duration>> {
    let client = client(url).await?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut waits = tokio::task::JoinSet::new();
    for wait in 0..scale.waits {
        let tag = format!("{mode:?}-{wait}");
        let state = task(
            &client,
            "steps",
            json!({"tag": tag, "changes": scale.changes}),
        )
        .await?;
        let seen = seen.clone();
        let options = AwaitOptions::default()
            .with_deadline(Some(Duration::from_secs(120)))
            .with_listen(mode)
            .with_observer(move |state| {
                let at = Instant::now();
                let Some(message) = &state.status_message else {
                    return;
                };
                let changed = CHANGED
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(message);
                if let Some(changed) = changed {
                    seen.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(at - changed);
                }
            });
        let client = client.clone();
        waits.spawn(async move { client.await_task(&state, &options).await });
    }
    while let Some(outcome) = waits.join_next().await {
        outcome??;
    }
    let missed = CHANGED.lock().unwrap_or_else(|p| p.into_inner()).len();
    anyhow::ensure!(missed == 0, "{missed} changes were never seen ({mode:?})");
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    seen.sort();
    Ok(seen)
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// A bare listen stream: a raw HTTP/1.1 POST on its own TCP connection,
/// read until its acknowledgement.
async fn raw_stream(address: &str, task_ids: &[&str], id: usize) -> anyhow::Result<TcpStream> {
    raw_post(address, "/mcp", task_ids, id, "acknowledged").await
}

/// POSTs a listen request to `path` and reads until `until`.
async fn raw_post(
    address: &str,
    path: &str,
    task_ids: &[&str],
    id: usize,
    until: &str,
) -> anyhow::Result<TcpStream> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
        "notifications": {"taskIds": task_ids}}})
    .to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(address).await?;
    stream.write_all(request.as_bytes()).await?;
    read_until(&mut stream, until).await?;
    Ok(stream)
}

/// The same held by a bare axum SSE endpoint (TCP_NODELAY) that sends one
/// event and then nothing, with the same bare clients: what any idle SSE
/// stream costs in hyper, axum and the client, without a subscription.
async fn bare_sse(n: usize) -> anyhow::Result<i128> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let app = axum::Router::new().route(
        "/sse",
        axum::routing::post(|_body: axum::body::Bytes| async {
            let first = futures::stream::once(async {
                Ok::<_, std::convert::Infallible>(Event::default().data("acknowledged"))
            });
            Sse::new(futures::StreamExt::chain(first, futures::stream::pending()))
                .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    tokio::spawn(mcp_tasks::server::http::serve(listener, app));
    drop(raw_post(&address, "/sse", &["warm-up"], 0, "acknowledged").await?);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = live_bytes();
    let mut open = Vec::with_capacity(n);
    for stream in 0..n {
        open.push(raw_post(&address, "/sse", &["a-task"], stream, "acknowledged").await?);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let held = live_bytes() - before;
    drop(open);
    Ok(held / n as i128)
}

/// Reads from `stream` until `needle` has come by.
async fn read_until(stream: &mut TcpStream, needle: &str) -> anyhow::Result<()> {
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    while !seen.contains(needle) {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer))
            .await
            .context("nothing came in 30 s")??;
        anyhow::ensure!(n > 0, "the stream closed before {needle:?}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    Ok(())
}

async fn streams(scale: &Scale) -> anyhow::Result<()> {
    let (server, url) = serve(usize::MAX).await?;
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let client = client(&url).await?;
    let one = task(&client, "idle", json!({})).await?;
    let id = one.id.expose().to_owned();
    let n = scale.streams;

    // Warm up the connection machinery, then measure.
    drop(raw_stream(&address, &[&id], 0).await?);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = live_bytes();
    let mut open = Vec::with_capacity(n);
    for stream in 0..n {
        open.push(raw_stream(&address, &[&id], stream).await?);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let held = live_bytes() - before;
    anyhow::ensure!(
        server.runtime.open_subscriptions() == n,
        "not every stream is open"
    );
    let bare = bare_sse(n).await?;
    let each = held / n as i128;
    println!(
        "{n} idle streams on one task: {each} bytes of heap each (server, hyper connection and \
         the bare TCP client together; {} in all); a bare axum SSE stream with the same clients: \
         {bare} bytes; the subscription's own share: {} bytes",
        held,
        each - bare
    );

    // One change reaches every stream.
    let started = Instant::now();
    client.cancel(&one.id).await?;
    for stream in &mut open {
        read_until(stream, "\"cancelled\"").await?;
    }
    println!(
        "one change (tasks/cancel) reached all {n} streams in {}",
        ms(started.elapsed())
    );

    // Closed streams give everything back.
    drop(open);
    let closing = Instant::now();
    while server.runtime.open_subscriptions() > 0 && closing.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    println!(
        "closed: {} streams still open after {}; heap {} bytes above the level before opening",
        server.runtime.open_subscriptions(),
        ms(closing.elapsed()),
        live_bytes() - before
    );

    // One stream on many tasks.
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(
            task(&client, "idle", json!({}))
                .await?
                .id
                .expose()
                .to_owned(),
        );
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = live_bytes();
    let wide = raw_stream(&address, &ids, 1).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = live_bytes() - before;
    println!(
        "one stream on {n} tasks: {} bytes of heap per task watched",
        held / n as i128
    );
    drop(wide);
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    let scale = if full {
        Scale {
            full,
            waits: 50,
            changes: 8,
            streams: 1000,
        }
    } else {
        Scale {
            full,
            waits: 2,
            changes: 1,
            streams: 10,
        }
    };
    println!(
        "mcp-tasks listen benchmark ({}): {} cores, HTTP on 127.0.0.1, one tokio runtime with 2 workers",
        if scale.full {
            "full run"
        } else {
            "smoke run without --bench: the numbers mean nothing"
        },
        std::thread::available_parallelism().map_or(0, usize::from),
    );

    println!(
        "\n== 1. from a change on the server to the client seeing it ({} waits at once, {} changes each, \
         changes 1.2-2.2 s apart; the server suggests pollIntervalMs 1000)",
        scale.waits, scale.changes
    );
    let (_server, url) = serve(scale.waits * 2).await?;
    let mut listen_p50 = Duration::MAX;
    for mode in [ListenMode::Required, ListenMode::Poll] {
        let seen = latencies(&scale, &url, mode).await?;
        let name = if mode == ListenMode::Poll {
            "poll"
        } else {
            "listen"
        };
        println!(
            "{name:<7} {} changes: p50 {}, p99 {}, max {}",
            seen.len(),
            ms(percentile(&seen, 0.5)),
            ms(percentile(&seen, 0.99)),
            ms(seen.last().copied().unwrap_or_default()),
        );
        if mode == ListenMode::Required {
            listen_p50 = percentile(&seen, 0.5);
        }
    }

    println!("\n== 2. open streams");
    streams(&scale).await?;

    println!("\n== target");
    let met = listen_p50 < Duration::from_millis(5);
    println!(
        "{} listen p50 under 5 ms: {}",
        if met { "PASS" } else { "MISS" },
        ms(listen_p50)
    );
    Ok(())
}
