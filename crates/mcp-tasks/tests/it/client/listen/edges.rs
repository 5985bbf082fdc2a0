//! The client's listen mode against a scripted server, under a paused
//! clock: what it sends, and how it falls back to polling (or fails, when
//! it must listen) on every way a stream can let it down.

use std::time::Duration;

use mcp_tasks::{AwaitOptions, Error, ListenMode, TaskOutcome};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::Handler;
use crate::support::schema::check_request;
use crate::support::scripted::{
    Reply, ack, connect_listening, created, get_value, input_required, ms, name_form, task,
    text_result,
};

/// The acknowledgement of a listen request, covering `task_ids`.
fn acknowledged(task_ids: &[&str]) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
        "_meta": {"io.modelcontextprotocol/subscriptionId": "$id"},
        "notifications": {"taskIds": task_ids}}})
}

/// A `notifications/tasks` with the state `status` and `extra`.
fn notification(status: &str, extra: Value) -> Value {
    let mut params = task(status, extra);
    params["_meta"] = json!({"io.modelcontextprotocol/subscriptionId": "$id"});
    json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
}

/// The listen result that ends a stream.
fn listen_result() -> Value {
    json!({"jsonrpc": "2.0", "id": "$id", "result": {"resultType": "complete",
        "_meta": {"io.modelcontextprotocol/subscriptionId": "$id"}}})
}

fn completed() -> Value {
    get_value("completed", json!({"result": text_result("done")}))
}

fn working() -> Value {
    get_value("working", json!({}))
}

/// A script: `listen` answers `subscriptions/listen`; `tasks/get` answers
/// from `gets`, repeating the last.
fn script(
    listen: impl Fn() -> Reply + Send + 'static,
    gets: Vec<Value>,
) -> impl FnMut(&str, &Value) -> Reply + Send + 'static {
    let mut n = 0;
    move |method, _| match method {
        "subscriptions/listen" => listen(),
        "tasks/get" => {
            let reply = gets[n.min(gets.len() - 1)].clone();
            n += 1;
            Reply::Result(reply)
        }
        "tasks/update" | "tasks/cancel" => ack(),
        "tools/call" => created(json!({})),
        _ => Reply::Error(json!({"code": -32601, "message": "Method not found"})),
    }
}

fn seed() -> mcp_tasks::TaskState {
    mcp_tasks::TaskState::from_json(task("working", json!({}))).unwrap()
}

fn options(mode: ListenMode) -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(60)))
        .with_request_timeout(Duration::from_secs(2))
        .with_listen(mode)
}

