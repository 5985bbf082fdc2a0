//! What the operator's view costs: `tasks/get` and task creation
//! (`tools/call`) over Streamable HTTP on 127.0.0.1, through the serving
//! recipe, on one server per [`Variant`], measured in one run in
//! interleaved rounds, reported as each variant's rate over the rate of
//! [`Variant::Off`].
//!
//! * `Off`: no observer, the store as given, no metrics recorded (a
//!   recorder that drops everything, as when none is installed);
//! * `Control`: `Off` again, on a server of its own, for the noise floor;
//! * `Metrics`: what `serve --admin` runs: the [`MetricsObserver`], the
//!   store inside a [`MeteredStore`], the Prometheus recorder of the
//!   operator listener recording, and `/metrics` rendered every second
//!   while the run lasts (a scrape 15 times as often as Prometheus's
//!   default).
//!
//! The recorder of the `metrics` facade is one per process, so the bench
//! installs a switch in front of the Prometheus recorder and turns it on
//! for the rounds of the variants that record. A further variant (tracing
//! at a 1 % sampler, say) is one more arm of [`Variant`]: its runtime in
//! [`Variant::runtime`], whether it records in [`Variant::records`].
//!
//! It prints a table and PASS or MISS against the floor of 95 %; a miss is
//! reported, not asserted, so the run exits 0. Without `--bench` (as under
//! `cargo test --benches`) it runs a small smoke version.
//!
//! ```text
//! cargo bench -p mcp-tasks --bench operator
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::future::BoxFuture;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::operator::prometheus_recorder;
use mcp_tasks::server::{
    AdmissionLimits, MeteredStore, MetricsObserver, TaskRuntime, TaskRuntimeBuilder, ToolTasks,
};
use mcp_tasks::store::{MemoryStore, SharedStore};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::PrometheusRecorder;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use tokio::task::JoinSet;

const PROTOCOL: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";
/// Requests in flight.
const CONCURRENCY: usize = 64;
/// The floor each variant's rate must reach, as a share of `Off`'s.
const FLOOR: f64 = 0.95;

/// A server configuration measured against [`Variant::Off`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Nothing observed, nothing recorded.
    Off,
    /// [`Variant::Off`] again, on a server of its own: the noise floor of
    /// the comparison (a difference of the same servers' rates).
    Control,
    /// The metrics of `serve --admin`.
    Metrics,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Off, Variant::Control, Variant::Metrics];

    fn name(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::Control => "off again, a second server (noise floor)",
            Variant::Metrics => "metrics on (recorded, scraped every 1 s)",
        }
    }

    /// The runtime of this variant's server, on a fresh memory store.
    fn runtime(self) -> TaskRuntimeBuilder {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let runtime = |store: SharedStore| {
            // One caller makes every task: no per-caller cap, no bound on
            // running tools.
            TaskRuntime::builder(store)
                .with_max_tasks_per_caller(None)
                .with_admission(AdmissionLimits::unbounded())
        };
        match self {
            Variant::Off | Variant::Control => runtime(store),
            Variant::Metrics => runtime(MeteredStore::shared(store, "memory"))
                .with_observer(Arc::new(MetricsObserver::new())),
        }
    }

    /// Whether the metrics recorder records during this variant's rounds.
    fn records(self) -> bool {
        matches!(self, Variant::Metrics)
    }
}

/// The process's recorder: the Prometheus one while `on`, else nothing.
struct Switch {
    on: AtomicBool,
    prometheus: PrometheusRecorder,
}

