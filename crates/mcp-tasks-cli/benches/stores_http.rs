//! The four stores side by side over HTTP, the way a user runs them: the
//! `mcp-tasks serve --http --max-tasks-per-caller 0` binary as a child
//! process, four times (`--store memory`, `--store sqlite:PATH`, `--store
//! redis://...` against a `redis-server` this bench starts with `appendonly
//! yes`, `appendfsync everysec` on a free port, and `--store postgres://...`
//! against a PostgreSQL it starts with `fsync` and `synchronous_commit` on,
//! so every creation's commit waits for the disk), driven by `wrk`:
//!
//! * `tasks/get` of one finished task, 64 connections;
//! * creation: `tools/call` of the demo tool `sleep` for 100 ms as a task,
//!   16 connections (so thousands of tasks are live at once; `--max-running
//!   0`, so none waits in the queue, whose default bound memory would fill).
//!   Failed requests are left out of the rate and printed.
//!
//! Each point is the median of 3 runs, the stores in turn within a round
//! (the order rotating between rounds); the ratios are each store's
//! medians over memory's, measured in the same run. Server CPU per request
//! is the child's user + system time over the run (from /proc/PID/stat),
//! Redis's the `used_cpu_*` of `INFO cpu`, PostgreSQL's that of its
//! postmaster and backends (from /proc). Then, against Redis, the
//! commands per creation, per `tasks/get` and per transition (a `working`
//! task's completion, the seat it held freed with it): `CONFIG RESETSTAT`
//! before each phase, `INFO commandstats` after, and the round trips (the
//! commands the server sent, not those its scripts ran) counted with
//! `MONITOR`; then the same counts for a `serve` with its default bounds
//! (each task holds seats). Then the same counts on PostgreSQL, from
//! PostgreSQL itself: a second server with `pg_stat_statements` loaded
//! (`track = all`), reset before each phase; the statements are every call
//! it counted, those run inside the store's functions included, and the
//! round trips the top-level ones (the statements the server sent).
//!
//! Targets (issue 31): `tasks/get` on Redis >= 0.8 of memory's; creation on
//! Redis >= 0.5 of memory's; one round trip per creation, none per
//! `tasks/get` of a task this replica knows. On PostgreSQL: `tasks/get` >=
//! 0.8 of memory's; creation >= 0.4 of memory's with durable commits; one
//! round trip per creation and per transition, none per `tasks/get` of a
//! known task. It prints PASS or MISS for each
//! (a miss is reported, not asserted). Without `--bench` (as under `cargo
//! test --benches`) it runs a smoke version: short runs, one round, and
//! without `wrk` only the command counts.
//!
//! ```text
//! cargo bench -p mcp-tasks-cli --bench stores_http
//! MCP_TASKS_BIN=/path/to/older/mcp-tasks cargo bench -p mcp-tasks-cli --bench stores_http
//! ```
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_testkit::stats::{loadavg, median, verdict};
use serde_json::Value;

#[path = "support/serve.rs"]
#[allow(dead_code, reason = "each bench uses a part of it")]
mod serve;

use serve::{META, wrk_script};

/// A `serve --http` child on one store.
struct Server {
    name: &'static str,
    serve: serve::Server,
}

impl std::ops::Deref for Server {
    type Target = serve::Server;

    fn deref(&self) -> &serve::Server {
        &self.serve
    }
}

impl Server {
    fn start(name: &'static str, store: &str) -> anyhow::Result<Self> {
        // No bound on running tasks either: at 100 ms a task, memory's
        // creations would fill the default queue and be refused.
        Self::start_with(
            name,
            &[
                "--store",
                store,
                "--max-tasks-per-caller",
                "0",
                "--max-running",
                "0",
            ],
        )
    }

    fn start_with(name: &'static str, args: &[&str]) -> anyhow::Result<Self> {
        let serve = serve::Server::start(args).context(name)?;
        Ok(Self { name, serve })
    }

    /// The child's CPU seconds so far (user + system).
    fn cpu_seconds(&self) -> f64 {
        self.cpu().as_secs_f64()
    }
}

fn call_body(ms: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":{ms}}},{META}}}}}"#
    )
}

