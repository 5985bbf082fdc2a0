//! `load`: a load test of a task server (not part of the test run; see
//! RELIABILITY.md for the command and its numbers).
//!
//! ```text
//! load --serve 'mcp-tasks serve --http 127.0.0.1:0 --store sqlite:/tmp/load.db --max-tasks-per-caller 0 --max-running 0' \
//!      [--tasks 10000] [--clients 64] [--seconds 60]
//! ```
//!
//! (`--max-running 0`: the live tasks all run, as in the runs RELIABILITY.md
//! reports, which came before admission; with the default bound of 1,024
//! the rest would wait in the queue.)
//!
//! It starts the server command (which must print `listening on URL`),
//! creates `--tasks` live tasks (the demo tool `sleep` for an hour), then has
//! `--clients` clients poll random tasks with `tasks/get` for `--seconds`,
//! and reports requests, errors, latency percentiles and the server's
//! resident memory (VmRSS) before, after creation and at its peak. It exits
//! 1 if any request failed.
#![allow(clippy::print_stdout, reason = "a load test reports on stdout")]

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcp_tasks::{CallOptions, CallResponse, TaskId, TasksClient};
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

struct Flags {
    serve: String,
    tasks: usize,
    clients: usize,
    seconds: u64,
}

fn flags() -> Result<Flags, String> {
    let mut flags = Flags {
        serve: String::new(),
        tasks: 10_000,
        clients: 64,
        seconds: 60,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number"))
        };
        match flag.as_str() {
            "--serve" => flags.serve = value.clone(),
            "--tasks" => flags.tasks = usize::try_from(number()?).unwrap_or(usize::MAX),
            "--clients" => flags.clients = usize::try_from(number()?).unwrap_or(1).max(1),
            "--seconds" => flags.seconds = number()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if flags.serve.is_empty() {
        return Err("--serve COMMAND is required".into());
    }
    Ok(flags)
}

/// The resident memory of process `pid`, in KiB (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

async fn client(url: &str) -> Result<TasksClient<()>, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .map(TasksClient::new)
        .map_err(|error| format!("cannot connect: {error}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("load: {error}");
            ExitCode::from(64)
        }
    }
}

async fn run() -> Result<bool, String> {
    let flags = flags()?;
    let mut server = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {}", flags.serve))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| format!("cannot start the server: {error}"))?;
    let pid = server.id();
    let mut line = String::new();
    BufReader::new(server.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(|error| format!("the server printed nothing: {error}"))?;
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or(format!("unexpected first line {line:?}"))?
        .to_owned();
    let result = load(&flags, &url, pid).await;
    let _ = server.kill();
    let _ = server.wait();
    result
}

async fn load(flags: &Flags, url: &str, pid: u32) -> Result<bool, String> {
    let rss_start = rss_kib(pid).unwrap_or(0);
    let creator = client(url).await?;
    let started = Instant::now();
    let mut ids: Vec<TaskId> = Vec::with_capacity(flags.tasks);
    let mut creating = tokio::task::JoinSet::new();
    let per_worker = flags.tasks.div_ceil(16);
    for worker in 0..16 {
        let creator = creator.clone();
        let count = per_worker.min(flags.tasks.saturating_sub(worker * per_worker));
        creating.spawn(async move {
            let mut made = Vec::with_capacity(count);
            for _ in 0..count {
                let arguments = json!({"ms": 3_600_000}).as_object().cloned();
                match creator
                    .call_tool("sleep", arguments, CallOptions::default())
                    .await
                {
                    Ok(CallResponse::Task(state)) => made.push(state.id),
                    Ok(other) => return Err(format!("sleep did not make a task: {other:?}")),
                    Err(error) => return Err(format!("tools/call failed: {error}")),
                }
            }
            Ok(made)
        });
    }
    while let Some(made) = creating.join_next().await {
        ids.extend(made.map_err(|error| error.to_string())??);
    }
    let created_in = started.elapsed();
    let rss_created = rss_kib(pid).unwrap_or(0);
    println!(
        "created {} live tasks in {:.1} s ({:.0}/s); server RSS {} MiB -> {} MiB ({:.0} B per task)",
        ids.len(),
        created_in.as_secs_f64(),
        ids.len() as f64 / created_in.as_secs_f64(),
        rss_start / 1024,
        rss_created / 1024,
        (rss_created.saturating_sub(rss_start) * 1024) as f64 / ids.len().max(1) as f64
    );

    let ids = Arc::new(ids);
    let requests = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(rss_created));
    let stop = Instant::now() + Duration::from_secs(flags.seconds);
    let mut polling = tokio::task::JoinSet::new();
    for n in 0..flags.clients {
        let poller = client(url).await?;
        let (ids, requests, errors) = (ids.clone(), requests.clone(), errors.clone());
        polling.spawn(async move {
            let mut latencies = Vec::new();
            let mut next = n;
            while Instant::now() < stop {
                next = (next * 7919 + 1) % ids.len().max(1);
                let sent = Instant::now();
                let read = poller.get(&ids[next]).await;
                latencies.push(sent.elapsed());
                requests.fetch_add(1, Ordering::Relaxed);
                if read.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            latencies
        });
    }
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            while Instant::now() < stop {
                if let Some(rss) = rss_kib(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let mut latencies = Vec::new();
    while let Some(more) = polling.join_next().await {
        latencies.extend(more.map_err(|error| error.to_string())?);
    }
    let _ = sampler.await;
    latencies.sort();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |latency| latency.as_secs_f64() * 1000.0)
    };
    let (requests, errors) = (
        requests.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
    );
    println!(
        "{} clients polled for {} s: {requests} tasks/get ({:.0}/s), {errors} errors, \
         latency p50 {:.2} ms, p99 {:.2} ms; server RSS peak {} MiB",
        flags.clients,
        flags.seconds,
        requests as f64 / flags.seconds.max(1) as f64,
        percentile(0.5),
        percentile(0.99),
        peak.load(Ordering::Relaxed) / 1024
    );
    Ok(errors == 0)
}
