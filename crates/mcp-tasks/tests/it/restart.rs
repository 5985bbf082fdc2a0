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