fn get_body(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{id}",{META}}}}}"#
    )
}

/// POSTs one request; the reply as JSON.
async fn post(http: &reqwest::Client, url: &str, method: &str, name: &str, body: String) -> Value {
    let sent = serve::mcp_post(http, url, method, name)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(reply) => {
            serde_json::from_slice(&reply.bytes().await.unwrap_or_default()).unwrap_or(Value::Null)
        }
        Err(_) => Value::Null,
    }
}

/// Creates a `sleep` task of `ms`: its id.
async fn create(http: &reqwest::Client, url: &str, ms: u64) -> anyhow::Result<String> {
    let reply = post(http, url, "tools/call", "sleep", call_body(ms)).await;
    match reply.pointer("/result/taskId").and_then(Value::as_str) {
        Some(id) if reply["result"]["resultType"] == "task" => Ok(id.to_owned()),
        _ => bail!("a creation was not answered with a task: {reply}"),
    }
}

/// The task's status.
async fn status(http: &reqwest::Client, url: &str, id: &str) -> String {
    let reply = post(http, url, "tasks/get", id, get_body(id)).await;
    reply["result"]["status"].as_str().unwrap_or("?").to_owned()
}

/// A finished task of the server (created, then waited for).
async fn finished_task(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let id = create(http, url, 0).await?;
    for _ in 0..200 {
        if status(http, url, &id).await == "completed" {
            return Ok(id);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bail!("a task of 0 ms did not complete within 2 s")
}

/// One wrk run: requests per second, server CPU µs per request, the
/// database's CPU µs per request (Redis's or PostgreSQL's, if the store has
/// one), and the failed requests.
#[derive(Clone, Copy, Default)]
struct Point {
    rate: f64,
    cpu_us: f64,
    db_us: f64,
    errors: u64,
}

/// The database server behind a store, if any.
#[derive(Clone, Copy)]
enum Db<'a> {
    Redis(&'a RedisServer),
    Postgres(&'a PostgresServer),
}

impl Db<'_> {
    /// Its CPU seconds so far (user + system).
    fn cpu_seconds(self) -> f64 {
        match self {
            Db::Redis(redis) => redis_cpu_seconds(redis),
            Db::Postgres(postgres) => postgres_cpu_seconds(postgres),
        }
    }

    /// Starts counting a phase's commands or statements.
    fn probe(self) -> anyhow::Result<Probe> {
        match self {
            Db::Redis(redis) => {
                redis_cli(redis, &["config", "resetstat"]);
                Ok(Probe::Redis(Monitor::start(redis)?))
            }
            Db::Postgres(postgres) => {
                postgres.psql("SELECT pg_stat_statements_reset()");
                Ok(Probe::Postgres)
            }
        }
    }

    /// Ends the phase `probe` started: (every command or statement run,
    /// those the server sent), by name.
    fn counted(self, probe: Probe) -> anyhow::Result<(Tally, Tally)> {
        match (self, probe) {
            (Db::Redis(redis), Probe::Redis(monitor)) => {
                let stats = command_stats(redis);
                Ok((stats, monitor.stop()?))
            }
            (Db::Postgres(postgres), Probe::Postgres) => Ok(statements(postgres)),
            _ => bail!("a probe of another database"),
        }
    }
}

/// A phase being counted.
enum Probe {
    Redis(Monitor),
    Postgres,
}

/// Calls by command or statement.
type Tally = BTreeMap<String, u64>;

async fn wrk(
    server: &Server,
    db: Option<Db<'_>>,
    script: &str,
    connections: usize,
    seconds: u64,
) -> anyhow::Result<Point> {
    let (cpu, db_cpu) = (server.cpu_seconds(), db.map(Db::cpu_seconds));
    let output = tokio::process::Command::new("wrk")
        .args(["-t2", &format!("-c{connections}"), &format!("-d{seconds}s")])
        .args(["--timeout", "10s", "-s", script, &server.url])
        .output()
        .await
        .context("run wrk")?;
    let cpu = server.cpu_seconds() - cpu;
    let db_cpu = db.map(Db::cpu_seconds).zip(db_cpu).map(|(a, b)| a - b);
    let text = String::from_utf8_lossy(&output.stdout);
    let number = |label: &str| -> Option<f64> {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    let rate = number("Requests/sec:").with_context(|| format!("wrk printed no rate: {text}"))?;
    let errors = number("Non-2xx or 3xx responses:").unwrap_or(0.0) as u64
        + text
            .lines()
            .find(|line| line.contains("Socket errors"))
            .map_or(0, |line| {
                line.split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse::<u64>().ok())
                    .sum()
            });
    // Only answered requests count (a refusal is not a task).
    let rate = (rate - errors as f64 / seconds as f64).max(0.0);
    let requests = (rate * seconds as f64).max(1.0);
    Ok(Point {
        rate,
        cpu_us: cpu / requests * 1e6,
        db_us: db_cpu.map_or(f64::NAN, |cpu| cpu / requests * 1e6),
        errors,
    })
}

fn redis_cli(redis: &RedisServer, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-p", &redis.port().to_string()])
        .args(args)
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_default()
}

fn redis_cpu_seconds(redis: &RedisServer) -> f64 {
    redis_cli(redis, &["info", "cpu"])
        .lines()
        .filter(|line| line.starts_with("used_cpu_sys:") || line.starts_with("used_cpu_user:"))
        .filter_map(|line| line.split_once(':')?.1.trim().parse::<f64>().ok())
        .sum()
}

/// PostgreSQL's CPU seconds so far: its postmaster's and every process
/// it started (backends, WAL writer, checkpointer), from /proc.
fn postgres_cpu_seconds(postgres: &PostgresServer) -> f64 {
    let pid_file = postgres.dir().join("data").join("postmaster.pid");
    let Some(postmaster) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|text| text.lines().next()?.trim().parse::<u32>().ok())
    else {
        return f64::NAN;
    };
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, ...; utime
        // and stime are the 12th and 13th fields from there.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let pid = entry.file_name().to_string_lossy().parse::<u32>().ok();
        let parent = fields.get(1).and_then(|ppid| ppid.parse::<u32>().ok());
        if pid == Some(postmaster) || parent == Some(postmaster) {
            ticks += fields[11..13]
                .iter()
                .filter_map(|n| n.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    ticks as f64 / serve::TICKS
}

/// `pg_stat_statements` since its reset: (every statement, those in the
/// store's functions included; the top-level ones, which the server sent),
/// by the statement's first words. psql's own are left out.
fn statements(postgres: &PostgresServer) -> (Tally, Tally) {
    let rows = postgres.psql(
        "SELECT toplevel, calls, regexp_replace(left(replace(query, '\"mcp_tasks\".', ''), 60), '\\s+', ' ', 'g') \
         FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
    );
    let (mut all, mut sent) = (Tally::new(), Tally::new());
    for row in rows.lines() {
        let mut fields = row.splitn(3, '|');
        let (Some(toplevel), Some(calls), Some(query)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(calls) = calls.parse::<u64>() else {
            continue;
        };
        *all.entry(query.to_owned()).or_insert(0) += calls;
        if toplevel == "t" {
            *sent.entry(query.to_owned()).or_insert(0) += calls;
        }
    }
    (all, sent)
}

/// `INFO commandstats` as command -> calls.
fn command_stats(redis: &RedisServer) -> BTreeMap<String, u64> {
    redis_cli(redis, &["info", "commandstats"])
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .filter(|(name, _)| !name.starts_with("config") && name != "info")
        .collect()
}

/// `MONITOR` of a phase: the commands the server sent (round trips).
struct Monitor(Child, tempfile::NamedTempFile);

impl Monitor {
    fn start(redis: &RedisServer) -> anyhow::Result<Self> {
        let file = tempfile::NamedTempFile::new()?;
        let child = Command::new("redis-cli")
            .args(["-p", &redis.port().to_string(), "monitor"])
            .stdout(file.reopen()?)
            .stderr(Stdio::null())
            .spawn()
            .context("run redis-cli monitor")?;
        std::thread::sleep(Duration::from_millis(200));
        Ok(Self(child, file))
    }

    /// Command -> how many times the server (not a script) sent it.
    fn stop(mut self) -> anyhow::Result<BTreeMap<String, u64>> {
        std::thread::sleep(Duration::from_millis(200));
        let _ = self.0.kill();
        let _ = self.0.wait();
        let text = std::fs::read_to_string(self.1.path())?;
        let mut sent = BTreeMap::new();
        for line in text.lines().filter(|line| !line.contains(" lua] ")) {
            if let Some(command) = line.split('"').nth(1) {
                *sent.entry(command.to_lowercase()).or_insert(0) += 1;
            }
        }
        Ok(sent)
    }
}

fn per(counts: &BTreeMap<String, u64>, n: usize) -> String {
    let total: u64 = counts.values().sum();
    let each: Vec<String> = counts
        .iter()
        .map(|(name, calls)| format!("{name} {:.2}", *calls as f64 / n as f64))
        .collect();
    format!("{:.2} ({})", total as f64 / n as f64, each.join(", "))
}

/// Commands (or statements) and round trips per operation on Redis (or
/// PostgreSQL).
async fn count_commands(server: &Server, db: Db<'_>, n: usize) -> anyhow::Result<Counts> {
    let http = reqwest::Client::new();
    let url = &server.url;
    let finished = finished_task(&http, url).await?;
    // Warm: the scripts are loaded, the periodic jobs ran once.
    create(&http, url, 0).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Creation: tasks that stay working through the phase.
    let probe = db.probe()?;
    let mut working = Vec::new();
    for _ in 0..n {
        working.push(create(&http, url, 1_500).await?);
    }
    let creation = db.counted(probe)?;
    // Transitions: the completions of those tasks (and the seats they
    // held), waited for without reading them.
    let probe = db.probe()?;
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let transition = db.counted(probe)?;
    for id in &working {
        let status = status(&http, url, id).await;
        if status != "completed" {
            bail!("a task of 1.5 s is {status} 2 s after the creations");
        }
    }
    // tasks/get of a finished task.
    let probe = db.probe()?;
    for _ in 0..n {
        status(&http, url, &finished).await;
    }
    let get = db.counted(probe)?;
    Ok(Counts {
        n,
        creation,
        transition,
        get,
    })
}

struct Counts {
    n: usize,
    creation: (Tally, Tally),
    transition: (Tally, Tally),
    get: (Tally, Tally),
}

impl Counts {
    fn round_trips(sent: &BTreeMap<String, u64>, n: usize) -> f64 {
        let ours: u64 = sent
            .iter()
            .filter(|(name, _)| !matches!(name.as_str(), "ping" | "config" | "info"))
            .map(|(_, calls)| calls)
            .sum();
        ours as f64 / n as f64
    }
}

async fn run(full: bool) -> anyhow::Result<()> {
    let has_wrk = Command::new("wrk").arg("-v").output().is_ok();
    println!(
        "mcp-tasks stores over HTTP ({}): `serve --http --max-tasks-per-caller 0` as a child, wrk on the same machine; load average {}",
        if full { "full run" } else { "smoke run" },
        loadavg()
    );
    let redis = RedisServer::start_with(&["--appendfsync", "everysec", "--save", ""]);
    // Durable commits: `fsync` and `synchronous_commit` on (the test
    // server's settings), with a buffer cache that holds the run's tasks.
    let postgres = PostgresServer::start_with(&["-c", "shared_buffers=256MB"]);
    let dir = tempfile::tempdir()?;
    let sqlite = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let servers = [
        Server::start("memory", "memory")?,
        Server::start("sqlite", &sqlite)?,
        Server::start("redis", &redis.url())?,
        Server::start("postgres", &postgres.url())?,
    ];
    let db = |server: &Server| match server.name {
        "redis" => Some(Db::Redis(&redis)),
        "postgres" => Some(Db::Postgres(&postgres)),
        _ => None,
    };
    let stores = servers.len();
    let http = reqwest::Client::new();
    let (rounds, seconds) = if full { (3, 5) } else { (1, 1) };
    let mut gets: Vec<Vec<Point>> = vec![Vec::new(); stores];
    let mut creations: Vec<Vec<Point>> = vec![Vec::new(); stores];
    if has_wrk {
        let mut scripts = Vec::new();
        for (n, server) in servers.iter().enumerate() {
            let id = finished_task(&http, &server.url).await?;
            let get = wrk_script(
                dir.path(),
                &format!("get{n}.lua"),
                "tasks/get",
                &id,
                &get_body(&id),
            )?;
            let call = wrk_script(
                dir.path(),
                &format!("call{n}.lua"),
                "tools/call",
                "sleep",
                &call_body(100),
            )?;
            scripts.push((get, call));
        }
        for round in 0..rounds {
            for k in 0..stores {
                let n = (round + k) % stores;
                let server = &servers[n];
                gets[n].push(wrk(server, db(server), &scripts[n].0, 64, seconds).await?);
            }
            // The other way round (stores - 1 is coprime with stores).
            for k in 0..stores {
                let n = (round + (stores - 1) * k) % stores;
                let server = &servers[n];
                creations[n].push(wrk(server, db(server), &scripts[n].1, 16, seconds).await?);
                // Creations are tasks (checked once after each run).
                create(&http, &server.url, 0).await?;
                // Let the run's tasks finish before the next store's run.
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        println!(
            "\n{:<8} {:>12} {:>8} {:>10} {:>10} {:>14} {:>8} {:>10} {:>10}",
            "store",
            "get/s c=64",
            "ratio",
            "µs/get",
            "db µs",
            "create/s c=16",
            "ratio",
            "µs/create",
            "db µs"
        );
        let medians: Vec<(Point, Point)> = (0..stores)
            .map(|n| {
                let pick = |points: &Vec<Point>| Point {
                    rate: median(&mut points.iter().map(|p| p.rate).collect::<Vec<_>>()),
                    cpu_us: median(&mut points.iter().map(|p| p.cpu_us).collect::<Vec<_>>()),
                    db_us: median(&mut points.iter().map(|p| p.db_us).collect::<Vec<_>>()),
                    errors: points.iter().map(|p| p.errors).sum(),
                };
                (pick(&gets[n]), pick(&creations[n]))
            })
            .collect();
        for (n, server) in servers.iter().enumerate() {
            let (get, create) = medians[n];
            println!(
                "{:<8} {:>12.0} {:>8.2} {:>10.1} {:>10.1} {:>14.0} {:>8.2} {:>10.1} {:>10.1}{}",
                server.name,
                get.rate,
                get.rate / medians[0].0.rate,
                get.cpu_us,
                get.db_us,
                create.rate,
                create.rate / medians[0].1.rate,
                create.cpu_us,
                create.db_us,
                if get.errors + create.errors > 0 {
                    format!("  ({} failed requests)", get.errors + create.errors)
                } else {
                    String::new()
                }
            );
        }
        let runs = |points: &Vec<Vec<Point>>| -> String {
            points
                .iter()
                .zip(&servers)
                .map(|(points, server)| {
                    let rates: Vec<String> =
                        points.iter().map(|p| format!("{:.0}", p.rate)).collect();
                    format!("{} [{}]", server.name, rates.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        println!("runs, get/s: {}", runs(&gets));
        println!("runs, create/s: {}", runs(&creations));
        let get_ratio = medians[2].0.rate / medians[0].0.rate;
        let create_ratio = medians[2].1.rate / medians[0].1.rate;
        println!("\ntargets:");
        println!(
            "  tasks/get on Redis >= 0.8 of memory's (c=64): {get_ratio:.2} {}",
            verdict(get_ratio >= 0.8)
        );
        println!(
            "  creation on Redis >= 0.5 of memory's (c=16, everysec): {create_ratio:.2} {}",
            verdict(create_ratio >= 0.5)
        );
        let get_ratio = medians[3].0.rate / medians[0].0.rate;
        let create_ratio = medians[3].1.rate / medians[0].1.rate;
        println!(
            "  tasks/get on PostgreSQL >= 0.8 of memory's (c=64): {get_ratio:.2} {}",
            verdict(get_ratio >= 0.8)
        );
        println!(
            "  creation on PostgreSQL >= 0.4 of memory's (c=16, synchronous_commit on): {create_ratio:.2} {}",
            verdict(create_ratio >= 0.4)
        );
    } else {
        println!("wrk is not installed: the throughput runs are skipped (smoke run)");
        if full {
            bail!("wrk is needed for a full run");
        }
    }
    let n = if full { 500 } else { 20 };
    let counts = count_commands(&servers[2], Db::Redis(&redis), n).await?;
    println!(
        "\nRedis commands per operation ({n} of each; INFO commandstats; round trips from MONITOR):"
    );
    print_counts(&counts, "commands");
    // The same with `serve`'s default bounds (1,024 running, 1,000 per
    // caller): each task holds seats, taken with its creation and given up
    // with its last write. Its own database, beside the idle server above.
    let bounded_store = redis.url().replace("/0", "/1");
    let bounded = Server::start_with("redis, default bounds", &["--store", &bounded_store])?;
    let bounded_counts = count_commands(&bounded, Db::Redis(&redis), n).await?;
    println!("\nThe same, `serve` with its default bounds (each task holds seats):");
    print_counts(&bounded_counts, "commands");
    let creation_trips = Counts::round_trips(&counts.creation.1, n);
    let get_trips = Counts::round_trips(&counts.get.1, n);
    println!(
        "  one round trip per creation: {creation_trips:.2} {}",
        verdict(creation_trips <= 1.05)
    );
    println!(
        "  no round trip per tasks/get of a known task: {get_trips:.2} {}",
        verdict(get_trips <= 0.05)
    );
    drop((servers, bounded));
    count_statements(n)
        .await
        .context("count PostgreSQL's statements")
}

/// Statements and round trips per operation on PostgreSQL, counted by a
/// PostgreSQL of its own with `pg_stat_statements` (so the rates above pay
/// nothing for it): `serve` without bounds, then with its default bounds
/// (each task holds seats), one after the other (each replica's lease
/// renewals would count in the other's phases).
async fn count_statements(n: usize) -> anyhow::Result<()> {
    let postgres = PostgresServer::start_with(&[
        "-c",
        "shared_preload_libraries=pg_stat_statements",
        "-c",
        "pg_stat_statements.track=all",
    ]);
    postgres.psql("CREATE EXTENSION pg_stat_statements");
    let url = postgres.url();
    let unbounded = Server::start("postgres", &url)?;
    let counts = count_commands(&unbounded, Db::Postgres(&postgres), n).await?;
    drop(unbounded);
    println!(
        "\nPostgreSQL statements per operation ({n} of each; pg_stat_statements with track = all: every statement, those in the store's functions included; round trips: the top-level statements `serve` sent):"
    );
    print_counts(&counts, "statements");
    let bounded = Server::start_with("postgres, default bounds", &["--store", &url])?;
    let bounded_counts = count_commands(&bounded, Db::Postgres(&postgres), n).await?;
    println!("\nThe same, `serve` with its default bounds (each task holds seats):");
    print_counts(&bounded_counts, "statements");
    let trips = |sent: &Tally| Counts::round_trips(sent, n);
    let (creation, transition, get) = (
        trips(&counts.creation.1),
        trips(&counts.transition.1),
        trips(&counts.get.1),
    );
    println!(
        "  one round trip per creation on PostgreSQL: {creation:.2} {}",
        verdict(creation <= 1.05)
    );
    println!(
        "  one round trip per transition on PostgreSQL: {transition:.2} {}",
        verdict(transition <= 1.05)
    );
    println!(
        "  no round trip per tasks/get of a known task on PostgreSQL: {get:.2} {}",
        verdict(get <= 0.05)
    );
    Ok(())
}

/// `what_ran`: "commands" (Redis) or "statements" (PostgreSQL).
fn print_counts(counts: &Counts, what_ran: &str) {
    for (what, (stats, sent)) in [
        ("creation", &counts.creation),
        ("transition (working -> completed)", &counts.transition),
        ("tasks/get of a finished task", &counts.get),
    ] {
        println!(
            "  {what}: round trips {:.2}; {what_ran} {}",
            Counts::round_trips(sent, counts.n),
            per(stats, counts.n)
        );
        println!("    sent by the server: {}", per(sent, counts.n));
    }
}

fn main() -> anyhow::Result<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(full))
}
