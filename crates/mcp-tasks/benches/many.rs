//! Awaiting many tasks at once (`TasksClient::await_each`), measured over
//! Streamable HTTP on 127.0.0.1 with every request counted on the server
//! (a layer on its router, by `Mcp-Method`):
//!
//! * what one set of 1,000 tasks costs: listen streams opened (at most one
//!   per 1,024 tasks), `tasks/get` sent, the most of them in flight at once
//!   (one poll queue: at most 8), listening and polling;
//! * how late each completion is seen, for 1 task (20 runs of one) and for
//!   1,000: from the moment the tool returns to the moment the set yields
//!   its outcome, p50, p99 and max; completions spread over 2 s, and all at
//!   one instant;
//! * for contrast, 1,000 separate `await_task` waits on the same tasks.
//!
//! It prints the numbers and PASS or MISS for each target; a miss is
//! reported, not asserted. Without `--bench` (as under `cargo test
//! --benches`) it runs a smoke version with 20 tasks whose numbers mean
//! nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks --bench many
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use mcp_tasks::client::ListenChannel;
use mcp_tasks::server::http::{HttpLimits, StreamableHttpServer, serve_with_limits};
use mcp_tasks::server::{TaskRuntime, ToolTasks};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, ListenMode, TaskState, TasksClient};
use mcp_tasks_testkit::stats::{percentile_duration as percentile, verdict};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleServer, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::watch;

/// When each task's tool returned, by tag.
static FINISHED: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Mutex::default);

/// The requests the server received, by method, and the most `tasks/get`
/// in flight at once.
#[derive(Default)]
struct Counts {
    by_method: Mutex<HashMap<String, u64>>,
    gets_in_flight: AtomicU64,
    most_gets_in_flight: AtomicU64,
}

impl Counts {
    fn of(&self, method: &str) -> u64 {
        let counts = self.by_method.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(method).copied().unwrap_or(0)
    }

    fn total(&self) -> u64 {
        let counts = self.by_method.lock().unwrap_or_else(|p| p.into_inner());
        counts.values().sum()
    }

    fn reset(&self) {
        self.by_method
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.most_gets_in_flight.store(0, Ordering::Relaxed);
    }
}

