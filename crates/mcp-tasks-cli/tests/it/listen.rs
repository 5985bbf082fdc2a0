//! `call` and `wait` listen by default, `--poll` polls, `--listen` insists:
//! the real binary against `mcp-tasks serve` over stdio and over HTTP,
//! suggesting a poll a minute (so a wait that ends within seconds, or a
//! status line that shows every step, heard the task), and against a
//! server without listen.

use serde_json::json;

use crate::support::{http_server_polling, json_of, run, stdio_server_polling};

/// A stdio server that knows no `subscriptions/listen` (-32601) and whose
/// task is finished at the first `tasks/get`.
const NO_LISTEN: &str = r#"python3 -c '
import json, sys
task = {"taskId": "t-1", "status": "working", "createdAt": "2026-07-28T10:30:00Z", "lastUpdatedAt": "2026-07-28T10:30:00Z", "ttlMs": 60000, "pollIntervalMs": 50}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    method = m["method"]
    if method == "server/discover":
        r = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}, "ttlMs": 0, "cacheScope": "private"}
    elif method == "tools/call":
        r = dict(task, resultType="task")
    elif method == "tasks/get":
        r = dict(task, resultType="complete", status="completed", result={"content": [{"type": "text", "text": "polled"}], "isError": False})
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
'"#;

/// `args` with the server flag after the subcommand.
fn against<'a>(server: (&'a str, &'a str), args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![args[0], server.0, server.1];
    all.extend_from_slice(&args[1..]);
    all
}

#[test]
fn call_and_wait_hear_the_task_and_poll_only_when_told() {
    let http = http_server_polling(60_000);
    let stdio = stdio_server_polling(60_000);
    for server in [("--url", http.url.as_str()), ("--stdio", stdio.as_str())] {
        let job = r#"{"steps": 3, "step_ms": 200}"#;
        // Heard: every step on the status line, done long before a poll.
        let output = run(&against(
            server,
            &["call", "long_job", job, "--timeout", "20"],
        ));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{server:?}: {stderr}");
        for step in ["step 1 of 3", "step 2 of 3", "step 3 of 3"] {
            assert!(stderr.contains(step), "{server:?}: no {step:?} in {stderr}");
        }
        let output = run(&against(
            server,
            &["call", "long_job", job, "--listen", "--json"],
        ));
        let (exit, value) = json_of(&output);
        assert_eq!(
            (exit, &value["status"]),
            (0, &json!("completed")),
            "{server:?}: {value}"
        );

        // Polled: the first poll is 30 s away (the client's longest interval).
        let output = run(&against(
            server,
            &[
                "call",
                "long_job",
                job,
                "--poll",
                "--timeout",
                "2",
                "--json",
            ],
        ));
        let (exit, value) = json_of(&output);
        assert_eq!(
            (exit, &value["status"]),
            (5, &json!("working")),
            "{server:?}: {value}"
        );

        // wait listens too (over HTTP: a stdio server ends with its command).
        if server.0 == "--stdio" {
            continue;
        }
        let output = run(&against(server, &["call", "long_job", job, "--no-wait"]));
        let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let output = run(&against(
            server,
            &["wait", &id, "--timeout", "20", "--json"],
        ));
        let (exit, value) = json_of(&output);
        assert_eq!(
            (exit, &value["result"]["content"][0]["text"]),
            (0, &json!("done: 3 steps")),
            "{server:?}: {value}"
        );
    }
}

#[test]
fn a_server_without_listen_is_polled_unless_listen_is_insisted_on() {
    let server = ("--stdio", NO_LISTEN);
    let (exit, value) = json_of(&run(&against(
        server,
        &["call", "job", "--json", "--timeout", "20"],
    )));
    assert_eq!(
        (exit, &value["result"]["content"][0]["text"]),
        (0, &json!("polled")),
        "{value}"
    );
    let (exit, value) = json_of(&run(&against(
        server,
        &["call", "job", "--listen", "--json", "--timeout", "20"],
    )));
    assert_eq!(
        (exit, &value["error"]["code"]),
        (70, &json!(-32601)),
        "{value}"
    );
    let output = run(&against(server, &["call", "job", "--listen", "--poll"]));
    assert_eq!(
        output.status.code(),
        Some(64),
        "--listen and --poll conflict"
    );
}
