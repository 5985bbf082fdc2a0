//! The journal through the binary: a `call` killed with SIGKILL mid-wait is
//! resumed by `wait --last` in a new process; `get`, `cancel` and `wait`
//! find the server in the journal and read ids from stdin; `ls` lists and
//! refreshes; `--detach` leaves the task running on Ctrl-C; a task its
//! server lost is reported gone by `wait --all` and kept so; `wait --last
//! --url` takes the newest task of that server.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{BIN, http_server, json_of};

/// The binary with `journal` as its journal.
pub(crate) fn with_journal(journal: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .arg("--journal")
        .arg(journal)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs to the end (60 s at most) with `stdin`.
fn run_with(mut command: Command, stdin: &str) -> std::process::Output {
    let mut child = command.stdin(Stdio::piped()).spawn().expect("starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    wait_output(child)
}

/// Its output once it ends (60 s at most).
pub(crate) fn wait_output(mut child: Child) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// `ls --json` (with `extra` flags) as an array.
fn ls(journal: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["ls", "--json"];
    args.extend_from_slice(extra);
    let output = wait_output(with_journal(journal, &args).spawn().expect("ls starts"));
    assert!(output.status.success(), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).expect("ls prints JSON");
    value.as_array().expect("an array").clone()
}

/// Waits until `ls` shows `count` unfinished tasks.
fn until_journaled(journal: &Path, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let entries = ls(journal, &[]);
        if entries.len() == count {
            return entries;
        }
        assert!(
            Instant::now() < deadline,
            "the journal never had {count}: {entries:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_call_killed_mid_wait_is_resumed_from_the_journal_by_a_new_process() {
    let server = http_server();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    let mut call = with_journal(
        &journal,
        &["call", "--url", &server.url, "sleep", "--arg", "ms=1500"],
    )
    .spawn()
    .expect("call starts");
    let entries = until_journaled(&journal, 1);
    assert_eq!(entries[0]["tool"], "sleep");
    assert_eq!(entries[0]["server"], server.url.as_str());
    assert_eq!(entries[0]["status"], "working");
    call.kill().expect("SIGKILL the call");
    let _ = call.wait();

    let resumed = wait_output(
        with_journal(&journal, &["wait", "--last", "--json"])
            .spawn()
            .expect("wait starts"),
    );
    let (code, report) = json_of(&resumed);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["status"], "completed");
    assert_eq!(report["taskId"], entries[0]["taskId"]);
    assert!(ls(&journal, &[]).is_empty(), "nothing unfinished is left");
    let all = ls(&journal, &["--all"]);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["status"], "completed");
}

#[test]
fn get_and_cancel_find_the_server_in_the_journal_and_read_the_id_from_stdin() {
    let server = http_server();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    let started = wait_output(
        with_journal(
            &journal,
            &[
                "call",
                "--url",
                &server.url,
                "--no-wait",
                "sleep",
                "--arg",
                "ms=60000",
            ],
        )
        .spawn()
        .expect("call starts"),
    );
    assert!(started.status.success(), "{started:?}");
    let id = String::from_utf8_lossy(&started.stdout).trim().to_owned();

    // No --url: the journal knows the server.
    let got = wait_output(
        with_journal(&journal, &["get", &id, "--json"])
            .spawn()
            .unwrap(),
    );
    let (code, report) = json_of(&got);
    assert_eq!(
        (code, report["status"].as_str()),
        (0, Some("working")),
        "{report}"
    );
    // The id from stdin, not the command line.
    let cancelled = run_with(
        with_journal(&journal, &["cancel", "-", "--json"]),
        &format!("{id}\n"),
    );
    let (code, report) = json_of(&cancelled);
    assert_eq!(report["status"], "cancelled", "{report}");
    assert_eq!(code, 3);
    let all = ls(&journal, &["--all"]);
    assert_eq!(all[0]["status"], "cancelled");

    // An id the journal does not have, without --url: a usage error.
    let unknown = wait_output(
        with_journal(&journal, &["get", "not-journaled"])
            .spawn()
            .unwrap(),
    );
    assert_eq!(unknown.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("not in the journal"),
        "{unknown:?}"
    );
}

#[test]
fn ls_refresh_asks_the_server() {
    let server = http_server();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    let started = wait_output(
        with_journal(
            &journal,
            &[
                "call",
                "--url",
                &server.url,
                "--no-wait",
                "sleep",
                "--arg",
                "ms=300",
            ],
        )
        .spawn()
        .unwrap(),
    );
    assert!(started.status.success(), "{started:?}");
    std::thread::sleep(Duration::from_millis(800));
    // As last seen: working; as the server says now: completed.
    assert_eq!(ls(&journal, &[])[0]["status"], "working");
    let refreshed = ls(&journal, &["--refresh", "--all"]);
    assert_eq!(refreshed[0]["status"], "completed");
    assert!(ls(&journal, &[]).is_empty(), "the refresh was recorded");
}

#[cfg(unix)]
#[test]
fn a_detached_call_leaves_its_task_running_on_ctrl_c() {
    let server = http_server();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    let call = with_journal(
        &journal,
        &[
            "call",
            "--url",
            &server.url,
            "--detach",
            "sleep",
            "--arg",
            "ms=60000",
        ],
    )
    .spawn()
    .expect("call starts");
    let entries = until_journaled(&journal, 1);
    let interrupt = Command::new("kill")
        .args(["-INT", &call.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupt.success());
    let ended = wait_output(call);
    assert_eq!(ended.status.code(), Some(130), "{ended:?}");
    assert!(String::from_utf8_lossy(&ended.stderr).contains("wait --last"));
    let id = entries[0]["taskId"].as_str().unwrap().to_owned();
    let got = wait_output(
        with_journal(&journal, &["get", &id, "--json"])
            .spawn()
            .unwrap(),
    );
    let (_, report) = json_of(&got);
    assert_eq!(report["status"], "working", "still running: {report}");
}

/// `call --no-wait` on `server` (a URL, or with `stdio` a command line);
/// the task id.
fn started(journal: &Path, flag: &str, server: &str, tool: &[&str]) -> String {
    let mut args = vec!["call", flag, server, "--no-wait"];
    args.extend_from_slice(tool);
    let output = wait_output(with_journal(journal, &args).spawn().expect("call starts"));
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn a_task_its_server_lost_is_reported_gone_once_and_kept_as_gone() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    // Each connection starts its own server on a memory store: the task
    // dies with the child of the call that made it.
    let server = crate::support::stdio_server();
    let lost = started(
        &journal,
        "--stdio",
        &server,
        &["sleep", "--arg", "ms=600000"],
    );
    assert_eq!(ls(&journal, &[])[0]["taskId"], lost.as_str());

    let resumed = wait_output(
        with_journal(&journal, &["wait", "--all"])
            .spawn()
            .expect("wait starts"),
    );
    assert_eq!(resumed.status.code(), Some(2), "{resumed:?}");
    // Its line says so on stdout (the outcome), the error on stderr.
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        stdout.contains("gone (the server does not know it any more"),
        "{resumed:?}"
    );
    assert!(
        String::from_utf8_lossy(&resumed.stderr).contains("-32602"),
        "{resumed:?}"
    );
    // Marked in the journal: not resumed again, shown as gone.
    assert!(ls(&journal, &[]).is_empty());
    let all = ls(&journal, &["--all"]);
    assert_eq!(all[0]["taskId"], lost.as_str());
    assert_eq!(all[0]["status"], "gone");
    let again = wait_output(
        with_journal(&journal, &["wait", "--all", "--json"])
            .spawn()
            .expect("wait starts"),
    );
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(again.stdout.is_empty(), "nothing left to wait for");
}

#[test]
fn wait_last_with_a_url_resumes_the_newest_task_of_that_server() {
    let (near, far) = (http_server(), http_server());
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    let wanted = started(&journal, "--url", &near.url, &["sleep", "--arg", "ms=300"]);
    // Newer, on the other server: `--last` alone would take it.
    started(
        &journal,
        "--url",
        &far.url,
        &["sleep", "--arg", "ms=600000"],
    );
    let resumed = wait_output(
        with_journal(&journal, &["wait", "--last", "--url", &near.url, "--json"])
            .spawn()
            .expect("wait starts"),
    );
    let (code, report) = json_of(&resumed);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["taskId"], wanted.as_str());
    assert_eq!(report["result"]["content"][0]["text"], "slept 300 ms");
    let left = ls(&journal, &[]);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["server"], far.url.as_str());
}
