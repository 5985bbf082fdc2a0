//! Our servers next to honest peers over HTTP, in one run, driven by `wrk`:
//!
//! * `bare`: an axum POST handler answering fixed bytes (the ceiling);
//! * `lean`: axum + serde + a `Mutex<HashMap>` of tasks, no MCP library
//!   (the anchor: what a hand-written task server costs);
//! * `rmcp shipped`: rmcp 3.11's `TaskManager` behind its Streamable HTTP
//!   service as shipped (default config, plain `axum::serve`);
//! * `rmcp tuned`: the same with JSON answers, stateless, TCP_NODELAY;
//! * `ours memory` and `ours sqlite`: our serving recipe
//!   (`StreamableHttpServer`) on `TaskRuntime` with the `MemoryStore` and
//!   the `SqliteStore` (a file in a temp dir).
//!
//! Loads: `tasks/get` of one task and `tools/call` of a tool that returns at
//! once (a task each), at 1, 4, 16, 64 and 256 connections; each point is
//! the median of 3 runs of `wrk` (servers in turn within a round, each
//! round starting one server further on). A third load, at 16 and 64
//! connections, creates tasks of a `live` tool that runs 100 ms (so
//! thousands are live at once, as with real tools; the lean anchor spawns a
//! task that completes it after the same 100 ms), with the server CPU
//! counted until the last of them completed. Creation points start each peer
//! fresh (rmcp's `spawn` scans every task, so its rate falls as tasks pile
//! up; a fresh server is its best case). Server CPU
//! per request is this process's CPU time (servers only: `wrk` is another
//! process) over the requests. Then RSS per retained finished task at
//! 100,000 tasks for each store, each in a fresh child process.
//!
//! Prints a table, a CSV (for `peers-plot.py`) and PASS/MISS per target;
//! a miss is reported, not asserted. Without `--bench` it runs a smoke
//! version (or nothing, without `wrk`).
//!
//! ```text
//! cargo bench -p mcp-tasks --bench peers
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

/// Every peer in this process runs on mimalloc, the allocator of the
/// `mcp-tasks` binary (glibc's fragmented under ours as tasks piled up).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{AdmissionLimits, TaskRuntime};
use mcp_tasks::store::{Change, MemoryStore, Principal, SharedStore, TaskRecord};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_sqlite::SqliteStore;
use mcp_tasks_testkit::bench_peers::{LIVE, OurServer, POLL_MS, RmcpServer, TTL_MS};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const PROTOCOL: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";
const CONCURRENCY: [usize; 5] = [1, 4, 16, 64, 256];
const RETAINED: usize = 100_000;
/// The connection counts at which creation with live tools is measured.
const LIVE_LEVELS: [usize; 2] = [16, 64];

// ----------------------------------------------------------------- servers

/// The lean anchor's request: what it reads of a JSON-RPC message.
#[derive(Deserialize)]
struct LeanRequest {
    id: Value,
    method: String,
    #[serde(default)]
    params: LeanParams,
}

#[derive(Deserialize, Default)]
struct LeanParams {
    #[serde(rename = "taskId")]
    task_id: Option<String>,
    name: Option<String>,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct LeanTask {
    task_id: String,
    status: &'static str,
    created_at: String,
    last_updated_at: String,
    ttl_ms: u64,
    poll_interval_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
}

#[derive(Serialize)]
struct LeanAnswer<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: LeanResult<'a>,
}

#[derive(Serialize)]
struct LeanResult<'a> {
    #[serde(rename = "resultType")]
    result_type: &'static str,
    #[serde(flatten)]
    task: &'a LeanTask,
}

