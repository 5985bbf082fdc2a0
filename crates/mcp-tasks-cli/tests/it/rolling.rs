//! A rolling restart under load, as the issue asks: a redis-server (and
//! then a PostgreSQL) and two `mcp-tasks serve --http --store redis://...`
//! (`postgres://...`) replicas behind Debian's
//! nginx (round robin, `proxy_next_upstream error timeout http_503`), 100
//! resumable `long_job` tasks running, created through nginx; each replica
//! in turn gets SIGTERM, exits 0 and is started again on the same port
//! while the other runs. Then every task completes with its right result:
//! 0 failed, 0 lost, and no step of any task ran twice (each replica logs
//! each step it runs, by the task's hash, and the test counts them).
//!
//! nginx must be installed (`.ci/run` installs it): without it the test
//! fails with a message saying so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::deploy::{nginx_main, run_nginx};
use crate::serving::{Logs, Served};
use crate::shared_store::Shared;
use crate::support::raw_http;
use mcp_tasks_testkit::wait::free_port;

const TASKS: usize = 100;
const STEPS: u64 = 40;
const STEP_MS: u64 = 250;

/// Starts a replica on 127.0.0.1:`port`, logging each `long_job` step
/// into `logs`.
fn replica(port: u16, store: &Shared, logs: &Logs) -> Served {
    replica_of(port, store, logs, "rolling", &[])
}

/// [`replica`] in the deployment `name` (a key prefix or schema of its
/// own), with the further flags `extra`.
fn replica_of(port: u16, store: &Shared, logs: &Logs, name: &str, extra: &[&str]) -> Served {
    let address = format!("127.0.0.1:{port}");
    let url = store.url();
    let namespace = store.namespace(name);
    let mut args = vec![
        "--http",
        &address,
        "--store",
        &url,
        &namespace[0],
        &namespace[1],
        "--lease-period",
        "2000",
        "--drain-timeout",
        "30",
        "--poll-interval",
        "500",
    ];
    args.extend_from_slice(extra);
    let env = [
        ("RUST_LOG", "warn,mcp_tasks::serve::tools=debug"),
        ("NO_COLOR", "1"),
    ];
    Served::spawn(crate::support::BIN, &args, &env, Some(logs))
}

/// SIGTERM, then the exit code (within 30 s).
fn terminate(replica: &mut Served) -> Option<i32> {
    replica.signal("TERM");
    replica.exit_code(Duration::from_secs(30))
}

/// nginx's configuration: round robin over `replicas`, a creation refused
/// with 503 (a draining replica) or not answered (a stopped one) sent to
/// the next.
fn nginx_conf(dir: &std::path::Path, port: u16, replicas: &[u16]) -> String {
    let servers: String = replicas
        .iter()
        .map(|port| format!("        server 127.0.0.1:{port} max_fails=1 fail_timeout=1s;\n"))
        .collect();
    nginx_main(
        dir,
        &format!(
            r#"    upstream replicas {{
{servers}    }}
    server {{
        listen 127.0.0.1:{port};
        location /mcp {{
            proxy_pass http://replicas/mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_next_upstream error timeout http_503 non_idempotent;
        }}
    }}"#
        ),
    )
}

/// One 2026-07-28 request through nginx: the status and the JSON body.
fn post(port: u16, method: &str, name: Option<&str>, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let name = name.map(|name| format!("Mcp-Name: {name}"));
    let method_header = format!("Mcp-Method: {method}");
    let mut headers = vec![
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Mcp-Protocol-Version: 2026-07-28",
        &method_header,
    ];
    headers.extend(name.as_deref());
    let answer = raw_http(
        &format!("127.0.0.1:{port}"),
        "POST",
        "/mcp",
        &headers,
        &body,
    );
    let (status, body) = (answer.status, answer.body.as_str());
    let body = serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()));
    (status, body)
}

/// Creates a `long_job` task through nginx; its id.
fn create(port: u16) -> String {
    create_job(port, STEPS, STEP_MS)
}

