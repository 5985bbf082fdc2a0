//! One deadline bounds everything a call or a wait does: every request,
//! every MRTR round, every input handler and resolver, every pause and the
//! journal's writes. Against the scripted server under a paused clock,
//! each case ends at its deadline to the millisecond and names the stage
//! that ran out. And garbage on a newline-delimited transport, which rmcp
//! drops silently, ends a wait once a `LineCheck` reports it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use mcp_tasks::client::journal::{Journal, JournalError, MemoryJournal, ServerRef, TaskRef};
use mcp_tasks::error::{ProtocolViolation, Stage};
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, Error, InputMode, TaskId, TaskOutcome, TaskStatus,
    Ttl, UnixMillis,
};
use rmcp::model::InputResponses;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Handler;
use crate::support::scripted::{
    Reply, ack, connect, connect_checked, created, get_value, gets, got, input_required, ms,
    name_form, task_id, text_result,
};

/// `work`, or a failed test if it runs for an hour (of paused time, so at
/// once): a regression fails instead of hanging.
async fn bounded<F: std::future::Future>(work: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(3600), work)
        .await
        .expect("ran for an hour: the deadline did not end it")
}

/// The stage of a timeout, or a panic naming what came instead.
fn stage_of<T: std::fmt::Debug>(outcome: Result<T, Error>) -> (Stage, Error) {
    match outcome {
        Err(error) => match error.timeout_stage() {
            Some(stage) => (stage.clone(), error),
            None => panic!("a timeout expected, got {error}"),
        },
        Ok(outcome) => panic!("a timeout expected, got {outcome:?}"),
    }
}

/// Sets its flag when dropped: a future holding it was cancelled.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A resolver that never returns, and the flag its dropped future sets.
fn resolver_never_returning() -> (InputMode, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let input = InputMode::resolver(move |_| {
        let guard = DropFlag(flag.clone());
        async move {
            let _guard = guard;
            std::future::pending::<Result<InputResponses, mcp_tasks::client::InputError>>().await
        }
    });
    (input, dropped)
}

/// A resolver that takes `pause` to answer every form with a name.
fn slow_resolver(pause: Duration) -> InputMode {
    InputMode::resolver(move |requests| async move {
        tokio::time::sleep(pause).await;
        let mut responses = InputResponses::new();
        for key in requests.keys() {
            responses.insert(
                key.clone(),
                json!({"action": "accept", "content": {"name": "Ada"}}),
            );
        }
        Ok(responses)
    })
}

fn within(deadline: Duration) -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(deadline))
}

/// A `tools/call` answer asking for input (MRTR).
fn asks_for_input() -> Reply {
    Reply::Result(json!({"resultType": "input_required",
        "inputRequests": {"who": name_form()}, "requestState": "opaque"}))
}

