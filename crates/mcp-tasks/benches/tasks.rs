//! The performance targets of the task runtime, measured in one run next to
//! rmcp's own `TaskManager` and a bare axum endpoint:
//!
//! 1. in process (tokio duplex, a real rmcp client sending `tasks/get` and
//!    `tools/call` with the Tasks extension declared in `_meta`): requests
//!    per second at one task and at many retained tasks;
//! 2. `tasks/get` over Streamable HTTP on 127.0.0.1, 64 requests in flight,
//!    against a bare axum POST handler;
//! 3. heap bytes per live task, counted by the global allocator;
//! 4. `tasks/get` over HTTP with bearer tokens required, against the same
//!    request without them.
//!
//! It prints a table and PASS or MISS per target; a miss is reported, not
//! asserted, so the run exits 0. The machine is shared: loads are measured
//! in many short rounds, in alternating order, and compared within the run.
//! Without `--bench` (as under `cargo test --benches`) it runs a small smoke
//! version whose numbers mean nothing.
//!
//! ```text
//! cargo bench -p mcp-tasks --bench tasks
//! ```
//!
//! The counting allocator is `stats_alloc`'s: the workspace forbids
//! `unsafe_code`, which a hand-written `GlobalAlloc` needs.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::alloc::System;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::future::BoxFuture;
use mcp_tasks::IdempotencyKey;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::store::{
    Change, Keyed, MemoryStore, Principal, StoreError, Swap, TaskRecord, TaskStore, Transition,
};
use mcp_tasks::{CallOptions, CallResponse, TaskId, TasksClient, Ttl, UnixMillis};
use mcp_tasks_testkit::bench_peers::{OurServer, POLL_MS, RmcpServer, TTL_MS, rmcp_options};
use rmcp::model::{CallToolResult, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::task_manager::{TaskExit, TaskManager};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tokio::sync::broadcast;
use tokio::task::JoinSet;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const PROTOCOL: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";
/// Requests in flight on the one in-process connection.
const IN_PROCESS_CONCURRENCY: usize = 8;
/// Requests in flight over HTTP.
const HTTP_CONCURRENCY: usize = 64;

/// The sizes of a run: the benchmark, or a smoke run.
struct Scale {
    full: bool,
    ours_retained: usize,
    rmcp_retained: usize,
    ours_running: usize,
    memory_tasks: usize,
    rounds: usize,
    http_rounds: usize,
    get_window: Duration,
    http_window: Duration,
    creates_per_round: usize,
}

impl Scale {
    fn new(full: bool) -> Self {
        let (big, small, rounds, window) = if full {
            (100_000, 10_000, 30, Duration::from_millis(100))
        } else {
            (1_000, 200, 1, Duration::from_millis(30))
        };
        Self {
            full,
            ours_retained: big,
            rmcp_retained: small,
            ours_running: small,
            memory_tasks: big,
            rounds,
            http_rounds: rounds.div_ceil(2),
            get_window: window,
            http_window: window * 5 / 2,
            creates_per_round: small / 20,
        }
    }
}

// ------------------------------------------------------------------ memory

/// Heap bytes allocated and not yet freed (requested sizes: the allocator's
/// own overhead per block is not counted).
fn live_bytes() -> i128 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i128 - stats.bytes_deallocated as i128
}

fn allocations() -> usize {
    GLOBAL.stats().allocations
}

/// Heap blocks allocated and not yet freed.
fn live_blocks() -> i128 {
    let stats = GLOBAL.stats();
    stats.allocations as i128 - stats.deallocations as i128
}

/// A small xorshift generator: ids and shuffles without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn hex(&mut self, chars: usize) -> String {
        let mut out = String::with_capacity(chars);
        while out.len() < chars {
            out.push_str(&format!("{:016x}", self.next()));
        }
        out.truncate(chars);
        out
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, (self.next() % (i as u64 + 1)) as usize);
        }
    }
}

/// A record as the runtime creates one: a 44-hex id (the time, then 32
/// random hex digits).
fn runtime_record(rng: &mut Rng, owner: &str, now: UnixMillis) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(format!("{:012x}{}", now.as_millis(), rng.hex(32))),
        Principal::new(owner),
        now,
        Ttl::from_millis(TTL_MS),
        Some(Duration::from_millis(POLL_MS)),
    )
}

// ----------------------------------------------------------------- servers

/// A `MemoryStore` that counts reads, to see what the runtime reads unasked.
#[derive(Default)]
struct CountingStore {
    inner: MemoryStore,
    gets: AtomicU64,
}

