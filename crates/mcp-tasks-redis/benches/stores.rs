//! The Redis and PostgreSQL stores next to the memory and SQLite stores, in
//! one run, and the cross-replica wake-up (Redis's pub/sub, PostgreSQL's
//! LISTEN/NOTIFY), and what seat pools cost: see BENCHMARKS.md
//! for the latest results and docs/benchmarks-history.md ("Stores and
//! replicas") for the runs.
//!
//! ```sh
//! cargo bench -p mcp-tasks-redis --bench stores
//! cargo bench -p mcp-tasks-redis --bench stores -- replicas   # the wake-up only
//! ```
//!
//! Without `--bench` (as under `cargo test --benches`) it runs a smoke
//! version whose numbers mean nothing. It starts its own `redis-server`
//! processes (Debian's package) and a PostgreSQL (`initdb` in a temporary
//! directory, `fsync` and `synchronous_commit` on) on free ports of
//! 127.0.0.1.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::client::ListenChannel;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskRuntime, ToolTasks};
use mcp_tasks::store::{Change, MemoryStore, Principal, SharedStore, TaskRecord, modify};
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, ListenMode, TaskId, TasksClient, Ttl, UnixMillis,
};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_redis::{RedisOptions, RedisStore};
use mcp_tasks_sqlite::{SqliteOptions, SqliteStore, SqliteSync};
use mcp_tasks_testkit::stats::percentile_ms;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequest,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleServer, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

#[path = "stores/seats.rs"]
mod seats;

/// Requests in flight at once, as in `crates/mcp-tasks/benches/tasks.rs`.
const IN_FLIGHT: usize = 8;

struct Scale {
    full: bool,
    /// Rounds per load, each store in turn (forwards, then backwards).
    rounds: usize,
    round: Duration,
    /// Tasks in each store before `get` loads (read in random order).
    filled: usize,
    /// Answers timed per wake-up series.
    wakes: usize,
}

impl Scale {
    fn new(full: bool) -> Self {
        if full {
            Self {
                full,
                rounds: 20,
                round: Duration::from_millis(200),
                filled: 10_000,
                wakes: 300,
            }
        } else {
            Self {
                full,
                rounds: 2,
                round: Duration::from_millis(20),
                filled: 200,
                wakes: 10,
            }
        }
    }
}

/// The principal of in-process clients.
fn process() -> Principal {
    Principal::new("process")
}

/// A small deterministic generator (xorshift): random ids without a dependency.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A store under test.
struct Subject {
    name: &'static str,
    store: SharedStore,
}

async fn subjects(
    redis: &RedisServer,
    everysec: &RedisServer,
    postgres: &PostgresServer,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<Subject>> {
    let redis_store = |server: &RedisServer, prefix: &str| {
        let url = server.url();
        let options = RedisOptions::default().with_key_prefix(prefix);
        async move { RedisStore::connect_with(&url, options).await }
    };
    Ok(vec![
        Subject {
            name: "memory",
            store: Arc::new(MemoryStore::new()),
        },
        Subject {
            name: "SQLite (WAL, synchronous=NORMAL)",
            store: Arc::new(SqliteStore::open(dir.join("bench.sqlite3"))?),
        },
        // `serve --sqlite-sync full`: an fsync of the WAL per group commit.
        Subject {
            name: "SQLite (WAL, synchronous=FULL)",
            store: Arc::new(SqliteStore::open_with(
                dir.join("bench-full.sqlite3"),
                &SqliteOptions::default().with_sync(SqliteSync::Full),
            )?),
        },
        Subject {
            name: "Redis, appendfsync always",
            store: Arc::new(redis_store(redis, "bench:").await?),
        },
        Subject {
            name: "Redis, appendfsync everysec",
            store: Arc::new(redis_store(everysec, "bench:").await?),
        },
        Subject {
            name: "PostgreSQL, synchronous_commit on",
            store: postgres_store(postgres, "bench").await?,
        },
    ])
}

fn record(id: String) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        process(),
        UnixMillis::now(),
        Ttl::from_millis(3_600_000),
        Some(Duration::from_secs(1)),
    )
}