impl Recorder for Switch {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.prometheus.describe_counter(key, unit, description);
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.prometheus.describe_gauge(key, unit, description);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.prometheus.describe_histogram(key, unit, description);
    }
    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::Relaxed) {
            self.prometheus.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }
    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::Relaxed) {
            self.prometheus.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::Relaxed) {
            self.prometheus.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

/// The server: `wait` makes a task that runs until the process ends.
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
            .call_tool(&request, &context, &ToolTasks::required(), |_| {
                std::future::pending::<Result<CallToolResult, ErrorData>>()
            })
            .await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// What a load did.
#[derive(Clone, Copy, Default)]
struct Rate {
    ok: u64,
    failed: u64,
    seconds: f64,
}

impl Rate {
    fn per_second(self) -> f64 {
        self.ok as f64 / self.seconds
    }
}

/// Runs `op` from [`CONCURRENCY`] loops for `window`.
async fn drive<F, Fut>(window: Duration, op: F) -> Rate
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let mut loops = JoinSet::new();
    for _ in 0..CONCURRENCY {
        let op = op.clone();
        loops.spawn(async move {
            let mut rate = Rate::default();
            while started.elapsed() < window {
                if op().await {
                    rate.ok += 1;
                } else {
                    rate.failed += 1;
                }
            }
            rate
        });
    }
    let mut rate = Rate::default();
    while let Some(joined) = loops.join_next().await {
        let part = joined.unwrap_or(Rate {
            failed: 1,
            ..Rate::default()
        });
        rate.ok += part.ok;
        rate.failed += part.failed;
    }
    rate.seconds = started.elapsed().as_secs_f64();
    rate
}

/// One load: each call runs it once.
type Load = Box<dyn Fn() -> BoxFuture<'static, Rate> + Send + Sync>;

fn headers(method: &str, name: &str) -> anyhow::Result<reqwest::header::HeaderMap> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("content-type", "application/json".parse()?);
    headers.insert("accept", "application/json, text/event-stream".parse()?);
    headers.insert("mcp-protocol-version", PROTOCOL.parse()?);
    headers.insert("mcp-method", method.parse()?);
    headers.insert("mcp-name", name.parse()?);
    Ok(headers)
}

/// POSTs `body` with `headers` to `url` for `window`, `switch` set to `records` first.
fn load(
    client: &reqwest::Client,
    url: &reqwest::Url,
    headers: reqwest::header::HeaderMap,
    body: &'static str,
    window: Duration,
    (switch, records): (&'static Switch, bool),
) -> Load {
    let (client, url) = (client.clone(), url.clone());
    Box::new(move || {
        switch.on.store(records, Ordering::Relaxed);
        let (client, url, headers) = (client.clone(), url.clone(), headers.clone());
        Box::pin(drive(window, move || {
            let request = client.post(url.clone()).headers(headers.clone()).body(body);
            async move {
                match request.send().await {
                    Ok(reply) if reply.status().is_success() => {
                        reply.bytes().await.is_ok_and(|body| {
                            !body.is_empty()
                                && !body.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\"")
                        })
                    }
                    _ => false,
                }
            }
        }))
    })
}

/// Each load once per round, forwards then backwards, after a warm-up round.
async fn rounds(loads: &[Load], rounds: usize) -> Vec<Vec<Rate>> {
    for load in loads {
        load().await;
    }
    let mut measured = vec![Vec::new(); loads.len()];
    for round in 0..rounds {
        for k in 0..loads.len() {
            let i = if round % 2 == 0 {
                k
            } else {
                loads.len() - 1 - k
            };
            measured[i].push(loads[i]().await);
        }
    }
    measured
}

fn total(rates: &[Rate]) -> Rate {
    rates.iter().fold(Rate::default(), |sum, rate| Rate {
        ok: sum.ok + rate.ok,
        failed: sum.failed + rate.failed,
        seconds: sum.seconds + rate.seconds,
    })
}

/// The ratio of the totals, and the middle half of the per-round ratios.
fn ratio(of: &[Rate], to: &[Rate]) -> (f64, f64, f64) {
    let mut each: Vec<f64> = of
        .iter()
        .zip(to)
        .map(|(of, to)| of.per_second() / to.per_second())
        .collect();
    each.sort_by(f64::total_cmp);
    let at = |q: usize| each.get(each.len() * q / 4).copied().unwrap_or(f64::NAN);
    (
        total(of).per_second() / total(to).per_second(),
        at(1),
        at(3),
    )
}