impl TaskStore for CountingStore {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        TaskStore::create(&self.inner, record).await
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        TaskStore::create_keyed(&self.inner, record).await
    }
    fn keeps_keys(&self) -> bool {
        self.inner.keeps_keys()
    }

    async fn find_keyed(
        &self,
        owner: &Principal,
        key: &IdempotencyKey,
    ) -> Result<Option<TaskRecord>, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        TaskStore::find_keyed(&self.inner, owner, key).await
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        TaskStore::get(&self.inner, id).await
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        TaskStore::compare_and_swap(&self.inner, transition).await
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        TaskStore::delete(&self.inner, id).await
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        TaskStore::expired(&self.inner, now, limit).await
    }

    async fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        TaskStore::list_owned(&self.inner, owner, after, limit).await
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        TaskStore::changes(&self.inner)
    }
}

/// Serves `server` in process over a tokio duplex; returns a client.
async fn connect<S: ServerHandler>(server: S) -> anyhow::Result<TasksClient<()>> {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let running = serve_client_with_lifecycle((), client_io, lifecycle)
        .await
        .context("connect in process")?;
    Ok(TasksClient::new(running))
}

/// Serves `router` on 127.0.0.1: with the library's `serve` (TCP_NODELAY)
/// when asked, else as plain axum does.
async fn serve(router: axum::Router, nodelay: bool) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    if nodelay {
        tokio::spawn(mcp_tasks::server::http::serve(listener, router));
    } else {
        tokio::spawn(async move { axum::serve(listener, router).await });
    }
    Ok(address)
}

fn mcp_service(server: OurServer, config: StreamableHttpServerConfig) -> axum::Router {
    let service: StreamableHttpService<OurServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
    axum::Router::new().nest_service("/mcp", service)
}

// -------------------------------------------------------------------- load

