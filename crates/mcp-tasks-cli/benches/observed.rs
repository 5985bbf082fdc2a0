//! What being observed costs `serve` (issue 56): `tasks/get` of one working
//! task over HTTP at 64 connections (wrk), `serve --http` on the memory
//! store, whose binary has metrics and tracing compiled in, against the
//! ceiling: a bare axum endpoint in this process that answers every POST
//! with the same bytes as `serve`'s answer, on the same serving loop and 2
//! worker threads.
//!
//! * **observed, no endpoint**: `serve` as an operator runs it without
//!   `--otlp-endpoint` (metrics recorded; no tracer provider, so no spans).
//! * **OTLP, default sampler**: `serve --otlp-endpoint` to a collector in
//!   this process that accepts and drops every export (counted, so that
//!   the spans are seen to go out); the SDK's default sampler samples every
//!   request, its batch processor exports them.
//! * **other build** (`MCP_TASKS_BIN=/path/to/mcp-tasks`): that binary as
//!   in the first row, for a before/after run.
//!
//! Each round runs every variant once, in an order that rotates; each
//! variant's rate and `serve`'s CPU per request (`/proc`, user and system)
//! are the medians of its rounds. Targets: with no endpoint, CPU per
//! `tasks/get` <= 15 µs and the rate >= 0.75 of the ceiling's.
//!
//! ```sh
//! cargo bench -p mcp-tasks-cli --bench observed    # about 2 minutes once built
//! MCP_TASKS_BIN=/path/to/older/mcp-tasks cargo bench -p mcp-tasks-cli --bench observed
//! ```
//!
//! Needs `wrk`; without it, nothing is measured. Without `--bench` a smoke
//! run of one short round whose numbers mean nothing.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

#[path = "support/serve.rs"]
#[allow(dead_code, reason = "each bench uses part of the support")]
mod serve;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, bail};
use axum::body::Bytes;
use mcp_tasks_testkit::stats::{loadavg, median, verdict};
use serde_json::Value;
use serve::{META, Server, cpu_ticks, wrk_script};

const CONNECTIONS: usize = 64;

/// One wrk run: the rate and the CPU µs per request of the process `pid`.
struct Point {
    rate: f64,
    cpu_us: f64,
}

fn wrk(url: &str, pid: u32, script: &str, seconds: u64) -> anyhow::Result<Point> {
    let before = cpu_ticks(pid).context("the server's CPU")?;
    let output = Command::new("wrk")
        .args(["-t2", &format!("-c{CONNECTIONS}"), &format!("-d{seconds}s")])
        .args(["--timeout", "10s", "-s", script, url])
        .output()
        .context("run wrk")?;
    let cpu = (cpu_ticks(pid).context("the server's CPU")? - before) as f64 / serve::TICKS;
    let text = String::from_utf8_lossy(&output.stdout);
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        bail!("wrk saw failed requests: {text}");
    }
    let rate: f64 = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("Requests/sec:"))
        .and_then(|rest| rest.trim().parse().ok())
        .with_context(|| format!("wrk printed no rate: {text}"))?;
    Ok(Point {
        rate,
        cpu_us: cpu / (rate * seconds as f64).max(1.0) * 1e6,
    })
}

/// POSTs one MCP request to `url`: the answer's bytes.
async fn post(
    http: &reqwest::Client,
    url: &str,
    method: &str,
    name: &str,
    body: String,
) -> anyhow::Result<Bytes> {
    let reply = serve::mcp_post(http, url, method, name)
        .body(body)
        .send()
        .await?;
    Ok(reply.bytes().await?)
}

/// A working task of `server` (a `sleep` of an hour): the wrk script that
/// polls it, and the bytes of one answer.
async fn poll_script(
    http: &reqwest::Client,
    server: &Server,
    dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<(String, Bytes)> {
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":3600000}},{META}}}}}"#
    );
    let created: Value =
        serde_json::from_slice(&post(http, &server.url, "tools/call", "sleep", call).await?)?;
    let id = created
        .pointer("/result/taskId")
        .and_then(Value::as_str)
        .with_context(|| format!("not a task: {created}"))?;
    let get = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{id}",{META}}}}}"#
    );
    let answer = post(http, &server.url, "tasks/get", id, get.clone()).await?;
    let status: Value = serde_json::from_slice(&answer)?;
    if status.pointer("/result/status") != Some(&Value::from("working")) {
        bail!("tasks/get did not answer a working task: {status}");
    }
    let script = wrk_script(dir, &format!("{name}.lua"), "tasks/get", id, &get)?;
    Ok((script, answer))
}

