//! Ten thousand listeners (issue 31), against the `mcp-tasks serve` binary
//! over HTTP on 127.0.0.1, as an operator runs it:
//!
//! `serve --http --max-tasks-per-caller 0 --max-running 0 --max-connections
//! 12000 --max-listen-streams 11000 --max-listen-streams-per-caller 11000`
//! (one caller: no `--auth-tokens`, so every stream counts against the one
//! per-caller bound, raised to fit). The bench creates 10,001 `sleep` tasks
//! of an hour, then opens 10,000 `subscriptions/listen` streams, each a raw
//! HTTP/1.1 POST on its own TCP connection from this process (not the
//! server's), each following its own task, plus 100 following one shared
//! task, and reads each up to its acknowledgement. It measures:
//!
//! * **RSS per stream**: the server's `VmRSS` (`/proc/PID/status`) before
//!   and after opening, divided by the streams opened (target ≤ 16 KiB);
//! * **delivery**: `tasks/cancel` of 1,000 of the own tasks (8 in flight)
//!   and then of the shared task; for each listener, the time from just
//!   before its task's cancel was sent to its reading the `cancelled`
//!   notification (p50/p99/max; target p99 < 100 ms);
//! * **`tasks/get` beside them**: `tasks/get` of one task per second under
//!   wrk at c=64 (2 threads) with the streams open, against the same server
//!   with none open, before opening and after closing (target ≥ 0.8 of the
//!   median of those two). Without wrk a reqwest client at c=64 measures it
//!   instead (slower than wrk, so the ratio, not the rate, is the number).
//!
//! It prints the numbers and PASS or MISS for each target; a miss is
//! reported, not asserted. Without `--bench` (as under `cargo test
//! --benches`) it runs a smoke version with 100 streams whose numbers mean
//! nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks-cli --bench listeners
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use mcp_tasks_testkit::stats::{loadavg, percentile_f64 as percentile};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "support/serve.rs"]
#[allow(dead_code, reason = "each bench uses a part of it")]
mod serve;

use serve::{META, Server};