/// The lean anchor: serde in and out, tasks in a `Mutex<HashMap>`.
fn lean_router() -> axum::Router {
    let tasks: Arc<Mutex<HashMap<String, LeanTask>>> = Arc::default();
    let next = Arc::new(AtomicU64::new(1));
    axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |body: axum::body::Bytes| {
            let (tasks, next) = (Arc::clone(&tasks), Arc::clone(&next));
            async move {
                let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
                let Ok(request) = serde_json::from_slice::<LeanRequest>(&body) else {
                    return (axum::http::StatusCode::BAD_REQUEST, json, Vec::new());
                };
                let now = chrono_now();
                let task = match request.method.as_str() {
                    "tools/call" => {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let task = LeanTask {
                            task_id: format!("{n:032x}"),
                            status: "working",
                            created_at: now.clone(),
                            last_updated_at: now,
                            ttl_ms: TTL_MS,
                            poll_interval_ms: POLL_MS,
                            result: None,
                        };
                        // `wait` runs forever, `live` is done after LIVE;
                        // any other tool is done at once.
                        let mut stored = task.clone();
                        match request.params.name.as_deref() {
                            Some("wait") => {}
                            Some("live") => {
                                let (tasks, id) = (Arc::clone(&tasks), task.task_id.clone());
                                tokio::spawn(async move {
                                    tokio::time::sleep(LIVE).await;
                                    if let Some(task) = lock(&tasks).get_mut(&id) {
                                        task.status = "completed";
                                        task.last_updated_at = chrono_now();
                                        task.result = Some(json!({"content":
                                            [{"type": "text", "text": "done"}]}));
                                    }
                                });
                            }
                            _ => {
                                stored.status = "completed";
                                stored.result =
                                    Some(json!({"content": [{"type": "text", "text": "done"}]}));
                            }
                        }
                        lock(&tasks).insert(task.task_id.clone(), stored);
                        Some(task)
                    }
                    "tasks/get" => request
                        .params
                        .task_id
                        .and_then(|id| lock(&tasks).get(&id).cloned()),
                    _ => None,
                };
                let Some(task) = task else {
                    return (axum::http::StatusCode::NOT_FOUND, json, Vec::new());
                };
                let answer = LeanAnswer {
                    jsonrpc: "2.0",
                    id: &request.id,
                    result: LeanResult {
                        result_type: "complete",
                        task: &task,
                    },
                };
                let body = serde_json::to_vec(&answer).unwrap_or_default();
                (axum::http::StatusCode::OK, json, body)
            }
        }),
    )
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An RFC 3339 timestamp, as the lean anchor writes it.
fn chrono_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A served peer, stopped when dropped.
struct Served {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Peer {
    Bare,
    Lean,
    RmcpShipped,
    RmcpTuned,
    OursMemory,
    OursSqlite,
}

const PEERS: [Peer; 6] = [
    Peer::Bare,
    Peer::Lean,
    Peer::RmcpShipped,
    Peer::RmcpTuned,
    Peer::OursMemory,
    Peer::OursSqlite,
];

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Bare => "bare axum (ceiling)",
            Peer::Lean => "lean serde + HashMap",
            Peer::RmcpShipped => "rmcp shipped",
            Peer::RmcpTuned => "rmcp tuned",
            Peer::OursMemory => "ours, memory",
            Peer::OursSqlite => "ours, SQLite",
        }
    }
}

async fn serve(
    router: axum::Router,
    nodelay: bool,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let task = if nodelay {
        tokio::spawn(async move {
            let _ = mcp_tasks::server::http::serve(listener, router).await;
        })
    } else {
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        })
    };
    Ok((address, task))
}

/// Starts `peer`; `bare` answers `fixed`.
async fn start(peer: Peer, fixed: &'static [u8]) -> anyhow::Result<Served> {
    start_with(peer, fixed, 0).await
}

/// [`start`], ours with `retained` finished tasks in the store first.
async fn start_with(peer: Peer, fixed: &'static [u8], retained: usize) -> anyhow::Result<Served> {
    let mut dir = None;
    let (router, nodelay) = match peer {
        Peer::Bare => (
            axum::Router::new().route(
                "/mcp",
                axum::routing::post(move |_body: axum::body::Bytes| async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        fixed,
                    )
                }),
            ),
            true,
        ),
        Peer::Lean => (lean_router(), true),
        Peer::RmcpShipped | Peer::RmcpTuned => {
            let server = RmcpServer::default();
            let config = if peer == Peer::RmcpTuned {
                StreamableHttpServerConfig::default()
                    .with_legacy_session_mode(false)
                    .with_json_response(true)
                    .with_sse_keep_alive(None)
            } else {
                StreamableHttpServerConfig::default()
            };
            let service: StreamableHttpService<RmcpServer, LocalSessionManager> =
                StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
            (
                axum::Router::new().nest_service("/mcp", service),
                peer == Peer::RmcpTuned,
            )
        }
        Peer::OursMemory | Peer::OursSqlite => {
            let store: SharedStore = if peer == Peer::OursSqlite {
                let temp = tempfile::tempdir()?;
                let store = SqliteStore::open(temp.path().join("tasks.sqlite3"))?;
                dir = Some(temp);
                Arc::new(store)
            } else {
                Arc::new(MemoryStore::new())
            };
            fill(&store, retained).await?;
            // No bound on tools running at once nor on one caller's tasks
            // (every request here is one caller): with live tools, the
            // defaults would queue or refuse what the lean anchor runs.
            let server = OurServer {
                runtime: TaskRuntime::builder(store)
                    .with_admission(AdmissionLimits::unbounded())
                    .with_max_tasks_per_caller(None)
                    .build(),
            };
            let runtime = server.runtime.clone();
            (StreamableHttpServer::new(server, runtime).router(), true)
        }
    };
    let (address, task) = serve(router, nodelay).await?;
    Ok(Served {
        address,
        task,
        _dir: dir,
    })
}

