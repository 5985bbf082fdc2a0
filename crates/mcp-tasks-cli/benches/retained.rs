//! A million retained tasks on SQLite (issue 31), through the user's path:
//! the `mcp-tasks serve --http --store sqlite:FILE` binary as a child
//! process, a reqwest client on 127.0.0.1.
//!
//! * **Fill**: 1,000,000 finished tasks (completed with a result, as the
//!   runtime leaves them; 1,000 owners; a 30-day TTL so they stay) written
//!   straight through [`SqliteStore`] (its group commit batches concurrent
//!   creations), since over HTTP it would take too long. The full run keeps
//!   the file under `target/tmp/retained/` between runs and fills it once.
//! * **Start**: from spawning `serve` to its first successful `tasks/get` of
//!   an uncached task, with the file's pages first dropped from the
//!   operating system's cache (`dd iflag=nocache`: a cold start, as after a
//!   reboot) and without (warm); several times; target < 2 s.
//! * **Memory**: the server's RSS after start, after reading 100,000
//!   distinct random tasks (the read cache's record bound, 100,000 by
//!   default) and after 50,000 more (past it); target: the growth stays
//!   within the configured cache (its byte bound, 128 MiB by default) and
//!   stops once the cache is full.
//! * **Reads**: p50/p99 of `tasks/get` of tasks no one read before in that
//!   process (so never in its cache), sequential and 16 at once; target
//!   p99 < 5 ms.
//! * **Crash**: creations from 16 callers at once, `kill -9` of the server
//!   in the middle, a restart (cold): time to the first `tasks/get` (target
//!   < 2 s again), and every creation answered before the kill read back
//!   (target: none lost with the default `--sqlite-sync normal`).
//!
//! * **PostgreSQL**: the same million tasks in a PostgreSQL this bench
//!   starts (`fsync` and `synchronous_commit` on): one written through
//!   [`PostgresStore`], copied 999,999 times by one `INSERT ... SELECT`
//!   (ids and owners rewritten), then `CHECKPOINT`. Starts of `serve
//!   --store postgres://...` to its first `tasks/get` of an uncached task,
//!   with PostgreSQL restarted first and its files dropped from the
//!   operating system's cache (cold; the restart's own time printed apart)
//!   and with PostgreSQL running (warm); target < 2 s; then uncached reads
//!   as above.
//!
//! It prints the numbers and PASS or MISS for each target; a miss is
//! reported, not asserted. Without `--bench` (as under `cargo test
//! --benches`) it runs a smoke version on 10,000 tasks whose numbers mean
//! little.
//!
//! ```text
//! cargo bench -p mcp-tasks-cli --bench retained
//! cargo bench -p mcp-tasks-cli --bench retained -- postgres    # PostgreSQL's part only
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use mcp_tasks::store::{Change, Principal, TaskRecord, TaskStore as _};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};
use mcp_tasks_sqlite::{SqliteOptions, SqliteStore};
use mcp_tasks_testkit::stats::{loadavg, median, ms, percentile_ms as percentile, verdict};
use serde_json::{Value, json};

#[path = "support/serve.rs"]
#[allow(dead_code, reason = "each bench uses a part of it")]
mod serve;

use serve::META;
/// How many callers own the filled tasks (task `n` is owner `n % OWNERS`'s).
const OWNERS: u64 = 1000;
/// How long the filled tasks are kept: long enough to outlive any run.
const RETAINED: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// The creation time of task 0 (2026-12-01), in ms; ids start with it.
const BASE_MS: u64 = 1_796_083_200_000;
/// The read cache the server is given: `serve`'s default (`SqliteOptions`).
const CACHE_BYTES_MIB: f64 = 128.0;