#[tokio::test(start_paused = true)]
async fn the_listen_request_names_the_task_and_declares_the_extension() {
    let (client, log) = connect_listening(
        Handler::default(),
        script(
            || {
                Reply::Notify(vec![
                    acknowledged(&["task-secret-1"]),
                    notification("completed", json!({"result": text_result("heard")})),
                ])
            },
            vec![working()],
        ),
    )
    .await;
    let outcome = client
        .await_task(&seed(), &options(ListenMode::Required))
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result.content[0].as_text().unwrap().text, "heard");
    let listens = log.of("subscriptions/listen");
    assert_eq!(listens.len(), 1);
    let request = &listens[0].message;
    check_request(request).unwrap();
    assert_eq!(
        request["params"]["notifications"],
        json!({"taskIds": ["task-secret-1"]})
    );
    let meta = &request["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(
        meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some()
    );
    // One tasks/get after the acknowledgement, then the notification.
    assert_eq!(log.of("tasks/get").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_acknowledgement_without_the_task_falls_back_or_fails() {
    let listen = || Reply::Notify(vec![acknowledged(&[]), listen_result()]);
    let (client, log) = connect_listening(
        Handler::default(),
        script(listen, vec![working(), completed()]),
    )
    .await;
    let started = Instant::now();
    let outcome = client
        .await_task(&seed(), &options(ListenMode::Auto))
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    // Polled as usual: the first poll one interval after the start.
    assert_eq!(log.gaps("tasks/get", started), vec![ms(1000), ms(1000)]);

    let (client, _) = connect_listening(Handler::default(), script(listen, vec![working()])).await;
    let error = client
        .await_task(&seed(), &options(ListenMode::Required))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::ListenDeclined), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_refused_listen_is_polled_unless_listening_is_required() {
    let refuse = || Reply::Error(json!({"code": -32601, "message": "Method not found"}));
    let (client, log) =
        connect_listening(Handler::default(), script(refuse, vec![completed()])).await;
    let outcome = client
        .await_task(&seed(), &options(ListenMode::Auto))
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    assert_eq!(log.of("subscriptions/listen").len(), 1);

    let (client, _) =
        connect_listening(Handler::default(), script(refuse, vec![completed()])).await;
    let error = client
        .await_task(&seed(), &options(ListenMode::Required))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32601), "{error}");
    assert!(
        error.to_string().contains("subscriptions/listen"),
        "{error}"
    );

    // A wait that polls never asks.
    let (client, log) =
        connect_listening(Handler::default(), script(refuse, vec![completed()])).await;
    client
        .await_task(&seed(), &options(ListenMode::Poll))
        .await
        .unwrap();
    assert!(log.of("subscriptions/listen").is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_acknowledgement_is_bounded_by_the_request_timeout_and_the_deadline() {
    // No acknowledgement within the 2 s request timeout: poll.
    let (client, log) = connect_listening(
        Handler::default(),
        script(|| Reply::Silence, vec![completed()]),
    )
    .await;
    let started = Instant::now();
    client
        .await_task(&seed(), &options(ListenMode::Required))
        .await
        .unwrap();
    assert_eq!(
        log.gaps("tasks/get", started),
        vec![ms(3000)],
        "2 s, then one interval"
    );

    // A deadline before the request timeout ends the wait at the deadline.
    let (client, log) = connect_listening(
        Handler::default(),
        script(|| Reply::Silence, vec![completed()]),
    )
    .await;
    let started = Instant::now();
    let error = client
        .await_task(
            &seed(),
            &options(ListenMode::Auto).with_deadline(Some(Duration::from_millis(1500))),
        )
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert_eq!(started.elapsed(), ms(1500));
    assert!(log.of("tasks/get").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_quiet_stream_waits_until_the_deadline() {
    let (client, log) = connect_listening(
        Handler::default(),
        script(
            || Reply::Notify(vec![acknowledged(&["task-secret-1"])]),
            vec![working()],
        ),
    )
    .await;
    let started = Instant::now();
    let error = client
        .await_task(
            &seed(),
            &options(ListenMode::Required).with_deadline(Some(Duration::from_secs(30))),
        )
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert_eq!(log.of("tasks/get").len(), 1, "no polls while listening");
}

#[tokio::test(start_paused = true)]
async fn stall_detection_counts_quiet_intervals_as_polls() {
    // Asked for a name, answered, and then nothing: stalled after 5
    // intervals of 100 ms, as polling would be.
    let (client, log) = connect_listening(
        Handler::default(),
        script(
            || Reply::Notify(vec![acknowledged(&["task-secret-1"])]),
            vec![input_required("name", name_form())],
        ),
    )
    .await;
    let started = Instant::now();
    let error = client
        .await_task(
            &seed(),
            &options(ListenMode::Required).with_stall_detection(5, false),
        )
        .await
        .unwrap_err();
    let Error::Stalled { polls, .. } = error else {
        panic!("{error}")
    };
    assert_eq!(polls, 5);
    assert_eq!(log.of("tasks/update").len(), 1, "answered once");
    assert_eq!(log.of("tasks/get").len(), 1);
    // The stream opens at the first pause; then five quiet intervals.
    assert_eq!(started.elapsed(), ms(500));
}

#[tokio::test(start_paused = true)]
async fn lost_events_and_an_early_end_fall_back_to_polling() {
    // A burst the client cannot take in: the stream lags.
    let burst = || {
        let mut messages = vec![acknowledged(&["task-secret-1"])];
        for n in 0..200 {
            messages.push(notification(
                "working",
                json!({"statusMessage": format!("{n}")}),
            ));
        }
        Reply::Notify(messages)
    };
    let (client, log) = connect_listening(
        Handler::default(),
        script(burst, vec![working(), completed()]),
    )
    .await;
    let outcome = client
        .await_task(&seed(), &options(ListenMode::Required))
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    assert_eq!(
        log.of("tasks/get").len(),
        2,
        "read after the ack, then after the gap"
    );

    // The server ends the stream before the task ends: polled from then on.
    let ended = || Reply::Notify(vec![acknowledged(&["task-secret-1"]), listen_result()]);
    let (client, log) = connect_listening(
        Handler::default(),
        script(ended, vec![working(), working(), completed()]),
    )
    .await;
    let started = Instant::now();
    client
        .await_task(&seed(), &options(ListenMode::Required))
        .await
        .unwrap();
    let gaps = log.gaps("tasks/get", started);
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    assert_eq!(gaps[2], ms(1000), "polling at the interval: {gaps:?}");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_wait_ends_the_stream() {
    let (client, log) = connect_listening(
        Handler::default(),
        script(
            || Reply::Notify(vec![acknowledged(&["task-secret-1"])]),
            vec![working()],
        ),
    )
    .await;
    let (seed, options) = (seed(), options(ListenMode::Required));
    let waiting = client.await_task(&seed, &options);
    let _ = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    tokio::time::sleep(ms(10)).await;
    let listen_id = log.of("subscriptions/listen")[0].message["id"].clone();
    let cancelled = log.of("notifications/cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0].params()["requestId"], listen_id);
}