#[tokio::test(start_paused = true)]
async fn a_resolver_that_never_returns_is_cancelled_at_the_deadline() {
    let (client, log) = connect(
        Handler::default(),
        gets(vec![input_required("name", name_form())]),
    )
    .await;
    let (input, dropped) = resolver_never_returning();
    let start = Instant::now();
    let outcome = bounded(client.await_task(task_id(), &within(ms(2500)).with_input(input))).await;
    assert_eq!(start.elapsed(), ms(2500), "to the millisecond");
    let (stage, error) = stage_of(outcome);
    assert_eq!(
        stage,
        Stage::InputResolver {
            keys: vec!["name".into()],
            round: None
        }
    );
    assert!(dropped.load(Ordering::SeqCst), "the resolver was cancelled");
    assert_eq!(error.last_status(), Some(&TaskStatus::InputRequired));
    assert_eq!(error.task_id(), Some(&task_id()));
    let Error::Timeout { waited, .. } = &error else {
        unreachable!()
    };
    assert_eq!(*waited, ms(2500));
    assert!(
        error
            .to_string()
            .contains("the input resolver for key \"name\""),
        "{error}"
    );
    assert!(log.of("tasks/update").is_empty(), "nothing was answered");
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_never_answers_is_cancelled_at_the_deadline() {
    let handler = Handler {
        hanging: true,
        ..Handler::default()
    };
    // In a task...
    let (client, _) = connect(
        handler.clone(),
        gets(vec![input_required("name", name_form())]),
    )
    .await;
    let start = Instant::now();
    let (stage, error) = stage_of(bounded(client.await_task(task_id(), &within(ms(1200)))).await);
    assert_eq!(start.elapsed(), ms(1200));
    assert_eq!(
        stage,
        Stage::InputHandler {
            key: "name".into(),
            round: None
        }
    );
    assert_eq!(error.last_status(), Some(&TaskStatus::InputRequired));
    // ...and in an MRTR round, before any task exists.
    let (client, _) = connect(handler, |_, _| asks_for_input()).await;
    let start = Instant::now();
    let outcome =
        bounded(client.call_and_await("greet", (), CallOptions::default(), &within(ms(900)))).await;
    assert_eq!(start.elapsed(), ms(900));
    let (stage, error) = stage_of(outcome);
    assert_eq!(
        stage,
        Stage::InputHandler {
            key: "who".into(),
            round: Some(1)
        }
    );
    assert_eq!(error.task_id(), None, "no task yet");
    assert!(error.task_state().is_none());
}

#[tokio::test(start_paused = true)]
async fn mrtr_rounds_that_never_end_stop_at_the_deadline() {
    let (client, log) = connect(Handler::default(), |_, _| asks_for_input()).await;
    let options = within(ms(1000))
        .with_mrtr_max_rounds(1000)
        .with_input(slow_resolver(ms(300)));
    let start = Instant::now();
    let outcome =
        bounded(client.call_and_await("greet", (), CallOptions::default(), &options)).await;
    assert_eq!(start.elapsed(), ms(1000), "not at the end of a round");
    let (stage, error) = stage_of(outcome);
    // Rounds at 0, 300, 600 and 900 ms; the resolver of the fourth is cut off.
    assert_eq!(
        stage,
        Stage::InputResolver {
            keys: vec!["who".into()],
            round: Some(4)
        }
    );
    assert_eq!(log.of("tools/call").len(), 4);
    assert!(
        error.to_string().contains("(asked by tools/call round 4)"),
        "{error}"
    );

    // start_tool, which `mcp-tasks call --no-wait` runs, is bounded the same way.
    let (client, _) = connect(Handler::default(), |_, _| asks_for_input()).await;
    let start = Instant::now();
    let outcome = bounded(client.start_tool("greet", (), CallOptions::default(), &options)).await;
    assert_eq!(start.elapsed(), ms(1000));
    assert!(matches!(
        stage_of(outcome).0,
        Stage::InputResolver { round: Some(4), .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_server_that_stops_answering_mid_round_ends_at_the_deadline() {
    let mut calls = 0;
    let (client, log) = connect(Handler::default(), move |method, _| match method {
        "tools/call" => {
            calls += 1;
            if calls == 1 {
                asks_for_input()
            } else {
                Reply::Silence
            }
        }
        _ => Reply::Silence,
    })
    .await;
    // The call's own timeout (60 s) is longer: the deadline cuts it.
    let options = within(ms(5000)).with_input(slow_resolver(ms(200)));
    let start = Instant::now();
    let outcome =
        bounded(client.call_and_await("greet", (), CallOptions::default(), &options)).await;
    assert_eq!(start.elapsed(), ms(5000));
    let (stage, error) = stage_of(outcome);
    assert_eq!(stage, Stage::Call { round: 2 });
    assert!(
        error.to_string().contains("during tools/call round 2"),
        "{error}"
    );
    let calls = log.of("tools/call");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].at - start, ms(200), "after the resolver");

    // A first call that is never answered.
    let (client, _) = connect(Handler::default(), |_, _| Reply::Silence).await;
    let start = Instant::now();
    let outcome =
        bounded(client.start_tool("greet", (), CallOptions::default(), &within(ms(700)))).await;
    assert_eq!(start.elapsed(), ms(700));
    assert_eq!(stage_of(outcome).0, Stage::Call { round: 1 });
}

#[tokio::test(start_paused = true)]
async fn a_server_that_stops_answering_mid_wait_ends_at_the_deadline() {
    let mut polls = 0;
    let (client, _) = connect(Handler::default(), move |method, _| match method {
        "tasks/get" => {
            polls += 1;
            if polls == 1 {
                got("working", json!({}))
            } else {
                Reply::Silence
            }
        }
        _ => Reply::Silence,
    })
    .await;
    let start = Instant::now();
    let outcome = bounded(client.await_task(task_id(), &within(ms(2500)))).await;
    // Read at 0, then a tasks/get at 1 s that is never answered.
    assert_eq!(start.elapsed(), ms(2500));
    let (stage, error) = stage_of(outcome);
    assert_eq!(
        stage,
        Stage::Request {
            method: "tasks/get"
        }
    );
    assert_eq!(error.last_status(), Some(&TaskStatus::Working));
}

#[tokio::test(start_paused = true)]
async fn call_and_await_has_one_deadline_for_the_rounds_and_the_wait() {
    let mut calls = 0;
    let (client, _) = connect(Handler::default(), move |method, _| match method {
        "tools/call" => {
            calls += 1;
            if calls == 1 {
                asks_for_input()
            } else {
                created(json!({}))
            }
        }
        "tasks/get" => got("working", json!({})),
        _ => Reply::Silence,
    })
    .await;
    let options = within(ms(2500)).with_input(slow_resolver(ms(400)));
    let start = Instant::now();
    let outcome =
        bounded(client.call_and_await("greet", (), CallOptions::default(), &options)).await;
    assert_eq!(
        start.elapsed(),
        ms(2500),
        "the wait does not start a deadline of its own"
    );
    let (stage, error) = stage_of(outcome);
    assert_eq!(stage, Stage::Pause);
    assert_eq!(error.task_id(), Some(&task_id()));
    assert_eq!(error.last_status(), Some(&TaskStatus::Working));
}

/// A journal whose writes never end, as told; a memory journal otherwise.
#[derive(Default)]
struct StuckJournal {
    memory: MemoryJournal,
    records: bool,
    updates: bool,
}

impl Journal for StuckJournal {
    fn record(&self, task: &TaskRef) -> BoxFuture<'_, Result<(), JournalError>> {
        if self.records {
            return Box::pin(std::future::pending());
        }
        self.memory.record(task)
    }

    fn update(
        &self,
        server: &ServerRef,
        id: &TaskId,
        status: &TaskStatus,
        ttl: Option<Ttl>,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        if self.updates {
            return Box::pin(std::future::pending());
        }
        self.memory.update(server, id, status, ttl, at)
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<TaskRef>, JournalError>> {
        self.memory.list()
    }

    fn remove(&self, server: &ServerRef, id: &TaskId) -> BoxFuture<'_, Result<(), JournalError>> {
        self.memory.remove(server, id)
    }

    fn prune(&self, now: UnixMillis) -> BoxFuture<'_, Result<usize, JournalError>> {
        self.memory.prune(now)
    }
}

fn server_ref() -> ServerRef {
    ServerRef::Stdio("scripted".into())
}

#[tokio::test(start_paused = true)]
async fn a_journal_that_never_writes_ends_at_the_deadline() {
    let done = get_value("completed", json!({"result": text_result("done")}));
    // The statuses of the wait: the outcome is in the error's last state.
    let (client, _) = connect(Handler::default(), gets(vec![done.clone()])).await;
    let stuck = StuckJournal {
        updates: true,
        ..StuckJournal::default()
    };
    let client = client.with_journal(Arc::new(stuck), server_ref());
    let start = Instant::now();
    let (stage, error) = stage_of(bounded(client.await_task(task_id(), &within(ms(1500)))).await);
    assert_eq!(start.elapsed(), ms(1500));
    assert_eq!(stage, Stage::Journal);
    let last = error.task_state().expect("the final state");
    assert!(matches!(last.outcome(), Ok(TaskOutcome::Completed(_))));

    // The record of a task just created: the error names the task.
    let (client, _) = connect(Handler::default(), gets(vec![done])).await;
    let stuck = StuckJournal {
        records: true,
        ..StuckJournal::default()
    };
    let client = client.with_journal(Arc::new(stuck), server_ref());
    let start = Instant::now();
    let outcome =
        bounded(client.call_and_await("slow", (), CallOptions::default(), &within(ms(800)))).await;
    assert_eq!(start.elapsed(), ms(800));
    let (stage, error) = stage_of(outcome);
    assert_eq!(stage, Stage::Journal);
    assert_eq!(error.task_id(), Some(&task_id()));
    assert_eq!(error.last_status(), Some(&TaskStatus::Working));
}

/// What a hostile server writes instead of an answer.
const GARBAGE: &str = "<html>surprise</html>";

fn answers_garbage(method: &str, _: &Value) -> Reply {
    match method {
        "tools/call" => created(json!({})),
        "tasks/get" => Reply::Lines(vec![GARBAGE.into()]),
        _ => ack(),
    }
}

#[tokio::test(start_paused = true)]
async fn garbage_on_stdio_ends_the_wait_with_a_protocol_error_without_a_deadline() {
    let (client, log) = connect_checked(Handler::default(), answers_garbage).await;
    let CallResponse::Task(state) = client
        .call_tool("t", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("a task")
    };
    let start = Instant::now();
    let outcome =
        bounded(client.await_task(&state, &AwaitOptions::default().with_deadline(None))).await;
    let Err(Error::Protocol {
        violation: ProtocolViolation::UnusableAnswers { method, attempts },
        ..
    }) = &outcome
    else {
        panic!("a protocol error expected, got {outcome:?}")
    };
    assert_eq!((*method, *attempts), ("tasks/get", 3));
    // At the task's interval (1 s), never faster.
    assert_eq!(
        log.gaps("tasks/get", start),
        vec![ms(1000), ms(1000), ms(1000)]
    );
    assert_eq!(start.elapsed(), ms(3000));
}

#[tokio::test(start_paused = true)]
async fn without_a_line_check_garbage_is_silence_until_the_deadline() {
    let (client, log) = connect(Handler::default(), answers_garbage).await;
    let start = Instant::now();
    let outcome = bounded(client.await_task(
        task_id(),
        &within(ms(5000)).with_request_timeout(ms(10_000)),
    ))
    .await;
    assert_eq!(start.elapsed(), ms(5000));
    assert_eq!(
        stage_of(outcome).0,
        Stage::Request {
            method: "tasks/get"
        }
    );
    assert_eq!(log.of("tasks/get").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stray_line_before_an_answer_ends_neither_a_call_nor_a_poll() {
    let answer =
        |result: Value| json!({"jsonrpc": "2.0", "id": "$id", "result": result}).to_string();
    let stray = "Starting the tool...".to_owned();
    let created_line = answer(json!({"resultType": "task", "taskId": "task-secret-1",
        "status": "working", "ttlMs": null, "pollIntervalMs": 100}));
    let working = answer(get_value("working", json!({"pollIntervalMs": 100})));
    let done = answer(get_value(
        "completed",
        json!({"result": text_result("done")}),
    ));
    let mut polls = 0;
    let (client, log) = connect_checked(Handler::default(), move |method, _| match method {
        // A tool that prints to stdout before its answer.
        "tools/call" => Reply::Lines(vec![stray.clone(), created_line.replace("\"$id\"", "$id")]),
        "tasks/get" => {
            polls += 1;
            let line = if polls == 1 { &working } else { &done };
            Reply::Lines(vec![stray.clone(), line.replace("\"$id\"", "$id")])
        }
        _ => ack(),
    })
    .await;
    let outcome =
        bounded(client.call_and_await("t", (), CallOptions::default(), &within(ms(10_000))))
            .await
            .expect("completed");
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    assert_eq!(log.of("tools/call").len(), 1, "the call is not sent again");
    // The answer right behind each stray line was read with it and won:
    // no poll was lost to them.
    assert_eq!(log.of("tasks/get").len(), 2);
}