/// Creates a `long_job` task of `steps` steps of `step_ms` through nginx;
/// its id.
fn create_job(port: u16, steps: u64, step_ms: u64) -> String {
    let arguments = json!({"steps": steps, "step_ms": step_ms});
    let (status, body) = post(
        port,
        "tools/call",
        Some("long_job"),
        json!({"name": "long_job", "arguments": arguments}),
    );
    assert_eq!(status, 200, "{body}");
    body["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {body}"))
        .to_owned()
}

/// Every task as `tasks/get` through nginx answers it now.
fn read_all(port: u16, ids: &[String]) -> Vec<Value> {
    ids.iter()
        .map(|id| {
            let (status, body) = post(port, "tasks/get", None, json!({"taskId": id}));
            assert_eq!(status, 200, "tasks/get: {body}");
            body["result"].clone()
        })
        .collect()
}

/// Waits (up to `within`) until no task waits to be taken over: each one
/// is finished or runs a step somewhere (through a gateway: the
/// upstream's step, relayed).
fn until_taken_over(port: u16, ids: &[String], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let tasks = read_all(port, ids);
        let waiting = tasks
            .iter()
            .filter(|task| task["status"] == "working")
            .filter(|task| {
                !task["statusMessage"]
                    .as_str()
                    .is_some_and(|message| message.starts_with("step "))
            })
            .count();
        if waiting == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{waiting} tasks not taken over in {within:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every task read through nginx once none is working any more (waited
/// for up to `within`).
fn all_ended(port: u16, ids: &[String], within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let tasks = read_all(port, ids);
        if tasks.iter().all(|task| task["status"] != "working") {
            return tasks;
        }
        assert!(
            Instant::now() < deadline,
            "tasks still run after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `(task hash, step)` of a replica's log line for a `long_job` step.
fn step_of(line: &str) -> Option<(String, u64)> {
    if !line.contains("long_job step") {
        return None;
    }
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name))
            .map(str::to_owned)
    };
    Some((field("task=")?, field("step=")?.parse().ok()?))
}

#[test]
fn a_rolling_restart_behind_nginx_fails_loses_and_repeats_nothing() {
    rolling_restart(&Shared::redis());
}

#[test]
fn a_rolling_restart_on_postgres_behind_nginx_fails_loses_and_repeats_nothing() {
    rolling_restart(&Shared::postgres());
}

fn rolling_restart(store: &Shared) {
    let logs = Logs::default();
    let ports = [free_port(), free_port()];
    let mut replicas: Vec<Served> = ports
        .iter()
        .map(|&port| replica(port, store, &logs))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let nginx_port = free_port();
    let _nginx = run_nginx(
        dir.path(),
        nginx_port,
        &nginx_conf(dir.path(), nginx_port, &ports),
    );

    // 100 tasks through nginx, ten callers at once.
    let ids: Vec<String> = std::thread::scope(|scope| {
        let makers: Vec<_> = (0..10)
            .map(|_| {
                scope.spawn(|| {
                    (0..TASKS / 10)
                        .map(|_| create(nginx_port))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        makers
            .into_iter()
            .flat_map(|maker| maker.join().expect("creations"))
            .collect()
    });
    assert_eq!(ids.len(), TASKS);
    until_taken_over(nginx_port, &ids, Duration::from_secs(10));

    // Each replica in turn: SIGTERM, exit 0, started again on its port.
    for (n, port) in ports.iter().enumerate() {
        let code = terminate(&mut replicas[n]);
        assert_eq!(code, Some(0), "replica {n} exits 0 after its drain");
        replicas[n] = replica(*port, store, &logs);
        let running = read_all(nginx_port, &ids)
            .iter()
            .filter(|task| task["status"] == "working")
            .count();
        assert!(running > 0, "tasks still ran after replica {n}'s restart");
        until_taken_over(nginx_port, &ids, Duration::from_secs(20));
    }

    // Every task completes, with the right result.
    let tasks = all_ended(nginx_port, &ids, Duration::from_secs(60));
    let mut outcomes = BTreeMap::<String, usize>::new();
    for task in &tasks {
        let text = task["result"]["content"][0]["text"].as_str().unwrap_or("");
        *outcomes
            .entry(format!("{} {text}", task["status"]))
            .or_default() += 1;
    }
    assert_eq!(
        outcomes,
        BTreeMap::from([(format!("\"completed\" done: {STEPS} steps"), TASKS)]),
        "0 failed, 0 lost"
    );

    // Both drains handed tasks off, failed none, and said so.
    let logs = logs.lock().unwrap().clone();
    drains_handed_off(&logs);
    // Each step of each task ran once, wherever it ran.
    each_step_once(&logs, TASKS, STEPS);
}

/// Both replicas' drains (in `logs`) handed tasks off and failed none.
fn drains_handed_off(logs: &[String]) {
    let drained: Vec<&String> = logs
        .iter()
        .filter(|line| line.contains("drained"))
        .collect();
    assert_eq!(drained.len(), 2, "{drained:?}");
    for line in &drained {
        eprintln!("replica: {line}");
        assert!(line.ends_with(", 0 failed"), "{line}");
        assert!(!line.contains(" 0 handed off"), "{line}");
    }
}

/// Each of the `tasks` tasks whose `long_job` steps `logs` has ran each of
/// its `steps` steps once.
fn each_step_once(logs: &[String], tasks: usize, steps: u64) {
    let mut runs = BTreeMap::<String, Vec<u64>>::new();
    for (hash, step) in logs.iter().filter_map(|line| step_of(line)) {
        runs.entry(hash).or_default().push(step);
    }
    assert_eq!(runs.len(), tasks, "every task's steps are logged");
    let every_step: Vec<u64> = (1..=steps).collect();
    for (hash, mut run) in runs {
        run.sort_unstable();
        assert_eq!(run, every_step, "task {hash}: each step once");
    }
}

/// How many gateway tasks (the upstream's `long_job`, 20 s each) a rolling
/// restart of two gateways must not fail.
const GATEWAY_TASKS: usize = 50;

/// Two task gateways (`serve --upstream-url`) on one Redis behind nginx,
/// in front of one upstream that makes tasks of its own (`mcp-tasks serve
/// --http` on SQLite): 50 tasks of 20 s through nginx, each gateway in turn
/// gets SIGTERM, exits 0 and is started again. Every task completes with
/// the upstream's result, both drains handed tasks over and failed none,
/// and the upstream ran each task once: exactly 50 tasks in its store,
/// each step of each once (the upstream logs each step it runs).
#[test]
fn a_rolling_restart_of_two_gateways_behind_nginx_follows_every_upstream_task_once() {
    let store = Shared::redis();
    let dir = tempfile::tempdir().unwrap();
    let upstream_db = dir.path().join("upstream.db");
    let upstream_logs = Logs::default();
    let upstream_store = format!("sqlite:{}", upstream_db.display());
    let upstream = Served::spawn(
        crate::support::BIN,
        &[
            "--http",
            "127.0.0.1:0",
            "--store",
            &upstream_store,
            "--poll-interval",
            "200",
        ],
        &[
            ("RUST_LOG", "warn,mcp_tasks::serve::tools=debug"),
            ("NO_COLOR", "1"),
        ],
        Some(&upstream_logs),
    );
    let logs = Logs::default();
    let gateway = ["--upstream-url", upstream.url.as_str()];
    let steps = roll_gateways(&store, dir.path(), &gateway, &logs);
    drains_handed_off(&logs.lock().unwrap().clone());
    // The upstream ran each task once: 50 tasks, each step of each once.
    let connection = rusqlite::Connection::open(&upstream_db).expect("the upstream's store");
    let made: i64 = connection
        .query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))
        .expect("a count");
    assert_eq!(
        made,
        i64::try_from(GATEWAY_TASKS).unwrap(),
        "upstream tasks"
    );
    each_step_once(&upstream_logs.lock().unwrap().clone(), GATEWAY_TASKS, steps);
}

/// How many gateway tasks of the TypeScript SDK v1 server (`slow_report`,
/// 20 s each) a rolling restart of two gateways must not fail.
const TS_TASKS: usize = 50;

/// A child process, killed (and waited for) when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The TypeScript SDK v1 task server of `interop/ts-sdk` (2025-11-25 tasks,
/// each kept for the session that made it), on a free port, its log of
/// POSTs in `dir/ts-sdk.log`: the child and its URL.
fn ts_sdk_server(dir: &std::path::Path) -> (Child, String) {
    let interop = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop");
    assert!(
        interop
            .join("node_modules/@modelcontextprotocol/sdk")
            .exists(),
        "the TypeScript SDK v1 server needs interop's packages: run `npm ci` in interop/ \
         (.ci/run does)"
    );
    let log = dir.join("ts-sdk.log");
    let child = Child(
        std::process::Command::new("node")
            .arg("--no-warnings")
            .arg(interop.join("ts-sdk/server.mjs"))
            .env("PORT", free_port().to_string())
            .stdout(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("node runs (.ci/run installs it)"),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(url) = text
            .lines()
            .find_map(|line| line.strip_prefix("listening on "))
        {
            return (child, url.trim().to_owned());
        }
        assert!(
            Instant::now() < deadline,
            "the TypeScript SDK v1 server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two task gateways on one Redis behind nginx, in front of a TypeScript
/// SDK v1 task server over HTTP (which keeps each task for the session that
/// made it): 50 tasks of 20 s, each gateway in turn gets SIGTERM, exits 0
/// and is started again. Every task completes with the upstream's result,
/// followed on the session it was made on, and the upstream was asked for
/// each task once (its log of `tools/call`s).
#[test]
fn a_rolling_restart_of_two_gateways_follows_typescript_sdk_v1_tasks_on_their_sessions() {
    let store = Shared::redis();
    let dir = tempfile::tempdir().unwrap();
    let (upstream, url) = ts_sdk_server(dir.path());
    let logs = Logs::default();
    let ports = [free_port(), free_port()];
    let gateway = ["--upstream-url", url.as_str()];
    let start = |port: u16| replica_of(port, &store, &logs, "rolling-ts-sdk", &gateway);
    let mut replicas: Vec<Served> = ports.iter().map(|&port| start(port)).collect();
    let nginx_port = free_port();
    let _nginx = run_nginx(
        dir.path(),
        nginx_port,
        &nginx_conf(dir.path(), nginx_port, &ports),
    );
    let ids: Vec<String> = (0..TS_TASKS)
        .map(|n| {
            let arguments = json!({"topic": format!("t{n}"), "ms": 20_000});
            let params = json!({"name": "slow_report", "arguments": arguments});
            let (status, body) = post(nginx_port, "tools/call", Some("slow_report"), params);
            assert_eq!(status, 200, "{body}");
            body["result"]["taskId"]
                .as_str()
                .unwrap_or_else(|| panic!("a task: {body}"))
                .to_owned()
        })
        .collect();
    for (n, port) in ports.iter().enumerate() {
        let code = terminate(&mut replicas[n]);
        assert_eq!(code, Some(0), "gateway {n} exits 0 after its drain");
        replicas[n] = start(*port);
    }
    let tasks = all_ended(nginx_port, &ids, Duration::from_secs(60));
    drop(upstream);
    let texts: Vec<String> = tasks
        .iter()
        .map(|task| match task["status"].as_str() {
            Some("completed") => task["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            other => format!("{other:?}: {} {}", task["statusMessage"], task["error"]),
        })
        .collect();
    let wanted: Vec<String> = (0..TS_TASKS).map(|n| format!("Report: t{n}")).collect();
    assert_eq!(texts, wanted, "0 failed, 0 lost, each with its own result");
    drains_handed_off(&logs.lock().unwrap().clone());
    let log = std::fs::read_to_string(dir.path().join("ts-sdk.log")).unwrap();
    let asked = log
        .lines()
        .filter(|line| line.contains(r#""tool":"slow_report","task":true"#))
        .count();
    assert_eq!(asked, TS_TASKS, "each upstream task asked for once");
}

/// Two gateway replicas (`serve` with the flags `gateway`) on `store`
/// behind nginx (its files in `dir`), their stderr in `logs`: 50 `long_job`
/// tasks of 20 steps of 1 s through nginx, each replica in turn SIGTERMed
/// and started again. Every task completes with "done: 20 steps", none
/// failed or lost. Returns the steps of each task.
fn roll_gateways(store: &Shared, dir: &std::path::Path, gateway: &[&str], logs: &Logs) -> u64 {
    let ports = [free_port(), free_port()];
    let start = |port: u16| replica_of(port, store, logs, "rolling-gateways", gateway);
    let mut replicas: Vec<Served> = ports.iter().map(|&port| start(port)).collect();
    let nginx_port = free_port();
    let _nginx = run_nginx(dir, nginx_port, &nginx_conf(dir, nginx_port, &ports));
    let (steps, step_ms) = (20, 1000);
    let ids: Vec<String> = (0..GATEWAY_TASKS)
        .map(|_| create_job(nginx_port, steps, step_ms))
        .collect();
    until_taken_over(nginx_port, &ids, Duration::from_secs(10));
    for (n, port) in ports.iter().enumerate() {
        let code = terminate(&mut replicas[n]);
        assert_eq!(code, Some(0), "gateway {n} exits 0 after its drain");
        replicas[n] = start(*port);
        until_taken_over(nginx_port, &ids, Duration::from_secs(20));
    }
    let tasks = all_ended(nginx_port, &ids, Duration::from_secs(60));
    let mut outcomes = BTreeMap::<String, usize>::new();
    for task in &tasks {
        let text = task["result"]["content"][0]["text"].as_str().unwrap_or("");
        let message = task["statusMessage"].as_str().unwrap_or("");
        let key = match task["status"].as_str() {
            Some("completed") => format!("completed {text}"),
            other => format!("{other:?} {message}"),
        };
        *outcomes.entry(key).or_default() += 1;
    }
    assert_eq!(
        outcomes,
        BTreeMap::from([(format!("completed done: {steps} steps"), GATEWAY_TASKS)]),
        "0 failed, 0 lost"
    );
    steps
}

/// The same with `mcp-tasks serve --stdio` as the upstream: each gateway
/// runs its own child, and the children share a store of their own on the
/// same Redis (a child per gateway on a SQLite file of its own could not
/// reach the other's tasks: SQLite is one process's). A drained gateway's
/// child stops with it (`serve --stdio` ends when its stdin does, without
/// a drain), the other child takes its `long_job` tasks over from their
/// last checkpoints, and the other gateway follows them there: every task
/// completes, no drain failed one, and each of the 50 upstream tasks ran
/// every step (the children log each step they run, on the gateways'
/// stderr), a step cut off by its child's stop at most twice.
#[test]
fn a_rolling_restart_of_two_gateways_follows_stdio_upstream_tasks_across_their_children() {
    let store = Shared::redis();
    let dir = tempfile::tempdir().unwrap();
    let children = store.namespace("rolling-stdio-upstream");
    let upstream = format!(
        "{} serve --stdio --store {} {} {} --lease-period 2000 --poll-interval 200",
        crate::support::BIN,
        store.url(),
        children[0],
        children[1]
    );
    let logs = Logs::default();
    let steps = roll_gateways(&store, dir.path(), &["--upstream", &upstream], &logs);
    let logs = logs.lock().unwrap().clone();
    let drained: Vec<&String> = logs
        .iter()
        .filter(|line| line.contains("drained"))
        .collect();
    assert!(drained.len() >= 2, "{drained:?}");
    for line in &drained {
        eprintln!("drained: {line}");
        assert!(line.ends_with(", 0 failed"), "{line}");
    }
    let mut runs = BTreeMap::<String, BTreeMap<u64, usize>>::new();
    for (hash, step) in logs.iter().filter_map(|line| step_of(line)) {
        *runs.entry(hash).or_default().entry(step).or_default() += 1;
    }
    assert_eq!(
        runs.len(),
        GATEWAY_TASKS,
        "every upstream task's steps are logged"
    );
    for (hash, counts) in runs {
        assert_eq!(
            counts.keys().copied().collect::<Vec<_>>(),
            (1..=steps).collect::<Vec<_>>(),
            "task {hash}: every step"
        );
        assert!(counts.values().all(|&n| n <= 2), "task {hash}: {counts:?}");
    }
}
