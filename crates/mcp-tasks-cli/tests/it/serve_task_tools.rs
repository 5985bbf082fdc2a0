//! `mcp-tasks serve --task-tools`: the binary, over stdio and HTTP, to
//! callers that declare no tasks (raw 2025-11-25 sessions that declare
//! nothing): a call within the window answered byte for byte as without
//! the flag; `--task-tools=TOOL` covering only that tool; the config
//! file's keys; a second caller refused as for an unknown id; a restart on
//! SQLite mid-task leaving the handle usable; two replicas on Redis
//! sharing a handle's task; the operator's `admin ls` and metrics showing
//! it; a caller's cap counting them; the gateway in front of `serve`, and a gateway refusing an
//! upstream tool named as a task tool.
//! (The official SDKs' clients against `serve` and the gateway, in front
//! of server-everything and FastMCP, are in `interop/`.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_tasks_testkit::handles::{task_id, text};
use mcp_tasks_testkit::old_client::OldClient;
use mcp_tasks_testkit::serve::Served;
use serde_json::{Value, json};

use crate::support::{BIN, bin, stdio_server};

const ALICE: &str = "alice-0123456789abcdef0123456789";
const BOB: &str = "bob-0123456789abcdef0123456789ab";

/// `serve --http` on memory with task tools on (a 0.2 s window) and
/// `extra`.
fn served(extra: &[&str]) -> Served {
    let mut args = vec!["--http", "127.0.0.1:0", "--store", "memory"];
    args.extend_from_slice(&["--task-tools", "--task-tools-wait", "0.2"]);
    args.extend_from_slice(extra);
    Served::spawn(BIN, &args, &[], None)
}

/// A raw 2025-11-25 session over HTTP that declares nothing.
async fn plain(url: &str, token: Option<&str>) -> OldClient {
    let authorization = token.map(|token| format!("Bearer {token}"));
    OldClient::http_declaring(url, authorization.as_deref(), json!({})).await
}

async fn call(client: &mut OldClient, name: &str, arguments: Value) -> Value {
    client
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await
        .unwrap_or_else(|error| panic!("{name}: {error}"))
}