/// When a load stops.
#[derive(Clone, Copy)]
enum Stop {
    After(Duration),
    Count(usize),
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

/// Runs `op` (given a running count; true on success) from `workers`
/// concurrent loops until `stop`.
async fn drive<F, Fut>(workers: usize, stop: Stop, op: F) -> Rate
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut loops = JoinSet::new();
    for _ in 0..workers {
        let (op, next) = (op.clone(), next.clone());
        loops.spawn(async move {
            let mut rate = Rate::default();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let more = match stop {
                    Stop::After(window) => started.elapsed() < window,
                    Stop::Count(count) => n < count,
                };
                if !more {
                    return rate;
                }
                if op(n).await {
                    rate.ok += 1;
                } else {
                    rate.failed += 1;
                }
            }
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

/// Runs every load once per round, forwards then backwards so that
/// neighbours stay close in time and the shared machine's changing load
/// falls on all alike, after a warm-up round that is thrown away when asked.
async fn rounds(loads: &[Load], rounds: usize, warm_up: bool) -> Vec<Vec<Rate>> {
    if warm_up {
        for load in loads {
            load().await;
        }
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

/// All rounds of a load as one.
fn total(rounds: &[Rate]) -> Rate {
    rounds.iter().fold(Rate::default(), |sum, rate| Rate {
        ok: sum.ok + rate.ok,
        failed: sum.failed + rate.failed,
        seconds: sum.seconds + rate.seconds,
    })
}

/// One load's rate relative to another's measured in the same rounds: the
/// ratio of the totals, and the middle half of the per-round ratios.
#[derive(Clone, Copy)]
struct Ratio {
    total: f64,
    low: f64,
    high: f64,
}

fn ratio(of: &[Rate], to: &[Rate]) -> Ratio {
    let mut each: Vec<f64> = of
        .iter()
        .zip(to)
        .map(|(of, to)| of.per_second() / to.per_second())
        .collect();
    each.sort_by(f64::total_cmp);
    let at = |q: usize| each.get(each.len() * q / 4).copied().unwrap_or(f64::NAN);
    Ratio {
        total: total(of).per_second() / total(to).per_second(),
        low: at(1),
        high: at(3),
    }
}

fn percent(ratio: Ratio) -> String {
    format!(
        "{:.1}% (rounds {:.0}..{:.0}%)",
        ratio.total * 100.0,
        ratio.low * 100.0,
        ratio.high * 100.0
    )
}

fn per_second(rate: Rate) -> String {
    match rate.failed {
        0 => format!("{:.0}", rate.per_second()),
        failed => format!("{:.0} ({failed} failed)", rate.per_second()),
    }
}

/// Creates `count` tasks of `tool` through `tools/call`; returns their ids.
async fn fill(client: &TasksClient<()>, tool: &'static str, count: usize) -> Vec<TaskId> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut loops = JoinSet::new();
    for _ in 0..IN_PROCESS_CONCURRENCY {
        let (client, next) = (client.clone(), next.clone());
        loops.spawn(async move {
            let mut ids = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                if let Ok(CallResponse::Task(state)) =
                    client.call_tool(tool, (), CallOptions::default()).await
                {
                    ids.push(state.id);
                }
            }
            ids
        });
    }
    let mut all = Vec::with_capacity(count);
    while let Some(joined) = loops.join_next().await {
        all.extend(joined.unwrap_or_default());
    }
    // A row must hold the tasks it says it holds.
    assert_eq!(
        all.len(),
        count,
        "{tool}: only {} of {count} calls made a task",
        all.len()
    );
    all
}

/// Heap held by a list of ids, to take out of a measurement.
fn ids_heap(ids: &[TaskId]) -> i128 {
    let strings: usize = ids.iter().map(|id| id.expose().len()).sum();
    (std::mem::size_of_val(ids) + strings) as i128
}

/// `tasks/get` of `ids` in turn, for `window`.
fn get_load(client: &TasksClient<()>, ids: Vec<TaskId>, window: Duration) -> Load {
    let (client, ids) = (client.clone(), Arc::new(ids));
    Box::new(move || {
        let (client, ids) = (client.clone(), ids.clone());
        Box::pin(drive(
            IN_PROCESS_CONCURRENCY,
            Stop::After(window),
            move |n| {
                let (client, ids) = (client.clone(), ids.clone());
                async move { client.get(&ids[n % ids.len()]).await.is_ok() }
            },
        ))
    })
}

/// `count` calls of the `instant` tool, each making a task.
async fn create_rate(client: TasksClient<()>, count: usize) -> Rate {
    drive(IN_PROCESS_CONCURRENCY, Stop::Count(count), move |_| {
        let client = client.clone();
        async move {
            let call = client.call_tool("instant", (), CallOptions::default());
            matches!(call.await, Ok(CallResponse::Task(_)))
        }
    })
    .await
}

fn create_load(client: &TasksClient<()>, count: usize) -> Load {
    let client = client.clone();
    Box::new(move || Box::pin(create_rate(client.clone(), count)))
}

/// [`create_load`] on a new server each time.
fn fresh_create_load<S: ServerHandler>(
    count: usize,
    server: impl Fn() -> S + Send + Sync + 'static,
) -> Load {
    Box::new(move || {
        let server = server();
        Box::pin(async move {
            match connect(server).await {
                Ok(client) => create_rate(client, count).await,
                Err(_) => Rate {
                    failed: 1,
                    seconds: 1.0,
                    ..Rate::default()
                },
            }
        })
    })
}

/// POSTs of `body` to `url` for `window`.
fn http_load(
    client: &reqwest::Client,
    url: &reqwest::Url,
    headers: &reqwest::header::HeaderMap,
    body: &'static str,
    window: Duration,
) -> Load {
    let (client, url, headers) = (client.clone(), url.clone(), headers.clone());
    Box::new(move || {
        let (client, url, headers) = (client.clone(), url.clone(), headers.clone());
        Box::pin(drive(HTTP_CONCURRENCY, Stop::After(window), move |_| {
            let request = client.post(url.clone()).headers(headers.clone());
            async move {
                match request.body(body).send().await {
                    Ok(reply) if reply.status().is_success() => {
                        reply.bytes().await.is_ok_and(|body| !body.is_empty())
                    }
                    _ => false,
                }
            }
        }))
    })
}

/// Process CPU seconds (user + system, USER_HZ = 100) from /proc/self/stat.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Process CPU use (in cores) over `window` while the bench sends nothing.
async fn idle_cpu(window: Duration) -> f64 {
    let before = cpu_seconds();
    tokio::time::sleep(window).await;
    match (before, cpu_seconds()) {
        (Some(before), Some(after)) => (after - before) / window.as_secs_f64(),
        _ => f64::NAN,
    }
}

/// PASS or MISS per target: name, met, numbers.
type Targets = Vec<(&'static str, bool, String)>;

// ---------------------------------------------------------------- sections

/// Heap per live task, first, while the process is quiet.
async fn memory(scale: &Scale, targets: &mut Targets) -> anyhow::Result<()> {
    println!("\n== 3. memory per live task (net heap bytes, requested sizes)");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let owner = format!("authorization:{}", rng.hex(64));
    let now = UnixMillis::now();
    let n = scale.memory_tasks;

    let (store, mut ids, ours, blocks) = filled_store(&mut rng, &owner, now, n).await?;
    println!(
        "ours, MemoryStore, {n} records: {ours:.0} B/task in {blocks:.1} heap blocks \
         (TaskRecord is {} B inline)",
        std::mem::size_of::<TaskRecord>()
    );
    // The hash map doubles when 7/8 full: one record past that is its worst case.
    let worst = (n.next_power_of_two() / 8 * 7).max(n) + 1;
    let (_, _, at_worst, _) = filled_store(&mut rng, &owner, now, worst).await?;
    println!("ours, MemoryStore, {worst} records (just after the map grew): {at_worst:.0} B/task");
    targets.push((
        "3. at most 1 KiB per live task in the memory store",
        ours <= 1024.0,
        format!("{ours:.0} B/task at {n} tasks, {at_worst:.0} B/task at {worst} (limit 1024)"),
    ));

    // What one read of the store costs, at 1 and at n records.
    let small = MemoryStore::new();
    let one = runtime_record(&mut rng, &owner, now);
    let one_id = vec![one.id().clone()];
    TaskStore::create(&small, one).await?;
    rng.shuffle(&mut ids);
    let reads = if scale.full { 400_000 } else { 1_000 };
    let (at_one, allocations_per_read) = store_read(&small, &one_id, reads).await;
    let (at_n, _) = store_read(&store, &ids, reads).await;
    let big = MemoryStore::new();
    let working = runtime_record(&mut rng, &owner, now);
    let big_id = vec![working.id().clone()];
    let result = json!({"content": [{"type": "text", "text": "x".repeat(64 * 1024)}]});
    let completed = working.apply(
        &Change::Complete(result),
        now,
        Duration::from_millis(TTL_MS),
    )?;
    TaskStore::create(&big, working).await?;
    TaskStore::compare_and_swap(&big, completed).await?;
    let (at_big, _) = store_read(&big, &big_id, reads / 20).await;
    println!(
        "MemoryStore::get: {at_one:.0} ns at 1 record, {at_n:.0} ns at {n} (random ids), \
         {at_big:.0} ns for a completed task with a 64 KiB result; {allocations_per_read:.1} \
         allocations per get (it clones the record)"
    );
    drop((store, ids, small, big));

    // rmcp's TaskManager: every spawn sweeps every task, so filling is O(n^2).
    let m = scale.rmcp_retained;
    let before = live_bytes();
    let started = Instant::now();
    let manager = TaskManager::new();
    for _ in 0..m {
        manager.spawn(rmcp_options(), |_| {
            Box::pin(std::future::pending::<Result<CallToolResult, TaskExit>>())
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rmcp = (live_bytes() - before) as f64 / m as f64;
    println!(
        "rmcp TaskManager, {m} waiting tasks: {rmcp:.0} B/task (entry and spawned future; \
         filling took {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    manager.shutdown();
    Ok(())
}

/// A store of `n` records as the runtime makes them, their ids, and the
/// net heap bytes and live heap blocks per record.
async fn filled_store(
    rng: &mut Rng,
    owner: &str,
    now: UnixMillis,
    n: usize,
) -> anyhow::Result<(MemoryStore, Vec<TaskId>, f64, f64)> {
    let mut ids = Vec::with_capacity(n);
    let (before, blocks_before) = (live_bytes(), live_blocks());
    let store = MemoryStore::new();
    for _ in 0..n {
        let record = runtime_record(rng, owner, now);
        ids.push(record.id().clone());
        TaskStore::create(&store, record).await?;
    }
    let bytes = (live_bytes() - before - (n * 32) as i128) as f64 / n as f64;
    let blocks = (live_blocks() - blocks_before - n as i128) as f64 / n as f64;
    Ok((store, ids, bytes, blocks))
}

/// Mean time (ns) and allocations of one `TaskStore::get`, over `ids` in turn.
async fn store_read(store: &MemoryStore, ids: &[TaskId], reads: usize) -> (f64, f64) {
    let allocations_before = allocations();
    let started = Instant::now();
    for n in 0..reads {
        std::hint::black_box(TaskStore::get(store, &ids[n % ids.len()]).await.ok());
    }
    let ns = started.elapsed().as_nanos() as f64 / reads as f64;
    let made = (allocations() - allocations_before) as f64 / reads as f64;
    (ns, made)
}

/// tasks/get over Streamable HTTP against a bare axum endpoint.
async fn http(scale: &Scale, targets: &mut Targets) -> anyhow::Result<()> {
    println!(
        "\n== 2. HTTP on 127.0.0.1 (reqwest, {HTTP_CONCURRENCY} requests in flight; client and \
         servers share the cores; {} rounds of {} ms)",
        scale.http_rounds,
        scale.http_window.as_millis()
    );
    let server = OurServer::new(Arc::new(MemoryStore::new()));
    // Ours: the library's serving recipe (rmcp's service, stateless with
    // JSON answers, our fast path for tasks/* in front, TCP_NODELAY).
    let recipe = StreamableHttpServer::new(server.clone(), server.runtime.clone()).router();
    let ours = serve(recipe, true).await?;
    // The same handler behind rmcp's server as shipped: default config, no TCP_NODELAY.
    let shipped = serve(mcp_service(server, Default::default()), false).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(HTTP_CONCURRENCY)
        .timeout(Duration::from_secs(10))
        .build()?;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let request = |method: &str, params: Value| -> &'static str {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
            .to_string()
            .leak()
    };

    let ours_url = reqwest::Url::parse(&format!("http://{ours}/mcp"))?;
    let call = request("tools/call", json!({"name": "wait", "_meta": meta}));
    let (_, created) = probe(
        &client,
        &ours_url,
        &headers("tools/call", Some("wait"))?,
        call,
    )
    .await?;
    let created: Value = serde_json::from_str(&created)?;
    let task_id = created["result"]["taskId"]
        .as_str()
        .context("tools/call over HTTP made no task")?;
    let get_headers = headers("tasks/get", Some(task_id))?;
    let get = request("tasks/get", json!({"taskId": task_id, "_meta": meta}));
    let (content_type, reply) = probe(&client, &ours_url, &get_headers, get).await?;
    anyhow::ensure!(
        reply.contains("\"working\""),
        "tasks/get over HTTP: {reply}"
    );
    // The bare endpoint answers the very bytes our tasks/get answers.
    let fixed: &'static str = reply.leak();
    let bare = axum::Router::new().route(
        "/bare",
        axum::routing::post(move |_body: axum::body::Bytes| async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                fixed,
            )
        }),
    );
    let bare_url = reqwest::Url::parse(&format!("http://{}/bare", serve(bare, true).await?))?;
    let list_headers = headers("tools/list", None)?;
    let list = request("tools/list", json!({"_meta": meta}));
    let (_, listed) = probe(&client, &ours_url, &list_headers, list).await?;
    let shipped_url = reqwest::Url::parse(&format!("http://{shipped}/mcp"))?;
    let (shipped_type, shipped_reply) = probe(&client, &shipped_url, &get_headers, get).await?;

    let mut endpoints = vec![
        (
            "bare axum POST handler, TCP_NODELAY",
            &bare_url,
            &get_headers,
            get,
        ),
        (
            "ours: tasks/get, stateless JSON, TCP_NODELAY",
            &ours_url,
            &get_headers,
            get,
        ),
    ];
    if listed.contains("\"tools\"") {
        endpoints.push((
            "same service: tools/list (no task runtime)",
            &ours_url,
            &list_headers,
            list,
        ));
    } else {
        println!("tools/list did not answer: {listed}");
    }
    if shipped_reply.contains("\"working\"") {
        endpoints.push((
            "rmcp as shipped: tasks/get, SSE, no NODELAY",
            &shipped_url,
            &get_headers,
            get,
        ));
    } else {
        println!("rmcp as shipped did not answer tasks/get: {shipped_reply}");
    }
    let loads: Vec<Load> = endpoints
        .iter()
        .map(|(_, url, headers, body)| http_load(&client, url, headers, body, scale.http_window))
        .collect();
    let measured = rounds(&loads, scale.http_rounds, true).await;
    println!("{:<46} {:>12}  of bare", "endpoint", "requests/s");
    for ((name, ..), rates) in endpoints.iter().zip(&measured) {
        println!(
            "{name:<46} {:>12}  {}",
            per_second(total(rates)),
            percent(ratio(rates, &measured[0]))
        );
    }
    println!(
        "(replies: ours {content_type}, rmcp as shipped {shipped_type}; bare and ours send the \
         same {} bytes)",
        fixed.len()
    );
    let (ours, bare) = (total(&measured[1]), total(&measured[0]));
    let of_bare = ratio(&measured[1], &measured[0]);
    targets.push((
        "2. tasks/get over HTTP at least 40% of a bare axum endpoint",
        of_bare.total >= 0.4 && ours.failed == 0,
        format!(
            "{:.0}/s vs bare {:.0}/s: {} (floor 40%)",
            ours.per_second(),
            bare.per_second(),
            percent(of_bare)
        ),
    ));
    Ok(())
}

/// How many tokens the bearer-token endpoint knows.
const AUTH_TOKENS: usize = 100;

/// `tasks/get` on the fast path with bearer tokens required and not: the
/// same request with the same `Authorization` header, to two recipes on one
/// runtime (without tokens the header is hashed into the principal; with
/// them it is checked against every token in constant time and the label
/// is the principal).
async fn http_auth(scale: &Scale, targets: &mut Targets) -> anyhow::Result<()> {
    println!(
        "\n== 4. tasks/get over HTTP with bearer tokens required and not ({AUTH_TOKENS} tokens; \
         {HTTP_CONCURRENCY} requests in flight; {} rounds of {} ms)",
        scale.http_rounds,
        scale.http_window.as_millis()
    );
    let server = OurServer::new(Arc::new(MemoryStore::new()));
    let file: String = (0..AUTH_TOKENS)
        .map(|n| format!("bench-token-{n:032} caller-{n}\n"))
        .collect();
    let token = format!("bench-token-{:032}", AUTH_TOKENS - 1);
    let tokens = mcp_tasks::server::auth::BearerTokens::parse(file.as_bytes())?;
    let recipe = || StreamableHttpServer::new(server.clone(), server.runtime.clone());
    let off = serve(recipe().router(), true).await?;
    let on = serve(recipe().with_bearer_tokens(tokens).router(), true).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(HTTP_CONCURRENCY)
        .timeout(Duration::from_secs(10))
        .build()?;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let authorization: reqwest::header::HeaderValue = format!("Bearer {token}").parse()?;
    let mut endpoints = Vec::new();
    for (name, address) in [
        ("tokens off: the header hashed into the principal", off),
        ("tokens on: checked, the label is the principal", on),
    ] {
        let url = reqwest::Url::parse(&format!("http://{address}/mcp"))?;
        let mut call_headers = headers("tools/call", Some("wait"))?;
        call_headers.insert("authorization", authorization.clone());
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "wait", "_meta": meta}});
        let (_, created) = probe(&client, &url, &call_headers, call.to_string().leak()).await?;
        let created: Value = serde_json::from_str(&created)?;
        let task_id = created["result"]["taskId"]
            .as_str()
            .with_context(|| format!("{name}: tools/call made no task: {created}"))?;
        let mut get_headers = headers("tasks/get", Some(task_id))?;
        get_headers.insert("authorization", authorization.clone());
        let get: &'static str = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
            "params": {"taskId": task_id, "_meta": meta}})
        .to_string()
        .leak();
        let (_, reply) = probe(&client, &url, &get_headers, get).await?;
        anyhow::ensure!(reply.contains("\"working\""), "{name}: {reply}");
        endpoints.push((name, url, get_headers, get));
    }
    let loads: Vec<Load> = endpoints
        .iter()
        .map(|(_, url, headers, body)| http_load(&client, url, headers, body, scale.http_window))
        .collect();
    let measured = rounds(&loads, scale.http_rounds, true).await;
    println!("{:<50} {:>12}  of tokens off", "endpoint", "requests/s");
    for ((name, ..), rates) in endpoints.iter().zip(&measured) {
        println!(
            "{name:<50} {:>12}  {}",
            per_second(total(rates)),
            percent(ratio(rates, &measured[0]))
        );
    }
    // What each adds to a request, without the HTTP around it.
    let (check_ns, hash_ns) = principal_costs(&file, &token, scale.memory_tasks);
    println!(
        "per request, in a loop: BearerTokens::authenticate with {AUTH_TOKENS} tokens {check_ns:.0} ns \
         (+ Authenticated on the request); default_principal hashing the header {hash_ns:.0} ns"
    );
    let (off, on) = (total(&measured[0]), total(&measured[1]));
    let of_off = ratio(&measured[1], &measured[0]);
    targets.push((
        "4. tasks/get with bearer tokens required within 5% of the rate without",
        of_off.total >= 0.95 && on.failed == 0 && off.failed == 0,
        format!(
            "{:.0}/s vs {:.0}/s without: {} (floor 95%)",
            on.per_second(),
            off.per_second(),
            percent(of_off)
        ),
    ));
    Ok(())
}

/// Nanoseconds per call of checking `token` against the tokens of `file`
/// and of `default_principal` hashing the same header, `reads` calls each.
fn principal_costs(file: &str, token: &str, reads: usize) -> (f64, f64) {
    let Ok(tokens) = mcp_tasks::server::auth::BearerTokens::parse(file.as_bytes()) else {
        return (f64::NAN, f64::NAN);
    };
    let request = axum::http::Request::builder()
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .map(|request| request.into_parts().0);
    let Ok(parts) = request else {
        return (f64::NAN, f64::NAN);
    };
    let reads = reads.max(1);
    let started = Instant::now();
    for _ in 0..reads {
        std::hint::black_box(
            tokens
                .authenticate(std::hint::black_box(&parts.headers))
                .ok(),
        );
    }
    let check = started.elapsed().as_nanos() as f64 / reads as f64;
    let mut extensions = rmcp::model::Extensions::new();
    extensions.insert(parts);
    let started = Instant::now();
    for _ in 0..reads {
        std::hint::black_box(mcp_tasks::server::default_principal(std::hint::black_box(
            &extensions,
        )));
    }
    let hash = started.elapsed().as_nanos() as f64 / reads as f64;
    (check, hash)
}

fn headers(method: &str, name: Option<&str>) -> anyhow::Result<reqwest::header::HeaderMap> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("content-type", "application/json".parse()?);
    headers.insert("accept", "application/json, text/event-stream".parse()?);
    headers.insert("mcp-protocol-version", PROTOCOL.parse()?);
    headers.insert("mcp-method", method.parse()?);
    if let Some(name) = name {
        headers.insert("mcp-name", name.parse()?);
    }
    Ok(headers)
}

