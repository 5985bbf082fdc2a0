//! The steps a caller can take on its own, against the scripted server:
//! start a tool without waiting, cancel and wait for the task to settle,
//! and the retries and time limits every request of a wait gets.

use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, Error, TaskOutcome, TaskStatus};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Handler;
use crate::support::scripted::{
    Reply, ack, connect, created, get_value, got, input_required, ms, name_form, task_id,
    text_result,
};

#[tokio::test(start_paused = true)]
async fn start_tool_runs_the_mrtr_rounds_and_returns_the_task_without_polling() {
    let mut calls = 0;
    let (client, log) = connect(Handler::default(), move |method, _| match method {
        "tools/call" => {
            calls += 1;
            if calls == 1 {
                Reply::Result(json!({"resultType": "input_required",
                    "inputRequests": {"who": name_form()}}))
            } else {
                created(json!({}))
            }
        }
        _ => Reply::Silence,
    })
    .await;
    let started = client
        .start_tool("t", (), CallOptions::default(), &AwaitOptions::default())
        .await
        .unwrap();
    let CallResponse::Task(state) = started else {
        panic!("a task: {started:?}")
    };
    assert_eq!(state.id, task_id());
    assert_eq!(
        log.of("tools/call").len(),
        2,
        "one MRTR round, then the task"
    );
    assert!(log.of("tasks/get").is_empty(), "no poll");
}

#[tokio::test(start_paused = true)]
async fn cancel_and_wait_returns_the_settled_outcome() {
    let mut polls = 0;
    let (client, log) = connect(Handler::default(), move |method, _| match method {
        "tasks/cancel" => ack(),
        "tasks/get" => {
            polls += 1;
            if polls < 6 {
                got("working", json!({"pollIntervalMs": 200}))
            } else {
                got("cancelled", json!({}))
            }
        }
        _ => Reply::Silence,
    })
    .await;
    let start = Instant::now();
    let outcome = client
        .cancel_and_wait(&task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    assert_eq!(log.of("tasks/cancel").len(), 1);
    // From the minimum interval, doubling, up to the server's.
    assert_eq!(
        log.gaps("tasks/get", start),
        vec![ms(0), ms(50), ms(100), ms(200), ms(200), ms(200)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancel_settles_in_moments_against_a_server_suggesting_a_minute() {
    let mut polls = 0;
    let (client, log) = connect(Handler::default(), move |method, _| match method {
        "tasks/cancel" => ack(),
        "tasks/get" => {
            polls += 1;
            if polls < 4 {
                got("working", json!({"pollIntervalMs": 60_000}))
            } else {
                got("cancelled", json!({}))
            }
        }
        _ => Reply::Silence,
    })
    .await;
    let start = Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(ms(5000)));
    let outcome = client.cancel_and_wait(&task_id(), &options).await.unwrap();
    assert_eq!(outcome.status(), TaskStatus::Cancelled);
    assert_eq!(start.elapsed(), ms(350), "0 + 50 + 100 + 200 ms");
    assert_eq!(log.of("tasks/get").len(), 4);
}

#[tokio::test(start_paused = true)]
async fn cancel_and_wait_returns_the_result_of_a_task_that_finished_first() {
    let (client, _) = connect(Handler::default(), |method, _| match method {
        "tasks/cancel" => ack(),
        "tasks/get" => got("completed", json!({"result": text_result("done first")})),
        _ => Reply::Silence,
    })
    .await;
    let outcome = client
        .cancel_and_wait(&task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    // The same outcome call_and_await gives.
    assert_eq!(outcome.into_text().unwrap(), "done first");
}

#[tokio::test(start_paused = true)]
async fn cancel_and_wait_gives_up_on_a_finished_task_without_its_payload() {
    let (client, log) = connect(Handler::default(), |method, _| match method {
        "tasks/cancel" => ack(),
        "tasks/get" => got("completed", json!({})),
        _ => Reply::Silence,
    })
    .await;
    let error = client
        .cancel_and_wait(&task_id(), &AwaitOptions::default())
        .await
        .unwrap_err();
    assert!(error.is_protocol(), "{error}");
    assert_eq!(log.of("tasks/get").len(), 3, "read a few times first");
}

#[tokio::test(start_paused = true)]
async fn cancel_and_wait_gives_up_at_the_deadline_with_the_last_state() {
    let (client, _) = connect(Handler::default(), |method, _| match method {
        "tasks/cancel" => ack(),
        "tasks/get" => got(
            "working",
            json!({"pollIntervalMs": 400, "statusMessage": "cleaning up"}),
        ),
        _ => Reply::Silence,
    })
    .await;
    let start = Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(ms(1000)));
    let error = client
        .cancel_and_wait(&task_id(), &options)
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert_eq!(start.elapsed(), ms(1000));
    let last = error.task_state().expect("the last state read");
    assert_eq!(last.status, TaskStatus::Working);
    assert_eq!(last.status_message.as_deref(), Some("cleaning up"));
}

/// A script whose first `tasks/update` never gets an answer.
fn update_lost_once() -> impl FnMut(&str, &Value) -> Reply + Send + 'static {
    let mut updates = 0;
    let mut gets = 0;
    move |method, _| match method {
        "tasks/update" => {
            updates += 1;
            if updates == 1 { Reply::Silence } else { ack() }
        }
        "tasks/get" => {
            gets += 1;
            if gets == 1 {
                Reply::Result(input_required("name", name_form()))
            } else {
                Reply::Result(get_value("completed", json!({"result": text_result("ok")})))
            }
        }
        _ => Reply::Silence,
    }
}

#[tokio::test(start_paused = true)]
async fn an_update_that_gets_no_answer_is_retried_inside_the_wait() {
    let (client, log) = connect(Handler::default(), update_lost_once()).await;
    let options = AwaitOptions::default().with_request_timeout(ms(1000));
    let outcome = client.await_task(task_id(), &options).await.unwrap();
    assert!(matches!(outcome, mcp_tasks::TaskOutcome::Completed(_)));
    let updates = log.of("tasks/update");
    assert_eq!(updates.len(), 2, "the lost update was sent again");
    // The request timeout, then the first backoff.
    assert_eq!(updates[1].at - updates[0].at, ms(1100));
    assert_eq!(
        updates[0].params()["inputResponses"],
        updates[1].params()["inputResponses"],
        "the same answers"
    );
}

#[tokio::test(start_paused = true)]
async fn an_update_gets_the_time_left_so_the_wait_ends_at_its_deadline() {
    let (client, log) = connect(Handler::default(), update_lost_once()).await;
    let start = Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(ms(700)));
    let error = client.await_task(task_id(), &options).await.unwrap_err();
    let Error::Timeout { waited, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*waited, ms(700));
    assert_eq!(
        start.elapsed(),
        ms(700),
        "no part of the wait outlives its deadline"
    );
    assert_eq!(log.of("tasks/update").len(), 1);
    assert_eq!(error.last_status(), Some(&TaskStatus::InputRequired));
}