async fn serve(variant: Variant) -> anyhow::Result<SocketAddr> {
    let server = Server {
        runtime: variant.runtime().build(),
    };
    let router = StreamableHttpServer::new(server.clone(), server.runtime.clone()).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(mcp_tasks::server::http::serve(listener, router));
    Ok(address)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    let (round_count, window) = if full {
        (20, Duration::from_millis(500))
    } else {
        (2, Duration::from_millis(50))
    };
    let prometheus = prometheus_recorder()?;
    let handle = prometheus.handle();
    let switch: &'static Switch = Box::leak(Box::new(Switch {
        on: AtomicBool::new(false),
        prometheus,
    }));
    metrics::set_global_recorder(switch).map_err(|_| anyhow::anyhow!("a recorder is installed"))?;
    mcp_tasks::server::metrics::describe();
    // The scrape, every second of the run.
    let scrapes = Arc::new(AtomicUsize::new(0));
    {
        let scrapes = scrapes.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                handle.run_upkeep();
                std::hint::black_box(handle.render());
                scrapes.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONCURRENCY)
        .timeout(Duration::from_secs(10))
        .build()?;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let call: &'static str = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "wait", "_meta": meta}})
    .to_string()
    .leak();
    let mut gets = Vec::new();
    let mut creates = Vec::new();
    for variant in Variant::ALL {
        let url = reqwest::Url::parse(&format!("http://{}/mcp", serve(variant).await?))?;
        let created: Value = client
            .post(url.clone())
            .headers(headers("tools/call", "wait")?)
            .body(call)
            .send()
            .await?
            .json()
            .await?;
        let id = created["result"]["taskId"]
            .as_str()
            .with_context(|| format!("{}: no task: {created}", variant.name()))?
            .to_owned();
        let get: &'static str = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
            "params": {"taskId": id, "_meta": meta}})
        .to_string()
        .leak();
        let switch = (switch, variant.records());
        gets.push(load(
            &client,
            &url,
            headers("tasks/get", &id)?,
            get,
            window,
            switch,
        ));
        creates.push(load(
            &client,
            &url,
            headers("tools/call", "wait")?,
            call,
            window,
            switch,
        ));
    }
    println!(
        "== tasks/get and creation over HTTP on 127.0.0.1, {CONCURRENCY} in flight, {round_count} \
         rounds of {} ms per variant, interleaved",
        window.as_millis()
    );
    let mut verdicts = Vec::new();
    for (what, loads) in [("tasks/get", &gets), ("creation (tools/call)", &creates)] {
        let measured = rounds(loads, round_count).await;
        println!("\n{what}");
        println!(
            "{:<44} {:>12}  of off (middle half of rounds)",
            "variant", "per second"
        );
        for (variant, rates) in Variant::ALL.iter().zip(&measured) {
            let (all, low, high) = ratio(rates, &measured[0]);
            let sum = total(rates);
            println!(
                "{:<44} {:>12.0}  {:.1}% ({:.0}..{:.0}%){}",
                variant.name(),
                sum.per_second(),
                all * 100.0,
                low * 100.0,
                high * 100.0,
                if sum.failed > 0 {
                    format!(", {} failed", sum.failed)
                } else {
                    String::new()
                }
            );
            if *variant == Variant::Metrics {
                verdicts.push((format!("{what}, {}", variant.name()), all, sum.failed == 0));
            }
        }
    }
    println!(
        "\n(/metrics rendered {} times during the run)",
        scrapes.load(Ordering::Relaxed)
    );
    for (name, all, clean) in verdicts {
        let pass = all >= FLOOR && clean;
        println!(
            "{}: {name}: {:.1}% of off (floor {:.0}%)",
            if pass { "PASS" } else { "MISS" },
            all * 100.0,
            FLOOR * 100.0
        );
    }
    Ok(())
}
