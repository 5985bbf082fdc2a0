//! `serve`'s graceful stop through the binary: SIGTERM drains (creation
//! answered 503 with `Retry-After`, `/readyz` 503 at once, `tasks/get`
//! still answered), the tasks that end within `--drain-timeout` complete,
//! the others fail honestly, the server exits 0 with one line on stderr
//! for the start and one for the end; a second signal ends at once. On a
//! SQLite file, a resumable `long_job` is suspended rather than failed and
//! continues from its checkpoint after a restart, over HTTP and over stdio
//! (where the session is answered until the drain ends).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serving::{Logs, Served};
use crate::support::{json_of, raw_http, run};

/// `serve --http 127.0.0.1:0 --admin 127.0.0.1:0` with `extra`, its
/// stderr kept.
fn served(extra: &[&str]) -> Served {
    let mut args = vec!["--http", "127.0.0.1:0", "--admin", "127.0.0.1:0"];
    args.extend_from_slice(&["--poll-interval", "50"]);
    args.extend_from_slice(extra);
    Served::spawn(crate::support::BIN, &args, &[], Some(&Logs::default()))
}

/// One plain HTTP/1.1 request: status, `Retry-After` if any, and the body.
fn http(url: &str, method: &str, headers: &[String], body: &str) -> (u16, Option<String>, String) {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (address, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let answer = raw_http(address, method, path, &headers, body);
    let retry_after = answer.header("retry-after").map(str::to_owned);
    (answer.status, retry_after, answer.body)
}

/// A 2026-07-28 `tools/call` of `sleep` (a minute), posted as is.
fn post_call(url: &str) -> (u16, Option<String>, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"ms": 60000},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
    .to_string();
    let headers = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Mcp-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/call",
        "Mcp-Name: sleep",
    ]
    .map(String::from);
    http(url, "POST", &headers, &body)
}

/// Starts `tool` with `args` on `url` without waiting; its task id.
fn start(url: &str, tool: &str, args: &[&str]) -> String {
    let mut command = vec!["call", "--url", url, tool];
    for arg in args {
        command.extend(["--arg", arg]);
    }
    command.extend(["--no-wait", "--json"]);
    let (code, created) = json_of(&run(&command));
    assert_eq!(code, 0, "{created}");
    created["taskId"].as_str().expect("a task id").to_owned()
}

/// `mcp-tasks get` of `id` on `url`, as JSON.
fn get(url: &str, id: &str) -> Value {
    let (code, got) = json_of(&run(&["get", "--url", url, id, "--json"]));
    assert!(code == 0 || got["status"].is_string(), "{got}");
    got
}

#[test]
fn sigterm_drains_answering_polls_refusing_creation_then_exits_0_and_fails_honestly() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.sqlite3").display());
    let mut server = served(&["--store", &store, "--drain-timeout", "3"]);
    let (status, _, _) = http(&format!("http://{}/readyz", server.admin), "GET", &[], "");
    assert_eq!(status, 200);
    let stuck = start(&server.url, "sleep", &["ms=60000"]);
    let quick = start(&server.url, "sleep", &["ms=1000"]);
    // Resumable: 10 steps of 600 ms, about 5 of them done when the drain ends.
    let job = start(&server.url, "long_job", &["steps=10", "step_ms=600"]);

    let signalled = Instant::now();
    server.signal("TERM");
    let started = server.stderr_line("draining", Duration::from_secs(10));
    assert!(started.starts_with("SIGTERM: draining"), "{started}");
    assert!(started.contains("up to 3 s"), "{started}");
    let (status, _, body) = http(&format!("http://{}/readyz", server.admin), "GET", &[], "");
    assert_eq!((status, body.as_str()), (503, "draining\n"));

    // A creation goes elsewhere: 503 with Retry-After and the reason.
    let (status, retry_after, body) = post_call(&server.url);
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.as_deref(), Some("3"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["data"]["reason"], "draining", "{body}");
    // What exists is still answered.
    assert_eq!(get(&server.url, &stuck)["status"], "working");

    let ended = server.stderr_line("drained", Duration::from_secs(20));
    assert_eq!(server.exit_code(Duration::from_secs(20)), Some(0));
    let took = signalled.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "waited the timeout: {took:?}"
    );
    assert!(
        ended.contains(": 1 tasks finished, 1 suspended")
            && ended.ends_with(", 0 handed off to other replicas, 1 failed"),
        "{ended}"
    );
    assert!(!ended.contains(&stuck) && !started.contains(&stuck));

    // Suspended, not failed: working, with its last checkpoint.
    let (code, kept) = json_of(&run(&["admin", "show", "--store", &store, &job, "--json"]));
    assert_eq!(code, 0, "{kept}");
    eprintln!("suspended: {kept}");
    assert_eq!(kept["status"], "working", "{kept}");
    let message = kept["statusMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("continues from its last checkpoint"),
        "{kept}"
    );
    // long_job's message names the step under way: the one before is kept.
    let at: u64 = message
        .split("(it was at: step ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("where it was: {message}"));
    let done_before = at - 1;
    assert!((2..10).contains(&done_before), "{kept}");

    // Started again on the same file: the quick one completed, the other
    // failed saying why, and the job continues after its checkpoint.
    let again = served(&["--store", &store]);
    let mut seen = Vec::new();
    let finished = loop {
        let got = get(&again.url, &job);
        if got["status"] != "working" {
            break got;
        }
        seen.extend(got["statusMessage"].as_str().map(str::to_owned));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(finished["status"], "completed", "{finished}");
    let steps: Vec<u64> = seen
        .iter()
        .filter_map(|m| m.strip_prefix("step ")?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        !steps.is_empty() && steps.iter().all(|&step| step > done_before),
        "no step at or before the checkpoint ({done_before}) ran again: {seen:?}"
    );
    assert!(
        finished.to_string().contains("done: 10 steps"),
        "{finished}"
    );
    let done = get(&again.url, &quick);
    assert_eq!(done["status"], "completed", "{done}");
    let failed = get(&again.url, &stuck);
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        "the server shut down before the task finished (it waited 3 s for the task to end)",
        "{failed}"
    );
}

