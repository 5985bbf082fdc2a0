//! `mcp-tasks serve --upstream` / `--upstream-url`: the task gateway as a
//! process, in front of `mcp-tasks serve` itself (an upstream that makes
//! tasks: the gateway awaits them and relays their status and input), over
//! stdio and over HTTP, its flags, and a gateway on SQLite killed and
//! started again. The gateway in front of a task-less server is tested in
//! `crates/mcp-tasks-conformance/tests/it/gateway/stdio.rs`, and in front of
//! server-everything and fastmcp by `interop/run`.

use mcp_tasks_testkit::serve::Served;

use crate::support::{BIN, bin, http_server, json_of, on_stdio, run, stdio_server};

/// A gateway on HTTP (`serve --http` with `extra`); killed when dropped.
fn http_gateway(extra: &[&str]) -> Served {
    let mut command = bin();
    command
        .args(["serve", "--http", "127.0.0.1:0", "--poll-interval", "50"])
        .args(extra);
    Served::command(command, None)
}

#[test]
fn a_stdio_gateway_relays_an_upstream_task_with_its_status() {
    let gateway = format!(
        "{BIN} serve --stdio --store memory --poll-interval 50 --upstream '{}'",
        stdio_server()
    );
    let output = run(&on_stdio(
        &gateway,
        &["call", "--json", "long_job", "--arg", "steps=3"],
    ));
    let (code, value) = json_of(&output);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["status"], "completed");
    assert!(value["taskId"].is_string(), "{value}");
    // The upstream task's status messages are the gateway task's.
    let output = run(&on_stdio(
        &gateway,
        &["call", "long_job", "--arg", "steps=2"],
    ));
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "done: 2 steps"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("working step 1 of 2"), "{stderr}");

    let output = run(&on_stdio(&gateway, &["tools"]));
    let listed = String::from_utf8_lossy(&output.stdout);
    for tool in ["long_job", "confirm_action", "failing_tool", "sleep"] {
        assert!(listed.contains(tool), "{listed}");
    }
}

#[test]
fn an_http_gateway_in_front_of_an_http_upstream_relays_input_and_policies() {
    let upstream = http_server();
    let gateway = http_gateway(&[
        "--store",
        "memory",
        "--upstream-url",
        &upstream.url,
        "--tasks",
        "sleep=forbidden",
    ]);
    let output = run(&[
        "call",
        "--url",
        &gateway.url,
        "--json",
        "confirm_action",
        "--answer",
        "confirm=true",
    ]);
    let (code, value) = json_of(&output);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["status"], "completed");
    assert!(value["taskId"].is_string(), "{value}");

    // Forbidden by --tasks: a plain result, no task.
    let output = run(&[
        "call",
        "--url",
        &gateway.url,
        "--json",
        "sleep",
        "--arg",
        "ms=10",
    ]);
    let (code, value) = json_of(&output);
    assert_eq!(code, 0, "{value}");
    assert!(value.get("taskId").is_none(), "{value}");

    // The upstream's JSON-RPC error fails the task.
    let output = run(&["call", "--url", &gateway.url, "--json", "failing_tool"]);
    let (code, value) = json_of(&output);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["status"], "failed");
}

#[test]
fn a_tool_that_answers_at_once_is_a_task_made_finished_through_the_gateway() {
    // `sleep` 0 answers in its first step: the upstream's task is made
    // `completed`, and so is the gateway's, over either transport.
    let http_upstream = http_server();
    let stdio_upstream = stdio_server();
    let over_stdio = http_gateway(&["--store", "memory", "--upstream", &stdio_upstream]);
    let over_http = http_gateway(&["--store", "memory", "--upstream-url", &http_upstream.url]);
    for gateway in [&over_stdio, &over_http] {
        let created = |ms: &str| {
            let output = run(&[
                "call",
                "--url",
                &gateway.url,
                "--json",
                "--no-wait",
                "sleep",
                "--arg",
                ms,
            ]);
            let (code, value) = json_of(&output);
            assert_eq!(code, 0, "{value}");
            assert!(value["taskId"].is_string(), "{value}");
            value
        };
        let value = created("ms=0");
        assert_eq!(value["status"], "completed", "{value}");
        let id = value["taskId"].as_str().unwrap();
        let output = run(&["get", "--url", &gateway.url, "--json", "--", id]);
        let (code, state) = json_of(&output);
        assert_eq!(code, 0, "{state}");
        assert_eq!(state["status"], "completed", "{state}");
        assert!(state.to_string().contains("slept 0 ms"), "{state}");
        // One that does not finish at once is made `working`, as before.
        let value = created("ms=300");
        assert_eq!(value["status"], "working", "{value}");
        let id = value["taskId"].as_str().unwrap();
        let output = run(&["wait", "--url", &gateway.url, "--", id]);
        assert!(output.status.success(), "{output:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "slept 300 ms"
        );
    }
}

#[test]
fn a_task_cut_off_by_a_gateway_restart_fails_honestly() {
    let folder = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", folder.path().join("gateway.db").display());
    let upstream = stdio_server();
    let flags = ["--store", &store, "--upstream", &upstream];
    let first = http_gateway(&flags);
    let output = run(&[
        "call",
        "--url",
        &first.url,
        "sleep",
        "--arg",
        "ms=60000",
        "--no-wait",
    ]);
    assert!(output.status.success(), "{output:?}");
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(!id.is_empty());
    drop(first);
    let second = http_gateway(&flags);
    let output = run(&["get", "--url", &second.url, "--json", &id]);
    let (_, value) = json_of(&output);
    assert_eq!(value["status"], "failed", "{value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("restarted")),
        "{value}"
    );
}

#[test]
fn gateway_flags_are_checked() {
    let output = run(&["serve", "--store", "memory", "--tasks", "x=optional"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--tasks applies to --upstream"), "{stderr}");

    let output = run(&[
        "serve",
        "--store",
        "memory",
        "--upstream",
        "true",
        "--tasks",
        "x=sometimes",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown task policy \"sometimes\""),
        "{stderr}"
    );

    let output = run(&["serve", "--store", "memory", "--upstream-connections", "2"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--upstream-connections applies to --upstream"),
        "{stderr}"
    );
    let output = run(&[
        "serve",
        "--store",
        "memory",
        "--upstream",
        "true",
        "--upstream-connections",
        "0",
    ]);
    assert_eq!(output.status.code(), Some(64), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("'--upstream-connections <N>'"), "{stderr}");

    let output = run(&["serve", "--store", "memory", "--upstream-root", "."]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--upstream-root applies to --upstream"),
        "{stderr}"
    );
    let output = run(&[
        "serve",
        "--store",
        "memory",
        "--upstream",
        "true",
        "--upstream-root",
        "no/such/dir",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--upstream-root no/such/dir")
            && stderr.contains("/no/such/dir cannot be a root")
            && stderr.contains("No such file or directory"),
        "{stderr}"
    );

    let output = run(&["serve", "--store", "memory", "--upstream", "true"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot serve the upstream")
            && stderr.contains("did not complete the MCP handshake"),
        "{stderr}"
    );
}
