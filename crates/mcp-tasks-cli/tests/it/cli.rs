//! The real binary against `mcp-tasks serve` over stdio and over HTTP:
//! every exit code, the `--json` shapes, `--no-wait` then `wait`, `cancel`,
//! an unreachable server and a misbehaving one. What no demo tool does (a
//! result with `isError`, an MRTR round before the task, a synchronous
//! result, two forms at once) is called on the conformance fixture server
//! of `mcp-tasks-conformance`, served in this test process over HTTP.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use mcp_tasks_conformance::{FixtureServer, serve_http};
use serde_json::{Value, json};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks");

/// The `--stdio` command line of a fresh in-memory server.
pub(crate) fn stdio_server() -> String {
    format!("{BIN} serve --stdio --store memory --poll-interval 50")
}

/// Runs the binary with a 60 s limit.
pub(crate) fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcp-tasks {args:?} ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The exit code and the one JSON object on stdout.
pub(crate) fn json_of(output: &Output) -> (i32, Value) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|error| {
        panic!(
            "stdout is not one JSON object ({error}): {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().expect("an exit code"), value)
}

/// A server on HTTP; killed when dropped.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn http_server() -> HttpServer {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--poll-interval",
            "50",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the server prints where it listens");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    HttpServer { child, url }
}

fn on_stdio<'a>(server: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![rest[0], "--stdio", server];
    args.extend_from_slice(&rest[1..]);
    args
}

#[test]
fn exit_codes_and_json_shapes_over_stdio() {
    let server = stdio_server();
    let call = |rest: &[&str]| json_of(&run(&on_stdio(&server, rest)));

    let (exit, value) = call(&[
        "call",
        "long_job",
        r#"{"steps": 2, "step_ms": 50}"#,
        "--json",
    ]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["status"], "completed");
    assert!(value["taskId"].is_string());
    assert_eq!(value["result"]["content"][0]["text"], "done: 2 steps");

    let (exit, value) = call(&["call", "failing_tool", "--json"]);
    assert_eq!((exit, &value["status"]), (2, &json!("failed")), "{value}");
    assert_eq!(value["error"]["code"], -32603);

    let (exit, value) = call(&["call", "confirm_action", "--arg", "action=deploy", "--json"]);
    assert_eq!(
        (exit, &value["status"]),
        (4, &json!("input_required")),
        "{value}"
    );
    assert!(value["taskId"].is_string());

    let (exit, value) = call(&[
        "call",
        "sleep",
        "--arg",
        "ms=60000",
        "--timeout",
        "0.5",
        "--json",
    ]);
    assert_eq!((exit, &value["status"]), (5, &json!("working")), "{value}");
    assert!(value["taskId"].is_string());

    // An unknown task: exit 2 with the server's -32602.
    let (exit, value) = call(&["get", "0123456789abcdef0123456789abcdef", "--json"]);
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["error"]["code"], -32602);
}

/// Serves the conformance fixture server over HTTP on 127.0.0.1, on a
/// thread of its own for the rest of the test process; returns its URL.
fn fixture_server() -> String {
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            address_tx
                .send(listener.local_addr().expect("an address"))
                .expect("the test waits");
            let tasks =
                mcp_tasks::server::TaskRuntime::builder(mcp_tasks::store::MemoryStore::new())
                    .with_poll_interval(Duration::from_millis(50))
                    .build();
            let server = FixtureServer::new(tasks).expect("a random key");
            serve_http(server, listener).await
        })
    });
    let address = address_rx.recv().expect("the fixture server listens");
    format!("http://{address}/mcp")
}