/// POSTs one JSON-RPC request; the answer's JSON.
async fn post(
    http: &reqwest::Client,
    url: &str,
    method: &str,
    name: &str,
    body: String,
) -> anyhow::Result<Value> {
    let response = serve::mcp_post(http, url, method, name)
        .body(body)
        .send()
        .await?;
    let bytes = response.bytes().await?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// Creates `count` `sleep` tasks of an hour, 16 in flight; their ids.
async fn create_tasks(
    http: &reqwest::Client,
    url: &str,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":3600000}},{META}}}}}"#
    );
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..16 {
        let (http, url, body, next) = (http.clone(), url.to_owned(), body.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count as u64 {
                let value = post(&http, &url, "tools/call", "sleep", body.clone()).await?;
                match value.pointer("/result/taskId").and_then(Value::as_str) {
                    Some(id) if value.pointer("/result/resultType") == Some(&"task".into()) => {
                        ids.push(id.to_owned());
                    }
                    // The answer, without any task id it may hold.
                    _ => bail!("a creation was not a task: {:?}", value.get("error")),
                }
            }
            Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(count);
    for worker in workers {
        ids.extend(worker.await??);
    }
    Ok(ids)
}

/// One open listen stream: it tells `opened` once acknowledged, then
/// records when it reads its task's `cancelled` notification, and ends
/// when that comes or when `close` says so.
async fn listener(
    addr: String,
    task: String,
    opened: tokio::sync::mpsc::Sender<anyhow::Result<()>>,
    seen: Arc<Mutex<Option<Instant>>>,
    mut close: tokio::sync::watch::Receiver<bool>,
) {
    let outcome = async {
        let mut stream = TcpStream::connect(&addr).await?;
        stream.set_nodelay(true)?;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{{"notifications":{{"taskIds":["{task}"]}},{META}}}}}"#
        );
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut text = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                bail!("closed before its acknowledgement");
            }
            text.extend_from_slice(&chunk[..n]);
            let got = String::from_utf8_lossy(&text);
            if !got.starts_with("HTTP/1.1 200") && got.contains("\r\n") {
                bail!("not a stream: {}", got.lines().next().unwrap_or_default());
            }
            if got.contains("notifications/subscriptions/acknowledged") {
                if !got.contains(r#""taskIds":[""#) {
                    bail!("acknowledged without its task");
                }
                break;
            }
        }
        Ok((stream, text))
    }
    .await;
    let (mut stream, mut text) = match outcome {
        Ok(open) => {
            let _ = opened.send(Ok(())).await;
            open
        }
        Err(error) => {
            let _ = opened.send(Err(error)).await;
            return;
        }
    };
    drop(opened);
    text.clear();
    let mut chunk = [0u8; 1024];
    loop {
        tokio::select! {
            read = stream.read(&mut chunk) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    text.extend_from_slice(&chunk[..n]);
                    if memchr_find(&text, br#""status":"cancelled""#) {
                        *seen.lock().unwrap() = Some(Instant::now());
                        return;
                    }
                }
            },
            _ = close.wait_for(|close| *close) => return,
        }
    }
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// `tasks/get` of `task` per second at c=64 for `run`: wrk's rate, or a
/// reqwest client's without wrk.
async fn get_rate(server: &Server, task: &str, run: Duration, wrk: bool) -> anyhow::Result<f64> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{task}",{META}}}}}"#
    );
    if wrk {
        let script = std::env::temp_dir().join(format!("listeners-{}.lua", std::process::id()));
        std::fs::write(
            &script,
            format!(
                "wrk.method = \"POST\"\nwrk.body = '{body}'\n\
                 wrk.headers[\"Content-Type\"] = \"application/json\"\n\
                 wrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n\
                 wrk.headers[\"MCP-Protocol-Version\"] = \"2026-07-28\"\n\
                 wrk.headers[\"Mcp-Method\"] = \"tasks/get\"\n\
                 wrk.headers[\"Mcp-Name\"] = \"{task}\"\n"
            ),
        )?;
        let output = tokio::process::Command::new("wrk")
            .args(["-t2", "-c64", &format!("-d{}s", run.as_secs().max(1))])
            .arg("-s")
            .arg(&script)
            .arg(&server.url)
            .output()
            .await?;
        let _ = std::fs::remove_file(&script);
        let text = String::from_utf8_lossy(&output.stdout);
        if text.contains("Non-2xx") || text.contains("Socket errors") {
            bail!("wrk saw failures: {text}");
        }
        return text
            .lines()
            .find_map(|line| line.strip_prefix("Requests/sec:"))
            .and_then(|rate| rate.trim().parse().ok())
            .with_context(|| format!("no rate in wrk's output: {text}"));
    }
    let http = reqwest::Client::new();
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..64 {
        let (http, url, body, done, task) = (
            http.clone(),
            server.url.clone(),
            body.clone(),
            done.clone(),
            task.to_owned(),
        );
        workers.push(tokio::spawn(async move {
            while started.elapsed() < run {
                let value = post(&http, &url, "tasks/get", &task, body.clone()).await?;
                if value.pointer("/result/taskId").and_then(Value::as_str) != Some(&task) {
                    bail!("tasks/get did not answer the task");
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// Cancels `tasks`, 8 in flight; when each cancel was sent, by index.
async fn cancel_all(
    http: &reqwest::Client,
    url: &str,
    tasks: &[String],
) -> anyhow::Result<Vec<Instant>> {
    let sent = Arc::new(Mutex::new(vec![None; tasks.len()]));
    let next = Arc::new(AtomicU64::new(0));
    let tasks = Arc::new(tasks.to_vec());
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (http, url, sent, next, tasks) = (
            http.clone(),
            url.to_owned(),
            sent.clone(),
            next.clone(),
            tasks.clone(),
        );
        workers.push(tokio::spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(task) = tasks.get(index) else {
                    return Ok(());
                };
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{{"taskId":"{task}",{META}}}}}"#
                );
                sent.lock().unwrap()[index] = Some(Instant::now());
                let value = post(&http, &url, "tasks/cancel", task, body).await?;
                if value.get("error").is_some() || value.get("result").is_none() {
                    bail!("a cancel was refused: {:?}", value.get("error"));
                }
            }
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let sent = sent.lock().unwrap();
    Ok(sent.iter().map(|at| at.expect("sent")).collect())
}

fn summary(delays: &mut [f64]) -> String {
    delays.sort_by(f64::total_cmp);
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} listeners)",
        percentile(delays, 0.5),
        percentile(delays, 0.99),
        delays.last().copied().unwrap_or(f64::NAN),
        delays.len()
    )
}

