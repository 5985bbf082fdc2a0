//! The client against the scripted server: every item of the await, the
//! input loop and the error model, with waits under a paused clock.

use std::sync::{Arc, Mutex};

use mcp_tasks::client::{InputKind, Unanswered};
use mcp_tasks::error::{ProtocolViolation, Stage};
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, Era, Error, InputMode, TaskId, TaskOutcome, TaskStatus,
};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::schema::check_request;
use crate::support::scripted::{
    Reply, ack, connect, connect_with, created, discover_result, get_value, gets, got,
    input_required, ms, name_form, task_id, text_result,
};
use crate::support::{Handler, TASKS};

/// `wait`, or a failed test after an hour of paused time (at once): for the
/// waits without a deadline, so that a regression fails instead of hanging.
async fn hour<F: std::future::Future>(wait: F) -> F::Output {
    tokio::time::timeout(std::time::Duration::from_secs(3600), wait)
        .await
        .expect("the wait did not end on its own")
}

#[tokio::test(start_paused = true)]
async fn every_tasks_request_declares_the_extension_and_nothing_else_does() {
    let (client, log) = connect(
        Handler::default(),
        gets(vec![get_value("working", json!({}))]),
    )
    .await;
    assert!(client.server_supports());
    let CallResponse::Task(state) = client
        .call_tool(
            "slow",
            (),
            CallOptions::default().with_meta("traceparent", json!("00-abc")),
        )
        .await
        .unwrap()
    else {
        panic!("expected a task");
    };
    client.get(&state.id).await.unwrap();
    client
        .update(
            &state.id,
            [("k".to_owned(), json!({"action": "decline"}))].into(),
        )
        .await
        .unwrap();
    client.cancel(&state.id).await.unwrap();
    client.running().list_tools(None).await.ok();

    for method in ["tools/call", "tasks/get", "tasks/update", "tasks/cancel"] {
        let request = &log.of(method)[0];
        let meta = &request.params()["_meta"];
        let caps = &meta["io.modelcontextprotocol/clientCapabilities"];
        assert_eq!(caps["extensions"][TASKS], json!({}), "{method}");
        // On top of the client's own capabilities.
        assert!(caps.get("elicitation").is_some(), "{method}: {caps}");
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        check_request(&request.message).unwrap_or_else(|e| panic!("{method}: {e}"));
    }
    assert_eq!(
        log.of("tools/call")[0].params()["_meta"]["traceparent"],
        "00-abc"
    );
    assert_eq!(log.of("tasks/get")[0].params()["taskId"], "task-secret-1");
    // A `tools/call` also asks for a task finished at once to come with its
    // outcome; nothing else does.
    let outcome = mcp_tasks::CREATED_OUTCOME_EXTENSION;
    for method in ["tools/call", "tasks/get", "tasks/update", "tasks/cancel"] {
        let request = &log.of(method)[0];
        let caps = &request.params()["_meta"]["io.modelcontextprotocol/clientCapabilities"];
        let declared = caps["extensions"].get(outcome);
        assert_eq!(
            declared,
            (method == "tools/call").then_some(&json!({})),
            "{method}"
        );
    }
    let listed = &log.of("tools/list")[0];
    let caps = &listed.params()["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(
        caps.get("extensions").is_none(),
        "tools/list must not declare: {caps}"
    );
}