// -------------------------------------------------------------------- load

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}})
}

/// A request: its `Mcp-Method`, `Mcp-Name` and body.
struct Request {
    method: &'static str,
    name: String,
    body: String,
}

fn call_request(tool: &str) -> Request {
    Request {
        method: "tools/call",
        name: tool.to_owned(),
        body: json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {}, "_meta": meta()}})
        .to_string(),
    }
}

fn get_request(task_id: &str) -> Request {
    Request {
        method: "tasks/get",
        name: task_id.to_owned(),
        body: json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
            "params": {"taskId": task_id, "_meta": meta()}})
        .to_string(),
    }
}

/// One request with reqwest: the reply body.
async fn probe(address: SocketAddr, request: &Request) -> anyhow::Result<String> {
    let client = reqwest::Client::new();
    let reply = client
        .post(format!("http://{address}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .header("mcp-method", request.method)
        .header("mcp-name", &request.name)
        .body(request.body.clone())
        .timeout(Duration::from_secs(10))
        .send()
        .await?;
    Ok(reply.text().await?)
}

/// The task id in a reply (JSON, or the last SSE `data:` line).
fn task_id_in(reply: &str) -> Option<String> {
    let json = reply
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .next_back()
        .unwrap_or(reply);
    let value: Value = serde_json::from_str(json.trim()).ok()?;
    value["result"]["taskId"].as_str().map(str::to_owned)
}

/// One wrk point.
#[derive(Clone, Copy, Default)]
struct Point {
    rate: f64,
    cpu_us: f64,
    errors: u64,
}

fn wrk_script(
    dir: &std::path::Path,
    request: &Request,
    n: usize,
) -> anyhow::Result<std::path::PathBuf> {
    let path = dir.join(format!("r{n}.lua"));
    let script = format!(
        "wrk.method = \"POST\"\nwrk.body = [==[{}]==]\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n\
         wrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n\
         wrk.headers[\"MCP-Protocol-Version\"] = \"{PROTOCOL}\"\n\
         wrk.headers[\"Mcp-Method\"] = \"{}\"\n\
         wrk.headers[\"Mcp-Name\"] = \"{}\"\n",
        request.body, request.method, request.name
    );
    std::fs::write(&path, script)?;
    Ok(path)
}

/// Process CPU seconds (user + system, USER_HZ = 100) from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let read = || -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / 100.0)
    };
    read().unwrap_or(f64::NAN)
}

/// Runs wrk against `address` with `script` at `connections`.
async fn wrk(
    address: SocketAddr,
    script: &std::path::Path,
    connections: usize,
    seconds: f64,
) -> anyhow::Result<Point> {
    wrk_settled(address, script, connections, seconds, Duration::ZERO).await
}

/// [`wrk`], with the server's CPU counted until `settle` after `wrk` ends
/// (so that the work of tools still running then, such as completing their
/// tasks, counts against the requests that started them).
async fn wrk_settled(
    address: SocketAddr,
    script: &std::path::Path,
    connections: usize,
    seconds: f64,
    settle: Duration,
) -> anyhow::Result<Point> {
    let threads = connections.min(2);
    let before = cpu_seconds();
    let output = tokio::process::Command::new("wrk")
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{}s", seconds.round().max(1.0) as u64))
        .arg("--timeout")
        .arg("10s")
        .arg("-s")
        .arg(script)
        .arg(format!("http://{address}/mcp"))
        .output()
        .await
        .context("run wrk")?;
    tokio::time::sleep(settle).await;
    let cpu = cpu_seconds() - before;
    let text = String::from_utf8_lossy(&output.stdout);
    let number = |label: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    let rate = number("Requests/sec:").context("wrk printed no rate")?;
    let errors = number("Non-2xx or 3xx responses:").unwrap_or(0.0) as u64
        + text
            .lines()
            .find(|line| line.contains("Socket errors"))
            .map_or(0, |line| {
                line.split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse::<u64>().ok())
                    .sum()
            });
    let requests = rate * seconds;
    Ok(Point {
        rate,
        cpu_us: if requests > 0.0 {
            cpu / requests * 1e6
        } else {
            f64::NAN
        },
        errors,
    })
}