/// The bearer token of owner `k` (its label in the tokens file is `owner-k`).
fn token(k: u64) -> String {
    format!("retained-bench-token-{k:020}")
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The id of filled task `n`, shaped as the runtime's (12 hex digits of the
/// creation time, 32 random), reproducible so no list of ids is kept.
fn task_id(n: u64) -> String {
    format!(
        "{:012x}{:016x}{:016x}",
        BASE_MS + n / 100,
        splitmix(2 * n),
        splitmix(2 * n + 1)
    )
}

/// The id of filled task `n` in PostgreSQL, of the same shape, made by SQL
/// as well (so the copies need no list of ids either).
fn postgres_task_id(n: u64) -> String {
    format!(
        "{:012x}{:08x}{:024x}",
        BASE_MS + n / 100,
        (n * 2_654_435_761) % (1 << 32),
        n
    )
}

/// [`postgres_task_id`] in SQL, of the integer `n`.
const POSTGRES_TASK_ID: &str = "lpad(to_hex(1796083200000 + n / 100), 12, '0') \
     || lpad(to_hex((n * 2654435761) % 4294967296), 8, '0') || lpad(to_hex(n), 24, '0')";

/// Filled task `n`: created by `sleep`, completed 10 ms later with its result.
fn finished(n: u64) -> anyhow::Result<TaskRecord> {
    finished_as(n, task_id(n))
}

/// [`finished`] under the id `id`.
fn finished_as(n: u64, id: String) -> anyhow::Result<TaskRecord> {
    let created = UnixMillis::new(BASE_MS + n / 100);
    let record = TaskRecord::new(
        TaskId::new(id),
        Principal::new(format!("owner-{}", n % OWNERS)),
        created,
        Ttl::Limited(RETAINED),
        Some(Duration::from_secs(1)),
    )
    .with_tool("sleep");
    let result = json!({"content": [{"type": "text", "text": format!("slept {} ms", n % 1000)}], "isError": false});
    Ok(record
        .apply(
            &Change::Complete(result),
            UnixMillis::new(created.as_millis() + 10),
            RETAINED,
        )?
        .into_record())
}

/// Writes `count` finished tasks into a new store file at `path`.
async fn fill(path: &Path, count: u64) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let store = Arc::new(SqliteStore::open_with(
        path,
        &SqliteOptions::default().with_cache(0, 0),
    )?);
    {
        let creations = futures::stream::iter(0..count)
            .map(|n| {
                let store = Arc::clone(&store);
                async move {
                    let record = finished(n)?;
                    store.create(record).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(1024);
        let mut creations = std::pin::pin!(creations);
        while let Some(done) = creations.next().await {
            done.context("fill the store")?;
        }
    }
    drop(store);
    Ok(started.elapsed())
}

/// Drops the file's pages (and the WAL's) from the operating system's cache.
fn evict(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        if !Path::new(&file).exists() {
            continue;
        }
        let _ = Command::new("dd")
            .arg(format!("if={}", Path::new(&file).display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .stderr(Stdio::null())
            .status();
    }
}

/// Drops every file of PostgreSQL's cluster from the operating system's cache.
fn evict_cluster(postgres: &PostgresServer) {
    let mut folders = vec![postgres.dir().join("data")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                evict(&path);
            }
        }
    }
}

/// A `serve --http` child on the store.
struct Server(serve::Server);

impl std::ops::Deref for Server {
    type Target = serve::Server;

    fn deref(&self) -> &serve::Server {
        &self.0
    }
}

impl Server {
    fn start(store: &Path, tokens: &Path) -> anyhow::Result<Self> {
        Self::start_on(&format!("sqlite:{}", store.display()), tokens)
    }

    /// A child on the store `--store` names.
    fn start_on(store: &str, tokens: &Path) -> anyhow::Result<Self> {
        let tokens = tokens.display().to_string();
        serve::Server::start(&["--store", store, "--auth-tokens", &tokens]).map(Self)
    }

    /// Polls `tasks/get` of filled task `n` until it answers: the time from
    /// spawn to that answer.
    async fn first_get(&self, http: &reqwest::Client, n: u64) -> anyhow::Result<Duration> {
        self.first_get_of(http, n, &task_id(n)).await
    }

    /// [`Server::first_get`] of the task `id` (filled task `n`).
    async fn first_get_of(
        &self,
        http: &reqwest::Client,
        n: u64,
        id: &str,
    ) -> anyhow::Result<Duration> {
        while self.spawned.elapsed() < Duration::from_secs(120) {
            if get(http, &self.url, &token(n % OWNERS), id).await.is_some() {
                return Ok(self.spawned.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        bail!("no tasks/get answered within 120 s")
    }
}

fn post(
    http: &reqwest::Client,
    url: &str,
    caller: &str,
    method: &str,
    name: &str,
) -> reqwest::RequestBuilder {
    serve::mcp_post(http, url, method, name).header("Authorization", format!("Bearer {caller}"))
}

/// One `tasks/get` of `id` as `caller`: its latency and status, if answered
/// with the task.
async fn get(
    http: &reqwest::Client,
    url: &str,
    caller: &str,
    id: &str,
) -> Option<(Duration, String)> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{id}",{META}}}}}"#
    );
    let started = Instant::now();
    let response = post(http, url, caller, "tasks/get", id)
        .body(body)
        .send()
        .await
        .ok()?;
    let bytes = response.bytes().await.ok()?;
    let took = started.elapsed();
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    if value.pointer("/result/taskId").and_then(Value::as_str) != Some(id) {
        return None;
    }
    let status = value.pointer("/result/status").and_then(Value::as_str)?;
    Some((took, status.to_owned()))
}

/// One `tools/call` of `sleep` for `ms` as `caller`: the task's id.
async fn create(http: &reqwest::Client, url: &str, caller: &str, ms: u64) -> Option<String> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":{ms}}},{META}}}}}"#
    );
    let response = post(http, url, caller, "tools/call", "sleep")
        .body(body)
        .send()
        .await
        .ok()?;
    let value: Value = serde_json::from_slice(&response.bytes().await.ok()?).ok()?;
    (value.pointer("/result/resultType") == Some(&Value::from("task")))
        .then(|| value.pointer("/result/taskId")?.as_str().map(str::to_owned))
        .flatten()
}

/// The `i`-th of a sequence of distinct filled tasks (a stride coprime to
/// `count` walks every task once, in an order unrelated to their ids).
fn distinct(i: u64, count: u64) -> u64 {
    const STRIDE: u64 = 1_000_003;
    (7 + i.wrapping_mul(STRIDE)) % count
}

/// Reads the distinct tasks `from..to`, `inflight` at once: the sorted
/// latencies; fails on any read that does not answer the task.
async fn read_range(
    url: &str,
    count: u64,
    from: u64,
    to: u64,
    inflight: usize,
) -> anyhow::Result<Vec<Duration>> {
    read_range_of(url, count, from, to, inflight, task_id).await
}

/// [`read_range`] of the tasks `id` names.
async fn read_range_of(
    url: &str,
    count: u64,
    from: u64,
    to: u64,
    inflight: usize,
    id: fn(u64) -> String,
) -> anyhow::Result<Vec<Duration>> {
    let http = reqwest::Client::new();
    let next = Arc::new(AtomicU64::new(from));
    let mut workers = Vec::new();
    for _ in 0..inflight {
        let (http, url, next) = (http.clone(), url.to_owned(), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to {
                    return anyhow::Ok(seen);
                }
                let n = distinct(i, count);
                let (took, _) = get(&http, &url, &token(n % OWNERS), &id(n))
                    .await
                    .with_context(|| format!("filled task {n} was not answered"))?;
                seen.push(took);
            }
        }));
    }
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await??);
    }
    all.sort();
    Ok(all)
}

