//! The client journal against our runtime in process, under a paused
//! clock: creations recorded before `call_tool` returns, statuses as the
//! wait learns them, a second client resuming from the journal, pruning.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::client::journal::{Journal, MemoryJournal, ServerRef};
use mcp_tasks::{CallOptions, CallResponse, TaskStatus, UnixMillis};
use serde_json::json;

use crate::support::{RuntimeServer, args, completed_text, in_process, options};

fn server_ref() -> ServerRef {
    ServerRef::Stdio("in-process test server".into())
}

#[tokio::test(start_paused = true)]
async fn every_task_created_is_journaled_and_its_status_follows_the_wait() {
    let server = RuntimeServer::in_memory();
    let journal = Arc::new(MemoryJournal::new());
    let client = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());

    // Recorded before call_tool returns it.
    let CallResponse::Task(state) = client
        .call_tool("slow", args(json!({"ms": 300})), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("slow must be a task")
    };
    let entries = journal.list().await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].task_id, state.id);
    assert_eq!(entries[0].tool, "slow");
    assert_eq!(entries[0].server, server_ref());
    assert_eq!(entries[0].status, TaskStatus::Working);

    // A synchronous result is not a task: nothing to journal.
    let sync = client
        .call_tool(
            "slow",
            args(json!({"ms": 1, "sync": true})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(matches!(sync, CallResponse::Complete(_)));
    assert_eq!(journal.list().await.unwrap().len(), 1);

    // The wait's last status is written before it returns.
    let outcome = client.await_task(&state, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "slept 300 ms");
    let entries = journal.list().await.unwrap();
    assert_eq!(entries[0].status, TaskStatus::Completed);
    assert!(entries[0].is_finished());
}

#[tokio::test(start_paused = true)]
async fn a_new_client_resumes_every_unfinished_wait_from_the_journal() {
    let server = RuntimeServer::in_memory();
    let journal = Arc::new(MemoryJournal::new());
    let first = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());
    for ms in [200, 400] {
        first
            .call_tool("slow", args(json!({"ms": ms})), CallOptions::default())
            .await
            .unwrap();
    }
    // The first client goes away mid-wait; a new one reads the journal.
    drop(first);
    let second = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());
    let unfinished: Vec<_> = journal
        .list()
        .await
        .unwrap()
        .into_iter()
        .filter(|entry| !entry.is_finished())
        .collect();
    assert_eq!(unfinished.len(), 2);
    for entry in &unfinished {
        let outcome = second.await_task(&entry.task_id, &options()).await.unwrap();
        assert!(completed_text(&outcome).starts_with("slept"));
    }
    assert!(
        journal
            .list()
            .await
            .unwrap()
            .iter()
            .all(|entry| entry.status == TaskStatus::Completed)
    );

    // Finished entries go once their TTL has passed since they were seen.
    let later = UnixMillis::now().saturating_add(Duration::from_secs(2 * 3600));
    assert_eq!(journal.prune(later).await.unwrap(), 2);
    assert!(journal.list().await.unwrap().is_empty());
}