fn median(points: &mut [Point]) -> Point {
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let mut middle = points[points.len() / 2];
    middle.errors = points.iter().map(|p| p.errors).sum();
    middle
}

// ------------------------------------------------------------------ memory

/// The result every retained task holds.
fn finished_result() -> Value {
    json!({"content": [{"type": "text", "text": "done"}], "isError": false})
}

/// Task `n` as the runtime makes it (a 44-hex id: the time, then 32 hex
/// digits; owner `authorization:<64 hex>`), and the transition that
/// completes it.
fn finished_task(
    n: usize,
    now: UnixMillis,
) -> anyhow::Result<(TaskRecord, mcp_tasks::store::Transition)> {
    let record = TaskRecord::new(
        TaskId::new(format!(
            "{:012x}{:032x}",
            now.as_millis(),
            (n as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)
        )),
        Principal::new(format!("authorization:{:064x}", n % 97)),
        now,
        Ttl::from_millis(TTL_MS),
        Some(Duration::from_millis(POLL_MS)),
    )
    .with_lifetime(Some(Duration::from_secs(86_400)), true);
    let done = record
        .apply(
            &Change::Complete(finished_result()),
            now,
            Duration::from_secs(3_600),
        )
        .map_err(|refused| anyhow::anyhow!("{refused:?}"))?;
    Ok((record, done))
}

/// Puts `retained` finished tasks into `store`, stored finished (one write
/// each, as the runtime stores a tool that returned at once), 256 at a time.
async fn fill(store: &SharedStore, retained: usize) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    let now = UnixMillis::now();
    futures::stream::iter(0..retained)
        .map(|n| async move {
            let (_, done) = finished_task(n, now)?;
            store.create(done.into_record()).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(256)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// RSS of this process in bytes, from /proc/self/statm.
fn rss_bytes() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(f64::NAN, |pages| pages * 4096.0)
}

/// In a child process: RSS per retained finished task at `retained` in
/// `store` ("memory" or "sqlite"), printed as `rss-per-task <bytes> <result bytes>`.
async fn rss_child(store: &str, retained: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store: SharedStore = match store {
        "sqlite" => Arc::new(SqliteStore::open(dir.path().join("tasks.sqlite3"))?),
        _ => Arc::new(MemoryStore::new()),
    };
    let result_bytes = finished_result().to_string().len();
    let now = UnixMillis::now();
    let make = |n: usize| finished_task(n, now);
    // Warm up allocator and SQLite, then measure from here.
    for n in 0..1_000 {
        let (record, done) = make(n + retained)?;
        store.create(record).await?;
        store.compare_and_swap(done).await?;
    }
    let before = rss_bytes();
    for n in 0..retained {
        let (record, done) = make(n)?;
        store.create(record).await?;
        store.compare_and_swap(done).await?;
    }
    let after = rss_bytes();
    println!(
        "rss-per-task {:.0} {result_bytes}",
        (after - before) / retained as f64
    );
    drop(store);
    Ok(())
}

/// RSS per retained task for `store`, from a fresh child process.
async fn rss_per_task(store: &str, retained: usize) -> anyhow::Result<(f64, f64)> {
    let output = tokio::process::Command::new(std::env::current_exe()?)
        .env("MCP_TASKS_PEERS_RSS", store)
        .env("MCP_TASKS_PEERS_RETAINED", retained.to_string())
        .output()
        .await?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix("rss-per-task "))
        .with_context(|| format!("the child printed no RSS: {text}"))?;
    let mut numbers = line
        .split_whitespace()
        .filter_map(|n| n.parse::<f64>().ok());
    Ok((
        numbers.next().unwrap_or(f64::NAN),
        numbers.next().unwrap_or(f64::NAN),
    ))
}

// -------------------------------------------------------------------- main