/// Writes the tokens file: `TOKEN owner-k` for every owner.
fn write_tokens(path: &Path) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    for k in 0..OWNERS {
        writeln!(file, "{} owner-{k}", token(k))?;
    }
    Ok(())
}

/// The store file, filled: kept in `target/tmp/retained/` by the full run
/// (filled once, reused by later runs), new in `dir` for the smoke run.
async fn filled_store(full: bool, count: u64, dir: &Path) -> anyhow::Result<PathBuf> {
    let folder = if full {
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("retained")
    } else {
        dir.to_path_buf()
    };
    std::fs::create_dir_all(&folder)?;
    let path = folder.join(format!("retained-{count}.sqlite3"));
    let marker = folder.join(format!("retained-{count}.filled"));
    if marker.exists() && path.exists() {
        // Opened once first: a file of an older schema is upgraded here, not
        // in the measured starts.
        let started = Instant::now();
        drop(SqliteStore::open_with(
            &path,
            &SqliteOptions::default().with_cache(0, 0),
        )?);
        println!(
            "store: {} (filled by an earlier run; opened once in {:.0} ms)",
            path.display(),
            ms(started.elapsed())
        );
        return Ok(path);
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(&file);
    }
    let took = fill(&path, count).await?;
    let size = std::fs::metadata(&path).map_or(0, |meta| meta.len());
    println!(
        "fill: {count} finished tasks in {:.1} s ({:.0}/s), file {:.0} MiB",
        took.as_secs_f64(),
        count as f64 / took.as_secs_f64(),
        size as f64 / 1_048_576.0
    );
    std::fs::write(&marker, b"")?;
    Ok(path)
}

