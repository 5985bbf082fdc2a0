//! `wait ID ID ...` and `wait --all` through the binary against `mcp-tasks
//! serve --http` (and a scripted 2025-11-25 server on stdio): each task
//! reported as it finishes, one JSON object a line with `--json`, the exit
//! code the worst outcome's, the server found in the journal.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{BIN, http_server, json_of};

/// Runs the binary with `journal` as its journal, 60 s at most.
fn cli(journal: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("MCP_TASKS_JOURNAL", journal)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcp-tasks {args:?} ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Each line of stdout, a JSON object.
fn objects(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!(
                    "{line:?} is not JSON ({error}); stderr: {}",
                    String::from_utf8_lossy(&output.stderr)
                )
            })
        })
        .collect()
}

/// Starts `tool` on `url` without waiting; its task id.
fn started(journal: &Path, url: &str, tool: &[&str]) -> String {
    let mut args = vec!["call", "--url", url];
    args.extend_from_slice(tool);
    args.extend(["--no-wait", "--json"]);
    let (exit, value) = json_of(&cli(journal, &args));
    assert_eq!(exit, 0, "{value}");
    value["taskId"].as_str().expect("a task id").to_owned()
}

/// The `taskId`s of `lines`, in order.
fn ids(lines: &[Value]) -> Vec<&str> {
    lines
        .iter()
        .map(|line| line["taskId"].as_str().unwrap_or("?"))
        .collect()
}

#[test]
fn several_ids_are_reported_as_they_finish_with_the_worst_exit_code() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let slow = started(&journal, &server.url, &["sleep", "--arg", "ms=1500"]);
    let quick = started(&journal, &server.url, &["sleep", "--arg", "ms=300"]);
    let failing = started(&journal, &server.url, &["failing_tool"]);

    let args = [
        "wait",
        "--url",
        &server.url,
        &slow,
        &quick,
        &failing,
        "--json",
    ];
    let output = cli(&journal, &args);
    let lines = objects(&output);
    assert_eq!(lines.len(), 3, "one line per task: {lines:?}");
    let order = ids(&lines);
    assert_eq!(order[2], slow, "the slowest comes last");
    let at = |id: &str| &lines[order.iter().position(|&seen| seen == id).unwrap()];
    assert!(order.iter().position(|&id| id == quick) < Some(2));
    assert_eq!(at(&slow)["status"], "completed");
    assert_eq!(at(&slow)["result"]["content"][0]["text"], "slept 1500 ms");
    assert_eq!(at(&quick)["result"]["content"][0]["text"], "slept 300 ms");
    assert_eq!(at(&failing)["status"], "failed");
    assert_eq!(at(&failing)["error"]["code"], -32603);
    assert_eq!(output.status.code(), Some(2), "failed is the worst here");

    // Ids alone: their server is in the journal; both finished long ago.
    let output = cli(&journal, &["wait", &quick, &slow, "--json"]);
    let lines = objects(&output);
    assert_eq!(ids(&lines).len(), 2);
    assert!(lines.iter().all(|line| line["status"] == "completed"));
    assert_eq!(output.status.code(), Some(0));

    // For people: on stdout a line per task, then its result; why one
    // failed on stderr.
    let output = cli(&journal, &["wait", "--url", &server.url, &quick, &failing]);
    assert_eq!(output.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Each task named by its place among the ids given and the end of
    // its id (its random part: ids made together share their start).
    let said = |start: &str, end: &str| {
        stdout
            .lines()
            .any(|line| line.starts_with(start) && line.ends_with(end))
    };
    assert!(said("task #1 ", ": completed"), "{stdout}");
    assert!(said("task #2 ", ": failed"), "{stdout}");
    let tail = |id: &str| format!("…{}:", &id[id.len() - 8..]);
    assert!(
        said(&format!("task #1 {}", tail(&quick)), ": completed"),
        "{stdout}"
    );
    assert!(
        said(&format!("task #2 {}", tail(&failing)), ": failed"),
        "{stdout}"
    );
    // The result right under its task's line; the failed one's status
    // said once (its line), its error on stderr.
    let lines: Vec<&str> = stdout.lines().collect();
    let first = lines.iter().position(|line| line.starts_with("task #1 "));
    assert_eq!(
        first.map(|at| lines[at + 1]),
        Some("slept 300 ms"),
        "{stdout}"
    );
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(stderr.contains("error -32603"), "{stderr}");
}

