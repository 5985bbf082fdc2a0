//! `mcp-tasks admin` through the binary: through a server's operator
//! listener on a SQLite file (`--server`, with an admin token), and on a
//! Redis store that two `serve` replicas share (`--store`); a cancel stops
//! the tool on the replica that runs it; listing by every filter; ids and
//! results hidden unless asked; purge of old finished tasks only; a held
//! SQLite file refused with a message naming `--server`; the audit line
//! with the hash and never the id.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use mcp_tasks_testkit::serve::Served;
use serde_json::Value;

use crate::shared_store::Shared;
use crate::support::{bin, run};

/// `mcp-tasks serve --http 127.0.0.1:0` with `extra`, its stderr into `log`.
fn serve(extra: &[&str], log: &Path) -> Served {
    let mut command = bin();
    command
        .args(["serve", "--http", "127.0.0.1:0", "--poll-interval", "50"])
        .args(extra)
        .stderr(std::fs::File::create(log).expect("log file"));
    Served::try_command(command, None)
        .unwrap_or_else(|error| panic!("{error}; its log: {}", read(log)))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs the binary and expects exit 0.
fn ok(args: &[&str]) -> Output {
    let output = run(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "mcp-tasks {args:?}: {}",
        stderr(&output)
    );
    output
}

/// Starts `tool` as a task with the bearer `token` and returns its id.
fn start(url: &str, token: Option<&str>, tool: &str, arg: &str) -> String {
    let header = token.map(|token| format!("Authorization: Bearer {token}"));
    let mut args = vec!["call", "--url", url];
    if let Some(header) = &header {
        args.extend(["--header", header.as_str()]);
    }
    args.extend([tool, "--arg", arg, "--no-wait"]);
    let id = stdout(&ok(&args));
    assert!(!id.is_empty() && !id.contains(' '), "an id: {id:?}");
    id
}

/// Runs `tool` to its end with the bearer `token` and returns its id.
fn finished(url: &str, token: &str, tool: &str, arg: &str) -> String {
    let id = start(url, Some(token), tool, arg);
    let header = format!("Authorization: Bearer {token}");
    ok(&["wait", "--url", url, "--header", &header, &id]);
    id
}

/// `admin ARGS... --json` parsed.
fn admin_json(args: &[&str]) -> Value {
    let output = ok(&[&["admin"], args, &["--json"]].concat());
    serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|error| panic!("{error}: {}", stdout(&output)))
}

/// The hashes `admin ls` lists with `filter`.
fn hashes(target: &[&str], filter: &[&str]) -> Vec<String> {
    let listed = admin_json(&[&["ls"], target, filter].concat());
    let mut hashes: Vec<String> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|task| {
            assert!(task.get("id").is_none(), "no id without --show-ids: {task}");
            task["task"].as_str().expect("a hash").to_owned()
        })
        .collect();
    hashes.sort();
    hashes
}

fn sorted(mut hashes: Vec<String>) -> Vec<String> {
    hashes.sort();
    hashes
}

