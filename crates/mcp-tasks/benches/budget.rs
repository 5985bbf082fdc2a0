//! Streams never starve requests, measured over Streamable HTTP on
//! 127.0.0.1: `tasks/get` latency (p50, p99) on a default server
//! (`StreamableHttpServer` with its default bounds: 1,024 connections, a
//! listen budget of 512 streams, 64 per caller) while idle, and beside a
//! full listen budget (512 idle streams from 8 callers that vary their
//! `Authorization` header, each stream on its own connection), in one run:
//! idle, full, idle again. The stream one past the budget is checked to be
//! refused with 503 (target: p99 beside the full budget within 2x of idle).
//!
//! It prints the numbers and PASS or MISS for the target; a miss is
//! reported, not asserted. Without `--bench` (as under `cargo test
//! --benches`) it runs a short smoke version whose numbers mean nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks --bench budget
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::time::{Duration, Instant};

use anyhow::Context as _;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{
    DEFAULT_MAX_LISTEN_STREAMS, DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER, TaskRuntime, ToolTasks,
};
use mcp_tasks::store::MemoryStore;
use mcp_tasks_testkit::stats::percentile_duration as percentile;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A server whose one tool, `idle`, runs until its task is cancelled.
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
        self.runtime
            .call_tool(
                &request,
                &context,
                &ToolTasks::required(),
                |task| async move {
                    task.cancelled().await;
                    Ok(CallToolResult::success(Vec::new()))
                },
            )
            .await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// One raw POST with reqwest: the status and the JSON body.
async fn post(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    method: &str,
    name: &str,
    body: String,
) -> anyhow::Result<(u16, Value)> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .header("authorization", format!("Bearer {token}"))
        .body(body)
        .send()
        .await?;
    let status = response.status().as_u16();
    let body = response.bytes().await?;
    Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// A task of `token`'s caller, made by a raw `tools/call`; its id.
async fn task(client: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<String> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"idle","arguments":{{}},{META}}}}}"#
    );
    let (status, answer) = post(client, url, token, "tools/call", "idle", body).await?;
    anyhow::ensure!(status == 200, "tools/call answered {status}: {answer}");
    answer["result"]["taskId"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no task in {answer}"))
}

fn get_body(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{id}",{META}}}}}"#
    )
}

/// A bare listen stream of `token`'s caller on its own TCP connection:
/// the connection and the head of the answer (up to the first event, or
/// the whole refusal).
async fn listen(
    address: &str,
    token: &str,
    id: &str,
    n: usize,
) -> anyhow::Result<(TcpStream, String)> {
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "subscriptions/listen", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
        "notifications": {"taskIds": [id]}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(address).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    while !seen.contains("acknowledged") && !seen.contains("listenStreams") {
        let n = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer))
            .await
            .context("nothing came in 30 s")??;
        anyhow::ensure!(n > 0, "the stream closed early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    Ok((stream, seen))
}

/// `tasks/get` latencies for `length`, from `workers` loops of one
/// request at a time on one pooled client.
async fn load(
    client: &reqwest::Client,
    url: &str,
    id: &str,
    workers: usize,
    length: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let until = Instant::now() + length;
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (client, url, id) = (client.clone(), url.to_owned(), id.to_owned());
        loops.spawn(async move {
            let mut seen = Vec::new();
            while Instant::now() < until {
                let started = Instant::now();
                let (status, answer) =
                    post(&client, &url, "poller", "tasks/get", &id, get_body(&id)).await?;
                anyhow::ensure!(status == 200, "tasks/get answered {status}: {answer}");
                seen.push(started.elapsed());
            }
            Ok(seen)
        });
    }
    let mut all = Vec::new();
    while let Some(seen) = loops.join_next().await {
        all.extend(seen??);
    }
    Ok(all)
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

