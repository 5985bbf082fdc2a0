//! The real binary against `mcp-tasks serve` over stdio and over HTTP:
//! every exit code (one table, so one failure does not hide the rest), the
//! `--json` shapes, `--no-wait` then `wait`, `cancel`, an unreachable
//! server and a misbehaving one. What no demo tool does (a result with
//! `isError`, an MRTR round before the task, a synchronous result, two forms
//! at once) is called on the conformance fixture server of
//! `mcp-tasks-conformance`, served in this test process over HTTP.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use mcp_tasks_conformance::hostile::Scenario;
use mcp_tasks_testkit::serve::{Logs, Served};

use crate::support::{
    BIN, bin, fixture_server, hostile_server, http_server, json_of, on_stdio, run, stdio_server,
};

/// A server that answers `tools/call` with a task that has no id.
const LIAR: &str = r#"python3 -c '
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

/// One run of the binary and what it must end with.
struct Case {
    what: &'static str,
    args: Vec<String>,
    exit: i32,
    /// The `status` of the JSON object (`--json` cases only).
    status: Option<&'static str>,
    /// A field of the JSON object that must hold this value.
    field: Option<(&'static str, Value)>,
}

fn case<S: AsRef<str>>(what: &'static str, args: &[S], exit: i32) -> Case {
    Case {
        what,
        args: args.iter().map(|arg| arg.as_ref().to_owned()).collect(),
        exit,
        status: None,
        field: None,
    }
}

impl Case {
    fn json(mut self, status: &'static str) -> Self {
        self.args.push("--json".to_owned());
        self.status = Some(status);
        self
    }

    fn with(mut self, pointer: &'static str, value: Value) -> Self {
        self.field = Some((pointer, value));
        self
    }

