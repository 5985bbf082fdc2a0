//! Resuming from the journal (`client::resume`) against our runtime: in
//! process under a paused clock (every unfinished task awaited on one
//! connection and its outcome journaled, a task purged by retention
//! reported gone and marked, a client of another server refused, a
//! `tasks/update` refused with -32602 not taken for a lost task), and over
//! Streamable HTTP on 127.0.0.1 with bearer tokens (the endpoint rebuilt
//! from the journal, the token given again; another caller's token makes
//! the task look gone, and a status read with the right one brings it back).

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::client::journal::{Journal, MemoryJournal, ServerRef, TaskRef};
use mcp_tasks::client::resume::{self, Resumed};
use mcp_tasks::server::TokioClock;
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    CallOptions, CallResponse, ConnectOptions, Endpoint, TaskOutcome, TaskStatus, TasksClient,
    UnixMillis,
};
use serde_json::json;

use crate::support::runtime_server::{runtime_on, serve_http_with};
use crate::support::scripted::{self, Reply, get_value, input_required, name_form};
use crate::support::{Handler, RuntimeServer, args, completed_text, in_process, options, task_of};

fn server_ref() -> ServerRef {
    ServerRef::Stdio("in-process test server".into())
}

/// A server whose runtime reads the paused tokio clock, sweeping every
/// 100 ms and deleting finished tasks `retention` after they end.
fn clocked_server(retention: Duration) -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_clock(TokioClock::starting_at(UnixMillis::new(1_767_225_600_000)))
            .with_retention(retention)
            .with_sweep_interval(Duration::from_millis(100))
            .build(),
    )
}

/// The journal's entry of `resumed`.
async fn entry(journal: &MemoryJournal, resumed: &Resumed) -> TaskRef {
    journal
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|entry| entry.task_id == resumed.task.task_id)
        .expect("still in the journal")
}

