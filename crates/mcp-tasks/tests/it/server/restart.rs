//! A server on the SQLite store dies mid-task and starts again on the same
//! file: finished tasks keep their outcome, unfinished ones are failed with
//! the restart message, never lost and never `working` forever.

use std::time::Duration;

use mcp_tasks::store::RESTARTED_MESSAGE;
use mcp_tasks::{TaskId, TaskOutcome, TaskStatus};
use mcp_tasks_sqlite::SqliteStore;
use serde_json::json;

use crate::support::runtime_server::runtime_on;
use crate::support::{RuntimeServer, in_process, options, task_of};

#[test]
fn a_restarted_server_keeps_finished_tasks_and_fails_unfinished_ones() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("tasks.db");

    // First life: one task finished, one working, one waiting for input.
    let life = tokio::runtime::Runtime::new().expect("a runtime");
    let (done, working, asking): (TaskId, TaskId, TaskId) = life.block_on(async {
        let store = SqliteStore::open(&path).expect("open the store");
        let client = in_process(RuntimeServer::new(runtime_on(store).build())).await;
        let done = task_of(&client, "slow", json!({"ms": 10})).await;
        let outcome = client.await_task(&done, &options()).await.expect("await");
        assert!(matches!(outcome, TaskOutcome::Completed(_)));
        let working = task_of(&client, "forever", json!({})).await;
        let asking = task_of(&client, "ask_two", json!({})).await;
        while client.get(&asking.id).await.expect("get").status != TaskStatus::InputRequired {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (done.id, working.id, asking.id)
    });
    // The process dies: every task of it stops mid-flight.
    life.shutdown_timeout(Duration::from_secs(5));

    // Second life on the same file.
    let life = tokio::runtime::Runtime::new().expect("a runtime");
    life.block_on(async {
        let store = SqliteStore::open(&path).expect("reopen the store");
        assert_eq!(store.abandoned_at_open(), 2);
        let client = in_process(RuntimeServer::new(runtime_on(store).build())).await;
        let finished = client.get(&done).await.expect("the finished task is kept");
        let TaskOutcome::Completed(result) = finished.outcome().expect("an outcome") else {
            panic!("completed stays completed")
        };
        assert_eq!(
            result.content[0].as_text().expect("text").text,
            "slept 10 ms"
        );
        for id in [&working, &asking] {
            let state = client
                .get(id)
                .await
                .expect("an unfinished task is not lost");
            assert_eq!(state.status, TaskStatus::Failed);
            assert_eq!(state.status_message.as_deref(), Some(RESTARTED_MESSAGE));
            let error = state.error.expect("a failed task has its error");
            assert_eq!(
                (error.code, error.message.as_str()),
                (-32603, RESTARTED_MESSAGE)
            );
            assert!(state.input_requests.is_empty());
        }
    });
}

/// Runs `first` in a process life of its own, which then dies with its
/// tasks mid-flight.
fn one_life<T>(first: impl std::future::Future<Output = T>) -> T {
    let life = tokio::runtime::Runtime::new().expect("a runtime");
    let out = life.block_on(first);
    life.shutdown_timeout(Duration::from_secs(5));
    out
}

/// Waits until task `id` shows `message`.
async fn until_message<H: rmcp::ClientHandler>(
    client: &mcp_tasks::client::TasksClient<H>,
    id: &TaskId,
    message: &str,
) {
    for _ in 0..2_000 {
        let state = client.get(id).await.expect("get");
        if state.status_message.as_deref() == Some(message) {
            return;
        }
        assert!(!state.status.is_terminal(), "ended early: {state:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("task never showed {message:?}");
}

#[test]
fn a_restarted_server_runs_resumable_tasks_again_from_their_checkpoint() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("tasks.db");

    // First life: a resumable task three steps in (its checkpoint says two
    // are done), and a task that cannot run again.
    let (steps, forever, first_events) = one_life(async {
        let store = SqliteStore::open(&path).expect("open the store");
        let server = RuntimeServer::resuming(runtime_on(store));
        let client = in_process(server.clone()).await;
        let steps = task_of(&client, "steps", json!({"n": 5, "ms": 200})).await;
        let forever = task_of(&client, "forever", json!({})).await;
        until_message(&client, &steps.id, "step 3 of 5").await;
        (steps.id, forever.id, server.events())
    });
    assert_eq!(first_events, ["step 1", "step 2"]);

    // Second life on the same file, with the resume hook.
    let life = tokio::runtime::Runtime::new().expect("a runtime");
    life.block_on(async {
        let store = SqliteStore::open(&path).expect("reopen the store");
        assert_eq!(store.abandoned_at_open(), 1, "only `forever` is failed");
        let server = RuntimeServer::resuming(runtime_on(store));
        let client = in_process(server.clone()).await;
        let outcome = client
            .await_task(&client.get(&steps).await.expect("get"), &options())
            .await
            .expect("await");
        let TaskOutcome::Completed(result) = outcome else {
            panic!("the resumed task completes: {outcome:?}")
        };
        assert_eq!(
            result.content[0].as_text().expect("text").text,
            "did 5 steps"
        );
        assert_eq!(
            server.events(),
            ["step 3", "step 4", "step 5"],
            "the resumed run continues after its checkpoint: no step runs twice"
        );
        let failed = client.get(&forever).await.expect("get");
        assert_eq!(failed.status, TaskStatus::Failed);
        assert_eq!(failed.status_message.as_deref(), Some(RESTARTED_MESSAGE));
    });
}

#[test]
fn without_a_resume_hook_a_restarted_server_fails_the_resumable_tasks() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("tasks.db");
    let steps = one_life(async {
        let store = SqliteStore::open(&path).expect("open the store");
        let client = in_process(RuntimeServer::resuming(runtime_on(store))).await;
        let steps = task_of(&client, "steps", json!({"n": 5, "ms": 200})).await;
        until_message(&client, &steps.id, "step 2 of 5").await;
        steps.id
    });
    let life = tokio::runtime::Runtime::new().expect("a runtime");
    life.block_on(async {
        // An operator's look at the file leaves the task to the next server.
        let store = SqliteStore::open(&path).expect("reopen the store");
        assert_eq!(store.abandoned_at_open(), 0);
        drop(store);
        let store = SqliteStore::open(&path).expect("reopen the store");
        let client = in_process(RuntimeServer::new(runtime_on(store).build())).await;
        let state = loop {
            let state = client.get(&steps).await.expect("get");
            if state.status.is_terminal() {
                break state;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(state.status, TaskStatus::Failed);
        assert_eq!(state.status_message.as_deref(), Some(RESTARTED_MESSAGE));
    });
}