#[tokio::test(start_paused = true)]
async fn caller_meta_wins_and_declaring_can_be_turned_off() {
    let (client, log) = connect(Handler::default(), |_, _| Reply::Result(text_result("ok"))).await;
    let own = json!({"sampling": {}});
    client
        .call_tool(
            "t",
            (),
            CallOptions::default()
                .with_meta("io.modelcontextprotocol/clientCapabilities", own.clone()),
        )
        .await
        .unwrap();
    client
        .call_tool("t", (), CallOptions::default().with_declare_tasks(false))
        .await
        .unwrap();
    let calls = log.of("tools/call");
    assert_eq!(
        calls[0].params()["_meta"]["io.modelcontextprotocol/clientCapabilities"],
        own
    );
    let caps = &calls[1].params()["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(caps.get("extensions").is_none());
    assert!(caps.get("elicitation").is_some());
}

#[tokio::test(start_paused = true)]
async fn server_support_follows_discover() {
    let (client, _) = connect_with(Handler::default(), discover_result(false), |_, _| {
        Reply::Silence
    })
    .await;
    assert!(!client.server_supports());
    // A server reached with initialize that advertises the extension there
    // (as rmcp's TaskManager servers do) supports it on that connection;
    // one that does not is a 2025-11-25 server.
    for (extensions, supports, era) in [
        (json!({TASKS: {}}), true, Era::Extension),
        (json!({}), false, Era::Legacy),
    ] {
        let (client, log) =
            connect_with(
                Handler::default(),
                Value::Null,
                move |method, _| match method {
                    "initialize" => Reply::Result(json!({"protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}, "extensions": extensions.clone()},
                    "serverInfo": {"name": "initialize", "version": "0"}})),
                    _ => Reply::Silence,
                },
            )
            .await;
        assert_eq!(log.of("initialize").len(), 1);
        assert_eq!(client.server_supports(), supports);
        assert_eq!(client.era(), era);
    }
}

#[tokio::test(start_paused = true)]
async fn call_tool_returns_a_task_a_result_or_an_input_request() {
    let replies = Arc::new(Mutex::new(vec![
        created(json!({"pollIntervalMs": 5000.0, "ttlMs": null})),
        Reply::Result(json!({"resultType": "complete", "content": [], "isError": true})),
        Reply::Result(
            json!({"resultType": "input_required", "inputRequests": {"n": name_form()}, "requestState": "s"}),
        ),
        Reply::Result(json!({"resultType": "eventually", "x": 1})),
        Reply::Result(json!({"resultType": "task", "status": "working"})),
        Reply::Result(
            json!({"resultType": "task", "taskId": "a", "status": "working", "pollIntervalMs": {"x": 1}}),
        ),
    ]));
    let script = {
        let replies = replies.clone();
        move |_: &str, _: &Value| replies.lock().unwrap().remove(0)
    };
    let (client, _) = connect(Handler::default(), script).await;
    let call = || client.call_tool("t", (), CallOptions::default());
    let CallResponse::Task(state) = call().await.unwrap() else {
        panic!("task")
    };
    assert_eq!(state.poll_interval, Some(ms(5000)));
    assert_eq!(state.ttl, Some(mcp_tasks::Ttl::Unlimited));
    let CallResponse::Complete(result) = call().await.unwrap() else {
        panic!("complete")
    };
    assert_eq!(result.is_error, Some(true));
    let CallResponse::InputRequired(input) = call().await.unwrap() else {
        panic!("input")
    };
    assert_eq!(input.request_state.as_deref(), Some("s"));
    let error = call().await.unwrap_err();
    assert!(
        matches!(&error, Error::Protocol { violation: ProtocolViolation::UnknownResultType(t), .. } if t == "eventually"),
        "{error}"
    );
    assert!(call().await.unwrap_err().is_protocol());
    // A malformed optional field is read as absent, not a failure.
    let CallResponse::Task(state) = call().await.unwrap() else {
        panic!("task")
    };
    assert_eq!(state.poll_interval, None);
}

#[tokio::test(start_paused = true)]
async fn get_update_cancel_errors_are_typed() {
    let (client, log) = connect(Handler::default(), |method, params| {
        match (method, params["taskId"].as_str()) {
            (_, Some("gone")) => Reply::Error(json!({"code": -32602, "message": "Task not found"})),
            ("tasks/get", Some("odd")) => {
                Reply::Result(json!({"resultType": "complete", "content": []}))
            }
            ("tasks/get", Some("made")) => created(json!({})),
            ("tasks/get", _) => got("completed", json!({"result": text_result("done")})),
            ("tasks/cancel", _) => ack(),
            _ => Reply::Silence,
        }
    })
    .await;
    for error in [
        client.get(&"gone".into()).await.unwrap_err(),
        client
            .update(&"gone".into(), Default::default())
            .await
            .unwrap_err(),
        client.cancel(&"gone".into()).await.unwrap_err(),
    ] {
        assert!(error.is_unknown_task(), "{error}");
        assert_eq!(error.code(), Some(-32602));
    }
    let odd = client.get(&"odd".into()).await.unwrap_err();
    assert!(odd.is_protocol());
    assert_eq!(odd.payload().unwrap()["content"], json!([]));
    let made = client.get(&"made".into()).await.unwrap_err();
    assert!(matches!(
        made,
        Error::Protocol {
            violation: ProtocolViolation::UnexpectedTask,
            ..
        }
    ));
    // Cancelling a finished task succeeds and changes nothing.
    let id = task_id();
    client.cancel(&id).await.unwrap();
    assert_eq!(client.get(&id).await.unwrap().status, TaskStatus::Completed);
    assert_eq!(log.of("tasks/cancel").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn intervals_follow_the_server_clamped() {
    let working = |interval: Value| {
        let mut value = get_value("working", json!({}));
        match interval {
            Value::Null => {
                value.as_object_mut().unwrap().remove("pollIntervalMs");
            }
            other => value["pollIntervalMs"] = other,
        }
        value
    };
    let (client, log) = connect(
        Handler::default(),
        gets(vec![
            working(json!(0)),
            working(json!(5000.0)),
            working(json!(1_000_000_000_000u64)),
            working(json!(-3)),
            working(Value::Null),
            working(json!(250)),
            get_value("completed", json!({"result": text_result("done")})),
        ]),
    )
    .await;
    let start = Instant::now();
    // No deadline: an hour of (paused) time fails the test instead of hanging it.
    let no_deadline = AwaitOptions::default().with_deadline(None);
    let outcome = hour(client.await_task(task_id(), &no_deadline))
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    // The first get is immediate (awaiting an id), then each pause follows the previous answer.
    assert_eq!(
        log.gaps("tasks/get", start),
        vec![
            ms(0),
            ms(50),
            ms(5000),
            ms(30_000),
            ms(50),
            ms(1000),
            ms(250)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_returns_timeout_with_the_last_status() {
    let (client, log) = connect(
        Handler::default(),
        gets(vec![get_value("working", json!({}))]),
    )
    .await;
    let CallResponse::Task(state) = client
        .call_tool("slow", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("task")
    };
    let start = Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(ms(2500)));
    let error = client.await_task(&state, &options).await.unwrap_err();
    assert!(error.is_timeout(), "{error}");
    let Error::Timeout {
        waited,
        last_state,
        task_id: id,
        ..
    } = &error
    else {
        unreachable!()
    };
    assert_eq!(*waited, ms(2500));
    assert_eq!(start.elapsed(), ms(2500));
    let last = last_state.as_deref().expect("the last state read");
    assert_eq!(last.status, TaskStatus::Working);
    assert_eq!(
        last.poll_interval,
        Some(ms(1000)),
        "the whole state, not only its status"
    );
    assert_eq!(error.last_status(), Some(&TaskStatus::Working));
    assert_eq!(error.task_state().map(|state| &state.id), Some(&task_id()));
    assert_eq!(id.as_ref().map(TaskId::expose), Some("task-secret-1"));
    assert_eq!(
        error.timeout_stage(),
        Some(&Stage::Pause),
        "between two polls"
    );
    assert!(!error.to_string().contains("task-secret"), "{error}");
    // Polls at 1 s and 2 s; none at the deadline.
    assert_eq!(log.gaps("tasks/get", start), vec![ms(1000), ms(1000)]);
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_times_out_with_no_status_read() {
    let (client, log) = connect(Handler::default(), |_, _| Reply::Silence).await;
    let start = Instant::now();
    let options = AwaitOptions::default()
        .with_deadline(Some(ms(3000)))
        .with_request_timeout(ms(1000));
    let error = client.await_task(task_id(), &options).await.unwrap_err();
    let Error::Timeout {
        waited, last_state, ..
    } = error
    else {
        panic!("{error}")
    };
    assert_eq!(waited, ms(3000));
    assert!(last_state.is_none());
    // Each get times out after the per-request limit, then is retried with backoff.
    assert_eq!(
        log.gaps("tasks/get", start),
        vec![ms(0), ms(1100), ms(1200)]
    );
}

#[tokio::test(start_paused = true)]
async fn each_request_gets_the_time_left_when_that_is_shorter() {
    let (client, log) = connect(Handler::default(), |_, _| Reply::Silence).await;
    let start = Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(ms(700)));
    let error = client.await_task(task_id(), &options).await.unwrap_err();
    assert!(error.is_timeout());
    assert_eq!(start.elapsed(), ms(700));
    assert_eq!(log.of("tasks/get").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn json_rpc_errors_are_not_retried() {
    let (client, log) = connect(Handler::default(), |_, _| {
        Reply::Error(json!({"code": -32603, "message": "db down", "data": {"retry": false}}))
    })
    .await;
    let error = client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32603));
    assert_eq!(
        error.rpc_error().unwrap().data,
        Some(json!({"retry": false}))
    );
    assert_eq!(log.of("tasks/get").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_finished_state_returns_at_once_without_a_request() {
    let (client, log) = connect(Handler::default(), |_, _| Reply::Silence).await;
    let state = mcp_tasks::TaskState::from_json(get_value(
        "failed",
        json!({"error": {"code": -32000, "message": "nope", "data": [1]}}),
    ))
    .unwrap();
    let TaskOutcome::Failed(failure) = client
        .await_task(&state, &AwaitOptions::default())
        .await
        .unwrap()
    else {
        panic!("failed")
    };
    assert_eq!(
        (failure.error.code, failure.error.message.as_str()),
        (-32000, "nope")
    );
    let error = TaskOutcome::Failed(failure).into_result().unwrap_err();
    assert_eq!(error.code(), Some(-32000));
    assert_eq!(error.last_status(), Some(&TaskStatus::Failed));
    assert!(log.of("tasks/get").is_empty());
}

#[tokio::test(start_paused = true)]
async fn terminal_without_payload_is_read_at_once_and_flapping_is_followed() {
    let (client, log) = connect(
        Handler::default(),
        gets(vec![
            get_value("working", json!({"pollIntervalMs": 100})),
            get_value(
                "input_required",
                json!({"pollIntervalMs": 100, "inputRequests": {}}),
            ),
            get_value("working", json!({"pollIntervalMs": 100})),
            get_value("mystery", json!({"pollIntervalMs": 100})),
            get_value("cancelled", json!({})),
        ]),
    )
    .await;
    let seed =
        mcp_tasks::TaskState::from_json(crate::support::scripted::task("completed", json!({})))
            .unwrap();
    let start = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let options = AwaitOptions::default().with_observer({
        let seen = seen.clone();
        move |state| seen.lock().unwrap().push(state.status.to_string())
    });
    let outcome = client.await_task(seed, &options).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)));
    assert_eq!(
        log.gaps("tasks/get", start),
        vec![ms(0), ms(100), ms(100), ms(100), ms(100)]
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "completed",
            "working",
            "input_required",
            "working",
            "mystery",
            "cancelled"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn malformed_task_json_is_a_clear_error() {
    for bad in [
        json!({"resultType": "complete", "taskId": 5, "status": "working"}),
        json!({"resultType": "complete", "status": "working", "taskId": ""}),
    ] {
        let (client, _) = connect(Handler::default(), gets(vec![bad])).await;
        let error = client
            .await_task(task_id(), &AwaitOptions::default())
            .await
            .unwrap_err();
        assert!(error.is_protocol(), "{error}");
        assert!(error.to_string().contains("taskId"), "{error}");
    }
}

#[tokio::test(start_paused = true)]
async fn handlers_answer_input_once_per_key() {
    let handler = Handler::default();
    let (client, log) = connect(
        handler.clone(),
        gets(vec![
            input_required("name", name_form()),
            // Eventually consistent: the answered key is still shown once more.
            input_required("name", name_form()),
            get_value("completed", json!({"result": text_result("Hello, Ada!")})),
        ]),
    )
    .await;
    let outcome = client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    let result = outcome.into_result().unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "Hello, Ada!");
    let updates = log.of("tasks/update");
    assert_eq!(updates.len(), 1);
    assert_eq!(
        updates[0].params()["inputResponses"],
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}})
    );
    check_request(&updates[0].message).unwrap();
    assert_eq!(*handler.elicitations.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_key_issued_again_after_resuming_is_offered_again() {
    let (client, log) = connect(
        Handler::default(),
        gets(vec![
            input_required("name", name_form()),
            get_value("working", json!({"pollIntervalMs": 100})),
            input_required("name", name_form()),
            get_value("completed", json!({"result": text_result("ok")})),
        ]),
    )
    .await;
    client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    assert_eq!(log.of("tasks/update").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_kind_without_handler_or_return_mode_hands_back_the_state() {
    let sampling =
        json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}});
    let (client, log) = connect(
        Handler::default(),
        gets(vec![input_required("s", sampling)]),
    )
    .await;
    let outcome = client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    let TaskOutcome::InputRequired { state, unanswered } = outcome else {
        panic!("input required")
    };
    assert!(state.input_requests.contains_key("s"));
    assert!(log.of("tasks/update").is_empty());
    // The outcome names the handler that is missing, and for which key.
    assert_eq!(
        unanswered,
        Unanswered::MissingHandler {
            key: "s".into(),
            kind: InputKind::Sampling,
            declared: false,
        }
    );
    let error = TaskOutcome::InputRequired { state, unanswered }
        .into_result()
        .unwrap_err();
    assert_eq!(error.unanswered().and_then(Unanswered::key), Some("s"));
    let said = error_chain(&error);
    for expected in [
        "sampling/createMessage",
        "\"s\"",
        "sampling capability",
        "no resolver",
    ] {
        assert!(said.contains(expected), "{expected:?} in {said:?}");
    }

    let (client, log) = connect(
        Handler::default(),
        gets(vec![input_required("name", name_form())]),
    )
    .await;
    let options = AwaitOptions::default().with_input(InputMode::Return);
    let outcome = client.await_task(task_id(), &options).await.unwrap();
    assert_eq!(outcome.unanswered(), Some(&Unanswered::Returned));
    let error = outcome.into_result().unwrap_err();
    assert_eq!(error.last_status(), Some(&TaskStatus::InputRequired));
    assert!(log.of("tasks/update").is_empty());
}

/// A handler that declares sampling but leaves it to rmcp's default (-32601).
#[derive(Clone)]
struct DeclaresSampling;

impl rmcp::ClientHandler for DeclaresSampling {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.sampling = Some(Default::default());
        rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new("t", "0"))
    }
}

#[tokio::test(start_paused = true)]
async fn a_declared_kind_the_handler_does_not_implement_is_named_too() {
    let sampling =
        json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}});
    let (client, log) = connect_with(
        DeclaresSampling,
        discover_result(true),
        gets(vec![input_required("s", sampling.clone())]),
    )
    .await;
    let outcome = client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    let unanswered = outcome.unanswered().expect("input required");
    assert_eq!(unanswered.missing_handler(), Some(&InputKind::Sampling));
    assert!(
        unanswered
            .to_string()
            .contains("does not implement create_message"),
        "{unanswered}"
    );
    assert!(log.of("tasks/update").is_empty());

    // Before a task exists (MRTR) the same.
    let script = move |_: &str, _: &Value| {
        Reply::Result(json!({"resultType": "input_required", "inputRequests": {"q": sampling}}))
    };
    let (client, _) = connect_with(DeclaresSampling, discover_result(true), script).await;
    let outcome = client
        .call_and_await("t", (), CallOptions::default(), &AwaitOptions::default())
        .await
        .unwrap();
    let TaskOutcome::CallInputRequired { unanswered, .. } = outcome else {
        panic!("input required before the task: {outcome:?}");
    };
    assert_eq!(unanswered.key(), Some("q"));
    let error = Error::CallInputRequired { unanswered };
    assert!(error_chain(&error).contains("create_message"), "{error}");
}