#[test]
fn admin_through_the_operator_listener_of_a_server_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("tasks.db");
    let (alice, bob, ops) = (
        "alice-token-0123456789abcdef",
        "bob-token-0123456789abcdef",
        "ops-token-0123456789abcdef",
    );
    let callers = dir.path().join("callers");
    std::fs::write(&callers, format!("{alice} alice\n{bob} bob\n")).expect("tokens");
    let admins = dir.path().join("admins");
    std::fs::write(&admins, format!("{ops} ops\n")).expect("admin tokens");
    let token_file = dir.path().join("ops-token");
    std::fs::write(&token_file, format!("{ops}\n")).expect("token file");
    let log = dir.path().join("serve.log");
    let store = format!("sqlite:{}", db.display());
    let server = serve(
        &[
            "--store",
            &store,
            "--auth-tokens",
            callers.to_str().expect("path"),
            "--admin",
            "127.0.0.1:0",
            "--admin-tokens",
            admins.to_str().expect("path"),
        ],
        &log,
    );
    let url = server.url.clone();
    let admin_url = format!("http://{}", server.admin);
    let target = [
        "--server",
        admin_url.as_str(),
        "--admin-token-file",
        token_file.to_str().expect("path"),
    ];

    let bob_done = finished(&url, bob, "long_job", "steps=1");
    let alice_done = finished(&url, alice, "long_job", "steps=1");
    let ended = Instant::now();
    let running = start(&url, Some(alice), "sleep", "ms=60000");
    let hash_of = |id: &str| stdout(&ok(&[&["admin", "hash"], &target[..], &[id]].concat()));
    let (bob_hash, alice_hash, running_hash) =
        (hash_of(&bob_done), hash_of(&alice_done), hash_of(&running));
    assert!(
        running_hash.starts_with("th_") && running_hash.len() == 35,
        "{running_hash}"
    );

    // Every filter, by value.
    let all = sorted(vec![
        bob_hash.clone(),
        alice_hash.clone(),
        running_hash.clone(),
    ]);
    assert_eq!(hashes(&target, &[]), all);
    assert_eq!(
        hashes(&target, &["--status", "working"]),
        std::slice::from_ref(&running_hash)
    );
    assert_eq!(
        hashes(&target, &["--status", "completed"]),
        sorted(vec![bob_hash.clone(), alice_hash.clone()])
    );
    assert_eq!(
        hashes(&target, &["--tool", "sleep"]),
        std::slice::from_ref(&running_hash)
    );
    assert_eq!(
        hashes(&target, &["--principal", "bob"]),
        std::slice::from_ref(&bob_hash)
    );
    assert_eq!(
        hashes(&target, &["--principal", "alice"]),
        sorted(vec![alice_hash.clone(), running_hash.clone()])
    );
    assert_eq!(
        hashes(&target, &["--older-than", "1h"]),
        Vec::<String>::new()
    );
    assert_eq!(hashes(&target, &["--newer-than", "1h"]), all);
    let refused = run(&[&["admin", "ls"], &target[..], &["--status", "done"]].concat());
    assert_eq!(refused.status.code(), Some(64), "{}", stderr(&refused));

    // The table names tasks by hash; the ids only with --show-ids.
    let table = stdout(&ok(&[&["admin", "ls"], &target[..]].concat()));
    assert!(
        table.contains(&running_hash) && !table.contains(&running),
        "{table}"
    );
    let table = stdout(&ok(
        &[&["admin", "ls"], &target[..], &["--show-ids"]].concat()
    ));
    assert!(table.contains(&running), "{table}");

    // show: by id or hash; ids and results only when asked.
    let shown = admin_json(&[&["show"], &target[..], &[bob_done.as_str()]].concat());
    assert_eq!(shown["task"], bob_hash.as_str());
    assert_eq!(shown["principal"], "bob");
    assert_eq!(shown["tool"], "long_job");
    assert!(
        shown.get("id").is_none() && shown.get("result").is_none(),
        "{shown}"
    );
    let shown = admin_json(
        &[
            &["show"],
            &target[..],
            &[bob_hash.as_str(), "--show-ids", "--show-results"],
        ]
        .concat(),
    );
    assert_eq!(shown["id"], bob_done.as_str());
    assert!(shown["result"].to_string().contains("done"), "{shown}");

    // Without the token: refused.
    let refused = run(&["admin", "ls", "--server", &admin_url]);
    assert_eq!(refused.status.code(), Some(69), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("token"), "{}", stderr(&refused));

    // The file is held: --store is refused, naming --server.
    let held = run(&["admin", "ls", "--store", &store]);
    assert_eq!(held.status.code(), Some(69));
    assert!(stderr(&held).contains("--server"), "{}", stderr(&held));
    // And so is a second server on it.
    let second = run(&["serve", "--http", "127.0.0.1:0", "--store", &store]);
    assert_eq!(second.status.code(), Some(69));
    assert!(
        stderr(&second).contains("another process holds the task store"),
        "{}",
        stderr(&second)
    );

    // Purge: only finished tasks that ended long enough ago.
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(ended.elapsed()));
    let cancelled = admin_json(&[&["cancel"], &target[..], &[running_hash.as_str()]].concat());
    assert_eq!(cancelled["task"], running_hash.as_str());
    let stopped = wait_for_status(&[&["show"], &target[..], &[running_hash.as_str()]].concat());
    assert_eq!(stopped, "cancelled", "the sleep did not complete");
    let dry = admin_json(
        &[
            &["purge"],
            &target[..],
            &["--older-than", "2s", "--dry-run"],
        ]
        .concat(),
    );
    assert_eq!(dry["dryRun"], true);
    assert_eq!(hashes(&target, &[]).len(), 3, "a dry run deletes nothing");
    let purged = admin_json(&[&["purge"], &target[..], &["--older-than", "2s"]].concat());
    let mut gone: Vec<String> = purged["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|hash| hash.as_str().expect("a hash").to_owned())
        .collect();
    gone.sort();
    assert_eq!(gone, sorted(vec![bob_hash, alice_hash]));
    assert_eq!(
        hashes(&target, &[]),
        std::slice::from_ref(&running_hash),
        "the recent one stays"
    );

    // The audit lines: on the server's log, by hash, never by id.
    drop(server);
    let log = read(&log);
    let audit: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("mcp_tasks::audit"))
        .collect();
    assert!(
        audit
            .iter()
            .any(|line| line.contains(r#"\"action\":\"cancel\""#)
                || line.contains(r#""action":"cancel""#)),
        "{log}"
    );
    assert!(
        audit
            .iter()
            .any(|line| line.contains(&running_hash) && line.contains("ops")),
        "{log}"
    );
    for id in [&running, &bob_done, &alice_done] {
        assert!(!log.contains(id.as_str()), "an id in the server's log");
    }
}

/// Polls `admin show ... --json` until the task is finished; its status.
fn wait_for_status(args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = admin_json(args);
        let status = shown["status"].as_str().expect("status").to_owned();
        if ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            return status;
        }
        assert!(Instant::now() < deadline, "still {status} after 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn admin_on_a_redis_store_cancels_a_task_running_on_a_replica() {
    admin_on_a_shared_store_cancels_a_task_running_on_a_replica(&Shared::redis());
}

#[test]
fn admin_on_a_postgres_store_cancels_a_task_running_on_a_replica() {
    admin_on_a_shared_store_cancels_a_task_running_on_a_replica(&Shared::postgres());
}

fn admin_on_a_shared_store_cancels_a_task_running_on_a_replica(shared: &Shared) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = shared.url();
    let namespace = shared.namespace("admin-test");
    let common = ["--store", store.as_str(), &namespace[0], &namespace[1]];
    let one = serve(&common, &dir.path().join("one.log"));
    let two = serve(&common, &dir.path().join("two.log"));
    let audit_log = dir.path().join("audit.log");
    let target = [
        "--store",
        store.as_str(),
        &namespace[0],
        &namespace[1],
        "--audit-log",
        audit_log.to_str().expect("path"),
    ];

    let running = start(&one.url, None, "sleep", "ms=60000");
    let hash = stdout(&ok(&[
        &["admin", "hash"],
        &target[..4],
        &[running.as_str()],
    ]
    .concat()));
    assert_eq!(
        hashes(&target, &["--tool", "sleep"]),
        std::slice::from_ref(&hash)
    );
    assert_eq!(
        hashes(&target, &["--principal", "(anonymous)"]),
        std::slice::from_ref(&hash)
    );

    let output = ok(&[&["admin", "cancel"], &target[..], &[running.as_str()]].concat());
    assert!(
        stderr(&output).contains(&hash),
        "the audit line on stderr: {}",
        stderr(&output)
    );
    assert!(!stderr(&output).contains(&running), "no id on stderr");
    // Replica one runs the sleep: it hears the cancel on the change feed and
    // stops it; replica two answers for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = run(&["get", "--url", &two.url, &running, "--json"]);
        let state: Value = serde_json::from_str(&stdout(&got)).unwrap_or(Value::Null);
        if state["status"] == "cancelled" {
            break;
        }
        assert_ne!(state["status"], "completed", "the sleep completed");
        assert!(
            Instant::now() < deadline,
            "not cancelled within 10 s: {state}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let dry = admin_json(
        &[
            &["purge"],
            &target[..],
            &["--older-than", "0s", "--dry-run"],
        ]
        .concat(),
    );
    assert_eq!(dry["tasks"], serde_json::json!([&hash]));
    ok(&[&["admin", "purge"], &target[..], &["--older-than", "0s"]].concat());
    assert_eq!(hashes(&target, &[]), Vec::<String>::new());

    let audit = read(&audit_log);
    let actions: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
        .collect();
    assert!(actions.iter().any(|line| line["action"] == "cancel"
        && line["tasks"] == serde_json::json!(std::slice::from_ref(&hash))));
    assert!(actions.iter().all(|line| {
        line["who"]
            .as_str()
            .is_some_and(|who| who.starts_with("local:"))
    }));
    assert!(!audit.contains(&running), "no id in the audit log");
    drop((one, two));
}

/// `admin migrate` brings a PostgreSQL schema to this binary's version
/// (once), the other commands only read a schema as it is, and a store that
/// has no schema is refused.
#[test]
fn admin_migrate_brings_a_postgres_schema_up_and_applies_to_postgres_only() {
    let shared = Shared::postgres();
    let store = shared.url();
    let target = ["--store", store.as_str(), "--postgres-schema", "ops"];
    // Before: admin reads no schema into being.
    let output = run(&[&["admin", "ls"], &target[..]].concat());
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("admin migrate"),
        "{}",
        stderr(&output)
    );
    let migrated = stdout(&ok(&[&["admin", "migrate"], &target[..]].concat()));
    assert_eq!(migrated, "schema ops migrated from version 0 to 3");
    let again = admin_json(&[&["migrate"], &target[..]].concat());
    assert_eq!(
        again,
        serde_json::json!({"schema": "ops", "from": 3, "to": 3})
    );
    assert_eq!(hashes(&target, &[]), Vec::<String>::new(), "an empty store");
    // Redis keeps no schema: refused as a usage error, naming why.
    let output = run(&["admin", "migrate", "--store", "redis://127.0.0.1:1/0"]);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("applies to a PostgreSQL store"),
        "{}",
        stderr(&output)
    );
    let output = run(&[
        "admin",
        "ls",
        "--store",
        "redis://127.0.0.1:1/0",
        "--postgres-schema",
        "ops",
    ]);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--postgres-schema applies to a PostgreSQL store"),
        "{}",
        stderr(&output)
    );
}
