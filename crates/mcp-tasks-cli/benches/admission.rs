//! Admission under load, against the `mcp-tasks serve` binary over HTTP on
//! 127.0.0.1 (raw requests from a reqwest client, the server a child
//! process, as an operator runs it):
//!
//! * **Cost**: task creations per second with admission on (the default
//!   bounds, never reached: `sleep` tools of 10 ms, so about a hundred run
//!   at once) against admission off (`--max-running 0`: no bound, so no queue), or,
//!   with `MCP_TASKS_BASELINE=PATH`, against the `mcp-tasks` binary at PATH
//!   (one built before admission existed: the bookkeeping runs either way,
//!   so only that shows its whole cost), 16 requests in flight, in
//!   alternating rounds; the target is a ratio of at least 0.95.
//! * **Flood**: 50,000 creations of ten-minute tasks from 500 callers that
//!   each send another `Authorization` header, 64 in flight, against
//!   `--max-queued 1000`, twice: with unauthenticated callers counted as one
//!   (the default: the per-caller cap refuses) and counted apart by header
//!   (`--quota-by-header`: the running bound and the queue refuse). Every
//!   answer is a task or the documented refusal
//!   (HTTP 503, `Retry-After`, -32603 with `data.reason`); `tasks/get` of
//!   another caller's task stays fast beside it (p50/p99 against the idle
//!   server's); the server's RSS before, after, and after a second flood
//!   (bounded: the second adds little).
//!
//! It prints the numbers and PASS or MISS for each target; a miss is
//! reported, not asserted. Without `--bench` (as under `cargo test
//! --benches`) it runs a smoke version whose numbers mean nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks-cli --bench admission
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use mcp_tasks_testkit::stats::{percentile_ms as percentile, verdict};
use serde_json::Value;

#[path = "support/serve.rs"]
#[allow(dead_code, reason = "each bench uses a part of it")]
mod serve;

use serve::{BIN, META, Server};

/// How a creation was answered.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Answer {
    Task(String),
    /// A 503 with `Retry-After` and `data.reason`.
    Refused(String),
    Other(String),
}

/// POSTs one `tools/call` of `sleep` for `ms` as `caller`.
async fn create(http: &reqwest::Client, url: &str, caller: &str, ms: u64) -> Answer {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":{ms}}},{META}}}}}"#
    );
    let sent = serve::mcp_post(http, url, "tools/call", "sleep")
        .header("Authorization", format!("Bearer {caller}"))
        .body(body)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(error) => return Answer::Other(format!("transport: {error}")),
    };
    let status = response.status().as_u16();
    let retry_after = response.headers().contains_key("retry-after");
    let bytes = response.bytes().await.unwrap_or_default();
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if value.pointer("/result/resultType") == Some(&Value::from("task"))
        && let Some(id) = value.pointer("/result/taskId").and_then(Value::as_str)
    {
        return Answer::Task(id.to_owned());
    }
    let reason = value.pointer("/error/data/reason").and_then(Value::as_str);
    match (status, retry_after, reason) {
        (503, true, Some(reason)) if value["error"]["code"] == -32603 => {
            Answer::Refused(reason.to_owned())
        }
        _ => Answer::Other(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        )),
    }
}

/// One `tasks/get` of `id` as `caller`; its latency, if answered with the task.
async fn get(http: &reqwest::Client, url: &str, caller: &str, id: &str) -> Option<Duration> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{id}",{META}}}}}"#
    );
    let started = Instant::now();
    let response = serve::mcp_post(http, url, "tasks/get", id)
        .header("Authorization", format!("Bearer {caller}"))
        .body(body)
        .send()
        .await
        .ok()?;
    let bytes = response.bytes().await.ok()?;
    let took = started.elapsed();
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    (value.pointer("/result/taskId").and_then(Value::as_str) == Some(id)).then_some(took)
}