    /// What is wrong with this case's run, if anything.
    fn check(&self) -> Option<String> {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let output = run(&args);
        let exit = output.status.code();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if exit != Some(self.exit) {
            return Some(format!(
                "{}: exit {exit:?}, expected {}; stdout {:?}; stderr {stderr:?}",
                self.what,
                self.exit,
                String::from_utf8_lossy(&output.stdout)
            ));
        }
        let status = self.status?;
        let (_, value) = json_of(&output);
        if value["status"] != status {
            return Some(format!(
                "{}: status in {value}, expected {status}",
                self.what
            ));
        }
        match &self.field {
            Some((pointer, expected)) if value.pointer(pointer) != Some(expected) => Some(format!(
                "{}: {pointer} in {value}, expected {expected}",
                self.what
            )),
            _ => None,
        }
    }
}

#[test]
fn every_exit_code_with_its_json_shape() {
    let server = stdio_server();
    let fixtures = fixture_server();
    let words =
        |list: &[&str]| -> Vec<String> { list.iter().map(|&word| word.to_owned()).collect() };
    let on = |rest: &[&str]| words(&on_stdio(&server, rest));
    let at = |rest: &[&str]| {
        let mut args = vec![rest[0], "--url", fixtures.as_str()];
        args.extend_from_slice(&rest[1..]);
        words(&args)
    };
    // A task to cancel, on the server that outlives one command.
    let (_, created) = json_of(&run(&[
        "call",
        "--url",
        &fixtures,
        "slow_compute",
        "--arg",
        "seconds=60",
        "--no-wait",
        "--json",
    ]));
    let sleeping = created["taskId"].as_str().expect("a task id").to_owned();
    let cases = [
        case(
            "completed",
            &on(&["call", "long_job", r#"{"steps": 2, "step_ms": 50}"#]),
            0,
        )
        .json("completed")
        .with("/result/content/0/text", json!("done: 2 steps")),
        case("completed with isError", &at(&["call", "failing_job"]), 1)
            .json("completed")
            .with("/result/isError", json!(true)),
        case("failed", &on(&["call", "failing_tool"]), 2)
            .json("failed")
            .with("/error/code", json!(-32603)),
        case(
            "unknown task",
            &on(&["get", "0123456789abcdef0123456789abcdef"]),
            2,
        )
        .json("failed")
        .with("/error/code", json!(-32602)),
        case("cancelled", &at(&["cancel", &sleeping]), 3).json("cancelled"),
        case(
            "input not answered",
            &on(&["call", "confirm_action", "--arg", "action=deploy"]),
            4,
        )
        .json("input_required"),
        case(
            "MRTR input not answered",
            &at(&["call", "test_tool_with_task"]),
            4,
        )
        .json("input_required"),
        case(
            "timeout",
            &on(&["call", "sleep", "--arg", "ms=60000", "--timeout", "0.5"]),
            5,
        )
        .json("working"),
        case("no server given", &["call", "long_job"], 64),
        case(
            "arguments not JSON",
            &[
                "call",
                "--url",
                "http://127.0.0.1:9/mcp",
                "long_job",
                "not json",
            ],
            64,
        ),
        case(
            "--arg without =",
            &[
                "call",
                "--url",
                "http://127.0.0.1:9/mcp",
                "long_job",
                "--arg",
                "novalue",
            ],
            64,
        ),
        case("no task id", &["get"], 64),
        case("unknown command", &["frobnicate"], 64),
        case(
            "an input the flags cannot build",
            &on(&["call", "confirm_action", "--input", "accept"]),
            64,
        )
        .json("error"),
        case(
            "unreachable URL",
            &["call", "--url", "http://127.0.0.1:9/mcp", "long_job"],
            69,
        )
        .json("error"),
        case(
            "a stdio command that is not a server",
            &["tools", "--stdio", "false"],
            69,
        ),
        case(
            "a task without an id",
            &["call", "--stdio", LIAR, "anything"],
            70,
        )
        .json("error"),
    ];
    let failures: Vec<String> = cases.iter().filter_map(Case::check).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
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
    assert_eq!(id.len(), 44, "the task id alone on stdout: {id:?}");

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
    assert_eq!(value["idempotencyKeys"], true, "serve declares it: {value}");
    assert!(
        value["capabilities"]["extensions"]["io.github.mcp-tasks/idempotency"].is_object(),
        "{value}"
    );
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
fn a_server_answering_garbage_ends_the_wait_with_exit_70_without_a_deadline() {
    for (scenario, violation) in [
        (Scenario::NotJson, "not a JSON-RPC message"),
        (Scenario::TerminalWithoutPayload, "lacks its payload"),
    ] {
        let (url, hostile) = hostile_server(scenario);
        let started = std::time::Instant::now();
        let (exit, value) = json_of(&run(&[
            "call",
            "--url",
            &url,
            "anything",
            "--timeout",
            "0",
            "--json",
        ]));
        assert_eq!(exit, 70, "{value}");
        let message = value["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(violation), "{message}");
        assert_eq!(hostile.count("tasks/get"), 3, "{message}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn a_misbehaving_server_is_named_in_the_error() {
    let (exit, value) = json_of(&run(&["call", "--stdio", LIAR, "anything", "--json"]));
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
    let child = bin()
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

/// `mcp-tasks serve --http` with extra flags and environment, its stderr
/// kept ([`Served::stderr`]); returns the server and its URL.
pub(crate) fn serve_logged(extra: &[&str], env: &[(&str, &str)]) -> (Served, String) {
    let mut command = bin();
    command
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--poll-interval",
            "50",
        ])
        .args(extra)
        .envs(env.iter().copied());
    let server = Served::command(command, Some(&Logs::default()));
    let url = server.url.clone();
    (server, url)
}

#[test]
fn task_ids_never_reach_a_log_at_any_verbosity() {
    for env in [&[][..], &[("RUST_LOG", "trace")][..]] {
        let (mut server, url) = serve_logged(&["-vv"], env);
        let mut ids = Vec::new();
        let mut client_logs = String::new();
        let mut command = |args: &[&str]| {
            let mut full = vec!["-vv"];
            full.extend_from_slice(args);
            let mut child = bin();
            child.args(&full).stdin(Stdio::null());
            for (name, value) in env {
                child.env(name, value);
            }
            let output = child.output().expect("the binary runs");
            client_logs.push_str(&String::from_utf8_lossy(&output.stderr));
            let stdout = String::from_utf8_lossy(&output.stdout).to_string();
            if let Ok(value) = serde_json::from_str::<Value>(stdout.trim())
                && let Some(id) = value["taskId"].as_str()
            {
                ids.push(id.to_owned());
            }
            stdout
        };
        command(&[
            "call",
            "--url",
            &url,
            "confirm_action",
            "--answer",
            "confirm=true",
            "--json",
        ]);
        command(&[
            "call",
            "--url",
            &url,
            "long_job",
            "--arg",
            "steps=2",
            "--arg",
            "step_ms=20",
            "--json",
        ]);
        let started = command(&[
            "call",
            "--url",
            &url,
            "sleep",
            "--arg",
            "ms=60000",
            "--no-wait",
            "--json",
        ]);
        let sleeping: Value = serde_json::from_str(started.trim()).expect("one JSON object");
        let sleeping = sleeping["taskId"].as_str().expect("a task id").to_owned();
        command(&["get", "--url", &url, &sleeping, "--json"]);
        command(&["cancel", "--url", &url, &sleeping, "--json"]);
        server.kill_9();
        let server_logs = server.stderr().join("\n");
        assert_eq!(ids.len(), 5, "five answers name a task: {ids:?}");
        assert!(
            !server_logs.is_empty() && !client_logs.is_empty(),
            "-vv logs something"
        );
        for id in &ids {
            assert!(
                !server_logs.contains(id.as_str()),
                "{env:?}: the server logged a task id:\n{server_logs}"
            );
            assert!(
                !client_logs.contains(id.as_str()),
                "{env:?}: the client logged a task id:\n{client_logs}"
            );
        }
    }
}

#[test]
fn unauthenticated_callers_share_one_task_cap_unless_counted_by_header() {
    let start = |url: &str, token: &str| {
        json_of(&run(&[
            "call",
            "--url",
            url,
            "sleep",
            "--arg",
            "ms=60000",
            "--no-wait",
            "--json",
            "--header",
            &format!("Authorization: Bearer {token}"),
        ]))
    };
    // By default, varying the header gains nothing: one cap for all.
    let (mut server, url) = serve_logged(&["--max-tasks-per-caller", "2"], &[]);
    assert_eq!(start(&url, "alice").0, 0);
    assert_eq!(start(&url, "bob").0, 0);
    let (exit, value) = start(&url, "carol");
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["error"]["data"]["maxTasksPerCaller"], 2, "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("too many unfinished tasks"),
        "{value}"
    );
    server.kill_9();
    // --quota-by-header: each header is a caller of its own.
    let (mut server, url) =
        serve_logged(&["--max-tasks-per-caller", "2", "--quota-by-header"], &[]);
    assert_eq!(start(&url, "alice").0, 0);
    assert_eq!(start(&url, "alice").0, 0);
    let (exit, value) = start(&url, "alice");
    assert_eq!(exit, 2, "{value}");
    assert_eq!(value["error"]["data"]["maxTasksPerCaller"], 2, "{value}");
    assert_eq!(start(&url, "bob").0, 0, "another caller is served");
    server.kill_9();
}

#[test]
fn connection_and_listen_bounds_are_flags_and_a_budget_without_reserve_is_refused() {
    use std::io::{Read, Write};
    // A listen budget as large as the connection bound leaves nothing for
    // tasks/get: refused at start, naming both flags.
    for (listen, connections) in [("8", "8"), ("9", "8")] {
        let output = run(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--max-connections",
            connections,
            "--max-listen-streams",
            listen,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "--max-listen-streams {listen} leaves no reserve within --max-connections {connections}"
            )),
            "{stderr}"
        );
    }
    // Connections are an HTTP matter; 0 is no bound of any use.
    let output = run(&[
        "serve",
        "--stdio",
        "--store",
        "memory",
        "--max-connections",
        "8",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("--max-connections applies to --http only"),
        "{stderr}"
    );
    let output = run(&["serve", "--http", "127.0.0.1:0", "--max-connections", "0"]);
    assert_eq!(output.status.code(), Some(64));

    // Without --max-listen-streams the budget is half the connections.
    let (mut server, _) = serve_logged(&["--max-connections", "100"], &[]);
    server.kill_9();

    // Accepted and applied: past 2 connections, none of them idle, a 503 at once.
    let (mut server, url) = serve_logged(
        &[
            "--max-connections",
            "2",
            "--max-listen-streams",
            "1",
            "--max-listen-streams-per-caller",
            "1",
        ],
        &[],
    );
    let host = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // Each in the middle of a request: its body asked for, never sent.
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(&host).unwrap();
            write!(
                stream,
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\n\
                 Content-Length: 100\r\n\r\n"
            )
            .unwrap();
            let mut continued = [0u8; 25];
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            stream
                .read_exact(&mut continued)
                .expect("the request is read");
            stream
        })
        .collect();
    let mut third = std::net::TcpStream::connect(&host).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        third,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    )
    .unwrap();
    let mut answer = String::new();
    third
        .read_to_string(&mut answer)
        .expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(answer.contains(r#""maxConnections":2"#), "{answer}");
    drop(busy);
    server.kill_9();
}

#[test]
fn a_running_task_outlives_its_ttl_but_not_the_maximum_lifetime() {
    let (mut server, url) = serve_logged(&["--ttl", "1", "--max-lifetime", "3"], &[]);
    let started = std::time::Instant::now();
    let (exit, value) = json_of(&run(&[
        "call",
        "--url",
        &url,
        "sleep",
        "--arg",
        "ms=60000",
        "--no-wait",
        "--json",
    ]));
    assert_eq!(exit, 0, "{value}");
    let id = value["taskId"].as_str().expect("a task id").to_owned();
    // Past its 1 s TTL the running tool keeps its task alive.
    std::thread::sleep(Duration::from_millis(1800));
    let (exit, value) = json_of(&run(&["get", "--url", &url, &id, "--json"]));
    assert_eq!((exit, &value["status"]), (0, &json!("working")), "{value}");
    // The maximum lifetime ends it however alive it is kept.
    let (_, value) = json_of(&run(&[
        "wait",
        "--url",
        &url,
        &id,
        "--timeout",
        "20",
        "--json",
    ]));
    assert_eq!(value["status"], "failed", "{value}");
    assert!(
        value.to_string().contains("task expired"),
        "expired: {value}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "ended at the 3 s lifetime, not the tool's minute: {took:?}"
    );
    server.kill_9();
}

#[test]
fn a_task_id_may_start_with_a_hyphen() {
    // Servers choose ids (fastmcp's are base64url): one starting with `-`
    // is an id, not an unknown flag; the flags around it still count.
    for args in [
        [
            "get",
            "-abc_def",
            "--url",
            "http://127.0.0.1:1/mcp",
            "--json",
        ],
        [
            "get",
            "--url",
            "http://127.0.0.1:1/mcp",
            "-abc_def",
            "--json",
        ],
        [
            "cancel",
            "-abc_def",
            "--url",
            "http://127.0.0.1:1/mcp",
            "--json",
        ],
        [
            "wait",
            "-abc_def",
            "--url",
            "http://127.0.0.1:1/mcp",
            "--json",
        ],
    ] {
        let (exit, value) = json_of(&run(&args));
        assert_eq!(
            exit, 69,
            "{args:?}: the id was taken, the server is unreachable: {value}"
        );
    }
}
