//! The examples a newcomer copies, run as they would run them: each example
//! server as a process on 127.0.0.1, and the example client against it.

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
        "(step 1 of 4)",
        "build: built",
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