fn row(name: &str, seen: &mut [Duration]) -> (Duration, Duration) {
    seen.sort();
    let (p50, p99) = (percentile(seen, 0.5), percentile(seen, 0.99));
    println!(
        "{name:<40} {:>7} requests: p50 {}, p99 {}, max {}",
        seen.len(),
        ms(p50),
        ms(p99),
        ms(seen.last().copied().unwrap_or_default())
    );
    (p50, p99)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    let (rounds, round) = if full {
        (5, Duration::from_millis(1000))
    } else {
        (1, Duration::from_millis(100))
    };
    let workers = 8;
    println!(
        "mcp-tasks listen-budget benchmark ({}): {} cores, HTTP on 127.0.0.1, one tokio runtime with 2 workers; \
         a default server (1024 connections, {DEFAULT_MAX_LISTEN_STREAMS} listen streams, \
         {DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER} per caller); {workers} tasks/get loops on one pooled client",
        if full {
            "full run"
        } else {
            "smoke run without --bench: the numbers mean nothing"
        },
        std::thread::available_parallelism().map_or(0, usize::from),
    );

    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let server = Server {
        runtime: runtime.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let url = format!("http://{address}/mcp");
    tokio::spawn(StreamableHttpServer::new(server, runtime.clone()).serve(listener));

    let client = reqwest::Client::new();
    let polled = task(&client, &url, "poller").await?;
    // Warm-up.
    load(&client, &url, &polled, workers, round).await?;

    let mut idle = Vec::new();
    let mut beside = Vec::new();
    for _ in 0..rounds {
        idle.extend(load(&client, &url, &polled, workers, round).await?);
    }

    // The flood: every caller as many streams as it may, up to the budget.
    let callers = DEFAULT_MAX_LISTEN_STREAMS / DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER;
    let opening = Instant::now();
    let mut streams = Vec::with_capacity(DEFAULT_MAX_LISTEN_STREAMS);
    for caller in 0..callers {
        let token = format!("listener-{caller}");
        let id = task(&client, &url, &token).await?;
        for n in 0..DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER {
            let (stream, head) = listen(&address, &token, &id, n).await?;
            anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "stream refused: {head}");
            streams.push(stream);
        }
    }
    anyhow::ensure!(
        runtime.open_subscriptions() == DEFAULT_MAX_LISTEN_STREAMS,
        "{} streams open",
        runtime.open_subscriptions()
    );
    let opened = opening.elapsed();
    let refusing = Instant::now();
    let extra_id = task(&client, &url, "one-more").await?;
    let (_extra, head) = listen(&address, "one-more", &extra_id, 0).await?;
    let refused = refusing.elapsed();
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 503") && head.to_ascii_lowercase().contains("retry-after:"),
        "the stream past the budget: {head}"
    );
    println!(
        "\n{} streams open from {callers} callers in {}; the next one refused (503, Retry-After) in {} \
         (a tools/call and the refused listen)",
        streams.len(),
        ms(opened),
        ms(refused)
    );

    for _ in 0..rounds {
        beside.extend(load(&client, &url, &polled, workers, round).await?);
    }
    drop(streams);
    let closing = Instant::now();
    while runtime.open_subscriptions() > 0 && closing.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut idle_after = Vec::new();
    for _ in 0..rounds {
        idle_after.extend(load(&client, &url, &polled, workers, round).await?);
    }

    println!(
        "\n== tasks/get latency ({rounds} rounds of {} each)",
        ms(round)
    );
    let (idle_p50, idle_p99) = row("idle, before the streams", &mut idle);
    let (full_p50, full_p99) = row("beside 512 open listen streams", &mut beside);
    row("idle, after the streams closed", &mut idle_after);
    let mut both = idle.clone();
    both.extend(idle_after.iter().copied());
    let (both_p50, both_p99) = row("idle, before and after", &mut both);

    println!("\n== target");
    let ratio = |full: Duration, idle: Duration| full.as_secs_f64() / idle.as_secs_f64().max(1e-9);
    let p99_ratio = ratio(full_p99, both_p99);
    println!(
        "{} tasks/get p99 beside a full listen budget within 2x of idle: {} vs {} ({:.2}x); \
         p50 {} vs {} ({:.2}x); first idle phase alone: p50 {}, p99 {}",
        if p99_ratio <= 2.0 { "PASS" } else { "MISS" },
        ms(full_p99),
        ms(both_p99),
        p99_ratio,
        ms(full_p50),
        ms(both_p50),
        ratio(full_p50, both_p50),
        ms(idle_p50),
        ms(idle_p99),
    );
    Ok(())
}