#[test]
fn a_second_signal_during_the_drain_ends_at_once() {
    let mut server = served(&["--store", "memory", "--drain-timeout", "600"]);
    start(&server.url, "sleep", &["ms=60000"]);
    server.signal("INT");
    let started = server.stderr_line("draining", Duration::from_secs(10));
    assert!(started.starts_with("Ctrl-C: draining"), "{started}");
    let again = Instant::now();
    server.signal("TERM");
    let line = server.stderr_line("again", Duration::from_secs(10));
    assert!(line.contains("stopping at once"), "{line}");
    assert_ne!(server.exit_code(Duration::from_secs(10)), Some(0));
    assert!(again.elapsed() < Duration::from_secs(10));
}

/// `serve --stdio` on `store` as a child of the test; its process id.
async fn stdio_server(store: &str) -> (mcp_tasks::TasksClient<crate::serving::Forms>, u32) {
    let mut command = tokio::process::Command::new(crate::support::BIN);
    command.args(["serve", "--stdio", "--store", store, "--drain-timeout", "2"]);
    command.args(["--poll-interval", "50"]);
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("the server starts");
    let pid = transport.id().expect("a process id");
    let lifecycle = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let running =
        rmcp::service::serve_client_with_lifecycle(crate::serving::Forms, transport, lifecycle)
            .await
            .expect("connect over stdio");
    (mcp_tasks::TasksClient::new(running), pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_sigterm_drains_answering_the_session_then_the_restart_continues() {
    use crate::serving::{start, until};
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let (client, pid) = stdio_server(&store).await;
    let job = start(&client, "long_job", json!({"steps": 30, "step_ms": 200})).await;
    let stuck = start(&client, "sleep", json!({"ms": 60_000})).await;
    until(&client, &job.id, Duration::from_secs(10), |state| {
        state.status_message.as_deref() == Some("step 3 of 30")
    })
    .await;
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    // The session is still answered while it drains; a creation is refused.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        client
            .get(&stuck.id)
            .await
            .expect("tasks/get while draining")
            .status,
        mcp_tasks::TaskStatus::Working
    );
    let refused = client
        .call_tool(
            "sleep",
            crate::serving::args(json!({"ms": 10})),
            mcp_tasks::CallOptions::default(),
        )
        .await
        .expect_err("no new task while draining");
    let rpc = refused.rpc_error().expect("a JSON-RPC error");
    assert_eq!(rpc.data.as_ref().expect("data")["reason"], "draining");
    // After the drain (2 s) the server ends: its session closes.
    let deadline = Instant::now() + Duration::from_secs(15);
    while client.get(&stuck.id).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the server still serves after its drain"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(client);

    // Started again on the same file: the job continues, the sleep failed.
    let (client, _pid) = stdio_server(&store).await;
    let mut seen = Vec::new();
    let ended = until(&client, &job.id, Duration::from_secs(20), |state| {
        seen.extend(state.status_message.clone());
        state.status.is_terminal()
    })
    .await;
    assert_eq!(ended.status, mcp_tasks::TaskStatus::Completed, "{ended:?}");
    assert!(
        !seen
            .iter()
            .any(|message| message == "step 1 of 30" || message == "step 2 of 30"),
        "the job started over: {seen:?}"
    );
    let failed = client.get(&stuck.id).await.expect("tasks/get");
    assert_eq!(failed.status, mcp_tasks::TaskStatus::Failed);
    assert!(
        failed
            .error
            .as_ref()
            .is_some_and(|error| error.message.contains("shut down before the task finished")),
        "{failed:?}"
    );
}

#[test]
fn a_task_gateway_drains_too_refusing_creation_and_failing_what_outlives_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("gateway.sqlite3").display());
    let upstream = crate::support::stdio_server();
    let flags = [
        "--store",
        &store,
        "--drain-timeout",
        "1",
        "--upstream",
        &upstream,
    ];
    let mut gateway = served(&flags);
    let stuck = start(&gateway.url, "sleep", &["ms=60000"]);
    gateway.signal("TERM");
    gateway.stderr_line("draining", Duration::from_secs(10));
    let (status, retry_after, _) = post_call(&gateway.url);
    assert_eq!((status, retry_after.as_deref()), (503, Some("3")));
    // The upstream's own task is left for the next start to follow again.
    let ended = gateway.stderr_line("drained", Duration::from_secs(20));
    assert!(ended.contains("1 suspended"), "{ended}");
    assert_eq!(gateway.exit_code(Duration::from_secs(20)), Some(0));

    // Read through a gateway started again on the same file: this upstream
    // kept its tasks in memory, so the task cannot be followed again, and
    // fails saying so.
    let again = served(&["--store", &store, "--upstream", &upstream]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let failed = loop {
        let state = get(&again.url, &stuck);
        if state["status"] != "working" || Instant::now() > deadline {
            break state;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "the gateway restarted while it followed a task of the upstream server, and could \
             not take it up again: it does not know the task"
        ),
        "{failed}"
    );
}