/// The listeners of one task each, then the shared task's.
struct Opened {
    seen: Vec<Arc<Mutex<Option<Instant>>>>,
    close: tokio::sync::watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

/// Opens a listener on each of `tasks` (in order), 128 opening at once.
async fn open_listeners(addr: &str, tasks: &[String]) -> anyhow::Result<Opened> {
    let (close, closing) = tokio::sync::watch::channel(false);
    let (opened, mut acks) = tokio::sync::mpsc::channel(tasks.len().max(1));
    let gate = Arc::new(tokio::sync::Semaphore::new(128));
    let mut seen = Vec::with_capacity(tasks.len());
    let mut handles = Vec::with_capacity(tasks.len());
    for task in tasks {
        let turn = gate.clone().acquire_owned().await?;
        let slot = Arc::new(Mutex::new(None));
        seen.push(slot.clone());
        let (opened, closing, addr, task) = (
            opened.clone(),
            closing.clone(),
            addr.to_owned(),
            task.clone(),
        );
        let (tell, mut told) = tokio::sync::mpsc::channel(1);
        handles.push(tokio::spawn(listener(addr, task, tell, slot, closing)));
        tokio::spawn(async move {
            let outcome = told
                .recv()
                .await
                .unwrap_or_else(|| Err(anyhow::anyhow!("gone")));
            drop(turn);
            let _ = opened.send(outcome).await;
        });
    }
    drop(opened);
    let mut count = 0;
    while let Some(outcome) = acks.recv().await {
        outcome?;
        count += 1;
    }
    if count != tasks.len() {
        bail!("{count} of {} listeners opened", tasks.len());
    }
    Ok(Opened {
        seen,
        close,
        handles,
    })
}

async fn run(full: bool) -> anyhow::Result<()> {
    let own = if full { 10_000 } else { 100 };
    let shared_listeners = 100;
    let cancelled = if full { 1_000 } else { 20 };
    let run = Duration::from_secs(if full { 5 } else { 1 });
    let wrk = which_wrk();
    println!(
        "mcp-tasks listeners benchmark ({}): {} cores, `serve --http` child, load average {}",
        if full { "full run" } else { "smoke run" },
        std::thread::available_parallelism().map_or(0, usize::from),
        loadavg()
    );
    if !wrk {
        if full {
            println!("wrk not found: tasks/get measured by a reqwest client at c=64");
        } else {
            println!("wrk not found: the smoke run skips the tasks/get part");
        }
    }
    let server = Server::start(&[
        "--store",
        "memory",
        "--max-tasks-per-caller",
        "0",
        "--max-running",
        "0",
        "--max-connections",
        "12000",
        "--max-listen-streams",
        "11000",
        "--max-listen-streams-per-caller",
        "11000",
    ])?;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let tasks = create_tasks(&http, &server.url, own + 1).await?;
    println!(
        "\n{} sleep tasks of an hour created in {:.1} s",
        tasks.len(),
        started.elapsed().as_secs_f64()
    );
    let (own_tasks, shared) = tasks.split_at(own);
    let shared = shared[0].clone();
    let probe = own_tasks[own - 1].clone();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = server.rss_kib();
    let measure_get = wrk || full;
    let without_before = if measure_get {
        Some(get_rate(&server, &probe, run, wrk).await?)
    } else {
        None
    };

    let mut listened: Vec<String> = own_tasks.to_vec();
    listened.extend(std::iter::repeat_n(shared.clone(), shared_listeners));
    let started = Instant::now();
    let opened = open_listeners(server.addr()?, &listened).await?;
    let opening = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_open = server.rss_kib();
    let streams = listened.len();
    let per_stream = (rss_open - rss_before) * 1024.0 / streams as f64;
    println!(
        "\n== open streams ({streams}: {own} on a task each, {shared_listeners} on a shared task)"
    );
    println!(
        "opened and acknowledged in {:.1} s; server RSS {:.1} MiB before, {:.1} MiB with them open: {:.0} bytes ({:.1} KiB) per stream",
        opening.as_secs_f64(),
        rss_before / 1024.0,
        rss_open / 1024.0,
        per_stream,
        per_stream / 1024.0
    );

    let with = if measure_get {
        Some(get_rate(&server, &probe, run, wrk).await?)
    } else {
        None
    };

    // Own tasks first, then the shared one.
    let sent = cancel_all(&http, &server.url, &own_tasks[..cancelled]).await?;
    let shared_sent = cancel_all(&http, &server.url, std::slice::from_ref(&shared)).await?[0];
    let deadline = Instant::now() + Duration::from_secs(10);
    let seen_by = |index: usize| *opened.seen[index].lock().unwrap();
    while Instant::now() < deadline
        && ((0..cancelled).any(|index| seen_by(index).is_none())
            || (own..streams).any(|index| seen_by(index).is_none()))
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut own_delays = Vec::new();
    let mut missed = 0;
    for (index, at) in sent.iter().enumerate() {
        match seen_by(index) {
            Some(seen) => own_delays.push(seen.saturating_duration_since(*at).as_secs_f64() * 1e3),
            None => missed += 1,
        }
    }
    let mut shared_delays = Vec::new();
    for index in own..streams {
        match seen_by(index) {
            Some(seen) => {
                shared_delays.push(seen.saturating_duration_since(shared_sent).as_secs_f64() * 1e3);
            }
            None => missed += 1,
        }
    }
    let untouched = (cancelled..own)
        .filter(|&index| seen_by(index).is_some())
        .count();
    let mut all: Vec<f64> = own_delays.iter().chain(&shared_delays).copied().collect();
    println!(
        "\n== a status change to its listeners (tasks/cancel, 8 in flight; from the cancel sent to the notification read)"
    );
    println!(
        "{cancelled} own tasks cancelled: {}",
        summary(&mut own_delays)
    );
    println!("the shared task cancelled: {}", summary(&mut shared_delays));
    println!("all: {}", summary(&mut all));
    println!(
        "listeners that never saw their change: {missed}; listeners of tasks not cancelled that saw a cancel: {untouched}"
    );

    let _ = opened.close.send(true);
    for handle in opened.handles {
        let _ = handle.await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_closed = server.rss_kib();
    println!("closed: server RSS {:.1} MiB", rss_closed / 1024.0);

    let without_after = if measure_get {
        Some(get_rate(&server, &probe, run, wrk).await?)
    } else {
        None
    };
    let ratio = match (without_before, with, without_after) {
        (Some(before), Some(with), Some(after)) => {
            let baseline = f64::midpoint(before, after);
            println!(
                "\n== tasks/get of one task at c=64 ({}, {} s a round)",
                if wrk { "wrk -t2" } else { "reqwest" },
                run.as_secs()
            );
            println!(
                "without streams {before:.0}/s (before opening), {after:.0}/s (after closing); with {streams} streams open {with:.0}/s: {:.2} of without",
                with / baseline
            );
            Some(with / baseline)
        }
        _ => None,
    };

    println!("\n== targets (load average {})", loadavg());
    let verdict = |pass: bool| if pass { "PASS" } else { "MISS" };
    let p99 = percentile(&all, 0.99);
    println!(
        "{} a change reaches its listeners with p99 < 100 ms: {p99:.2} ms{}",
        verdict(p99 < 100.0 && missed == 0 && untouched == 0),
        if missed + untouched > 0 {
            " (some listener missed or misread its change)"
        } else {
            ""
        }
    );
    println!(
        "{} server RSS per open stream <= 16 KiB: {:.1} KiB",
        verdict(per_stream <= 16.0 * 1024.0),
        per_stream / 1024.0
    );
    match ratio {
        Some(ratio) => println!(
            "{} tasks/get beside {streams} streams >= 0.8 of it without them: {ratio:.2}",
            verdict(ratio >= 0.8)
        ),
        None => println!("SKIP tasks/get beside the streams (smoke run without wrk)"),
    }
    Ok(())
}

fn which_wrk() -> bool {
    Command::new("wrk")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(full))
}