/// A server whose `finish` tool waits for the run's gate to open, then
/// `delay_ms` more, records when it returns, and completes with its tag.
#[derive(Clone)]
struct Server {
    runtime: TaskRuntime,
    gate: watch::Receiver<bool>,
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
        let delay = arguments
            .get("delay_ms")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let mut gate = self.gate.clone();
        self.runtime
            .call_tool(
                &request,
                &context,
                &ToolTasks::required(),
                move |_task| async move {
                    let _ = gate.wait_for(|open| *open).await;
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    FINISHED
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(tag.clone(), Instant::now());
                    Ok(CallToolResult::success(vec![ContentBlock::text(tag)]))
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

/// Counts each POST by its `Mcp-Method`, and the `tasks/get` in flight.
async fn count(counts: Arc<Counts>, request: Request, next: Next) -> Response {
    let method = request
        .headers()
        .get("mcp-method")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    *counts
        .by_method
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(method.clone())
        .or_default() += 1;
    if method != "tasks/get" {
        return next.run(request).await;
    }
    let now = counts.gets_in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    counts.most_gets_in_flight.fetch_max(now, Ordering::Relaxed);
    let response = next.run(request).await;
    counts.gets_in_flight.fetch_sub(1, Ordering::Relaxed);
    response
}

struct Serving {
    server: Server,
    url: String,
    counts: Arc<Counts>,
    gate: watch::Sender<bool>,
}

async fn serve() -> anyhow::Result<Serving> {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(1000))
        .with_max_tasks_per_caller(None)
        .with_max_listen_streams(4096)
        .with_max_listen_streams_per_caller(4096)
        .build();
    let (gate, opened) = watch::channel(false);
    let server = Server {
        runtime,
        gate: opened,
    };
    let counts = Arc::new(Counts::default());
    let counted = counts.clone();
    let router = StreamableHttpServer::new(server.clone(), server.runtime.clone())
        .router()
        .layer(axum::middleware::from_fn(
            move |request: Request, next: Next| count(counted.clone(), request, next),
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let mut limits = HttpLimits::default();
    limits.max_connections = 8192;
    tokio::spawn(async move { serve_with_limits(listener, router, &limits).await });
    Ok(Serving {
        server,
        url,
        counts,
        gate,
    })
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

/// How the completions of a run are spread.
#[derive(Clone, Copy)]
enum Spread {
    /// At random moments over 2 s.
    Over2s,
    /// All at once.
    Burst,
}

/// How the tasks of a run are awaited.
#[derive(Clone, Copy, PartialEq)]
enum Awaiting {
    /// One `await_each` on the whole set.
    Set(ListenMode),
    /// One `await_task` per task, all at once.
    Separately,
}

/// What one run measured.
struct Run {
    tasks: usize,
    latencies: Vec<Duration>,
    streams: u64,
    most_open: usize,
    gets: u64,
    most_gets_in_flight: u64,
    requests: u64,
    took: Duration,
}

/// Creates `n` tasks (gated), awaits them as `awaiting` says, opens the
/// gate once the waits are settled, and measures.
async fn run(n: usize, spread: Spread, awaiting: Awaiting, round: u64) -> anyhow::Result<Run> {
    let serving = serve().await?;
    let client = client(&serving.url).await?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ round);
    let mut tasks: Vec<TaskState> = Vec::with_capacity(n);
    for i in 0..n {
        let delay = match spread {
            Spread::Over2s => rng.next() % 2000,
            Spread::Burst => 0,
        };
        let Value::Object(arguments) = json!({"tag": format!("{round}-{i}"), "delay_ms": delay})
        else {
            unreachable!("an object");
        };
        match client
            .call_tool("finish", Some(arguments), CallOptions::default())
            .await?
        {
            CallResponse::Task(state) => tasks.push(state),
            other => anyhow::bail!("finish made no task: {other:?}"),
        }
    }
    serving.counts.reset();
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(120)));
    let seen: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let waiting = {
        let (client, seen, tasks) = (client.clone(), seen.clone(), tasks.clone());
        tokio::spawn(async move {
            let record = |outcome: Result<mcp_tasks::TaskOutcome, mcp_tasks::Error>| {
                let at = Instant::now();
                let result = outcome?.into_result()?;
                let tag = result
                    .content
                    .first()
                    .and_then(|content| content.as_text())
                    .map(|text| text.text.clone())
                    .unwrap_or_default();
                seen.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((tag, at));
                Ok::<_, mcp_tasks::Error>(())
            };
            match awaiting {
                Awaiting::Set(mode) => {
                    let options = options.with_listen(mode);
                    let mut outcomes = client.await_each(&tasks, &options);
                    while let Some((_, outcome)) = outcomes.next().await {
                        record(outcome)?;
                    }
                }
                Awaiting::Separately => {
                    let mut waits = futures::stream::FuturesUnordered::new();
                    for task in &tasks {
                        waits.push(client.await_task(task, &options));
                    }
                    while let Some(outcome) = waits.next().await {
                        record(outcome)?;
                    }
                }
            }
            Ok::<_, mcp_tasks::Error>(())
        })
    };
    // Settled: the streams are open and each task was read once (or, when
    // polling, the first round went out).
    let settling = Instant::now();
    let runtime = &serving.server.runtime;
    let listening = !matches!(awaiting, Awaiting::Set(ListenMode::Poll));
    while serving.counts.of("tasks/get") < n as u64
        || (listening && runtime.open_subscriptions() == 0)
    {
        anyhow::ensure!(
            settling.elapsed() < Duration::from_secs(60),
            "the waits did not settle"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let most_open = runtime.open_subscriptions();
    let started = Instant::now();
    serving.gate.send_replace(true);
    waiting.await??;
    let took = started.elapsed();
    let finished = std::mem::take(&mut *FINISHED.lock().unwrap_or_else(|p| p.into_inner()));
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
    anyhow::ensure!(seen.len() == n, "{} of {n} outcomes", seen.len());
    let mut latencies: Vec<Duration> = seen
        .iter()
        .filter_map(|(tag, at)| Some(at.saturating_duration_since(*finished.get(tag)?)))
        .collect();
    anyhow::ensure!(latencies.len() == n, "a completion was not recorded");
    latencies.sort();
    let counts = &serving.counts;
    let measured = Run {
        tasks: n,
        latencies,
        streams: counts.of("subscriptions/listen"),
        most_open,
        gets: counts.of("tasks/get"),
        most_gets_in_flight: counts.most_gets_in_flight.load(Ordering::Relaxed),
        requests: counts.total(),
        took,
    };
    client.close().await;
    Ok(measured)
}

/// [`run`] of one task, `times` times over: one sample each, merged (the
/// counts are the first run's).
async fn one_task(times: u64, spread: Spread, round: u64) -> anyhow::Result<Run> {
    let mut merged = run(1, spread, Awaiting::Set(ListenMode::Auto), round * 1000).await?;
    for again in 1..times {
        let next = run(
            1,
            spread,
            Awaiting::Set(ListenMode::Auto),
            round * 1000 + again,
        )
        .await?;
        merged.latencies.extend(next.latencies);
        merged.took = merged.took.max(next.took);
    }
    merged.latencies.sort();
    Ok(merged)
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

fn report(name: &str, run: &Run) {
    println!(
        "{name:<34} {:>5} tasks: latency ({:>4} samples) p50 {:>9}, p99 {:>9}, max {:>9}; \
         listen streams {:>4} (open at once {:>4}); tasks/get {:>5} (at most {} in flight); \
         requests {:>5}; {:.2} s",
        run.tasks,
        run.latencies.len(),
        ms(percentile(&run.latencies, 0.5)),
        ms(percentile(&run.latencies, 0.99)),
        ms(run.latencies.last().copied().unwrap_or_default()),
        run.streams,
        run.most_open,
        run.gets,
        run.most_gets_in_flight,
        run.requests,
        run.took.as_secs_f64(),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    let (n, repeats) = if full { (1000, 20) } else { (20, 2) };
    println!(
        "mcp-tasks many-tasks benchmark ({}): {} cores, HTTP on 127.0.0.1, one tokio runtime with \
         2 workers; the server suggests pollIntervalMs 1000; latency is from the tool returning to \
         the set yielding its outcome",
        if full {
            "full run"
        } else {
            "smoke run without --bench: the numbers mean nothing"
        },
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    let listen = Awaiting::Set(ListenMode::Auto);
    println!("\n== completions spread over 2 s");
    let one = one_task(repeats, Spread::Over2s, 1).await?;
    report("await_each, listening (1 task)", &one);
    let many = run(n, Spread::Over2s, listen, 2).await?;
    report("await_each, listening", &many);
    let polled = run(n, Spread::Over2s, Awaiting::Set(ListenMode::Poll), 3).await?;
    report("await_each, polling", &polled);
    let separate = run(n, Spread::Over2s, Awaiting::Separately, 4).await?;
    report("await_task each, listening", &separate);

    println!("\n== completions all at one instant");
    let burst_one = one_task(repeats, Spread::Burst, 5).await?;
    report("await_each, listening (1 task)", &burst_one);
    let burst = run(n, Spread::Burst, listen, 6).await?;
    report("await_each, listening", &burst);

    println!("\n== targets");
    let streams_bound = n.div_ceil(mcp_tasks::client::many::TASKS_PER_STREAM) as u64;
    println!(
        "{} {n} tasks on at most {streams_bound} listen stream(s): {} opened, {} open at once \
         (separate waits: {} opened)",
        verdict(many.streams <= streams_bound && many.most_open as u64 <= streams_bound),
        many.streams,
        many.most_open,
        separate.streams,
    );
    // Listening, the set reads each task once (after its stream is open)
    // and never polls: no poll loop at all. Polling, its one queue keeps at
    // most POLLS_IN_FLIGHT tasks/get in flight: one loop, not n.
    println!(
        "{} no poll loop while listening: {} tasks/get for {n} tasks (one read each)",
        verdict(many.gets <= n as u64),
        many.gets,
    );
    let in_flight = mcp_tasks::client::many::POLLS_IN_FLIGHT as u64;
    println!(
        "{} one poll loop when polling: at most {in_flight} tasks/get in flight: {} ({} sent in {:.2} s)",
        verdict(polled.most_gets_in_flight <= in_flight),
        polled.most_gets_in_flight,
        polled.gets,
        polled.took.as_secs_f64(),
    );
    for (what, one, many) in [
        ("spread over 2 s", &one, &many),
        ("all at once", &burst_one, &burst),
    ] {
        let (one_p50, many_p50) = (
            percentile(&one.latencies, 0.5),
            percentile(&many.latencies, 0.5),
        );
        let (one_p99, many_p99) = (
            percentile(&one.latencies, 0.99),
            percentile(&many.latencies, 0.99),
        );
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
        let line = format!(
            "{n} completions {what}: p50 {} vs one task's {} ({:.2}x), p99 {} vs {} ({:.2}x)",
            ms(many_p50),
            ms(one_p50),
            ratio(many_p50, one_p50),
            ms(many_p99),
            ms(one_p99),
            ratio(many_p99, one_p99),
        );
        if what == "spread over 2 s" {
            // The target: as soon as one task's (p50 within 1 ms: at a
            // fraction of a millisecond a ratio alone is noise).
            println!(
                "{} {line}",
                verdict(many_p50 <= one_p50 + Duration::from_millis(1))
            );
        } else {
            println!("(no target) {line}");
        }
    }
    Ok(())
}
