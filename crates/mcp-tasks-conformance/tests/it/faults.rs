//! A task server on SQLite killed with SIGKILL at the worst moments: while
//! tasks are being created, right after a `tasks/update` was acknowledged,
//! while tasks complete. After a restart on the same file, nothing the
//! server acknowledged is lost: every task whose creation was answered
//! exists, every acknowledged answer is in the file, every completion seen
//! is still there.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_tasks::{CallOptions, CallResponse, TaskId, TaskStatus, TasksClient};
use mcp_tasks_testkit::serve::{Forms, Served, polling_client_over};
use serde_json::{Value, json};

use crate::support::args;

const BIN: &str = env!("CARGO_BIN_EXE_conformance-server");

/// `conformance-server --http` on the SQLite file `store`, through the
/// kit's harness; killed when dropped.
fn start(store: &Path) -> Served {
    let mut command = Command::new(BIN);
    command
        .args(["--http", "127.0.0.1:0", "--poll-interval", "20", "--store"])
        .arg(format!("sqlite:{}", store.display()))
        .stderr(Stdio::null());
    Served::command(command, None)
}

/// A client of `server` that polls (no listen stream to lose when it dies).
async fn connect(server: &Served) -> TasksClient<Forms> {
    polling_client_over(&server.url, reqwest::Client::new()).await
}

/// The stored JSON of task `id`, read from the file behind the store's back
/// (opening a `SqliteStore` would already fail the unfinished tasks).
fn raw_record(store: &Path, id: &TaskId) -> Option<Value> {
    let connection = rusqlite::Connection::open(store).expect("open the file");
    connection
        .query_row(
            "SELECT record FROM tasks WHERE id = ?1",
            [id.expose()],
            |row| row.get::<_, String>(0),
        )
        .ok()
        .map(|json| serde_json::from_str(&json).expect("a stored record is JSON"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_creation_loses_no_acknowledged_task() {
    let folder = tempfile::tempdir().unwrap();
    let store = folder.path().join("tasks.db");
    let mut server = start(&store);
    let client = connect(&server).await;
    let (sent, mut received) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..400 {
        let client = client.clone();
        let sent = sent.clone();
        tokio::spawn(async move {
            let created = client
                .call_tool(
                    "slow_compute",
                    args(json!({"seconds": 60})),
                    CallOptions::default(),
                )
                .await;
            if let Ok(CallResponse::Task(state)) = created {
                let _ = sent.send(state.id);
            }
        });
    }
    drop(sent);
    // Kill as soon as some creations were answered, with others in flight.
    let mut acknowledged = Vec::new();
    while acknowledged.len() < 40 {
        acknowledged.push(received.recv().await.expect("creations are answered"));
    }
    server.kill_9();
    while let Ok(Some(id)) = tokio::time::timeout(Duration::from_millis(200), received.recv()).await
    {
        acknowledged.push(id);
    }
    assert!(acknowledged.len() < 400, "the kill came mid-creation");

    let restarted = start(&store);
    let client = connect(&restarted).await;
    for id in &acknowledged {
        let state = client
            .get(id)
            .await
            .expect("an acknowledged task survives SIGKILL");
        assert_eq!(state.status, TaskStatus::Failed, "its server died mid-task");
        assert_eq!(
            state.status_message.as_deref(),
            Some(mcp_tasks::store::RESTARTED_MESSAGE)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_right_after_an_acknowledged_update_keeps_the_answer() {
    let folder = tempfile::tempdir().unwrap();
    let store = folder.path().join("tasks.db");
    let mut server = start(&store);
    let client = connect(&server).await;
    // Two questions: one answer leaves the task waiting for the other, so
    // the answer stays in the file for the tool to read.
    let CallResponse::Task(state) = client
        .call_tool("multi_input", (), CallOptions::default())
        .await
        .expect("multi_input")
    else {
        panic!("multi_input is a task")
    };
    for _ in 0..500 {
        let read = client.get(&state.id).await.expect("get");
        if read.input_requests.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    client
        .update(&state.id, [("name".to_owned(), answer.clone())].into())
        .await
        .expect("the update is acknowledged");
    server.kill_9();

    let record = raw_record(&store, &state.id).expect("the task is in the file");
    assert_eq!(record["input_responses"]["name"], answer, "{record}");
    assert!(
        record["input_requests"].get("confirm").is_some(),
        "{record}"
    );

    let restarted = start(&store);
    let read = connect(&restarted)
        .await
        .get(&state.id)
        .await
        .expect("kept");
    assert_eq!(read.status, TaskStatus::Failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_while_tasks_complete_keeps_every_completion_seen() {
    let folder = tempfile::tempdir().unwrap();
    let store = folder.path().join("tasks.db");
    let mut server = start(&store);
    let client = connect(&server).await;
    let mut tasks = Vec::new();
    // Half finish within a third of a second of their creation, half run
    // for a minute: some are done and some running at the kill, however
    // slowly a loaded machine creates them.
    for n in 0..60 {
        let seconds = if n < 30 { 0.01 * f64::from(n) } else { 60.0 };
        let CallResponse::Task(state) = client
            .call_tool(
                "slow_compute",
                args(json!({"seconds": seconds, "label": format!("run {n}")})),
                CallOptions::default(),
            )
            .await
            .expect("slow_compute")
        else {
            panic!("a task")
        };
        tasks.push(state.id);
    }
    // Read them all until some have completed (the short ones complete
    // meanwhile); the long ones are still running.
    let mut completed = Vec::new();
    for _ in 0..100 {
        completed.clear();
        for id in &tasks {
            let read = client.get(id).await.expect("get");
            if read.status == TaskStatus::Completed {
                completed.push((id.clone(), read.result.clone()));
            }
        }
        if completed.len() >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.kill_9();
    assert!(
        !completed.is_empty() && completed.len() < tasks.len(),
        "{} completed",
        completed.len()
    );

    let restarted = start(&store);
    let client = connect(&restarted).await;
    for (id, result) in &completed {
        let read = client.get(id).await.expect("kept");
        assert_eq!(
            read.status,
            TaskStatus::Completed,
            "a completion survives SIGKILL"
        );
        assert_eq!(&read.result, result);
    }
    for id in &tasks {
        assert!(
            client
                .get(id)
                .await
                .expect("every task is kept")
                .status
                .is_terminal()
        );
    }
}
