//! What tracing costs a server (feature `otel`): `tasks/get` and task
//! creation throughput over Streamable HTTP on 127.0.0.1 (the serving
//! recipe, 64 requests in flight), with tracing off (no tracer provider
//! installed: the `mcp-tasks serve` of a deployment without
//! `--otlp-endpoint`) and on at a 1 % sampler (the SDK with
//! `ParentBased(TraceIdRatioBased(0.01))`, batching into an exporter that
//! accepts and drops), measured in one run, in rotating rounds, on the
//! same server, with off measured twice for the noise floor. The target: on
//! ≥ 0.95 of off, for both.
//!
//! It prints a table and PASS or MISS; a miss is reported, not asserted.
//! Without `--bench` (as under `cargo test --benches`) it runs a small smoke
//! version whose numbers mean nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks --features otel --bench traces
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskRuntime, ToolTasks};
use mcp_tasks::store::MemoryStore;
use opentelemetry::global;
use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::noop::NoopTracerProvider;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use tokio::task::JoinSet;

const IN_FLIGHT: usize = 64;
const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// Two tools: `done` finishes in its first step (a creation is one store
/// write), `held` never does (the task polled).
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
        let held = request.name == "held";
        self.runtime
            .call_tool(
                &request,
                &context,
                &ToolTasks::required(),
                move |task| async move {
                    if held {
                        task.cancellation_token().cancelled().await;
                    }
                    Ok(CallToolResult::success(Vec::new()))
                },
            )
            .await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// Accepts every batch and drops it.
#[derive(Debug)]
struct Drop;

impl SpanExporter for Drop {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        std::hint::black_box(batch);
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tracing {
    Off,
    On,
    /// Off again: the noise floor (off against off, in the same rounds).
    OffAgain,
}

/// Installs (or removes) the global tracer provider and propagator.
fn set(tracing: Tracing, provider: &SdkTracerProvider) {
    match tracing {
        Tracing::Off | Tracing::OffAgain => {
            global::set_tracer_provider(NoopTracerProvider::new());
            global::set_text_map_propagator(TextMapCompositePropagator::new(Vec::new()));
        }
        Tracing::On => {
            global::set_tracer_provider(provider.clone());
            global::set_text_map_propagator(TraceContextPropagator::new());
        }
    }
}

/// Requests per second of `body` for `window`, `IN_FLIGHT` at a time.
async fn rate(
    client: &reqwest::Client,
    url: &str,
    method: &'static str,
    name: &str,
    body: impl Fn() -> String,
    window: Duration,
) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + window;
    let mut workers = JoinSet::new();
    for _ in 0..IN_FLIGHT {
        let (client, url, name, done) = (
            client.clone(),
            url.to_owned(),
            name.to_owned(),
            done.clone(),
        );
        let body = body();
        workers.spawn(async move {
            while Instant::now() < until {
                let answer = client
                    .post(&url)
                    .header("Content-Type", "application/json")
                    .header("Accept", "application/json, text/event-stream")
                    .header("MCP-Protocol-Version", "2026-07-28")
                    .header("Mcp-Method", method)
                    .header("Mcp-Name", &name)
                    .body(body.clone())
                    .send()
                    .await
                    .expect("an answer");
                assert!(answer.status().is_success(), "{}", answer.status());
                answer.bytes().await.expect("a body");
                done.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while workers.join_next().await.is_some() {}
    done.load(Ordering::Relaxed) as f64 / window.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let (rounds, window) = if full {
        (15, Duration::from_millis(1000))
    } else {
        (2, Duration::from_millis(50))
    };
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            0.01,
        ))))
        .with_batch_exporter(Drop)
        .build();
    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let server = Server {
        runtime: runtime.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
    let recipe = StreamableHttpServer::new(server, runtime);
    tokio::spawn(recipe.serve(listener));
    let client = reqwest::Client::new();

    // One task that stays working, for the polls.
    let created = client
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "held")
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"held","arguments":{{}},{META}}}}}"#
        ))
        .send()
        .await
        .expect("created");
    let created: serde_json::Value =
        serde_json::from_slice(&created.bytes().await.expect("a body")).expect("JSON");
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let get = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{id}",{META}}}}}"#
    );
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"done","arguments":{{}},{META}}}}}"#
    );

    let mut results: Vec<(Tracing, &str, f64)> = Vec::new();
    for round in 0..rounds {
        // Alternating order, so a drift of the shared machine hits both.
        let order = match round % 3 {
            0 => [Tracing::Off, Tracing::On, Tracing::OffAgain],
            1 => [Tracing::On, Tracing::OffAgain, Tracing::Off],
            _ => [Tracing::OffAgain, Tracing::Off, Tracing::On],
        };
        for tracing in order {
            set(tracing, &provider);
            let gets = rate(&client, &url, "tasks/get", &id, || get.clone(), window).await;
            results.push((tracing, "tasks/get", gets));
            let made = rate(&client, &url, "tools/call", "done", || call.clone(), window).await;
            results.push((tracing, "creation", made));
        }
    }
    set(Tracing::Off, &provider);
    let _ = provider.shutdown();

    println!(
        "| load | tracing off (req/s) | on, 1 % sampled (req/s) | on / off | target ≥ 0.95 | noise floor (off again / off) |"
    );
    println!("|---|---|---|---|---|---|");
    for load in ["tasks/get", "creation"] {
        let median = |tracing: Tracing| {
            let mut rates: Vec<f64> = results
                .iter()
                .filter(|(t, l, _)| *t == tracing && *l == load)
                .map(|(_, _, rate)| *rate)
                .collect();
            rates.sort_by(f64::total_cmp);
            rates[rates.len() / 2]
        };
        let (off, on) = (median(Tracing::Off), median(Tracing::On));
        let floor = median(Tracing::OffAgain) / off;
        let ratio = on / off;
        println!(
            "| {load} | {off:.0} | {on:.0} | {ratio:.3} | {} | {floor:.3} |",
            if ratio >= 0.95 { "PASS" } else { "MISS" }
        );
    }
    if !full {
        println!("(a smoke run: the numbers mean nothing)");
    }
}