#[tokio::test(start_paused = true)]
async fn a_new_client_awaits_every_unfinished_task_and_the_journal_has_each_outcome() {
    let server = clocked_server(Duration::from_secs(3600));
    let journal = Arc::new(MemoryJournal::new());
    let first = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());
    task_of(&first, "slow", json!({"ms": 400})).await;
    task_of(&first, "slow", json!({"ms": 200})).await;
    // Expires at 300 ms: failed, and still known to the server (not gone).
    let ttl = json!({"ttl_ms": 300, "from_creation": true});
    task_of(&first, "forever", ttl).await;
    let done = task_of(&first, "slow", json!({"ms": 1})).await;
    first.await_task(&done, &options()).await.unwrap();
    drop(first);

    // A new client, with no journal of its own: the outcomes go to the one
    // the tasks were listed from.
    let groups = resume::unfinished(journal.clone()).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].server, server_ref());
    assert_eq!(groups[0].tasks.len(), 3, "not the finished one");
    let second = in_process(server.clone()).await;
    let mut resumed = second.resume(&groups[0], &options());
    assert_eq!(resumed.remaining(), 3);
    let mut seen = Vec::new();
    while let Some(task) = resumed.next().await {
        // Journaled before it is yielded.
        let journaled = entry(&journal, &task).await;
        assert!(journaled.is_finished() && !journaled.is_gone());
        assert!(!task.is_gone());
        assert_eq!(task.task.status, TaskStatus::Working, "as listed");
        seen.push(match task.outcome.unwrap() {
            TaskOutcome::Failed(failure) => {
                assert_eq!(journaled.status, TaskStatus::Failed);
                failure.error.message
            }
            outcome => {
                assert_eq!(journaled.status, TaskStatus::Completed);
                completed_text(&outcome)
            }
        });
    }
    assert_eq!(resumed.remaining(), 0);
    assert_eq!(seen, ["slept 200 ms", "task expired", "slept 400 ms"]);
    assert!(resume::unfinished(journal).await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_task_its_server_no_longer_knows_is_reported_gone_and_not_listed_again() {
    // Finished tasks are deleted 300 ms after they end.
    let server = clocked_server(Duration::from_millis(300));
    let journal = Arc::new(MemoryJournal::new());
    let first = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());
    let expired = task_of(&first, "slow", json!({"ms": 10})).await;
    drop(first);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let second = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());
    let live = task_of(&second, "slow", json!({"ms": 300})).await;

    let groups = resume::unfinished(journal.clone()).await.unwrap();
    assert_eq!(groups[0].tasks.len(), 2);
    let resumed = second.resume_all(&groups[0], &options()).await;
    // In the journal's order, newest first.
    assert_eq!(resumed[0].task.task_id, live.id);
    assert_eq!(
        completed_text(resumed[0].outcome.as_ref().unwrap()),
        "slept 300 ms"
    );
    assert_eq!(resumed[1].task.task_id, expired.id);
    assert!(resumed[1].is_gone(), "{:?}", resumed[1].outcome);
    let gone = entry(&journal, &resumed[1]).await;
    assert!(gone.is_gone() && gone.is_finished());
    assert_eq!(
        gone.status,
        TaskStatus::Working,
        "the last status seen is kept"
    );

    // Nothing left to resume: no endless retry.
    assert!(
        resume::unfinished(journal.clone())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_connected_to_another_server_awaits_nothing_and_marks_nothing() {
    let server = RuntimeServer::in_memory();
    let journal = Arc::new(MemoryJournal::new());
    let first = in_process(server.clone())
        .await
        .with_journal(journal.clone(), server_ref());
    task_of(&first, "slow", json!({"ms": 200})).await;
    let groups = resume::unfinished(journal.clone()).await.unwrap();
    let elsewhere = in_process(server).await.with_journal(
        journal.clone(),
        ServerRef::Url("http://127.0.0.1:1/mcp".into()),
    );
    let resumed = elsewhere.resume_all(&groups[0], &options()).await;
    assert_eq!(resumed.len(), 1);
    let error = resumed[0].outcome.as_ref().unwrap_err();
    assert_eq!(error.kind(), mcp_tasks::ErrorKind::Usage, "{error}");
    assert!(!resumed[0].is_gone());
    let groups = resume::unfinished(journal).await.unwrap();
    assert_eq!(groups[0].tasks.len(), 1, "still unfinished, not gone");
}

#[tokio::test(start_paused = true)]
async fn a_refused_update_is_not_taken_for_a_task_the_server_lost() {
    // The server refuses the answer to its form with -32602, as it refuses
    // an unknown task; asked again, it knows the task.
    let mut gets = 0;
    let (client, log) = scripted::connect(Handler::default(), move |method, _| match method {
        "tasks/get" => {
            gets += 1;
            match gets {
                1 => Reply::Result(input_required("name", name_form())),
                _ => Reply::Result(get_value("working", json!({}))),
            }
        }
        "tasks/update" => Reply::Error(json!({"code": -32602, "message": "not an answer"})),
        _ => Reply::Error(json!({"code": -32601, "message": "no"})),
    })
    .await;
    let journal = Arc::new(MemoryJournal::new());
    let server = ServerRef::Stdio("scripted server".into());
    let entry: TaskRef = serde_json::from_value(json!({
        "server": server, "taskId": "task-secret-1", "era": "extension", "tool": "ask",
        "createdAt": 1, "ttl": null, "status": "input_required", "seenAt": 1,
    }))
    .unwrap();
    journal.record(&entry).await.unwrap();

    let groups = resume::unfinished(journal.clone()).await.unwrap();
    let resumed = client.resume_all(&groups[0], &options()).await;
    let error = resumed[0].outcome.as_ref().unwrap_err();
    assert!(error.is_unknown_task(), "{error}");
    assert!(!resumed[0].is_gone(), "the server still knows it");
    assert_eq!(log.of("tasks/update").len(), 1);
    assert_eq!(log.of("tasks/get").len(), 2, "one more read to make sure");
    let groups = resume::unfinished(journal.clone()).await.unwrap();
    assert_eq!(groups.len(), 1, "still to resume");
    assert_eq!(
        groups[0].tasks[0].status,
        TaskStatus::Working,
        "as read last"
    );
}

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef01";

#[tokio::test]
async fn over_http_the_endpoint_comes_from_the_journal_and_the_token_from_the_caller() {
    let tokens = BearerTokens::parse(format!("{ALICE} alice\n{BOB} bob\n").as_bytes()).unwrap();
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| {
        recipe.with_bearer_tokens(tokens)
    })
    .await;
    let journal = Arc::new(MemoryJournal::new());
    let journaled = || ConnectOptions::default().with_journal(journal.clone());
    let bearer = |token: &str| format!("Bearer {token}");
    let alice = Endpoint::url(&url)
        .with_header("Authorization", bearer(ALICE))
        .unwrap();
    let first = TasksClient::connect(alice, (), journaled()).await.unwrap();
    let CallResponse::Task(task) = first
        .call_tool("slow", args(json!({"ms": 300})), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("slow must be a task")
    };
    first.close().await;

    let groups = resume::unfinished(journal.clone()).await.unwrap();
    assert_eq!(groups[0].server, ServerRef::Url(url.clone()));
    assert_eq!(
        groups[0].endpoint().unwrap(),
        Endpoint::url(&url),
        "no header kept"
    );
    // Without the token the server cannot be reached at all.
    let refused = TasksClient::connect(groups[0].endpoint().unwrap(), (), journaled()).await;
    assert!(refused.is_err(), "401 without the token");

    // Bob's token: the task is not his, so the server does not know it.
    let as_bob = groups[0]
        .endpoint()
        .unwrap()
        .with_header("Authorization", bearer(BOB))
        .unwrap();
    let bob = TasksClient::connect(as_bob, (), journaled()).await.unwrap();
    let resumed = bob.resume_all(&groups[0], &options()).await;
    assert!(resumed[0].is_gone());
    assert!(
        resume::unfinished(journal.clone())
            .await
            .unwrap()
            .is_empty()
    );
    bob.close().await;

    // Alice reads it again: the server knows it, the mark is off.
    let as_alice = groups[0]
        .endpoint()
        .unwrap()
        .with_header("Authorization", bearer(ALICE))
        .unwrap();
    let alice = TasksClient::connect(as_alice, (), journaled())
        .await
        .unwrap();
    alice.get(&task.id).await.unwrap();
    let groups = resume::unfinished(journal.clone()).await.unwrap();
    assert_eq!(groups.len(), 1, "listed again");
    let resumed = alice.resume_all(&groups[0], &options()).await;
    assert_eq!(
        completed_text(resumed[0].outcome.as_ref().unwrap()),
        "slept 300 ms"
    );
    let entries = journal.list().await.unwrap();
    assert_eq!(entries[0].status, TaskStatus::Completed);
    assert!(!entries[0].is_gone());
    alice.close().await;
}