/// The raw line `serve --stdio EXTRA` answers a plain `tools/call` of
/// `sleep {ms}` with, after an `initialize` that declared nothing.
fn raw_answer(extra: &[&str], ms: u64) -> String {
    let mut child = bin()
        .args(["serve", "--stdio", "--store", "memory"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve --stdio");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "plain", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": ms}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let answer = lines
        .by_ref()
        .map(|line| line.expect("a line"))
        .find(|line| line.contains("\"id\":2"))
        .expect("the call's answer");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    answer
}

#[test]
fn a_call_within_the_window_is_answered_byte_for_byte_as_without_the_flag() {
    let without = raw_answer(&[], 300);
    let with = raw_answer(&["--task-tools", "--task-tools-wait", "3"], 300);
    assert_eq!(with, without);
    assert!(without.contains("slept 300 ms"), "{without}");
    // Past the window, a handle instead.
    let handle = raw_answer(&["--task-tools", "--task-tools-wait", "0.2"], 3_000);
    assert!(
        handle.contains("\"taskId\"") && handle.contains("tasks_wait"),
        "{handle}"
    );
}

#[test]
fn the_flags_are_checked() {
    let refused = |args: &[&str], says: &str| {
        let output = bin().arg("serve").args(args).output().expect("serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    refused(&["--stdio", "--task-tools-wait", "2"], "--task-tools");
    refused(
        &["--stdio", "--task-tools", "--task-tools-wait", "-1"],
        "'-1'",
    );
    refused(
        &["--stdio", "--task-tools", "--task-tools-wait=-1"],
        "seconds",
    );
    refused(
        &["--stdio", "--task-tools", "--task-tools-wait", "soon"],
        "seconds",
    );
    refused(&["--stdio", "--task-tools", "sleep"], "sleep");
    refused(
        &["--stdio", "--task-tools=sleep,nap"],
        "--task-tools=nap names no tool of this server",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_tools_for_one_tool_leave_the_others_synchronous_and_so_does_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, "task-tools = [\"sleep\"]\ntask-tools-wait = 0.5\n").unwrap();
    let config = config.display().to_string();
    for args in [
        vec!["--task-tools=sleep", "--task-tools-wait", "0.5"],
        vec!["--config", config.as_str()],
    ] {
        let mut full = vec!["--http", "127.0.0.1:0", "--store", "memory"];
        full.extend(args.iter().copied());
        let served = Served::spawn(BIN, &full, &[], None);
        let mut client = plain(&served.url, None).await;
        let handle = call(&mut client, "sleep", json!({"ms": 3_000})).await;
        assert_eq!(
            handle["structuredContent"]["status"], "working",
            "{args:?}: {handle}"
        );
        // Not covered: waited for, as without task tools.
        let started = Instant::now();
        let job = call(&mut client, "long_job", json!({"steps": 2, "step_ms": 400})).await;
        assert_eq!(text(&job), "done: 2 steps", "{args:?}: {job}");
        assert!(started.elapsed() >= Duration::from_millis(800));
        let done = call(
            &mut client,
            "tasks_wait",
            json!({"taskId": task_id(&handle)}),
        )
        .await;
        assert_eq!(text(&done), "slept 3000 ms", "{args:?}: {done}");
    }
    // A value the flag refuses is reported at its line.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "store = \"memory\"\ntask-tools-wait = \"soon\"\n").unwrap();
    let output = bin()
        .args(["serve", "--stdio", "--task-tools", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("bad.toml:2"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_caller_gets_the_answer_of_an_unknown_id() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ALICE} alice\n{BOB} bob\n")).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&tokens).unwrap().permissions(),
        0o600,
    );
    let tokens = tokens.display().to_string();
    let served = served(&["--auth-tokens", &tokens]);
    let mut alice = plain(&served.url, Some(ALICE)).await;
    let mut bob = plain(&served.url, Some(BOB)).await;
    let handle = call(&mut alice, "sleep", json!({"ms": 60_000})).await;
    let id = task_id(&handle);
    let unknown = "0193a1b2c3d4e5f60123456789abcdef0123456789ab";
    for tool in ["tasks_status", "tasks_wait", "tasks_cancel"] {
        let theirs = call(&mut bob, tool, json!({"taskId": id, "timeoutSeconds": 0})).await;
        let none = call(
            &mut bob,
            tool,
            json!({"taskId": unknown, "timeoutSeconds": 0}),
        )
        .await;
        assert_eq!(theirs["isError"], json!(true), "{tool}: {theirs}");
        assert_eq!(
            text(&theirs).replace(&id, "ID"),
            text(&none).replace(unknown, "ID"),
            "{tool}"
        );
    }
    let listed = call(&mut bob, "tasks_list", json!({})).await;
    assert_eq!(listed["structuredContent"]["tasks"], json!([]), "{listed}");
    // Alice's task runs on, untouched.
    let status = call(&mut alice, "tasks_status", json!({"taskId": id})).await;
    assert_eq!(status["structuredContent"]["status"], "working", "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_outlives_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let flags = ["--task-tools", "--task-tools-wait", "0.3"];
    let mut first = Served::start(BIN, "127.0.0.1:0", &store, &flags);
    let mut client = plain(&first.url, None).await;
    let job = call(&mut client, "long_job", json!({"steps": 6, "step_ms": 500})).await;
    let job = task_id(&job);
    let sleeper = call(&mut client, "sleep", json!({"ms": 60_000})).await;
    let sleeper = task_id(&sleeper);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    first.kill_9();

    let second = Served::start(BIN, first.address(), &store, &flags);
    let mut client = plain(&second.url, None).await;
    // The resumable job goes on from its checkpoint and completes.
    let done = call(
        &mut client,
        "tasks_wait",
        json!({"taskId": job, "timeoutSeconds": 20}),
    )
    .await;
    assert_eq!(text(&done), "done: 6 steps", "{done}");
    // The other fails honestly.
    let failed = call(
        &mut client,
        "tasks_wait",
        json!({"taskId": sleeper, "timeoutSeconds": 5}),
    )
    .await;
    assert_eq!(failed["isError"], json!(true), "{failed}");
    assert_eq!(failed["structuredContent"]["status"], "failed", "{failed}");
    assert!(text(&failed).contains("restarted"), "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_hands_out_handles_for_its_upstream_tools() {
    let upstream = stdio_server();
    let served = served(&["--upstream", &upstream]);
    let mut client = plain(&served.url, None).await;
    let listed = client.request("tools/list", json!({})).await.unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(
        names.contains(&"sleep") && names.contains(&"tasks_wait"),
        "{names:?}"
    );
    let handle = call(&mut client, "sleep", json!({"ms": 2_000})).await;
    let done = call(
        &mut client,
        "tasks_wait",
        json!({"taskId": task_id(&handle)}),
    )
    .await;
    assert_eq!(text(&done), "slept 2000 ms", "{done}");
    // Input of the upstream's task, answered through the tool.
    let handle = call(&mut client, "confirm_action", json!({"action": "ship"})).await;
    assert_eq!(
        handle["structuredContent"]["status"], "input_required",
        "{handle}"
    );
    let id = task_id(&handle);
    let key = handle["structuredContent"]["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next().cloned())
        .expect("a question");
    call(
        &mut client,
        "tasks_answer",
        json!({"taskId": id, "answers": {key: {"confirm": true}}}),
    )
    .await;
    let done = call(&mut client, "tasks_wait", json!({"taskId": id})).await;
    assert_eq!(text(&done), "confirmed: ship", "{done}");
}

#[test]
fn a_gateway_refuses_an_upstream_tool_named_as_a_task_tool() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("upstream.py");
    // The fewest lines of a stdio MCP server that lists a tool `tasks_wait`.
    std::fs::write(
        &script,
        r#"import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "clash", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "tasks_wait", "inputSchema": {"type": "object"}}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": method}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#,
    )
    .unwrap();
    let upstream = format!("python3 {}", script.display());
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--stdio",
            "--store",
            "memory",
            "--upstream",
            &upstream,
            "--task-tools",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the gateway started");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("\"tasks_wait\"") && stderr.contains("task tool"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_made_on_one_replica_is_followed_and_answered_on_another_on_redis() {
    let redis = mcp_tasks_redis::testing::RedisServer::start();
    let flags = [
        "--redis-key-prefix",
        "task-tools-test:",
        "--task-tools",
        "--task-tools-wait",
        "0.3",
    ];
    let a = Served::start(BIN, "127.0.0.1:0", &redis.url(), &flags);
    let b = Served::start(BIN, "127.0.0.1:0", &redis.url(), &flags);
    let mut on_a = plain(&a.url, None).await;
    let mut on_b = plain(&b.url, None).await;
    let handle = call(&mut on_a, "sleep", json!({"ms": 2_000})).await;
    let id = task_id(&handle);
    let listed = call(&mut on_b, "tasks_list", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["tasks"][0]["taskId"],
        id.as_str(),
        "{listed}"
    );
    let done = call(&mut on_b, "tasks_wait", json!({"taskId": id})).await;
    assert_eq!(text(&done), "slept 2000 ms", "{done}");
    // A question asked on A, answered through B's tool.
    let handle = call(&mut on_a, "confirm_action", json!({"action": "ship"})).await;
    let id = task_id(&handle);
    call(
        &mut on_b,
        "tasks_answer",
        json!({"taskId": id, "answers": {"confirm": {"confirm": true}}}),
    )
    .await;
    let done = call(&mut on_a, "tasks_wait", json!({"taskId": id})).await;
    assert_eq!(text(&done), "confirmed: ship", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_sees_a_handles_task_in_admin_ls_and_the_metrics() {
    let served = served(&["--admin", "127.0.0.1:0"]);
    let mut client = plain(&served.url, None).await;
    let handle = call(&mut client, "sleep", json!({"ms": 60_000})).await;
    assert_eq!(handle["structuredContent"]["status"], "working", "{handle}");
    let admin = format!("http://{}", served.admin);
    let output = crate::support::run(&["admin", "ls", "--server", &admin, "--json"]);
    assert!(output.status.success(), "{output:?}");
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let tasks = listed.as_array().expect("an array");
    assert_eq!(tasks.len(), 1, "{listed}");
    assert_eq!(tasks[0]["tool"], "sleep", "{listed}");
    assert!(
        tasks[0].get("id").is_none(),
        "no id without --show-ids: {listed}"
    );
    let metrics = crate::support::raw_http(&served.admin, "GET", "/metrics", &[], "");
    let created = metrics
        .body
        .lines()
        .find(|line| {
            line.starts_with("mcp_tasks_tasks_created_total") && line.contains("tool=\"sleep\"")
        })
        .unwrap_or_else(|| panic!("{}", metrics.body));
    assert!(created.ends_with(" 1"), "{created}");
    // No task id in what the operator sees.
    assert!(!metrics.body.contains(&task_id(&handle)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_cap_counts_the_tasks_behind_its_handles() {
    let served = served(&["--max-tasks-per-caller", "1"]);
    let mut client = plain(&served.url, None).await;
    let handle = call(&mut client, "sleep", json!({"ms": 60_000})).await;
    let id = task_id(&handle);
    // Refused as a task would be: the caller's one task is running.
    let refused = client
        .request(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60_000}}),
        )
        .await
        .expect_err("over the cap");
    assert_eq!(refused["data"]["reason"], "callerTasks", "{refused}");
    assert!(refused["data"]["retryAfterMs"].is_u64(), "{refused}");
    // Its place comes back once the task is cancelled.
    call(&mut client, "tasks_cancel", json!({"taskId": id})).await;
    let next = call(&mut client, "sleep", json!({"ms": 10})).await;
    assert_eq!(text(&next), "slept 10 ms", "{next}");
}