/// Serves `router` on 127.0.0.1 with the library's serving loop: its URL.
async fn serve_here(router: axum::Router, path: &str) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = mcp_tasks::server::http::serve(listener, router).await;
    });
    Ok(format!("http://{address}{path}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    if Command::new("wrk").arg("-v").output().is_err() {
        println!("observed bench: wrk is not installed; nothing measured");
        return Ok(());
    }
    println!(
        "mcp-tasks observed ({}): tasks/get of a working task, c={CONNECTIONS}, `serve --http --store memory` as a child, wrk on the same machine; load average {}",
        if full { "full run" } else { "smoke run" },
        loadavg()
    );
    let exports = Arc::new(AtomicU64::new(0));
    let counted = exports.clone();
    let collector = serve_here(
        axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(body.len() as u64, Ordering::Relaxed);
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")]
                }
            }),
        ),
        "",
    )
    .await?;
    let bounds = [
        "--store",
        "memory",
        "--max-tasks-per-caller",
        "0",
        "--max-running",
        "0",
    ];
    let mut variants: Vec<(&str, Server)> = vec![
        ("observed, no endpoint", Server::start(&bounds)?),
        ("OTLP, default sampler", {
            let mut args = bounds.to_vec();
            args.extend(["--otlp-endpoint", collector.as_str()]);
            Server::start(&args)?
        }),
    ];
    if let Ok(other) = std::env::var("MCP_TASKS_BIN") {
        variants.push((
            "other build (MCP_TASKS_BIN)",
            Server::start_binary(&other, &bounds)?,
        ));
    }
    let dir = tempfile::tempdir()?;
    let http = reqwest::Client::new();
    let mut scripts = Vec::new();
    let mut answer = Bytes::new();
    for (n, (_, server)) in variants.iter().enumerate() {
        let (script, bytes) = poll_script(&http, server, dir.path(), &format!("get{n}")).await?;
        scripts.push(script);
        answer = bytes;
    }
    let fixed = answer.clone();
    let ceiling = serve_here(
        axum::Router::new().route(
            "/mcp",
            axum::routing::post(move |_body: Bytes| {
                let fixed = fixed.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        fixed,
                    )
                }
            }),
        ),
        "/mcp",
    )
    .await?;
    let (rounds, seconds) = if full { (9, 3) } else { (1, 1) };
    // Index `variants.len()` is the ceiling.
    let mut points: Vec<Vec<Point>> = (0..=variants.len()).map(|_| Vec::new()).collect();
    let me = std::process::id();
    for round in 0..rounds {
        for turn in 0..=variants.len() {
            // Forwards in even rounds, backwards in odd ones: no variant
            // always follows the same one.
            let n = variants.len() + 1;
            let which = if round % 2 == 0 {
                (round + turn) % n
            } else {
                (round + n - turn) % n
            };
            let point = match variants.get(which) {
                Some((_, server)) => {
                    let (url, pid, script) =
                        (server.url.clone(), server.pid(), scripts[which].clone());
                    tokio::task::spawn_blocking(move || wrk(&url, pid, &script, seconds)).await??
                }
                None => {
                    let (url, script) = (ceiling.clone(), scripts[0].clone());
                    tokio::task::spawn_blocking(move || wrk(&url, me, &script, seconds)).await??
                }
            };
            points[which].push(point);
            // What the OTLP variant's exporter still has queued goes out
            // before the next variant's turn.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
    let summary = |points: &[Point]| {
        let mut rates: Vec<f64> = points.iter().map(|point| point.rate).collect();
        let mut cpus: Vec<f64> = points.iter().map(|point| point.cpu_us).collect();
        (median(&mut rates), median(&mut cpus))
    };
    let (ceiling_rate, ceiling_cpu) = summary(&points[variants.len()]);
    println!("\n| variant | tasks/get/s | of the ceiling | server CPU per request |");
    println!("|---|---|---|---|");
    println!(
        "| bare axum (ceiling) | {ceiling_rate:.0} | 1.00 | {ceiling_cpu:.1} µs (this process) |"
    );
    let mut results = Vec::new();
    for (n, (name, _)) in variants.iter().enumerate() {
        let (rate, cpu) = summary(&points[n]);
        println!(
            "| {name} | {rate:.0} | {:.2} | {cpu:.1} µs |",
            rate / ceiling_rate
        );
        results.push((rate, cpu));
    }
    println!(
        "\n(medians of {rounds} rounds of {seconds} s each; the collector received {} bytes of spans)",
        exports.load(Ordering::Relaxed)
    );
    let (rate, cpu) = results[0];
    let (otlp_rate, otlp_cpu) = results[1];
    println!("\ntargets (issue 56):");
    println!(
        "  CPU per tasks/get, no endpoint <= 15 µs: {cpu:.1} µs {}",
        verdict(cpu <= 15.0)
    );
    println!(
        "  tasks/get >= 0.75 of the ceiling (c={CONNECTIONS}), no endpoint: {:.2} {}",
        rate / ceiling_rate,
        verdict(rate / ceiling_rate >= 0.75)
    );
    println!(
        "  with an OTLP endpoint, default sampler (no bound): {:.2} of the rate without, {:+.1} µs of CPU per request",
        otlp_rate / rate,
        otlp_cpu - cpu
    );
    Ok(())
}
