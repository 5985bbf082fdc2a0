//! Every `call` and `wait` of the real binary is bounded: `--timeout` has a
//! default that `--help` shows, `0` is no limit and a bad value a usage
//! error; a timeout ends at its deadline with exit 5 and names what was
//! running; a stdio server that answers `tasks/get` with garbage ends the
//! wait with exit 70 even without a deadline. Every run of the binary is
//! killed after 60 s (`support::run`), so a wait that does not end fails.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{http_server, json_of, on_stdio, run, stdio_server};

const TIMEOUT: i32 = 5;
const USAGE: i32 = 64;
const PROTOCOL: i32 = 70;

/// Answers `server/discover` for a 2026-07-28 task server; `tools/call`
/// and `tasks/get` as the script's `call` and `get` say (`None`: no
/// answer; a string: that line, raw); any other request with -32601.
fn python_server(call: &str, get: &str) -> String {
    format!(
        r#"python3 -c '
import json, sys
task = {{"taskId": "t-0001", "status": "working", "createdAt": "2026-07-28T00:00:00Z",
        "lastUpdatedAt": "2026-07-28T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 50}}
call = {call}
get = {get}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    if m["method"] == "server/discover":
        answer = {{"result": {{"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {{"tools": {{}}, "extensions": {{"io.modelcontextprotocol/tasks": {{}}}}}},
            "ttlMs": 0, "cacheScope": "private"}}}}
    elif m["method"] == "tools/call": answer = call
    elif m["method"] == "tasks/get": answer = get
    else: answer = {{"error": {{"code": -32601, "message": "no such method"}}}}
    if answer is None: continue
    if isinstance(answer, str):
        print(answer, flush=True)
        continue
    print(json.dumps(dict(answer, jsonrpc="2.0", id=m["id"])), flush=True)
'"#
    )
}

/// The help entry of `--timeout`: from its name to the next option.
fn timeout_entry(help: &str) -> &str {
    let at = help
        .find("--timeout <SECS>")
        .unwrap_or_else(|| panic!("no --timeout in {help}"));
    let rest = &help[at..];
    let end = rest[1..].find("\n  -").map_or(rest.len(), |end| end + 1);
    &rest[..end]
}

#[test]
fn the_default_timeout_is_shown_in_help() {
    for command in ["call", "wait"] {
        for flag in ["--help", "-h"] {
            let output = run(&[command, flag]);
            assert_eq!(output.status.code(), Some(0), "{command} {flag}");
            let help = String::from_utf8_lossy(&output.stdout);
            let entry = timeout_entry(&help);
            assert!(
                entry.contains("[default: 600]"),
                "{command} {flag}: {entry}"
            );
            assert!(entry.contains("0: no limit"), "{command} {flag}: {entry}");
        }
    }
    // The long help says why ten minutes.
    let output = run(&["call", "--help"]);
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(timeout_entry(&help).contains("Ten minutes"), "{help}");
}

#[test]
fn a_bad_timeout_is_a_usage_error_before_connecting() {
    // Port 9 refuses connections: a parsed value would end in exit 69.
    let url = "http://127.0.0.1:9/mcp";
    for value in ["-1", "-0.5", "NaN", "inf", "soon", "", "1e300"] {
        for args in [
            vec!["call", "--url", url, "long_job", "--timeout", value],
            vec!["wait", "--url", url, "some-task", "--timeout", value],
        ] {
            let output = run(&args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(USAGE), "{args:?}: {stderr}");
            assert!(
                stderr.contains("--timeout") && stderr.contains("0 for no limit"),
                "{args:?}: {stderr}"
            );
        }
    }
    // --timeout=VALUE too.
    let output = run(&["call", "--url", url, "long_job", "--timeout=-1"]);
    assert_eq!(output.status.code(), Some(USAGE));
}

#[test]
fn timeout_zero_is_no_limit() {
    // A tool that outlasts a zero-second limit completes: 0 is no limit, not
    // "give up at once" (which a tiny positive limit does).
    let server = stdio_server();
    let call = |timeout: &str| {
        json_of(&run(&on_stdio(
            &server,
            &[
                "call",
                "sleep",
                "--arg",
                "ms=1500",
                "--timeout",
                timeout,
                "--json",
            ],
        )))
    };
    let (exit, value) = call("0");
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["status"], "completed", "{value}");
    let (exit, value) = call("0.001");
    assert_eq!(exit, TIMEOUT, "{value}");
}

/// The stage a timeout names while a task runs: between two reads, or in
/// the `tasks/get` of one.
fn names_a_wait_stage(message: &str) -> bool {
    message.starts_with("gave up after ")
        && (message.contains(", during the pause before the next read of the task")
            || message.contains(", during tasks/get"))
}

#[test]
fn a_short_timeout_ends_a_slow_call_with_exit_5_naming_the_stage() {
    let server = stdio_server();
    let started = Instant::now();
    let (exit, value) = json_of(&run(&on_stdio(
        &server,
        &[
            "call",
            "sleep",
            "--arg",
            "ms=60000",
            "--timeout",
            "1",
            "--poll",
            "--json",
        ],
    )));
    let took = started.elapsed();
    assert_eq!(exit, TIMEOUT, "{value}");
    assert_eq!(value["status"], "working", "{value}");
    assert!(value["taskId"].is_string(), "{value}");
    let message = value["error"]["message"].as_str().unwrap_or("");
    assert!(names_a_wait_stage(message), "{message}");
    // At the deadline, not after it (start, connect and close included).
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(15),
        "{took:?}"
    );
}

