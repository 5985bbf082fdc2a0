//! `serve`'s admission flags through the binary: a task past
//! `--max-running` is queued and says so, one past `--max-queued` is
//! refused with the server's message, and bad flags are refused.

use crate::support::{http_server_with, json_of, run};

/// Starts `sleep` for a minute on `url` without waiting; its task id.
fn start_sleep(url: &str) -> String {
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
    let (code, created) = json_of(&output);
    assert_eq!(code, 0, "{created}");
    created["taskId"].as_str().expect("a task id").to_owned()
}

#[test]
fn past_max_running_a_task_is_queued_and_past_max_queued_refused() {
    let server = http_server_with(&["--max-running", "1", "--max-queued", "1"]);
    let first = start_sleep(&server.url);
    let second = start_sleep(&server.url);
    let (_, got) = json_of(&run(&["get", "--url", &server.url, &second, "--json"]));
    assert_eq!(got["status"], "working", "{got}");
    assert_eq!(got["statusMessage"], "queued: next to run", "{got}");

    let refused = run(&[
        "call",
        "--url",
        &server.url,
        "sleep",
        "--arg",
        "ms=10",
        "--no-wait",
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("busy"), "the server's reason: {stderr}");

    // Cancelling the queued task frees the queue for another.
    let cancelled = run(&["cancel", "--url", &server.url, &second]);
    assert_eq!(cancelled.status.code(), Some(3), "{cancelled:?}");
    let third = start_sleep(&server.url);
    assert_ne!(third, second);
    let _ = first;
}

#[test]
fn bad_admission_flags_are_refused_with_what_is_wrong() {
    for (flag, value, says) in [
        ("--tool-concurrency", "sleep", "TOOL=N"),
        ("--tool-concurrency", "sleep=0", "at least 1"),
        ("--tool-concurrency", "sleep=many", "not a number"),
        ("--weight", "alice=0", "from 1 to 1000"),
        ("--max-running", "many", "invalid value"),
    ] {
        let output = run(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            "memory",
            flag,
            value,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
}