#[test]
fn wait_all_awaits_the_unfinished_tasks_of_the_journal() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    // A finished task is not waited for again.
    let (exit, _) = json_of(&cli(
        &journal,
        &[
            "call",
            "--url",
            &server.url,
            "sleep",
            "--arg",
            "ms=10",
            "--json",
        ],
    ));
    assert_eq!(exit, 0);
    let first = started(&journal, &server.url, &["sleep", "--arg", "ms=300"]);
    let second = started(&journal, &server.url, &["sleep", "--arg", "ms=900"]);

    let output = cli(&journal, &["wait", "--all", "--json"]);
    let lines = objects(&output);
    assert_eq!(
        ids(&lines),
        [first.as_str(), second.as_str()],
        "as they finish"
    );
    assert!(lines.iter().all(|line| line["status"] == "completed"));
    assert_eq!(output.status.code(), Some(0));

    // Nothing unfinished is left: nothing to wait for.
    let output = cli(&journal, &["wait", "--all", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty());

    // Unfinished tasks on two servers: --all needs to be told which.
    let other = http_server();
    let endless = started(&journal, &server.url, &["sleep", "--arg", "ms=600000"]);
    let elsewhere = started(&journal, &other.url, &["sleep", "--arg", "ms=200"]);
    let output = cli(&journal, &["wait", "--all", "--json"]);
    assert_eq!(output.status.code(), Some(64), "{output:?}");
    let output = cli(&journal, &["wait", "--all", "--url", &other.url, "--json"]);
    assert_eq!(ids(&objects(&output)), [elsewhere.as_str()]);
    assert_eq!(output.status.code(), Some(0));
    // The deadline ends the set: the task still running is a timeout.
    let args = [
        "wait",
        "--all",
        "--url",
        &server.url,
        "--timeout",
        "1",
        "--json",
    ];
    let output = cli(&journal, &args);
    let lines = objects(&output);
    assert_eq!(ids(&lines), [endless.as_str()]);
    assert_eq!(lines[0]["status"], "working");
    assert_eq!(output.status.code(), Some(5));
}

#[test]
fn several_ids_on_a_2025_11_25_server() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let server = crate::call_2025_11_25::legacy_server(&dir);
    let args = ["wait", "--stdio", &server, "legacy-a", "legacy-b", "--json"];
    let output = cli(&journal, &args);
    let lines = objects(&output);
    let mut seen = ids(&lines);
    seen.sort_unstable();
    assert_eq!(seen, ["legacy-a", "legacy-b"]);
    for line in &lines {
        assert_eq!(line["status"], "completed", "{line}");
        assert_eq!(line["result"]["content"][0]["text"], "researched");
    }
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn the_exit_code_is_the_worst_outcomes() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let done = started(&journal, &server.url, &["sleep", "--arg", "ms=10"]);
    let failing = started(&journal, &server.url, &["failing_tool"]);
    let cancelled = started(&journal, &server.url, &["sleep", "--arg", "ms=600000"]);
    let (exit, value) = json_of(&cli(
        &journal,
        &["cancel", "--url", &server.url, &cancelled, "--json"],
    ));
    assert_eq!((exit, &value["status"]), (3, &Value::from("cancelled")));
    let url = server.url.as_str();
    for (given, worst) in [
        (vec![done.as_str()], 0),
        (vec![done.as_str(), cancelled.as_str()], 3),
        (vec![cancelled.as_str(), done.as_str()], 3),
        // Failed is worse than cancelled, whatever the order.
        (vec![failing.as_str(), cancelled.as_str(), done.as_str()], 2),
        (vec![done.as_str(), cancelled.as_str(), failing.as_str()], 2),
    ] {
        let mut args = vec!["wait", "--url", url, "--json"];
        args.extend(&given);
        let output = cli(&journal, &args);
        assert_eq!(objects(&output).len(), given.len(), "{output:?}");
        assert_eq!(output.status.code(), Some(worst), "{given:?}: {output:?}");
    }
}