/// Runs `op` from `IN_FLIGHT` workers until `long` has passed; how many ran.
async fn load<F, Fut>(long: Duration, op: Arc<F>) -> u64
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + long;
    let mut workers = Vec::new();
    for worker in 0..IN_FLIGHT {
        let (op, done) = (op.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            let mut n = (worker as u64) << 40;
            while Instant::now() < until {
                op(n).await;
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for worker in workers {
        let _ = worker.await;
    }
    done.load(Ordering::Relaxed)
}

/// Rates per subject: `rounds` rounds, each subject in turn, forwards then
/// backwards; ops over the time of all its rounds.
async fn rates<F, Fut>(scale: &Scale, count: usize, make: impl Fn(usize) -> Arc<F>) -> Vec<f64>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut totals = vec![0u64; count];
    let mut order: Vec<usize> = (0..count).collect();
    for round in 0..scale.rounds {
        if round % 2 == 1 {
            order.reverse();
        }
        for &subject in &order {
            totals[subject] += load(scale.round, make(subject)).await;
        }
        if round % 2 == 1 {
            order.reverse();
        }
    }
    let seconds = scale.round.as_secs_f64() * scale.rounds as f64;
    totals.into_iter().map(|ops| ops as f64 / seconds).collect()
}

fn table(title: &str, names: &[&str], columns: &[(&str, Vec<f64>)]) {
    println!("\n== {title}");
    print!("{:<36}", "store");
    for (column, _) in columns {
        print!("{column:>16}{:>10}", "of memory");
    }
    println!();
    for (row, name) in names.iter().enumerate() {
        print!("{name:<36}");
        for (_, values) in columns {
            print!(
                "{:>16.0}{:>9.1}%",
                values[row],
                100.0 * values[row] / values[0]
            );
        }
        println!();
    }
}

/// The store alone: `get` of random ids among `filled`, and `create`.
async fn stores_alone(scale: &Scale, subjects: &[Subject]) -> anyhow::Result<()> {
    for subject in subjects {
        for n in 0..scale.filled {
            subject.store.create(record(format!("filled-{n}"))).await?;
        }
    }
    let names: Vec<&str> = subjects.iter().map(|s| s.name).collect();
    let stores: Vec<SharedStore> = subjects.iter().map(|s| s.store.clone()).collect();
    let filled = scale.filled;
    let gets = rates(scale, stores.len(), |subject| {
        let store = stores[subject].clone();
        Arc::new(move |n: u64| {
            let store = store.clone();
            async move {
                let mut random = Random(n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                let id = TaskId::new(format!("filled-{}", random.below(filled)));
                let _ = store.get(&id).await;
            }
        })
    })
    .await;
    let made = AtomicU64::new(0);
    let made = Arc::new(made);
    let creates = rates(scale, stores.len(), |subject| {
        let (store, made) = (stores[subject].clone(), made.clone());
        Arc::new(move |_| {
            let (store, made) = (store.clone(), made.clone());
            async move {
                let n = made.fetch_add(1, Ordering::Relaxed);
                let _ = store.create(record(format!("made-{n}"))).await;
            }
        })
    })
    .await;
    table(
        &format!(
            "1. the store alone ({IN_FLIGHT} operations in flight; get: random ids among {filled} tasks)"
        ),
        &names,
        &[("get/s", gets), ("create/s", creates)],
    );
    Ok(())
}

/// The bench server: `instant` completes at once; `ask_loop` asks for
/// `k0`, `k1`, ... and reports when each answer reached it; `notes` sets
/// `count` status messages 20-60 ms apart and notes when it set each.
#[derive(Clone)]
struct Bench {
    runtime: TaskRuntime,
    resumed: Arc<Mutex<Option<mpsc::UnboundedSender<Instant>>>>,
    noted: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Bench {
    fn new(runtime: TaskRuntime) -> Self {
        Self {
            runtime,
            resumed: Arc::default(),
            noted: Arc::default(),
        }
    }
}

fn form() -> InputRequest {
    serde_json::from_value(json!({"method": "elicitation/create", "params": {"mode": "form",
        "message": "?", "requestedSchema": {"type": "object", "properties": {"v": {"type": "string"}}}}}))
    .expect("a form")
}

impl ServerHandler for Bench {
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
        let resumed = self.resumed.lock().expect("lock").clone();
        let noted = self.noted.clone();
        match request.name.as_ref() {
            "notes" => {
                let arguments = request.arguments.clone().unwrap_or_default();
                let tag = arguments
                    .get("tag")
                    .and_then(|tag| tag.as_str())
                    .unwrap_or("")
                    .to_owned();
                let count = arguments
                    .get("count")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(1);
                self.runtime
                    .call_tool(
                        &request,
                        &context,
                        &ToolTasks::required(),
                        move |task| async move {
                            let mut random = Random(tag.len() as u64 * 7919 + 1);
                            for n in 0..count {
                                tokio::time::sleep(Duration::from_millis(
                                    20 + random.below(40) as u64,
                                ))
                                .await;
                                let message = format!("{tag}-{n}");
                                noted
                                    .lock()
                                    .expect("lock")
                                    .insert(message.clone(), Instant::now());
                                task.set_status_message(message).await?;
                            }
                            Ok(CallToolResult::success(vec![ContentBlock::text("noted")]))
                        },
                    )
                    .await
            }
            "instant" => {
                self.runtime
                    .call_tool(&request, &context, &ToolTasks::required(), |_| async {
                        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
                    })
                    .await
            }
            _ => {
                self.runtime
                    .call_tool(
                        &request,
                        &context,
                        &ToolTasks::required(),
                        move |task| async move {
                            for n in 0.. {
                                task.request_input(format!("k{n}"), form()).await?;
                                if let Some(resumed) = &resumed {
                                    let _ = resumed.send(Instant::now());
                                }
                            }
                            Ok(CallToolResult::success(vec![]))
                        },
                    )
                    .await
            }
        }
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

fn runtime(store: SharedStore) -> TaskRuntime {
    TaskRuntime::builder(store)
        .with_max_tasks_per_caller(None)
        .with_admission(mcp_tasks::server::AdmissionLimits::unbounded())
        .build()
}

async fn client(server: Bench) -> anyhow::Result<TasksClient<()>> {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Ok(TasksClient::new(
        serve_client_with_lifecycle((), client_io, lifecycle).await?,
    ))
}

async fn make_task(client: &TasksClient<()>, tool: &str) -> anyhow::Result<TaskId> {
    match client.call_tool(tool, (), CallOptions::default()).await? {
        CallResponse::Task(state) => Ok(state.id),
        other => anyhow::bail!("{tool} made no task: {other:?}"),
    }
}

/// Through the runtime, over an in-process rmcp connection: `tasks/get`
/// and `tools/call` (a task made and completed: two store writes).
async fn through_the_runtime(scale: &Scale, subjects: &[Subject]) -> anyhow::Result<()> {
    let names: Vec<&str> = subjects.iter().map(|s| s.name).collect();
    let mut clients = Vec::new();
    let mut ids = Vec::new();
    for subject in subjects {
        let server = Bench::new(runtime(subject.store.clone()));
        let client = client(server).await?;
        let mut made = Vec::new();
        for _ in 0..scale.filled.min(1000) {
            made.push(make_task(&client, "instant").await?);
        }
        clients.push(client);
        ids.push(Arc::new(made));
    }
    let gets = rates(scale, clients.len(), |subject| {
        let (client, ids) = (clients[subject].clone(), ids[subject].clone());
        Arc::new(move |n: u64| {
            let (client, ids) = (client.clone(), ids.clone());
            async move {
                let mut random = Random(n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
                let _ = client.get(&ids[random.below(ids.len())]).await;
            }
        })
    })
    .await;
    let calls = rates(scale, clients.len(), |subject| {
        let client = clients[subject].clone();
        Arc::new(move |_| {
            let client = client.clone();
            async move {
                let _ = client
                    .call_tool("instant", (), CallOptions::default())
                    .await;
            }
        })
    })
    .await;
    // The same calls without an idempotency key (our client sends one by
    // default: a lookup first, and no one-write shortcut for a tool that
    // ends in its first step).
    let unkeyed = rates(scale, clients.len(), |subject| {
        let client = clients[subject].clone();
        Arc::new(move |_| {
            let client = client.clone();
            async move {
                let options = CallOptions::default().with_idempotent(false);
                let _ = client.call_tool("instant", (), options).await;
            }
        })
    })
    .await;
    table(
        &format!("2. through the runtime (in-process rmcp client, {IN_FLIGHT} requests in flight)"),
        &names,
        &[
            ("tasks/get/s", gets),
            ("tools/call/s", calls),
            ("no key/s", unkeyed),
        ],
    );
    Ok(())
}

fn percentiles(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |p: f64| percentile_ms(&times, p);
    println!(
        "{name:<52} {:>4} samples: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        times.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

/// From `tasks/update` arriving at replica B to the tool parked in
/// `request_input` on replica A returning: `a` and `b` may be one runtime.
async fn wake_ups(scale: &Scale, a: TaskRuntime, b: &TaskRuntime) -> anyhow::Result<Vec<Duration>> {
    let (sender, mut resumed) = mpsc::unbounded_channel();
    let server = Bench::new(a);
    *server.resumed.lock().expect("lock") = Some(sender);
    let client = client(server).await?;
    let id = make_task(&client, "ask_loop").await?;
    let mut times = Vec::new();
    let mut random = Random(7);
    for n in 0..scale.wakes {
        let key = format!("k{n}");
        // Asked, and the tool parked: then answer on B.
        loop {
            let record = b
                .store()
                .get(&id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("gone"))?;
            if record.input_requests().contains_key(&key) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(1 + random.below(4) as u64)).await;
        let answer =
            serde_json::from_value(json!({&key: {"action": "accept", "content": {"v": "x"}}}))?;
        let answered = Instant::now();
        b.update_task_as(&id, answer, &process()).await?;
        let woke = resumed
            .recv()
            .await
            .ok_or_else(|| anyhow::anyhow!("the tool stopped"))?;
        times.push(woke.saturating_duration_since(answered));
    }
    client.cancel(&id).await?;
    Ok(times)
}

/// From a write on replica A returning to replica C's change feed hearing it.
async fn feed_delay(
    scale: &Scale,
    a: &SharedStore,
    c: &SharedStore,
) -> anyhow::Result<Vec<Duration>> {
    let id = TaskId::new("feed-delay");
    a.create(record(id.expose().to_owned())).await?;
    let mut feed = c.changes();
    let mut times = Vec::new();
    for n in 0..scale.wakes {
        while feed.try_recv().is_ok() {}
        let started = Instant::now();
        modify(
            &**a,
            &id,
            &Change::StatusMessage(format!("m{n}")),
            UnixMillis::now(),
            Duration::from_secs(60),
        )
        .await?;
        let written = started.elapsed();
        loop {
            if feed.recv().await? == id {
                break;
            }
        }
        times.push(started.elapsed().saturating_sub(written));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(times)
}

async fn connect_to(server: &RedisServer, prefix: &str) -> anyhow::Result<SharedStore> {
    let options = RedisOptions::default().with_key_prefix(prefix);
    Ok(Arc::new(
        RedisStore::connect_with(&server.url(), options).await?,
    ))
}

/// A replica's store on `postgres`, in `schema`.
async fn postgres_store(postgres: &PostgresServer, schema: &str) -> anyhow::Result<SharedStore> {
    let options = PostgresOptions::default().with_schema(schema);
    Ok(Arc::new(
        PostgresStore::connect_with(&postgres.url(), options).await?,
    ))
}

async fn replicas(
    scale: &Scale,
    redis: &RedisServer,
    everysec: &RedisServer,
    postgres: &PostgresServer,
) -> anyhow::Result<()> {
    println!(
        "\n== 3. wake-ups: from tasks/update arriving at replica B to the tool parked in request_input on replica A returning"
    );
    let memory: SharedStore = Arc::new(MemoryStore::new());
    let one = runtime(memory);
    percentiles(
        "memory, one process (A is B)",
        wake_ups(scale, one.clone(), &one).await?,
    );
    let (a, b) = (
        connect_to(redis, "wake:").await?,
        connect_to(redis, "wake:").await?,
    );
    let (on_a, on_b) = (runtime(a.clone()), runtime(b.clone()));
    percentiles(
        "Redis (always), one replica (A is B)",
        wake_ups(scale, on_a.clone(), &on_a).await?,
    );
    percentiles(
        "Redis (always), across replicas (own connections)",
        wake_ups(scale, on_a, &on_b).await?,
    );
    let (d, e) = (
        connect_to(everysec, "wake:").await?,
        connect_to(everysec, "wake:").await?,
    );
    percentiles(
        "Redis (everysec), across replicas (own connections)",
        wake_ups(scale, runtime(d), &runtime(e)).await?,
    );
    let (f, g) = (
        postgres_store(postgres, "wake").await?,
        postgres_store(postgres, "wake").await?,
    );
    let woke = wake_ups(scale, runtime(f.clone()), &runtime(g)).await?;
    let mut sorted = woke.clone();
    sorted.sort();
    let p99 = percentile_ms(&sorted, 0.99);
    percentiles("PostgreSQL, across replicas (LISTEN/NOTIFY)", woke);
    println!(
        "{} PostgreSQL: an answer on B wakes the tool parked on A within 10 ms (p99 {p99:.2} ms)",
        mcp_tasks_testkit::stats::verdict(p99 < 10.0)
    );
    let c = connect_to(redis, "wake:").await?;
    percentiles(
        "Redis: a write on A returned -> C's change feed has it",
        feed_delay(scale, &a, &c).await?,
    );
    let h = postgres_store(postgres, "wake").await?;
    percentiles(
        "PostgreSQL: a write on A returned -> C's feed has it",
        feed_delay(scale, &f, &h).await?,
    );
    println!(
        "\n== 4. listen across replicas: the tool on A sets a status message -> a client listening over HTTP on C has it"
    );
    let (a, c) = (
        connect_to(redis, "listen:").await?,
        connect_to(redis, "listen:").await?,
    );
    percentiles(
        "Redis (always), A and C with their own connections",
        heard_on_c(scale, a, c).await?,
    );
    Ok(())
}

/// Tasks made on replica A (in process) whose status messages a client of
/// replica C hears on listen streams over HTTP on 127.0.0.1.
async fn heard_on_c(
    scale: &Scale,
    a: SharedStore,
    c: SharedStore,
) -> anyhow::Result<Vec<Duration>> {
    // One caller for both (in process on A, over HTTP on C).
    let caller = |store| {
        TaskRuntime::builder(store)
            .with_principal(|_| Principal::new("bench"))
            .build()
    };
    let on_a = Bench::new(caller(a));
    let noted = on_a.noted.clone();
    let maker = client(on_a).await?;
    let server_c = Bench::new(caller(c));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let router = StreamableHttpServer::new(server_c.clone(), server_c.runtime.clone()).router();
    tokio::spawn(mcp_tasks::server::http::serve(listener, router));
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let channel = ListenChannel::http(reqwest::Client::new(), &config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let transport = StreamableHttpClientTransport::from_config(config);
    let on_c = TasksClient::new(serve_client_with_lifecycle((), transport, lifecycle).await?)
        .with_listen(channel);
    let heard = Arc::new(Mutex::new(Vec::new()));
    let mut waits = tokio::task::JoinSet::new();
    let per_task = (scale.wakes / 4).max(1);
    for wait in 0..4 {
        let mut arguments = serde_json::Map::new();
        arguments.insert("tag".into(), json!(format!("w{wait}")));
        arguments.insert("count".into(), json!(per_task));
        let state = match maker
            .call_tool("notes", Some(arguments), CallOptions::default())
            .await?
        {
            CallResponse::Task(state) => state,
            other => anyhow::bail!("notes made no task: {other:?}"),
        };
        let (heard, noted) = (heard.clone(), noted.clone());
        let options = AwaitOptions::default()
            .with_deadline(Some(Duration::from_secs(120)))
            .with_listen(ListenMode::Required)
            .with_observer(move |state| {
                let at = Instant::now();
                let message = state.status_message.as_ref();
                let set = message.and_then(|m| noted.lock().expect("lock").remove(m));
                if let Some(set) = set {
                    heard
                        .lock()
                        .expect("lock")
                        .push(at.saturating_duration_since(set));
                }
            });
        let on_c = on_c.clone();
        waits.spawn(async move { on_c.await_task(&state, &options).await });
    }
    while let Some(outcome) = waits.join_next().await {
        outcome??;
    }
    let missed = noted.lock().expect("lock").len();
    println!(
        "(status messages set on A and not heard on C, replaced by a newer one first: {missed})"
    );
    let heard = heard.lock().expect("lock").clone();
    Ok(heard)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let scale = Scale::new(std::env::args().any(|arg| arg == "--bench"));
    let started = std::time::Instant::now();
    println!(
        "mcp-tasks stores benchmark ({}): {} cores, one tokio runtime with 2 workers; redis-server {} on 127.0.0.1 with appendonly yes",
        if scale.full {
            "full run"
        } else {
            "smoke run without --bench: the numbers mean nothing"
        },
        std::thread::available_parallelism().map_or(0, usize::from),
        redis_version(),
    );
    let redis = RedisServer::start();
    let everysec = RedisServer::start_with(&["--appendfsync", "everysec"]);
    let postgres = PostgresServer::start_with(&["-c", "shared_buffers=256MB"]);
    let dir = tempfile::tempdir()?;
    let subjects = subjects(&redis, &everysec, &postgres, dir.path()).await?;
    // `cargo bench -p mcp-tasks-redis --bench stores -- seats` runs section 5
    // only, `-- replicas` the wake-up across replicas (section 3) only.
    let only = |section: &str| std::env::args().any(|arg| arg == section);
    let (seats_only, replicas_only) = (only("seats"), only("replicas"));
    if !seats_only && !replicas_only {
        stores_alone(&scale, &subjects).await?;
        through_the_runtime(&scale, &subjects).await?;
    }
    if !seats_only {
        replicas(&scale, &redis, &everysec, &postgres).await?;
    }
    if !replicas_only {
        seats::seats(&scale, &redis, &everysec).await?;
    }
    println!("\n(the run took {:.0} s)", started.elapsed().as_secs_f64());
    Ok(())
}

fn redis_version() -> String {
    std::process::Command::new(mcp_tasks_redis::testing::PROGRAM)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| {
            text.split_whitespace()
                .find_map(|word| word.strip_prefix("v=").map(str::to_owned))
        })
        .unwrap_or_else(|| "?".to_owned())
}
