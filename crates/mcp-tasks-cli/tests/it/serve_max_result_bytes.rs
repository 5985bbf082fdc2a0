//! `serve --max-result-bytes`: the binary as a gateway over HTTP in front of
//! an upstream whose task completes with a result too large (the hostile
//! server's `big-result` scenario, over HTTP), on a SQLite file and on a
//! real `redis-server`, called by `mcp-tasks call`. A result past the
//! budget fails its task naming both sizes, one far past it is not read,
//! and nothing of either reaches the store.

use mcp_tasks_conformance::hostile::Scenario;
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_testkit::serve::Served;

use crate::support::{bin, hostile_server, json_of, run};

/// `serve --http` with `store` and a budget of 100,000 bytes, in front of
/// a hostile server whose task completes with a text of `bytes` bytes.
fn gateway(store: &str, bytes: usize) -> Served {
    let (upstream, _) = hostile_server(Scenario::BigResult(bytes));
    let mut command = bin();
    command
        .args(["serve", "--http", "127.0.0.1:0", "--poll-interval", "50"])
        .args(["--store", store, "--max-result-bytes", "100000"])
        .args(["--upstream-url", &upstream]);
    Served::command(command, None)
}

/// `call --json job` on `gateway`: its failed task's id and error message.
fn failed_call(gateway: &Served) -> (String, String) {
    let output = run(&["call", "--url", &gateway.url, "--json", "job"]);
    let (code, value) = json_of(&output);
    assert_eq!(code, 2, "failed: {value}");
    assert_eq!(value["status"], "failed", "{value}");
    let id = value["taskId"].as_str().expect("a task id").to_owned();
    let message = value["error"]["message"].as_str().expect("a message");
    (id, message.to_owned())
}

/// What the two scenarios end with: past the budget (its message names
/// both sizes), and far past it (not read).
fn both_fail(store: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let (id, message) = failed_call(&gateway(store, 120_000));
    assert!(
        message.starts_with("the tool's result is 120,")
            && message.ends_with("past this server's limit of 100,000 bytes (max-result-bytes)"),
        "{message}"
    );
    ids.push(id);
    let (id, message) = failed_call(&gateway(store, 2_000_000));
    assert!(
        message.starts_with("the upstream task: the answer is past what this gateway reads")
            && message.contains("(165,536 bytes: its max-result-bytes and 64 KiB"),
        "{message}"
    );
    ids.push(id);
    ids
}

#[test]
fn on_sqlite_a_result_past_the_budget_fails_and_nothing_of_it_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    let store = format!("sqlite:{}", path.display());
    let ids = both_fail(&store);
    let db = rusqlite::Connection::open(&path).unwrap();
    for id in ids {
        let record: String = db
            .query_row("SELECT record FROM tasks WHERE id = ?1", [&id], |row| {
                row.get(0)
            })
            .expect("the task is kept");
        assert!(
            record.len() < 5_000,
            "{} bytes: {record:.300}",
            record.len()
        );
        assert!(record.contains("past"), "{record}");
        assert!(!record.contains("xxxxxxxxxx"), "no part of the result");
    }
    let largest: i64 = db
        .query_row("SELECT max(length(record)) FROM tasks", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert!(largest < 5_000, "{largest}");
}

#[test]
fn on_redis_a_result_past_the_budget_fails_and_nothing_of_it_is_stored() {
    let redis = RedisServer::start();
    let ids = both_fail(&redis.url());
    assert_eq!(ids.len(), 2);
    // Every key the gateways wrote, and what each takes in Redis.
    let cli = |args: &[&str]| {
        let output = std::process::Command::new("redis-cli")
            .args(["-p", &redis.port().to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let keys = cli(&["--scan"]);
    let keys: Vec<&str> = keys.lines().filter(|key| !key.is_empty()).collect();
    assert!(!keys.is_empty(), "the tasks are kept");
    let mut total = 0;
    for key in &keys {
        let used: u64 = cli(&["MEMORY", "USAGE", key]).trim().parse().unwrap_or(0);
        assert!(used < 20_000, "{key}: {used} bytes");
        total += used;
    }
    assert!(total < 100_000, "{total} bytes in {} keys", keys.len());
}