async fn run(full: bool) -> anyhow::Result<()> {
    let count: u64 = if full { 1_000_000 } else { 10_000 };
    let (starts, first_reads, more_reads, sequential) = if full {
        (5, 100_000, 50_000, 2_000)
    } else {
        (2, 2_000, 1_000, 200)
    };
    println!(
        "retained ({}): {count} tasks, load average {}",
        if full { "full run" } else { "smoke run" },
        loadavg()
    );
    let dir = tempfile::tempdir()?;
    let tokens = dir.path().join("tokens.txt");
    write_tokens(&tokens)?;
    // `cargo bench -p mcp-tasks-cli --bench retained -- postgres`: PostgreSQL's part only.
    if std::env::args().any(|arg| arg == "postgres") {
        return on_postgres(full, count, starts, &tokens).await;
    }
    let store = filled_store(full, count, dir.path()).await?;
    let http = reqwest::Client::new();

    // Starts, cold and warm in turn; the task read first differs each time.
    let (mut cold, mut warm, mut listen_cold) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..starts {
        for is_cold in [true, false] {
            if is_cold {
                evict(&store);
            }
            let server = Server::start(&store, &tokens)?;
            let first = server
                .first_get(
                    &http,
                    distinct(count - 1 - round * 2 - u64::from(is_cold), count),
                )
                .await?;
            if is_cold {
                cold.push(ms(first));
                listen_cold.push(ms(server.listening));
            } else {
                warm.push(ms(first));
            }
        }
    }
    let cold_ms = median(&mut cold.clone());
    println!(
        "start to first tasks/get: cold median {cold_ms:.0} ms (all {cold:.0?}; listening after {:.0} ms), warm median {:.0} ms (all {warm:.0?})",
        median(&mut listen_cold),
        median(&mut warm.clone()),
    );
    println!(
        "{} first tasks/get within 2 s of start (cold median {cold_ms:.0} ms, slowest {:.0} ms)",
        verdict(cold.iter().chain(&warm).all(|&t| t < 2000.0)),
        cold.iter().chain(&warm).copied().fold(0.0, f64::max)
    );

    // Memory and reads of tasks never read before by this process.
    evict(&store);
    let server = Server::start(&store, &tokens)?;
    server.first_get(&http, distinct(count - 1, count)).await?;
    let rss_start = server.rss_mib();
    let seq = read_range(&server.url, count, 0, sequential, 1).await?;
    let (started, cpu) = (Instant::now(), server.cpu());
    let par = read_range(&server.url, count, sequential, first_reads, 16).await?;
    let rate = (first_reads - sequential) as f64 / started.elapsed().as_secs_f64();
    let cpu_per_read = (server.cpu() - cpu).as_secs_f64() * 1e6 / par.len() as f64;
    let rss_full = server.rss_mib();
    read_range(
        &server.url,
        count,
        first_reads,
        first_reads + more_reads,
        16,
    )
    .await?;
    let rss_past = server.rss_mib();
    println!(
        "tasks/get of uncached tasks: sequential p50 {:.2} ms p99 {:.2} ms ({} reads); c=16 p50 {:.2} ms p99 {:.2} ms ({} reads, {rate:.0}/s, server CPU {cpu_per_read:.0} µs a read)",
        percentile(&seq, 0.5),
        percentile(&seq, 0.99),
        seq.len(),
        percentile(&par, 0.5),
        percentile(&par, 0.99),
        par.len()
    );
    let p99 = percentile(&seq, 0.99).max(percentile(&par, 0.99));
    println!(
        "{} uncached tasks/get p99 < 5 ms (worst {p99:.2} ms)",
        verdict(p99 < 5.0)
    );
    println!(
        "RSS: {rss_start:.1} MiB after start, {rss_full:.1} MiB after {first_reads} distinct reads, {rss_past:.1} MiB after {more_reads} more"
    );
    let grown = rss_past - rss_start;
    println!(
        "{} RSS within the configured cache: grew {grown:.1} MiB over start (cache bound {CACHE_BYTES_MIB:.0} MiB or 100,000 records; {:+.1} MiB of it past the record bound)",
        verdict(grown <= CACHE_BYTES_MIB),
        rss_past - rss_full
    );
    drop(server);

    // A burst of creations, kill -9 in its middle, a cold restart.
    let server = Server::start(&store, &tokens)?;
    server.first_get(&http, distinct(count - 2, count)).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for k in 0..16 {
        let (http, url, stop) = (http.clone(), server.url.clone(), Arc::clone(&stop));
        workers.push(tokio::spawn(async move {
            let mut answered = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match create(&http, &url, &token(k), 20).await {
                    Some(id) => answered.push(id),
                    None => break,
                }
            }
            (k, answered)
        }));
    }
    tokio::time::sleep(Duration::from_millis(if full { 2000 } else { 500 })).await;
    drop(server);
    stop.store(true, Ordering::Relaxed);
    let mut answered = Vec::new();
    for worker in workers {
        answered.push(worker.await?);
    }
    let created: usize = answered.iter().map(|(_, ids)| ids.len()).sum();
    evict(&store);
    let server = Server::start(&store, &tokens)?;
    let restart = ms(server.first_get(&http, distinct(count - 3, count)).await?);
    let (mut lost, mut unfinished) = (0, 0);
    for (k, ids) in &answered {
        for id in ids {
            match get(&http, &server.url, &token(*k), id).await {
                None => lost += 1,
                Some((_, status)) if status == "working" => unfinished += 1,
                Some(_) => {}
            }
        }
    }
    println!(
        "kill -9 after {created} creations answered (c=16, 20 ms tools): restart to first tasks/get {restart:.0} ms (cold), {lost} lost, {unfinished} still working"
    );
    println!(
        "{} recovery after kill -9 within 2 s ({restart:.0} ms) and nothing lost ({lost} of {created})",
        verdict(restart < 2000.0 && lost == 0 && created > 0)
    );
    drop(server);
    on_postgres(full, count, starts, &tokens).await?;
    println!("load average after: {}", loadavg());
    Ok(())
}