type Table = HashMap<(&'static str, Peer, usize), Point>;

async fn measure(full: bool) -> anyhow::Result<Table> {
    let (seconds, rounds, levels): (f64, usize, &[usize]) = if full {
        (1.0, 3, &CONCURRENCY)
    } else {
        (1.0, 1, &[4])
    };
    let scripts = tempfile::tempdir()?;
    let mut table = Table::new();
    // tasks/get: one server per peer for the whole run, one task each.
    let mut get_targets = Vec::new();
    let mut fixed: &'static [u8] = b"{}";
    for peer in PEERS {
        if peer == Peer::Bare {
            continue;
        }
        let served = start(peer, fixed).await?;
        let created = probe(served.address, &call_request("wait")).await?;
        let id = task_id_in(&created)
            .with_context(|| format!("{}: tools/call made no task: {created}", peer.name()))?;
        let request = get_request(&id);
        let reply = probe(served.address, &request).await?;
        anyhow::ensure!(
            reply.contains("working"),
            "{}: tasks/get: {reply}",
            peer.name()
        );
        if peer == Peer::OursMemory {
            fixed = reply.into_bytes().leak();
        }
        let script = wrk_script(scripts.path(), &request, get_targets.len())?;
        get_targets.push((peer, served, script));
    }
    let bare = start(Peer::Bare, fixed).await?;
    let bare_script = wrk_script(scripts.path(), &get_request("x"), 100)?;
    let call_script = wrk_script(scripts.path(), &call_request("instant"), 101)?;
    let live_script = wrk_script(scripts.path(), &call_request("live"), 102)?;
    for &connections in levels {
        let mut gets: HashMap<Peer, Vec<Point>> = HashMap::new();
        let mut calls: HashMap<Peer, Vec<Point>> = HashMap::new();
        let mut lives: HashMap<Peer, Vec<Point>> = HashMap::new();
        // Each round starts one peer further on, so that no peer always
        // runs right after the same other one.
        for round in 0..rounds {
            let point = wrk(bare.address, &bare_script, connections, seconds).await?;
            gets.entry(Peer::Bare).or_default().push(point);
            let turn = round % get_targets.len();
            for (peer, served, script) in get_targets[turn..].iter().chain(&get_targets[..turn]) {
                let point = wrk(served.address, script, connections, seconds).await?;
                gets.entry(*peer).or_default().push(point);
            }
            let point = wrk(bare.address, &call_script, connections, seconds).await?;
            calls.entry(Peer::Bare).or_default().push(point);
            let mut others: Vec<Peer> = PEERS
                .into_iter()
                .filter(|peer| *peer != Peer::Bare)
                .collect();
            let turn = round % others.len();
            others.rotate_left(turn);
            for peer in others {
                let served = start(peer, fixed).await?;
                let point = wrk(served.address, &call_script, connections, seconds).await?;
                calls.entry(peer).or_default().push(point);
                drop(served);
                // Let the aborted server's connections and tasks go.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Creation with live tools (each runs LIVE, so thousands are
            // live at once): CPU counted until the last has completed.
            if !LIVE_LEVELS.contains(&connections) && full {
                continue;
            }
            let mut others: Vec<Peer> = PEERS
                .into_iter()
                .filter(|peer| *peer != Peer::Bare)
                .collect();
            let turn = round % others.len();
            others.rotate_left(turn);
            for peer in others {
                let served = start(peer, fixed).await?;
                let settle = LIVE + Duration::from_millis(50);
                let point =
                    wrk_settled(served.address, &live_script, connections, seconds, settle).await?;
                lives.entry(peer).or_default().push(point);
                drop(served);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        for (load, points) in [
            ("get", &mut gets),
            ("create", &mut calls),
            ("live", &mut lives),
        ] {
            for (peer, points) in points.iter_mut() {
                table.insert((load, *peer, connections), median(points));
            }
        }
        println!("(c={connections} measured)");
    }
    // Flat from 1 to 100,000 tasks: tasks/get of one task in a store that
    // retains RETAINED finished ones, against the one-task server above,
    // in turns.
    let (c, retained) = if full {
        (64, RETAINED)
    } else {
        (4, RETAINED / 10)
    };
    for (n, (peer, one, one_script)) in get_targets
        .iter()
        .filter(|(peer, ..)| matches!(peer, Peer::OursMemory | Peer::OursSqlite))
        .enumerate()
    {
        let filled = start_with(*peer, fixed, retained).await?;
        let created = probe(filled.address, &call_request("wait")).await?;
        let id = task_id_in(&created)
            .with_context(|| format!("{}: tools/call made no task: {created}", peer.name()))?;
        let script = wrk_script(scripts.path(), &get_request(&id), 200 + n)?;
        let (mut ones, mut filleds) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                ones.push(wrk(one.address, one_script, c, seconds).await?);
                filleds.push(wrk(filled.address, &script, c, seconds).await?);
            } else {
                filleds.push(wrk(filled.address, &script, c, seconds).await?);
                ones.push(wrk(one.address, one_script, c, seconds).await?);
            }
        }
        table.insert(("get_one", *peer, c), median(&mut ones));
        table.insert(("get_filled", *peer, c), median(&mut filleds));
    }
    println!("(tasks/get at {retained} retained tasks measured)");
    Ok(table)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if let Ok(store) = std::env::var("MCP_TASKS_PEERS_RSS") {
        let retained = std::env::var("MCP_TASKS_PEERS_RETAINED")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(RETAINED);
        return rss_child(&store, retained).await;
    }
    // For profiling: serve one peer (by its position in the tables) until killed.
    if let Ok(peer) = std::env::var("MCP_TASKS_PEERS_SERVE") {
        let peer = PEERS[peer.parse::<usize>()?.min(PEERS.len() - 1)];
        let served = start(peer, b"{}").await?;
        println!("{} on http://{}/mcp", peer.name(), served.address);
        std::future::pending::<()>().await;
    }
    let full = std::env::args().any(|arg| arg == "--bench");
    let has_wrk = std::process::Command::new("wrk")
        .arg("--version")
        .output()
        .is_ok();
    if !has_wrk {
        println!("peers bench: wrk is not installed; nothing measured");
        return Ok(());
    }
    println!(
        "mcp-tasks peers benchmark ({}): {} cores; servers in this process (one tokio runtime, 2 workers), wrk in another",
        if full {
            "full run"
        } else {
            "smoke run without --bench: the numbers mean nothing"
        },
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    let table = measure(full).await?;
    let levels: Vec<usize> = {
        let mut levels: Vec<usize> = table.keys().map(|(_, _, c)| *c).collect();
        levels.sort_unstable();
        levels.dedup();
        levels
    };
    for (load, title) in [
        ("get", "tasks/get/s"),
        ("create", "creations/s (tools/call)"),
        (
            "live",
            "creations/s of live tools (each runs 100 ms; CPU until the last completed)",
        ),
    ] {
        println!("\n== {title}, median of runs; (server CPU per request)");
        print!("{:<22}", "server");
        for c in &levels {
            print!(" {:>18}", format!("c={c}"));
        }
        println!();
        for peer in PEERS {
            print!("{:<22}", peer.name());
            for c in &levels {
                match table.get(&(load, peer, *c)) {
                    Some(point) => print!(
                        " {:>18}",
                        format!(
                            "{:.0} ({:.0} µs){}",
                            point.rate,
                            point.cpu_us,
                            if point.errors > 0 { "!" } else { "" }
                        )
                    ),
                    None => print!(" {:>18}", "-"),
                }
            }
            println!();
        }
    }
    // The smoke run keeps fewer (a debug build fills slowly).
    let retained = if full { RETAINED } else { RETAINED / 10 };
    let c64 = if full { 64 } else { 4 };
    println!(
        "\n== tasks/get/s at c={c64}: one task alone, and one among {retained} retained finished tasks (in turns)"
    );
    let mut flat = Vec::new();
    for peer in [Peer::OursMemory, Peer::OursSqlite] {
        let (Some(one), Some(filled)) = (
            table.get(&("get_one", peer, c64)),
            table.get(&("get_filled", peer, c64)),
        ) else {
            continue;
        };
        let ratio = filled.rate / one.rate;
        println!(
            "{:<22} {:>8.0} alone, {:>8.0} among {retained} ({ratio:.2})",
            peer.name(),
            one.rate,
            filled.rate
        );
        flat.push((peer, ratio));
    }
    let errors: u64 = table.values().map(|p| p.errors).sum();
    println!("(`!`: some answers were errors or not 2xx; {errors} in all)");
    println!("\n== csv");
    println!("load,server,concurrency,rate,cpu_us,errors");
    let mut keys: Vec<_> = table.keys().copied().collect();
    keys.sort_by_key(|(load, peer, c)| (*load, PEERS.iter().position(|p| p == peer), *c));
    for key in keys {
        let point = table[&key];
        println!(
            "{},\"{}\",{},{:.0},{:.1},{}",
            key.0,
            key.1.name(),
            key.2,
            point.rate,
            point.cpu_us,
            point.errors
        );
    }

    println!(
        "\n== memory: RSS per retained finished task at {retained} (fresh child process each, store filled directly)"
    );
    let mut rss = Vec::new();
    for store in ["memory", "sqlite"] {
        let (per_task, result_bytes) = rss_per_task(store, retained).await?;
        println!(
            "{store}: {per_task:.0} B per task, of which the result's JSON is {result_bytes:.0} B"
        );
        rss.push((store, per_task - result_bytes));
    }

    let rate = |load, peer, c| table.get(&(load, peer, c)).map_or(f64::NAN, |p| p.rate);
    let c16 = if full { 16 } else { 4 };
    let mut targets: Vec<(String, bool)> = Vec::new();
    let ratio = |a: f64, b: f64| a / b;
    let sqlite_get = ratio(
        rate("get", Peer::OursSqlite, c64),
        rate("get", Peer::OursMemory, c64),
    );
    targets.push((
        format!("SQLite tasks/get >= 0.9 of memory's (c={c64}): {sqlite_get:.2}"),
        sqlite_get >= 0.9,
    ));
    let sqlite_create = rate("create", Peer::OursSqlite, c16);
    let sqlite_of_memory = ratio(sqlite_create, rate("create", Peer::OursMemory, c16));
    targets.push((
        format!("SQLite creation >= 5,000/s at c={c16}: {sqlite_create:.0}/s"),
        sqlite_create >= 5_000.0,
    ));
    targets.push((
        format!("SQLite creation >= 0.5 of memory's (c={c16}): {sqlite_of_memory:.2}"),
        sqlite_of_memory >= 0.5,
    ));
    let memory_create = rate("create", Peer::OursMemory, c16);
    let of_lean = ratio(memory_create, rate("create", Peer::Lean, c16));
    targets.push((
        format!("memory creation >= 20,000/s at c={c16}: {memory_create:.0}/s"),
        memory_create >= 20_000.0,
    ));
    targets.push((
        format!("memory creation >= 0.5 of the lean anchor's (c={c16}): {of_lean:.2}"),
        of_lean >= 0.5,
    ));
    let live_memory = table.get(&("live", Peer::OursMemory, c16)).copied();
    let live_of_lean = ratio(
        rate("live", Peer::OursMemory, c16),
        rate("live", Peer::Lean, c16),
    );
    targets.push((
        format!("memory creation with live tools >= 1.0 of the lean anchor's (c={c16}): {live_of_lean:.2}"),
        live_of_lean >= 1.0,
    ));
    let live_sqlite = ratio(
        rate("live", Peer::OursSqlite, c16),
        rate("live", Peer::OursMemory, c16),
    );
    targets.push((
        format!("SQLite creation with live tools >= 0.6 of memory's (c={c16}): {live_sqlite:.2}"),
        live_sqlite >= 0.6,
    ));
    let live_cpu = live_memory.map_or(f64::NAN, |point| point.cpu_us);
    targets.push((
        format!(
            "memory: server CPU per creation with live tools <= 30 µs (c={c16}): {live_cpu:.0} µs"
        ),
        live_cpu <= 30.0,
    ));
    let get_of_bare = ratio(
        rate("get", Peer::OursMemory, c64),
        rate("get", Peer::Bare, c64),
    );
    targets.push((
        format!("memory tasks/get >= 0.7 of the bare ceiling (c={c64}): {get_of_bare:.2}"),
        get_of_bare >= 0.7,
    ));
    for (peer, ratio) in flat {
        targets.push((
            format!(
                "{} tasks/get flat from 1 to {retained} tasks (>= 0.9 of the one-task rate): {ratio:.2}",
                peer.name()
            ),
            ratio >= 0.9,
        ));
    }
    for (store, beyond) in rss {
        targets.push((
            format!(
                "{store}: RSS per retained finished task beyond its result <= 1024 B: {beyond:.0} B"
            ),
            beyond <= 1024.0,
        ));
    }
    println!("\n== targets");
    for (text, met) in targets {
        println!("{} {text}", if met { "PASS" } else { "MISS" });
    }
    println!("(a MISS is reported, not asserted)");
    Ok(())
}