/// The error and its causes, one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[tokio::test(start_paused = true)]
async fn roots_are_answered_by_the_handler_when_declared() {
    let handler = Handler {
        roots: true,
        ..Handler::default()
    };
    let (client, log) = connect(
        handler,
        gets(vec![
            input_required("r", json!({"method": "roots/list"})),
            get_value("completed", json!({"result": text_result("ok")})),
        ]),
    )
    .await;
    client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    assert_eq!(
        log.of("tasks/update")[0].params()["inputResponses"],
        json!({"r": {"roots": []}})
    );
}

#[tokio::test(start_paused = true)]
async fn a_resolver_answers_only_offered_keys() {
    let offered = Arc::new(Mutex::new(Vec::new()));
    let resolver = {
        let offered = offered.clone();
        InputMode::resolver(move |requests| {
            offered
                .lock()
                .unwrap()
                .push(requests.keys().cloned().collect::<Vec<_>>());
            async move {
                Ok([
                    (
                        "a".to_owned(),
                        json!({"action": "accept", "content": {"name": "Bo"}}),
                    ),
                    ("never-offered".to_owned(), json!({"action": "decline"})),
                ]
                .into())
            }
        })
    };
    let two = get_value(
        "input_required",
        json!({"pollIntervalMs": 100, "inputRequests": {"a": name_form(), "b": name_form()}}),
    );
    let (client, log) = connect(
        Handler::default(),
        gets(vec![
            two,
            get_value("completed", json!({"result": text_result("ok")})),
        ]),
    )
    .await;
    client
        .await_task(task_id(), &AwaitOptions::default().with_input(resolver))
        .await
        .unwrap();
    assert_eq!(
        *offered.lock().unwrap(),
        vec![vec!["a".to_owned(), "b".to_owned()]]
    );
    let updates = log.of("tasks/update");
    assert_eq!(updates.len(), 1);
    assert_eq!(
        updates[0].params()["inputResponses"],
        json!({"a": {"action": "accept", "content": {"name": "Bo"}}})
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_response_stops_the_wait_and_sends_nothing() {
    let resolver = InputMode::resolver(|_| async {
        Ok([("name".to_owned(), json!({"action": "sure"}))].into())
    });
    let (client, log) = connect(
        Handler::default(),
        gets(vec![input_required("name", name_form())]),
    )
    .await;
    let error = client
        .await_task(task_id(), &AwaitOptions::default().with_input(resolver))
        .await
        .unwrap_err();
    let Error::InvalidInputResponse { key, reason } = &error else {
        panic!("{error}")
    };
    assert_eq!(key, "name");
    assert!(reason.contains("action"), "{reason}");
    assert!(log.of("tasks/update").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stalled_input_loop_ends_and_may_cancel() {
    for cancel in [false, true] {
        let (client, log) = connect(
            Handler::default(),
            gets(vec![input_required("name", name_form())]),
        )
        .await;
        let start = Instant::now();
        let options = AwaitOptions::default()
            .with_deadline(None)
            .with_stall_detection(5, cancel);
        let error = hour(client.await_task(task_id(), &options))
            .await
            .unwrap_err();
        let Error::Stalled {
            polls, cancel_sent, ..
        } = &error
        else {
            panic!("{error}")
        };
        assert_eq!((*polls, *cancel_sent), (5, cancel));
        assert!(error.is_stalled());
        // One answer, then five polls with nothing new, 100 ms apart.
        assert_eq!(log.of("tasks/update").len(), 1);
        assert_eq!(log.of("tasks/get").len(), 6);
        assert_eq!(start.elapsed(), ms(500));
        assert_eq!(log.of("tasks/cancel").len(), usize::from(cancel));
    }
}

#[tokio::test(start_paused = true)]
async fn call_and_await_runs_mrtr_rounds_then_the_task() {
    let mut calls = 0;
    let (client, log) = connect(Handler::default(), move |method, params| match method {
        "tools/call" => {
            calls += 1;
            if calls == 1 {
                Reply::Result(json!({"resultType": "input_required",
                    "inputRequests": {"who": name_form()}, "requestState": "opaque-1"}))
            } else {
                assert_eq!(params["requestState"], "opaque-1");
                created(json!({"pollIntervalMs": 200}))
            }
        }
        "tasks/get" => got("completed", json!({"result": text_result("Hello, Ada!")})),
        _ => Reply::Silence,
    })
    .await;
    let outcome = client
        .call_and_await(
            "greet",
            (),
            CallOptions::default(),
            &AwaitOptions::default(),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    let calls = log.of("tools/call");
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].message["id"], calls[1].message["id"]);
    assert_eq!(
        calls[1].params()["inputResponses"],
        json!({"who": {"action": "accept", "content": {"name": "Ada"}}})
    );
    check_request(&calls[1].message).unwrap();
}

#[tokio::test(start_paused = true)]
async fn mrtr_rounds_are_bounded_and_can_be_handed_back() {
    let script = |_: &str, _: &Value| {
        Reply::Result(
            json!({"resultType": "input_required", "inputRequests": {"who": name_form()}}),
        )
    };
    let (client, log) = connect(Handler::default(), script).await;
    let options = AwaitOptions::default().with_mrtr_max_rounds(3);
    let error = client
        .call_and_await("t", (), CallOptions::default(), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Protocol {
                violation: ProtocolViolation::TooManyInputRounds(3),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(log.of("tools/call").len(), 4);

    let (client, _) = connect(Handler::default(), script).await;
    let options = AwaitOptions::default().with_input(InputMode::Return);
    let outcome = client
        .call_and_await("t", (), CallOptions::default(), &options)
        .await
        .unwrap();
    assert!(matches!(
        outcome,
        TaskOutcome::CallInputRequired {
            unanswered: Unanswered::Returned,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_missing_capability_error_is_retried_once_with_the_extension() {
    let (client, log) = connect(Handler::default(), |method, params| {
        let declared = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            .get(TASKS)
            .is_some();
        match (method, declared) {
            ("tools/call", false) => Reply::Error(
                json!({"code": -32021, "message": "Missing required client capability",
                "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}}),
            ),
            ("tools/call", true) => created(json!({})),
            ("tasks/get", _) => got("completed", json!({"result": text_result("ok")})),
            _ => Reply::Silence,
        }
    })
    .await;
    let call = CallOptions::default().with_declare_tasks(false);
    let outcome = client
        .call_and_await("t", (), call.clone(), &AwaitOptions::default())
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    assert_eq!(log.of("tools/call").len(), 2);
    // A single call reports the refusal with typed accessors.
    let error = client.call_tool("t", (), call).await.unwrap_err();
    assert!(error.requires_tasks_extension());
    assert_eq!(error.code(), Some(-32021));
}

#[tokio::test(start_paused = true)]
async fn a_tool_run_at_once_returns_its_result_unchanged() {
    let result = json!({"resultType": "complete", "content": [{"type": "text", "text": "now"}],
        "structuredContent": {"n": 1}, "isError": true});
    let (client, log) = connect(Handler::default(), move |_, _| {
        Reply::Result(result.clone())
    })
    .await;
    let outcome = client
        .call_and_await("t", (), CallOptions::default(), &AwaitOptions::default())
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("completed")
    };
    assert_eq!(result.is_error, Some(true));
    assert_eq!(result.structured_content, Some(json!({"n": 1})));
    assert!(log.of("tasks/get").is_empty());
}