/// The million tasks in PostgreSQL: filled, then `serve` started on them,
/// cold and warm, and uncached reads.
async fn on_postgres(full: bool, count: u64, starts: u64, tokens: &Path) -> anyhow::Result<()> {
    let mut postgres = PostgresServer::start_with(&["-c", "shared_buffers=256MB"]);
    let url = postgres.url();
    let started = Instant::now();
    let store = PostgresStore::connect_with(&url, PostgresOptions::default().with_cache(0, 0))
        .await
        .context("connect to PostgreSQL")?;
    let template = postgres_task_id(0);
    store.create(finished_as(0, template.clone())?).await?;
    drop(store);
    postgres.psql(&format!(
        "INSERT INTO mcp_tasks.tasks (id, owner, version, record, runner, expires_at, keyed) \
         SELECT {POSTGRES_TASK_ID}, 'owner-' || (n % {OWNERS}), t.version, \
           replace(replace(t.record, '\"{template}\"', '\"' || {POSTGRES_TASK_ID} || '\"'), \
             '\"owner-0\"', '\"owner-' || (n % {OWNERS}) || '\"'), \
           t.runner, t.expires_at, t.keyed \
         FROM generate_series(1::bigint, {last}) AS n, mcp_tasks.tasks AS t WHERE t.id = '{template}'; \
         CHECKPOINT",
        last = count - 1
    ));
    let size = postgres.psql("SELECT pg_total_relation_size('mcp_tasks.tasks')");
    println!(
        "\nPostgreSQL: filled {count} finished tasks in {:.1} s (one through the store, the rest copied by SQL), table and indexes {:.0} MiB",
        started.elapsed().as_secs_f64(),
        size.parse::<f64>().unwrap_or(f64::NAN) / 1_048_576.0
    );
    let http = reqwest::Client::new();
    let (mut cold, mut warm, mut restarts) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..starts {
        for is_cold in [true, false] {
            if is_cold {
                // A clean stop's state (CHECKPOINT, then the kill), its
                // buffers and the operating system's cache emptied.
                postgres.psql("CHECKPOINT");
                postgres.kill();
                evict_cluster(&postgres);
                let restarted = Instant::now();
                postgres.restart();
                restarts.push(ms(restarted.elapsed()));
            }
            let server = Server::start_on(&url, tokens)?;
            let n = distinct(count - 1 - round * 2 - u64::from(is_cold), count);
            let first = server.first_get_of(&http, n, &postgres_task_id(n)).await?;
            let times = if is_cold { &mut cold } else { &mut warm };
            times.push(ms(first));
        }
    }
    let cold_ms = median(&mut cold.clone());
    println!(
        "PostgreSQL: serve's start to first tasks/get: cold median {cold_ms:.0} ms (all {cold:.0?}; PostgreSQL's restart before it: median {:.0} ms), warm median {:.0} ms (all {warm:.0?})",
        median(&mut restarts.clone()),
        median(&mut warm.clone()),
    );
    println!(
        "{} PostgreSQL: first tasks/get within 2 s of start (cold median {cold_ms:.0} ms, slowest {:.0} ms; with PostgreSQL's own restart, slowest {:.0} ms)",
        verdict(cold.iter().chain(&warm).all(|&t| t < 2000.0)),
        cold.iter().chain(&warm).copied().fold(0.0, f64::max),
        cold.iter()
            .zip(&restarts)
            .map(|(a, b)| a + b)
            .fold(0.0, f64::max)
    );
    let (sequential, parallel) = if full { (2_000, 20_000) } else { (200, 1_000) };
    let server = Server::start_on(&url, tokens)?;
    server
        .first_get_of(&http, count - 1, &postgres_task_id(count - 1))
        .await?;
    let seq = read_range_of(&server.url, count, 0, sequential, 1, postgres_task_id).await?;
    let started = Instant::now();
    let par = read_range_of(
        &server.url,
        count,
        sequential,
        parallel,
        16,
        postgres_task_id,
    )
    .await?;
    println!(
        "PostgreSQL: tasks/get of uncached tasks: sequential p50 {:.2} ms p99 {:.2} ms ({} reads); c=16 p50 {:.2} ms p99 {:.2} ms ({} reads, {:.0}/s)",
        percentile(&seq, 0.5),
        percentile(&seq, 0.99),
        seq.len(),
        percentile(&par, 0.5),
        percentile(&par, 0.99),
        par.len(),
        par.len() as f64 / started.elapsed().as_secs_f64()
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