#[test]
fn a_bad_id_gets_its_error_line_and_the_others_their_outcomes() {
    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let good = started(&journal, &server.url, &["sleep", "--arg", "ms=200"]);
    let unknown = "0123456789abcdef0123456789abcdef";

    // The server does not know it: that task failed (-32602, as `wait ID`).
    let args = ["wait", "--url", &server.url, unknown, &good, "--json"];
    let output = cli(&journal, &args);
    let lines = objects(&output);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let of = |lines: &[Value], id: &str| {
        lines
            .iter()
            .find(|line| line["taskId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no line for {id} in {lines:?}"))
    };
    assert_eq!(of(&lines, unknown)["status"], "failed");
    assert_eq!(of(&lines, unknown)["error"]["code"], -32602);
    assert_eq!(of(&lines, &good)["status"], "completed");
    assert_eq!(output.status.code(), Some(2));

    // Not in the journal, and no --url: a usage error for that id alone.
    let output = cli(&journal, &["wait", &good, "not-in-the-journal", "--json"]);
    let lines = objects(&output);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let missing = of(&lines, "not-in-the-journal");
    assert_eq!(missing["status"], "error");
    assert!(
        missing["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("not in the journal")),
        "{missing}"
    );
    assert_eq!(of(&lines, &good)["status"], "completed");
    assert_eq!(output.status.code(), Some(64));

    // For people: each id named on stderr with how it ended.
    let output = cli(&journal, &["wait", "nowhere-1", "nowhere-2"]);
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("not in the journal").count(), 2, "{stderr}");
}

#[test]
fn usage_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    for (args, says) in [
        (&["wait"][..], "required"),
        (&["wait", "--all", "some-id"][..], "cannot be used with"),
        (&["wait", "--all", "--last"][..], "cannot be used with"),
    ] {
        let output = cli(&journal, args);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
    }
    // --no-journal (the journal's variable unset: the two conflict).
    let output = Command::new(BIN)
        .args(["wait", "--all", "--no-journal"])
        .env_remove("MCP_TASKS_JOURNAL")
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(64), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--all needs the journal"), "{stderr}");
}

#[test]
fn each_line_is_printed_the_moment_its_task_finishes() {
    use std::io::{BufRead, BufReader};

    let server = http_server();
    let dir = tempfile::tempdir().expect("a temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let endless = started(&journal, &server.url, &["sleep", "--arg", "ms=600000"]);
    let quick = started(&journal, &server.url, &["sleep", "--arg", "ms=200"]);
    let mut child = Command::new(BIN)
        .args(["wait", "--url", &server.url, &endless, &quick, "--json"])
        .args(["--timeout", "600"])
        .env("MCP_TASKS_JOURNAL", &journal)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    // Read in a thread: a wait that held its lines back would print none
    // for the ten minutes of its deadline.
    let stdout = child.stdout.take().expect("stdout");
    let (lines, first) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = lines.send(line);
    });
    let first = first.recv_timeout(Duration::from_secs(30));
    // The endless task is still awaited when the quick one's line is out.
    let running = child.try_wait().expect("try_wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    let first = first.expect("the quick task's line within 30 s");
    let line: Value = serde_json::from_str(&first).expect("a JSON line");
    assert_eq!(line["taskId"], quick.as_str(), "{line}");
    assert_eq!(line["status"], "completed", "{line}");
    assert!(running, "the first line came only when the wait ended");
}
