//! The examples a newcomer copies, run as they would run them: each example
//! server as a process on 127.0.0.1, and the example client against it; the
//! journaling client killed with SIGKILL while it waits, and resumed by a
//! new process from its SQLite journal.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// An example program: a binary of this package, which `cargo test` builds
/// before it runs the tests.
fn example(name: &str) -> PathBuf {
    match name {
        "client" => env!("CARGO_BIN_EXE_client").into(),
        "client_journal" => env!("CARGO_BIN_EXE_client_journal").into(),
        "server_macros" => env!("CARGO_BIN_EXE_server_macros").into(),
        "server_sqlite_http" => env!("CARGO_BIN_EXE_server_sqlite_http").into(),
        other => panic!("no example program {other}"),
    }
}

/// Starts an example server; returns it (killed on drop) and its URL.
async fn start(name: &str, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(example(name))
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example server starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} says where it listens within 30 s"))
    .expect("read the example server's stdout");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{name}: unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}

/// Runs the example client against `url` and checks what it printed.
async fn client_against(url: &str) {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(example("client")).arg(url).output(),
    )
    .await
    .expect("the example client ends within 60 s")
    .expect("the example client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "the server offers tasks: true",
        "(1 of 4)",
        "build: built",
        "builds awaited together: 3 of 3 built",
        "the server asks: Deploy now?",
        "deploy: deployed",
        "forever: cancelled",
        "no-such-task: refused error:",
    ] {
        assert!(
            stdout.contains(expected),
            "{expected:?} missing in:\n{stdout}"
        );
    }
}

#[tokio::test]
async fn the_client_example_runs_against_the_sqlite_server_example() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.db");
    let (_server, url) = start(
        "server_sqlite_http",
        &["127.0.0.1:0", file.to_str().unwrap()],
    )
    .await;
    client_against(&url).await;
    assert!(file.exists(), "the tasks are in the SQLite file");
}

#[tokio::test]
async fn the_client_example_runs_against_the_macro_server_example() {
    let (_server, url) = start("server_macros", &["127.0.0.1:0"]).await;
    client_against(&url).await;
}

/// Runs the journaling client with `args` to its end (60 s at most); its stdout.
async fn client_journal(args: &[&str]) -> String {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(example("client_journal")).args(args).output(),
    )
    .await
    .expect("client_journal ends within 60 s")
    .expect("client_journal runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "client_journal {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The journal's entries, as a new process would read them.
async fn journaled(file: &std::path::Path) -> Vec<mcp_tasks::client::journal::TaskRef> {
    use mcp_tasks::client::journal::Journal;
    let journal = mcp_tasks_sqlite::SqliteJournal::open(file).expect("the journal opens");
    journal.list().await.expect("the journal reads")
}

#[cfg(unix)]
#[tokio::test]
async fn a_client_killed_while_it_waits_is_resumed_from_its_journal_by_a_new_process() {
    use std::os::unix::process::ExitStatusExt;

    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.sqlite3");
    let journal_arg = journal.to_str().unwrap();
    let (_server, url) = start("server_macros", &["127.0.0.1:0"]).await;

    // The first process calls `crunch` (5 s) and waits; it is killed once
    // the task is journaled.
    let mut first = Command::new(example("client_journal"))
        .args(["--journal", journal_arg, &url])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("client_journal starts");
    let mut lines = BufReader::new(first.stdout.take().expect("piped stdout")).lines();
    let started = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("read its stdout") {
            if line.starts_with("crunch: started") {
                return true;
            }
        }
        false
    })
    .await
    .expect("the task starts within 30 s");
    assert!(started, "client_journal ended before its task started");
    first.start_kill().expect("SIGKILL");
    let killed = first.wait().await.expect("the killed process is reaped");
    assert_eq!(killed.signal(), Some(9), "killed mid-wait: {killed:?}");
    let entries = journaled(&journal).await;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].tool, "crunch");
    assert_eq!(
        entries[0].status,
        mcp_tasks::TaskStatus::Working,
        "the first process never saw it end"
    );

    // A new process resumes from the same file and gets the tool's result.
    let resumed = client_journal(&["--resume", "--journal", journal_arg]).await;
    assert!(
        resumed.contains(&format!("resuming 1 task(s) on {url}")),
        "{resumed}"
    );
    assert!(resumed.contains("crunch: crunched for 5 s"), "{resumed}");
    let entries = journaled(&journal).await;
    assert_eq!(entries[0].status, mcp_tasks::TaskStatus::Completed);
    assert!(entries[0].is_finished());

    // Finished in the journal: nothing left to resume.
    let again = client_journal(&["--resume", "--journal", journal_arg]).await;
    assert_eq!(again.trim(), "nothing to resume");
}

#[tokio::test]
async fn the_sqlite_server_example_leaves_nothing_where_it_is_run() {
    let here = tempfile::tempdir().unwrap();
    let temporary = tempfile::tempdir().unwrap();
    let mut child = Command::new(example("server_sqlite_http"))
        .arg("127.0.0.1:0")
        .current_dir(here.path())
        .env("TMPDIR", temporary.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the example server starts");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line),
    )
    .await
    .expect("it says where it listens within 30 s")
    .expect("read its stdout");
    let url = line.trim().strip_prefix("listening on ").expect("a URL");
    client_against(url).await;
    drop(child);
    let left: Vec<_> = std::fs::read_dir(here.path()).unwrap().collect();
    assert!(left.is_empty(), "files left where it ran: {left:?}");
    assert!(
        temporary.path().join("mcp-tasks-example-tasks.db").exists(),
        "its tasks are in the temporary folder"
    );
}