/// One request: the reply's content type and body.
async fn probe(
    client: &reqwest::Client,
    url: &reqwest::Url,
    headers: &reqwest::header::HeaderMap,
    body: &'static str,
) -> anyhow::Result<(String, String)> {
    let reply = client
        .post(url.clone())
        .headers(headers.clone())
        .body(body)
        .send()
        .await?;
    let content_type = reply
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("none")
        .to_owned();
    Ok((content_type, reply.text().await?))
}

/// In process: tasks/get and tools/call at one task and at many.
async fn in_process(scale: &Scale, targets: &mut Targets) -> anyhow::Result<()> {
    println!(
        "\n== 1. in process (tokio duplex, rmcp client, {IN_PROCESS_CONCURRENCY} requests in \
         flight; tasks/get: {} rounds of {} ms, ratios to the 1-task row of the same server)",
        scale.rounds,
        scale.get_window.as_millis()
    );
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let one = connect(OurServer::new(Arc::new(MemoryStore::new()))).await?;
    let one_ids = fill(&one, "wait", 1).await;

    // Ours with the store filled directly (tools/call would take a while):
    // these tasks have no running tool, as after a restart.
    let n = scale.ours_retained;
    let store = Arc::new(MemoryStore::new());
    let now = UnixMillis::now();
    let mut filled = Vec::with_capacity(n);
    for _ in 0..n {
        let record = runtime_record(&mut rng, "process", now);
        filled.push(record.id().clone());
        TaskStore::create(&*store, record).await?;
    }
    rng.shuffle(&mut filled);
    let big = connect(OurServer::new(store)).await?;

    // Ours with tasks made through tools/call whose tools run forever.
    let idle_before = idle_cpu(Duration::from_secs(1)).await;
    let counting = Arc::new(CountingStore::default());
    let running = connect(OurServer::new(counting.clone())).await?;
    let before = live_bytes();
    let started = Instant::now();
    let mut running_ids = fill(&running, "wait", scale.ours_running).await;
    let fill_ours = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ours_bytes =
        (live_bytes() - before - ids_heap(&running_ids)) as f64 / running_ids.len().max(1) as f64;
    rng.shuffle(&mut running_ids);
    let reads_before = counting.gets.load(Ordering::Relaxed);
    let idle_started = Instant::now();
    let idle_after = idle_cpu(Duration::from_secs(2)).await;
    let background_reads = (counting.gets.load(Ordering::Relaxed) - reads_before) as f64
        / idle_started.elapsed().as_secs_f64();

    // rmcp at one task and at many, both through tools/call.
    let rmcp_one = connect(RmcpServer::default()).await?;
    let rmcp_one_ids = fill(&rmcp_one, "wait", 1).await;
    let rmcp_many = connect(RmcpServer::default()).await?;
    let before = live_bytes();
    let started = Instant::now();
    let mut rmcp_ids = fill(&rmcp_many, "wait", scale.rmcp_retained).await;
    let fill_rmcp = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rmcp_bytes =
        (live_bytes() - before - ids_heap(&rmcp_ids)) as f64 / rmcp_ids.len().max(1) as f64;
    rng.shuffle(&mut rmcp_ids);

    let rows = [
        ("ours (TaskRuntime + MemoryStore)", 1, 0),
        ("ours, store filled directly", n, 0),
        ("ours, via tools/call, tools running", scale.ours_running, 0),
        ("rmcp TaskManager", 1, 3),
        ("rmcp TaskManager, via tools/call", scale.rmcp_retained, 3),
    ];
    let window = scale.get_window;
    let get_loads = vec![
        get_load(&one, one_ids, window),
        get_load(&big, filled, window),
        get_load(&running, running_ids, window),
        get_load(&rmcp_one, rmcp_one_ids, window),
        get_load(&rmcp_many, rmcp_ids, window),
    ];
    let gets = rounds(&get_loads, scale.rounds, true).await;
    // tools/call of a tool that returns at once: the 1-task rows on a new
    // server every round, the others on the servers as they are.
    let k = scale.creates_per_round;
    let create_loads = vec![
        fresh_create_load(k, || OurServer::new(Arc::new(MemoryStore::new()))),
        create_load(&big, k),
        create_load(&running, k),
        fresh_create_load(k, RmcpServer::default),
        create_load(&rmcp_many, k),
    ];
    let creates = rounds(&create_loads, 3.min(scale.rounds), false).await;

    println!(
        "{:<38} {:>8} {:>12}  {:<25} {:>12}  ratio",
        "server", "retained", "tasks/get/s", "ratio", "tools/call/s"
    );
    for (i, (name, retained, base)) in rows.iter().enumerate() {
        println!(
            "{name:<38} {retained:>8} {:>12}  {:<25} {:>12}  {}",
            per_second(total(&gets[i])),
            percent(ratio(&gets[i], &gets[*base])),
            per_second(total(&creates[i])),
            percent(ratio(&creates[i], &creates[*base])),
        );
    }
    // rmcp scans every task on every call: time per call ~ a + b * n.
    let seconds_per_call = |rounds: &[Rate]| 1.0 / total(rounds).per_second();
    let extrapolate = |at_one: &[Rate], at_many: &[Rate]| {
        let slope = (seconds_per_call(at_many) - seconds_per_call(at_one))
            / (scale.rmcp_retained - 1) as f64;
        let rate = 1.0 / (seconds_per_call(at_one) + slope * (n - 1) as f64);
        (rate, rate * seconds_per_call(at_one))
    };
    let (get_n, get_ratio) = extrapolate(&gets[3], &gets[4]);
    let (create_n, create_ratio) = extrapolate(&creates[3], &creates[4]);
    println!(
        "{:<38} {n:>8} {:>12}  {:<25} {:>12}  {:.1}%",
        "rmcp, extrapolated (linear scan)",
        format!("~{get_n:.0}"),
        format!("{:.1}%", get_ratio * 100.0),
        format!("~{create_n:.0}"),
        create_ratio * 100.0
    );
    println!(
        "tools/call: {k} calls per round, 3 rounds; 1-task rows start from an empty server. \
         rmcp at {n} not measured: filling through tools/call is O(n^2) ({} tasks took {:.1} s; \
         ours {} took {:.1} s)",
        scale.rmcp_retained,
        fill_rmcp.as_secs_f64(),
        scale.ours_running,
        fill_ours.as_secs_f64()
    );
    println!(
        "whole server per live task (made by tools/call, tool running; net heap): ours {ours_bytes:.0} B, \
         rmcp {rmcp_bytes:.0} B"
    );
    println!(
        "idle process CPU: {idle_before:.3} cores before, {idle_after:.3} with {} running tools on \
         our runtime, which read the store {background_reads:.0} times/s unasked",
        scale.ours_running
    );

    let of_one = ratio(&gets[1], &gets[0]);
    targets.push((
        "1. tasks/get at 100,000 live tasks within 10% of the one-task rate (in process)",
        of_one.total >= 0.9 && total(&gets[0]).failed + total(&gets[1]).failed == 0,
        format!(
            "{:.0}/s at {n} vs {:.0}/s at 1: {} (floor 90%); rmcp at {}: {}",
            total(&gets[1]).per_second(),
            total(&gets[0]).per_second(),
            percent(of_one),
            scale.rmcp_retained,
            percent(ratio(&gets[4], &gets[3])),
        ),
    ));
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let scale = Scale::new(std::env::args().any(|arg| arg == "--bench"));
    let started = Instant::now();
    println!(
        "mcp-tasks benchmark ({}): {} cores, one tokio runtime with 2 workers for servers and clients",
        if scale.full {
            "full run"
        } else {
            "smoke run without --bench: the numbers mean nothing"
        },
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    let mut targets = Targets::new();
    memory(&scale, &mut targets).await?;
    // HTTP before the in-process servers, whose running tools wake every second.
    http(&scale, &mut targets).await?;
    http_auth(&scale, &mut targets).await?;
    in_process(&scale, &mut targets).await?;

    println!("\n== targets");
    targets.sort_by_key(|(name, ..)| *name);
    for (name, met, detail) in &targets {
        println!("{} {name}: {detail}", if *met { "PASS" } else { "MISS" });
    }
    println!(
        "(the run took {:.0} s; a MISS is reported, not asserted)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