#[test]
fn a_short_timeout_ends_a_wait_with_exit_5_naming_the_stage() {
    let server = http_server();
    let started = run(&[
        "call",
        "--url",
        &server.url,
        "sleep",
        "--arg",
        "ms=60000",
        "--no-wait",
    ]);
    assert_eq!(started.status.code(), Some(0));
    let id = String::from_utf8_lossy(&started.stdout).trim().to_owned();
    // Listening (the default) and polling, for people (stderr) and --json.
    for mode in ["--listen", "--poll"] {
        let begun = Instant::now();
        let output = run(&["wait", "--url", &server.url, &id, "--timeout", "1", mode]);
        let took = begun.elapsed();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(TIMEOUT), "{mode}: {stderr}");
        let message = stderr
            .lines()
            .find_map(|line| line.strip_prefix("error: "))
            .unwrap_or_else(|| panic!("{mode}: no error line in {stderr}"));
        assert!(names_a_wait_stage(message), "{mode}: {message}");
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(15),
            "{mode}: {took:?}"
        );
        let (exit, value) = json_of(&run(&[
            "wait",
            "--url",
            &server.url,
            &id,
            "--timeout",
            "1",
            mode,
            "--json",
        ]));
        assert_eq!(exit, TIMEOUT, "{mode}: {value}");
        assert_eq!(value["taskId"], Value::String(id.clone()), "{mode}");
        let message = value["error"]["message"].as_str().unwrap_or("");
        assert!(names_a_wait_stage(message), "{mode}: {message}");
    }
}

#[test]
fn a_tools_call_never_answered_times_out_naming_it() {
    let silent = python_server("None", "None");
    let started = Instant::now();
    let (exit, value) = json_of(&run(&[
        "call",
        "--stdio",
        &silent,
        "anything",
        "--timeout",
        "1",
        "--json",
    ]));
    assert_eq!(exit, TIMEOUT, "{value}");
    let message = value["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("gave up after ") && message.contains(", during tools/call ("),
        "{message}"
    );
    // No task status: the JSON says there was no task.
    assert_eq!(value["status"], "timeout", "{value}");
    assert!(
        value["taskId"].is_null() && value.get("taskId").is_some(),
        "{value}"
    );
    assert!(message.ends_with("(no task was made)"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn a_stdio_server_answering_garbage_ends_the_wait_with_exit_70_without_a_deadline() {
    // rmcp drops a line that is not JSON-RPC; the CLI's line check hears of
    // it. Without it this wait (no deadline) would only end at the 60 s kill.
    let garbage = python_server(
        r#"{"result": dict(task, resultType="task")}"#,
        r#""<html>surprise</html>""#,
    );
    // Listening where it can (the default: this server cannot) and polling.
    for mode in [None, Some("--poll")] {
        let started = Instant::now();
        let mut args = vec!["call", "--stdio", &garbage, "anything", "--timeout", "0"];
        args.extend(mode);
        args.push("--json");
        let (exit, value) = json_of(&run(&args));
        assert_eq!(exit, PROTOCOL, "{mode:?}: {value}");
        let message = value["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains("tasks/get was answered 3 times in a row")
                && message.contains("not a JSON-RPC message"),
            "{mode:?}: {message}"
        );
        assert!(started.elapsed() < Duration::from_secs(15), "{mode:?}");
    }
}