#[test]
fn is_error_mrtr_synchronous_and_two_forms_on_the_fixture_server() {
    let url = fixture_server();
    let call = |rest: &[&str]| {
        let mut args = vec![rest[0], "--url", &url];
        args.extend_from_slice(&rest[1..]);
        args.push("--json");
        json_of(&run(&args))
    };

    // A completed task whose result has isError: exit 1.
    let (exit, value) = call(&["call", "failing_job"]);
    assert_eq!(
        (exit, &value["status"]),
        (1, &json!("completed")),
        "{value}"
    );
    assert_eq!(value["result"]["isError"], true);

    let (exit, value) = call(&["call", "protocol_error_job"]);
    assert_eq!((exit, &value["status"]), (2, &json!("failed")), "{value}");
    assert!(value["error"]["code"].is_i64());

    // An MRTR round before any task: unanswered it is exit 4 without a task id;
    // answered, the retry becomes a task that uses the answer.
    let (exit, value) = call(&["call", "test_tool_with_task"]);
    assert_eq!(
        (exit, &value["status"]),
        (4, &json!("input_required")),
        "{value}"
    );
    assert!(value.get("taskId").is_none(), "{value}");
    let (exit, value) = call(&["call", "test_tool_with_task", "--answer", "name=Alice"]);
    assert_eq!(exit, 0, "{value}");
    assert!(value["taskId"].is_string(), "{value}");
    assert!(
        value["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("Alice"),
        "{value}"
    );

    // Greet runs synchronously: a result without a task id.
    let (exit, value) = call(&["call", "greet", "--arg", "name=Ada"]);
    assert_eq!(exit, 0, "{value}");
    assert!(value.get("taskId").is_none(), "{value}");

    // Two forms at once, each answered from the --answer values naming its fields.
    let (exit, value) = call(&[
        "call",
        "multi_input",
        "--answer",
        "name=Ada",
        "--answer",
        "confirm=yes",
    ]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(
        value["result"]["content"][0]["text"],
        "Hello, Ada! confirmed: true"
    );
}

#[test]
fn no_wait_then_wait_get_and_cancel_over_http() {
    let server = http_server();
    let url = server.url.as_str();

    let output = run(&[
        "call",
        "--url",
        url,
        "long_job",
        "--arg",
        "steps=3",
        "--arg",
        "step_ms=100",
        "--no-wait",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert_eq!(id.len(), 32, "the task id alone on stdout: {id:?}");

    let (exit, value) = json_of(&run(&["get", "--url", url, &id, "--json"]));
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["taskId"], id.as_str());
    let (exit, value) = json_of(&run(&["wait", "--url", url, &id, "--json"]));
    assert_eq!(
        (exit, &value["status"]),
        (0, &json!("completed")),
        "{value}"
    );
    assert_eq!(value["result"]["content"][0]["text"], "done: 3 steps");

    let output = run(&[
        "call",
        "--url",
        url,
        "sleep",
        "--arg",
        "ms=60000",
        "--no-wait",
        "--json",
    ]);
    let (_, value) = json_of(&output);
    assert_eq!(value["status"], "working");
    let id = value["taskId"].as_str().expect("a task id").to_owned();
    let (exit, value) = json_of(&run(&["cancel", "--url", url, &id, "--json"]));
    assert_eq!(
        (exit, &value["status"]),
        (3, &json!("cancelled")),
        "{value}"
    );

    // Another bearer cannot see it: the same -32602 as an unknown id.
    let (exit, value) = json_of(&run(&[
        "get",
        "--url",
        url,
        &id,
        "--header",
        "Authorization: Bearer other",
        "--json",
    ]));
    assert_eq!(
        (exit, &value["error"]["code"]),
        (2, &json!(-32602)),
        "{value}"
    );

    // Human output: text on stdout, exit 0.
    let output = run(&[
        "call",
        "--url",
        url,
        "long_job",
        "--arg",
        "steps=1",
        "--arg",
        "step_ms=10",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "done: 1 steps"
    );
}

#[test]
fn discover_reports_task_support() {
    let server = stdio_server();
    let (exit, value) = json_of(&run(&["discover", "--stdio", &server, "--json"]));
    assert_eq!(exit, 0);
    assert_eq!(value["tasks"], true, "{value}");
}

#[test]
fn tools_lists_exactly_the_four_demo_tools() {
    let server = format!("{BIN} serve --stdio --store memory");
    let output = run(&["tools", "--stdio", &server]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (exit, value) = json_of(&run(&["tools", "--stdio", &server, "--json"]));
    assert_eq!(exit, 0, "{value}");
    let names: Vec<&str> = value["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["long_job", "confirm_action", "failing_tool", "sleep"]
    );
    for fixture in ["greet", "slow_compute", "confirm_delete", "test_"] {
        assert!(!stdout.contains(fixture), "{fixture} in {stdout}");
    }
    for name in names {
        assert!(stdout.contains(name), "{name} missing from {stdout}");
    }
}

#[test]
fn usage_unreachable_and_misbehaving_servers() {
    for args in [
        vec!["call", "long_job"],
        vec![
            "call",
            "--url",
            "http://127.0.0.1:9/mcp",
            "long_job",
            "not json",
        ],
        vec![
            "call",
            "--url",
            "http://127.0.0.1:9/mcp",
            "long_job",
            "--arg",
            "novalue",
        ],
        vec!["get"],
        vec!["frobnicate"],
    ] {
        assert_eq!(run(&args).status.code(), Some(64), "{args:?}");
    }
    let output = run(&[
        "call",
        "--url",
        "http://127.0.0.1:9/mcp",
        "long_job",
        "--json",
    ]);
    let (exit, value) = json_of(&output);
    assert_eq!(exit, 69, "{value}");
    assert_eq!(run(&["tools", "--stdio", "false"]).status.code(), Some(69));

    // A server that answers tools/call with a task that has no id.
    let liar = r#"python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    if m["method"] == "server/discover":
        r = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}, "ttlMs": 0, "cacheScope": "private"}
    else:
        r = {"resultType": "task", "status": "working"}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
'"#;
    let (exit, value) = json_of(&run(&["call", "--stdio", liar, "anything", "--json"]));
    assert_eq!(exit, 70, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("taskId"),
        "{value}"
    );
}

#[test]
fn ctrl_c_cancels_the_task_and_reports_it() {
    let server = stdio_server();
    let child = Command::new(BIN)
        .args([
            "call", "--stdio", &server, "sleep", "--arg", "ms=60000", "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    std::thread::sleep(Duration::from_millis(1500));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let output = child.wait_with_output().expect("output");
    let (exit, value) = json_of(&output);
    assert_eq!(
        (exit, &value["status"]),
        (3, &json!("cancelled")),
        "{value}"
    );
    assert!(value["taskId"].is_string());
}