/// Creations per second of `sleep` for 10 ms, `inflight` at once, for `run`.
async fn creation_rate(url: &str, inflight: usize, run: Duration) -> anyhow::Result<f64> {
    let http = reqwest::Client::new();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut workers = Vec::new();
    for n in 0..inflight {
        let (http, url, done, stop) = (http.clone(), url.to_owned(), done.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let caller = format!("rate-{n}");
            while !stop.load(Ordering::Relaxed) {
                match create(&http, &url, &caller, 10).await {
                    Answer::Task(_) => done.fetch_add(1, Ordering::Relaxed),
                    other => return Err(anyhow::anyhow!("not a task: {other:?}")),
                };
            }
            Ok(())
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// Probes `tasks/get` of one task every 5 ms until `stop`; the latencies.
async fn probe(url: String, id: String, stop: Arc<AtomicBool>) -> (Vec<Duration>, u64) {
    let http = reqwest::Client::new();
    let (mut seen, mut failed) = (Vec::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        match get(&http, &url, "probe", &id).await {
            Some(took) => seen.push(took),
            None => failed += 1,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    seen.sort();
    (seen, failed)
}

/// `count` creations of ten-minute tasks from `callers` callers, `inflight`
/// at once: how each was answered, and the probe's latencies beside.
async fn flood(
    server: &Server,
    probe_id: &str,
    callers: usize,
    count: usize,
    inflight: usize,
) -> anyhow::Result<(BTreeMap<String, u64>, Vec<Duration>, u64, Duration)> {
    let stop = Arc::new(AtomicBool::new(false));
    let probing = tokio::spawn(probe(server.url.clone(), probe_id.to_owned(), stop.clone()));
    let http = reqwest::Client::new();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..inflight {
        let (http, url, next) = (http.clone(), server.url.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut answers: BTreeMap<String, u64> = BTreeMap::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                if n >= count {
                    return answers;
                }
                let caller = format!("flood-{}", n % callers);
                let key = match create(&http, &url, &caller, 600_000).await {
                    Answer::Task(_) => "task".to_owned(),
                    Answer::Refused(reason) => format!("503 {reason}"),
                    Answer::Other(other) => {
                        format!("other: {}", other.chars().take(160).collect::<String>())
                    }
                };
                *answers.entry(key).or_default() += 1;
            }
        }));
    }
    let mut answers: BTreeMap<String, u64> = BTreeMap::new();
    for worker in workers {
        for (key, n) in worker.await? {
            *answers.entry(key).or_default() += n;
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (latencies, failed) = probing.await?;
    Ok((answers, latencies, failed, took))
}

async fn run(full: bool) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "mcp-tasks admission benchmark ({}): {cores} cores, `mcp-tasks serve --http --store memory` as a child process, raw HTTP on 127.0.0.1",
        if full { "full run" } else { "smoke run" }
    );

    // == Cost: admission on (bounds not reached) against off: this
    // binary without bounds, or (MCP_TASKS_BASELINE=path) a binary built
    // before admission existed.
    let on = Server::start_binary(BIN, &["--store", "memory", "--max-tasks-per-caller", "0"])?;
    let baseline = std::env::var("MCP_TASKS_BASELINE").ok();
    let (off, off_name) = match &baseline {
        Some(binary) => (
            Server::start_binary(
                binary,
                &["--store", "memory", "--max-tasks-per-caller", "0"],
            )?,
            format!("the binary before admission ({binary})"),
        ),
        None => (
            Server::start_binary(
                BIN,
                &[
                    "--store",
                    "memory",
                    "--max-tasks-per-caller",
                    "0",
                    "--max-running",
                    "0",
                ],
            )?,
            "off (--max-running 0)".to_owned(),
        ),
    };
    let (rounds, round) = if full {
        (10, Duration::from_secs(2))
    } else {
        (1, Duration::from_millis(200))
    };
    creation_rate(&on.url, 16, round / 2).await?;
    creation_rate(&off.url, 16, round / 2).await?;
    let (mut on_total, mut off_total) = (0.0, 0.0);
    let mut ratios = Vec::new();
    for n in 0..rounds {
        // Forwards, then backwards, so neither always goes first.
        let (a, b) = if n % 2 == 0 { (&on, &off) } else { (&off, &on) };
        let first = creation_rate(&a.url, 16, round).await?;
        let second = creation_rate(&b.url, 16, round).await?;
        let (rate_on, rate_off) = if n % 2 == 0 {
            (first, second)
        } else {
            (second, first)
        };
        on_total += rate_on;
        off_total += rate_off;
        ratios.push(rate_on / rate_off);
    }
    drop((on, off));
    ratios.sort_by(f64::total_cmp);
    let ratio = on_total / off_total;
    println!(
        "\n== creations/s, 16 in flight, sleep tools of 10 ms ({rounds} rounds of {round:?} each)"
    );
    println!(
        "admission on (defaults, not reached) {:>9.0}/s; {off_name} {:>9.0}/s; ratio {ratio:.3} (rounds {:.3}..{:.3})",
        on_total / f64::from(rounds),
        off_total / f64::from(rounds),
        ratios[0],
        ratios[ratios.len() - 1]
    );

    println!("\n== targets");
    println!(
        "{} creation with admission on (bounds not reached) >= 0.95 of it off: {ratio:.3}",
        verdict(ratio >= 0.95)
    );

    // == Floods: callers counted as one (the default without tokens), so
    // the per-caller cap refuses; and counted apart by their header, so the
    // running bound and the queue are what refuse.
    for (name, flags) in [
        (
            "unauthenticated callers counted as one (the default)",
            &["--max-queued", "1000"][..],
        ),
        (
            "each header counted apart (--quota-by-header)",
            &["--max-queued", "1000", "--quota-by-header"][..],
        ),
    ] {
        flood_report(full, name, flags).await?;
    }
    Ok(())
}

/// Two floods against a server with `flags`, reported with their targets.
async fn flood_report(full: bool, name: &str, flags: &[&str]) -> anyhow::Result<()> {
    let (callers, count) = if full { (500, 50_000) } else { (20, 600) };
    let server = Server::start_binary(BIN, &[&["--store", "memory"], flags].concat())?;
    let http = reqwest::Client::new();
    let Answer::Task(probe_id) = create(&http, &server.url, "probe", 600_000).await else {
        bail!("the probe task was not created");
    };
    let rss_idle = server.rss_mib();
    let stop = Arc::new(AtomicBool::new(false));
    let idle = tokio::spawn(probe(server.url.clone(), probe_id.clone(), stop.clone()));
    tokio::time::sleep(if full {
        Duration::from_secs(3)
    } else {
        Duration::from_millis(300)
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let (idle, _) = idle.await?;
    let (answers, beside, failed, took) = flood(&server, &probe_id, callers, count, 64).await?;
    let rss_flood = server.rss_mib();
    let (answers2, beside2, failed2, took2) = flood(&server, &probe_id, callers, count, 64).await?;
    let rss_second = server.rss_mib();
    println!(
        "\n== flood, {name}: {count} creations of ten-minute tasks from {callers} callers with their own Authorization header, 64 in flight, `serve {}`",
        flags.join(" ")
    );
    for (name, (answers, took)) in [("first", (&answers, took)), ("second", (&answers2, took2))] {
        let listed: Vec<String> = answers.iter().map(|(k, n)| format!("{n} {k}")).collect();
        println!(
            "{name} flood in {:.1} s: {}",
            took.as_secs_f64(),
            listed.join(", ")
        );
    }
    println!(
        "tasks/get of another caller's task: idle p50 {:.2} ms p99 {:.2} ms ({} samples); during the first flood p50 {:.2} ms p99 {:.2} ms ({} samples, {failed} unanswered); during the second p50 {:.2} ms p99 {:.2} ms ({} samples, {failed2} unanswered)",
        percentile(&idle, 0.5),
        percentile(&idle, 0.99),
        idle.len(),
        percentile(&beside, 0.5),
        percentile(&beside, 0.99),
        beside.len(),
        percentile(&beside2, 0.5),
        percentile(&beside2, 0.99),
        beside2.len()
    );
    println!(
        "server RSS: {rss_idle:.1} MiB idle, {rss_flood:.1} MiB after the first flood, {rss_second:.1} MiB after the second"
    );
    let others: u64 = answers
        .iter()
        .chain(answers2.iter())
        .filter(|(k, _)| k.starts_with("other"))
        .map(|(_, n)| n)
        .sum();
    println!(
        "{} every answer to the flood is a task or the documented 503: {others} others",
        verdict(others == 0)
    );
    println!(
        "{} tasks/get answered throughout the floods: {} unanswered",
        verdict(failed + failed2 == 0),
        failed + failed2
    );
    let growth = rss_second - rss_flood;
    println!(
        "{} memory bounded: the second flood added {growth:.1} MiB (first: {:.1} MiB)",
        verdict(growth < (rss_flood - rss_idle).max(1.0) * 0.25 + 2.0),
        rss_flood - rss_idle
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(full))
}
