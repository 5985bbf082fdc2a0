//! The 2025-11-25 era against a scripted initialize-era server: when a call
//! is task-augmented, how a wait reads status and payload, how input on the
//! `tasks/result` stream is answered, cancel, and the edge cases no real
//! server produces (a missing or failing `tasks/result`, a `ttl` of null, a
//! status flapping back from terminal), all under a paused clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::client::InputError;
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, Era, Error, InputMode, TaskId, TaskOutcome, TaskState,
    TaskStatus, Ttl,
};
use rmcp::model::InputResponses;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::legacy::{
    Connected, Server, TASK, all_tasks, answer_to, connect, created, elicitation, refuse, reply,
    status, task, text, tools, unknown,
};
use crate::support::schema::check_legacy;
use crate::support::scripted::{discover_result, ms};
use crate::support::{Handler, TASKS, completed_text, options};

/// A server whose `slow` tool requires a task, answering `tools/call` with
/// `created` and `tasks/get` from `gets` (repeating the last), with
/// `tasks/result` held until `on_result` says what to send (given how many
/// `tasks/get` were answered).
fn polled(
    created_extra: Value,
    gets: Vec<Value>,
    result: Value,
) -> impl FnMut(&Value) -> Vec<Value> + Send + 'static {
    let mut answered = 0usize;
    let mut held: Option<Value> = None;
    move |m| match m["method"].as_str() {
        Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
        Some("tools/call") => vec![reply(m, created(created_extra.clone()))],
        Some("tasks/get") => {
            let state = gets[answered.min(gets.len() - 1)].clone();
            answered += 1;
            let mut out = vec![reply(m, state.clone())];
            if (state["status"] == "completed" || state["status"] == "failed")
                && let Some(held) = held.take()
            {
                out.push(reply(&held, result.clone()));
            }
            out
        }
        Some("tasks/result") => {
            held = Some(m.clone());
            Vec::new()
        }
        _ => unknown(m),
    }
}

async fn slow_task(connected: &Connected) -> TaskState {
    match connected
        .client
        .call_tool("slow", (), CallOptions::default())
        .await
        .expect("call")
    {
        CallResponse::Task(state) => state,
        other => panic!("slow should be a task: {other:?}"),
    }
}

fn statuses() -> (Arc<Mutex<Vec<TaskStatus>>>, AwaitOptions) {
    let seen: Arc<Mutex<Vec<TaskStatus>>> = Arc::default();
    let record = seen.clone();
    let options =
        options().with_observer(move |state| record.lock().unwrap().push(state.status.clone()));
    (seen, options)
}

#[tokio::test(start_paused = true)]
async fn calls_are_task_augmented_only_where_the_server_and_the_tool_allow_it() {
    let listing = tools(&[
        ("slow", Some("required")),
        ("maybe", Some("optional")),
        ("plain", Some("forbidden")),
        ("bare", None),
    ]);
    let connected =
        connect(
            Server::legacy(all_tasks()),
            Handler::default(),
            move |m| match m["method"].as_str() {
                Some("tools/list") => vec![reply(m, listing.clone())],
                Some("tools/call") if m["params"].get("task").is_some() => {
                    vec![reply(m, created(json!({"ttl": null, "pollInterval": 250})))]
                }
                Some("tools/call") => vec![reply(m, text("now", false))],
                _ => unknown(m),
            },
        )
        .await;
    let client = &connected.client;
    assert_eq!(client.era(), Era::Legacy);
    assert!(
        !client.server_supports(),
        "the extension is not defined here"
    );
    assert_eq!(
        client.task_methods(),
        Some(vec![
            "tasks/get",
            "tasks/result",
            "tasks/list",
            "tasks/cancel"
        ])
    );

    let with_ttl = CallOptions::default().with_task_ttl(Some(Duration::from_secs(30)));
    let CallResponse::Task(state) = client.call_tool("slow", (), with_ttl).await.unwrap() else {
        panic!("a required tool is a task");
    };
    assert_eq!(state.era(), Era::Legacy);
    assert_eq!(state.id.expose(), TASK);
    assert_eq!(state.status, TaskStatus::Working);
    assert_eq!(state.ttl, Some(Ttl::Unlimited), "ttl: null is unlimited");
    assert_eq!(state.poll_interval, Some(ms(250)));
    let response = client.call_tool("maybe", (), CallOptions::default()).await;
    assert!(
        matches!(response, Ok(CallResponse::Task(_))),
        "optional: {response:?}"
    );
    for plain in ["plain", "bare"] {
        let response = client.call_tool(plain, (), CallOptions::default()).await;
        assert!(
            matches!(response, Ok(CallResponse::Complete(_))),
            "{plain}: {response:?}"
        );
    }
    let undeclared = CallOptions::default().with_declare_tasks(false);
    let response = client.call_tool("slow", (), undeclared).await;
    assert!(
        matches!(response, Ok(CallResponse::Complete(_))),
        "{response:?}"
    );

    let calls = connected.log.of("tools/call");
    let tasks: Vec<Option<&Value>> = calls.iter().map(|call| call.params().get("task")).collect();
    assert_eq!(
        tasks,
        [
            Some(&json!({"ttl": 30000})),
            Some(&json!({})),
            None,
            None,
            None
        ]
    );
    for call in &calls {
        check_legacy("CallToolRequest", &call.message).unwrap();
        let meta = call.params().get("_meta").cloned().unwrap_or(json!({}));
        assert!(
            meta.get("io.modelcontextprotocol/clientCapabilities")
                .is_none(),
            "no 2026-07-28 envelope on a legacy call: {meta}"
        );
    }
    assert_eq!(
        connected.log.of("tools/list").len(),
        1,
        "listed once, then cached"
    );

    // A changed list is read again before the next call.
    connected.push(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    tokio::time::sleep(ms(10)).await;
    let response = client.call_tool("slow", (), CallOptions::default()).await;
    assert!(matches!(response, Ok(CallResponse::Task(_))));
    assert_eq!(connected.log.of("tools/list").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_wait_polls_tasks_get_and_reads_the_payload_from_tasks_result() {
    let working = |n: u32| {
        task(
            "working",
            json!({"statusMessage": format!("step {n}"), "ttl": 5000, "pollInterval": 250}),
        )
    };
    let script = polled(
        json!({"pollInterval": 250}),
        vec![
            working(1),
            working(2),
            task("completed", json!({"pollInterval": 250})),
        ],
        text("done", false),
    );
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), script).await;
    let started = Instant::now();
    let state = slow_task(&connected).await;
    let states: Arc<Mutex<Vec<TaskState>>> = Arc::default();
    let record = states.clone();
    let options = options().with_observer(move |state| record.lock().unwrap().push(state.clone()));
    let outcome = connected.client.await_task(state, &options).await.unwrap();
    assert_eq!(completed_text(&outcome), "done");
    assert_eq!(
        connected.log.gaps("tasks/get", started),
        [ms(250), ms(250), ms(250)]
    );
    let results = connected.log.of("tasks/result");
    assert_eq!(results.len(), 1, "one tasks/result, kept open");
    assert!(results[0].at - started < ms(1), "sent at once");
    check_legacy("GetTaskPayloadRequest", &results[0].message).unwrap();
    for get in connected.log.of("tasks/get") {
        check_legacy("GetTaskRequest", &get.message).unwrap();
    }
    let states = states.lock().unwrap();
    let seen: Vec<&TaskStatus> = states.iter().map(|state| &state.status).collect();
    use TaskStatus::{Completed, Working};
    assert_eq!(seen, [&Working, &Working, &Working, &Completed, &Completed]);
    // The polls were read from the server's own JSON, ttl and all.
    let first_poll = &states[1];
    assert_eq!(first_poll.status_message.as_deref(), Some("step 1"));
    assert_eq!(first_poll.ttl, Some(Ttl::Limited(Duration::from_secs(5))));
    assert!(states.iter().all(|state| state.era() == Era::Legacy));
    assert!(states[4].result.is_some(), "the observer sees the payload");
}

#[tokio::test(start_paused = true)]
async fn intervals_are_clamped_as_in_the_extension() {
    let script = polled(
        json!({"pollInterval": 1}),
        vec![
            task("working", json!({"pollInterval": 1})),
            task("working", json!({"pollInterval": 1e12})),
            task("completed", json!({})),
        ],
        text("done", false),
    );
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), script).await;
    let started = Instant::now();
    let state = slow_task(&connected).await;
    let options = options().with_deadline(Some(Duration::from_secs(120)));
    connected.client.await_task(state, &options).await.unwrap();
    assert_eq!(
        connected.log.gaps("tasks/get", started),
        [ms(50), ms(50), Duration::from_secs(30)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_status_notification_wakes_the_wait_early() {
    let script = polled(
        json!({"pollInterval": 10_000}),
        vec![task("working", json!({}))],
        json!({}),
    );
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), script).await;
    let started = Instant::now();
    let state = slow_task(&connected).await;
    let options = options();
    let (outcome, ()) = tokio::join!(connected.client.await_task(state, &options), async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        connected.push(status(task(
            "cancelled",
            json!({"statusMessage": "stopped"}),
        )));
    });
    let TaskOutcome::Cancelled(state) = outcome.unwrap() else {
        panic!("expected cancelled");
    };
    assert_eq!(state.status_message.as_deref(), Some("stopped"));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "woken by the notification"
    );
    assert!(
        connected.log.of("tasks/get").is_empty(),
        "no poll was due yet"
    );
}

/// A server whose task asks for a name once, on the first `tasks/result`,
/// and completes with `Hello, <name>` once answered: from then on
/// `tasks/get` says completed and every `tasks/result` has the greeting.
fn asks_for_a_name() -> impl FnMut(&Value) -> Vec<Value> + Send + 'static {
    let mut held: Vec<Value> = Vec::new();
    let mut asked = false;
    let mut greeting: Option<String> = None;
    move |m| match m["method"].as_str() {
        Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
        Some("tools/call") => vec![reply(m, created(json!({})))],
        Some("tasks/get") if greeting.is_some() => vec![reply(m, task("completed", json!({})))],
        Some("tasks/get") => vec![reply(m, task("input_required", json!({})))],
        Some("tasks/result") => match &greeting {
            Some(greeting) => vec![reply(m, text(greeting, false))],
            None => {
                held.push(m.clone());
                if asked {
                    Vec::new()
                } else {
                    asked = true;
                    vec![elicitation("e1")]
                }
            }
        },
        None if m["id"] == "e1" => {
            let said = match m["result"]["content"]["name"].as_str() {
                Some(name) => format!("Hello, {name}"),
                None => "declined".to_owned(),
            };
            greeting = Some(said.clone());
            held.drain(..)
                .map(|held| reply(&held, text(&said, false)))
                .collect()
        }
        _ => unknown(m),
    }
}

#[tokio::test(start_paused = true)]
async fn input_on_the_result_stream_goes_to_the_handler() {
    let handler = Handler::default();
    let connected = connect(
        Server::legacy(all_tasks()),
        handler.clone(),
        asks_for_a_name(),
    )
    .await;
    let state = slow_task(&connected).await;
    let outcome = connected
        .client
        .await_task(state, &options())
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Ada");
    assert_eq!(*handler.elicitations.lock().unwrap(), 1);
    let answer = answer_to(&connected.log, "e1").expect("the elicitation was answered");
    assert_eq!(answer["result"]["content"], json!({"name": "Ada"}));
    check_legacy("ElicitResult", &answer["result"]).unwrap();

    // A request tied to a task no wait knows goes to the handler directly.
    let mut other = elicitation("x1");
    other["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] = json!("other");
    connected.push(other);
    tokio::time::sleep(ms(10)).await;
    assert_eq!(*handler.elicitations.lock().unwrap(), 2);
    assert!(answer_to(&connected.log, "x1").is_some());
}

/// A server that sends its elicitation for the task before the answer that
/// creates it (as a server may on its GET stream), then ends the task with
/// the name it was given.
fn asks_before_creating() -> impl FnMut(&Value) -> Vec<Value> + Send + 'static {
    let mut held: Vec<Value> = Vec::new();
    let mut greeting: Option<String> = None;
    move |m| match m["method"].as_str() {
        Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
        Some("tools/call") => vec![elicitation("e0"), reply(m, created(json!({})))],
        Some("tasks/get") if greeting.is_some() => vec![reply(m, task("completed", json!({})))],
        Some("tasks/get") => vec![reply(m, task("input_required", json!({})))],
        Some("tasks/result") => match &greeting {
            Some(greeting) => vec![reply(m, text(greeting, false))],
            None => {
                held.push(m.clone());
                Vec::new()
            }
        },
        None if m["id"] == "e0" => {
            let said = match m["result"]["content"]["name"].as_str() {
                Some(name) => format!("Hello, {name}"),
                None => "declined".to_owned(),
            };
            greeting = Some(said.clone());
            held.drain(..)
                .map(|held| reply(&held, text(&said, false)))
                .collect()
        }
        _ => unknown(m),
    }
}

#[tokio::test(start_paused = true)]
async fn input_sent_before_the_wait_starts_is_held_for_it() {
    let handler = Handler::default();
    let connected = connect(
        Server::legacy(all_tasks()),
        handler.clone(),
        asks_before_creating(),
    )
    .await;
    // The request comes before the call's answer; the wait starts a second
    // later (the CLI writes its journal in between): it is the wait's.
    let state = slow_task(&connected).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let options = options().with_input(resolver(
        json!({"action": "accept", "content": {"name": "Bo"}}),
    ));
    let outcome = connected.client.await_task(state, &options).await.unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Bo");
    assert_eq!(
        *handler.elicitations.lock().unwrap(),
        0,
        "not the handler's"
    );

    // With no wait within two seconds, the handler answers.
    let handler = Handler::default();
    let connected = connect(
        Server::legacy(all_tasks()),
        handler.clone(),
        asks_before_creating(),
    )
    .await;
    let _state = slow_task(&connected).await;
    let started = Instant::now();
    while answer_to(&connected.log, "e0").is_none() {
        tokio::time::sleep(ms(100)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_secs(2) - ms(100),
        "held first"
    );
    assert_eq!(*handler.elicitations.lock().unwrap(), 1);
}

fn resolver(answer: Value) -> InputMode {
    InputMode::resolver(move |requests: BTreeMap<String, Value>| {
        let answer = answer.clone();
        async move {
            let mut responses = InputResponses::new();
            for (key, request) in requests {
                assert_eq!(request["method"], "elicitation/create");
                assert_eq!(request["params"]["message"], "Your name?");
                responses.insert(key, answer.clone());
            }
            Ok::<_, InputError>(responses)
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_resolver_answers_with_the_same_validation_and_unanswered_input_waits() {
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        asks_for_a_name(),
    )
    .await;
    let state = slow_task(&connected).await;
    let invalid = options().with_input(resolver(json!({"action": "accept", "content": {}})));
    let error = connected
        .client
        .await_task(&state, &invalid)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::InvalidInputResponse { key, .. } if key == "e1"),
        "{error}"
    );
    assert!(
        answer_to(&connected.log, "e1").is_none(),
        "nothing invalid is sent"
    );

    // The next wait on the connection gets the request the first one left.
    let valid = options().with_input(resolver(
        json!({"action": "accept", "content": {"name": "Bo"}}),
    ));
    let outcome = connected
        .client
        .await_task(TaskId::new(TASK), &valid)
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Bo");
    assert_eq!(connected.log.of("tasks/result").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn input_left_unanswered_can_be_answered_with_update() {
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        asks_for_a_name(),
    )
    .await;
    let state = slow_task(&connected).await;
    let returning = options().with_input(InputMode::Return);
    let TaskOutcome::InputRequired { state, .. } = connected
        .client
        .await_task(state, &returning)
        .await
        .unwrap()
    else {
        panic!("expected the input requirement");
    };
    assert_eq!(state.status, TaskStatus::InputRequired);
    assert_eq!(state.input_requests["e1"]["method"], "elicitation/create");
    let answer: InputResponses = [(
        "e1".to_owned(),
        json!({"action": "accept", "content": {"name": "Cy"}}),
    )]
    .into();
    connected.client.update(&state.id, answer).await.unwrap();
    let outcome = connected
        .client
        .await_task(&state.id, &options())
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Cy");
}

#[tokio::test(start_paused = true)]
async fn is_error_in_tasks_result_means_failed() {
    for status in ["completed", "failed"] {
        let script = polled(
            json!({}),
            vec![task(status, json!({"statusMessage": "it broke"}))],
            text("boom", true),
        );
        let connected = connect(Server::legacy(all_tasks()), Handler::default(), script).await;
        let state = slow_task(&connected).await;
        let outcome = connected
            .client
            .await_task(state, &options())
            .await
            .unwrap();
        let TaskOutcome::Failed(failure) = &outcome else {
            panic!("{status} with isError: expected failed, got {outcome:?}");
        };
        assert_eq!(failure.error.code, -32603);
        assert_eq!(failure.error.message, "boom");
        assert_eq!(failure.error.data.as_ref().unwrap()["isError"], true);
        assert_eq!(failure.state.era(), Era::Legacy);
        let error = outcome.into_result().unwrap_err();
        assert_eq!(error.code(), Some(-32603));
    }
}

#[tokio::test(start_paused = true)]
async fn a_tasks_result_error_is_the_failure_of_a_failed_task_and_an_error_otherwise() {
    // Failed: tasks/result answers with the original request's error.
    let mut held = None;
    let connected =
        connect(
            Server::legacy(all_tasks()),
            Handler::default(),
            move |m| match m["method"].as_str() {
                Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
                Some("tools/call") => vec![reply(m, created(json!({})))],
                Some("tasks/get") => {
                    let mut out = vec![reply(m, task("failed", json!({})))];
                    out.extend(
                        held.take()
                            .map(|held: Value| refuse(&held, -32000, "upstream down")),
                    );
                    out
                }
                Some("tasks/result") => {
                    held = Some(m.clone());
                    Vec::new()
                }
                _ => unknown(m),
            },
        )
        .await;
    let state = slow_task(&connected).await;
    let outcome = connected
        .client
        .await_task(state, &options())
        .await
        .unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("expected failed");
    };
    assert_eq!(
        (failure.error.code, failure.error.message.as_str()),
        (-32000, "upstream down")
    );

    // Completed, but tasks/result is not there: its error is returned.
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        |m| match m["method"].as_str() {
            Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
            Some("tools/call") => vec![reply(m, created(json!({})))],
            Some("tasks/get") => vec![reply(m, task("completed", json!({})))],
            _ => unknown(m),
        },
    )
    .await;
    let state = slow_task(&connected).await;
    let error = connected
        .client
        .await_task(state, &options())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Rpc {
                method: "tasks/result",
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.code(), Some(-32601));
}

#[tokio::test(start_paused = true)]
async fn a_silent_tasks_result_ends_at_the_deadline_with_the_last_state() {
    let mut script = polled(json!({}), vec![task("completed", json!({}))], json!(null));
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), move |m| {
        // tasks/result is never answered.
        match m["method"].as_str() {
            Some("tasks/result") => Vec::new(),
            _ => script(m),
        }
    })
    .await;
    let state = slow_task(&connected).await;
    let options = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(5)))
        .with_request_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let error = connected
        .client
        .await_task(state, &options)
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert_eq!(error.last_status(), Some(&TaskStatus::Completed));
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let sent = connected.log.of("tasks/result").len();
    assert!(sent >= 4, "a timed-out tasks/result is sent again: {sent}");
}

#[tokio::test(start_paused = true)]
async fn a_ttl_of_null_is_unlimited_and_a_ttl_rmcp_dropped_is_kept_from_before() {
    // With the tap: every ttl is read as sent.
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        |m| match m["method"].as_str() {
            Some("tasks/get") => vec![reply(
                m,
                task("working", json!({"ttl": null, "pollInterval": 300})),
            )],
            _ => unknown(m),
        },
    )
    .await;
    let state = connected.client.get(&TaskId::new(TASK)).await.unwrap();
    assert_eq!(state.ttl, Some(Ttl::Unlimited));
    assert_eq!(state.poll_interval, Some(ms(300)));

    // Without the tap: the call cannot be augmented, and a working task's ttl
    // and pollInterval are unknown (rmcp does not read them), never `null`.
    let server = Server {
        tapped: false,
        ..Server::legacy(all_tasks())
    };
    let script = polled(
        json!({"ttl": null, "pollInterval": 200}),
        vec![
            task("working", json!({"ttl": 5})),
            task("working", json!({})),
            task("working", json!({})),
            task("completed", json!({})),
        ],
        text("done", false),
    );
    let connected = connect(server, Handler::default(), script).await;
    assert_eq!(connected.client.task_methods(), None);
    let state = slow_task(&connected).await;
    assert!(
        connected.log.of("tools/call")[0]
            .params()
            .get("task")
            .is_none()
    );
    assert!(connected.log.of("tools/list").is_empty());
    assert_eq!(
        state.ttl,
        Some(Ttl::Unlimited),
        "a creation result is read whole"
    );
    let got = connected.client.get(&state.id).await.unwrap();
    assert_eq!((got.ttl, got.poll_interval), (None, None));
    let started = Instant::now();
    let (seen, options) = {
        let seen: Arc<Mutex<Vec<TaskState>>> = Arc::default();
        let record = seen.clone();
        (
            seen,
            options().with_observer(move |state| record.lock().unwrap().push(state.clone())),
        )
    };
    let outcome = connected.client.await_task(state, &options).await.unwrap();
    assert_eq!(completed_text(&outcome), "done");
    // The first tasks/get is the `get` above.
    assert_eq!(
        connected.log.gaps("tasks/get", started)[1..],
        [ms(200), ms(200), ms(200)]
    );
    let seen = seen.lock().unwrap();
    for state in seen
        .iter()
        .filter(|state| state.status == TaskStatus::Working)
    {
        assert_eq!(
            state.ttl,
            Some(Ttl::Unlimited),
            "kept from the creation result"
        );
        assert_eq!(state.poll_interval, Some(ms(200)));
    }
    // rmcp keeps a completed task without `result` raw: its own ttl is read.
    let last = seen.last().unwrap();
    assert_eq!(
        (&last.status, last.ttl),
        (&TaskStatus::Completed, Some(Ttl::from_millis(60_000)))
    );
}

#[tokio::test(start_paused = true)]
async fn a_status_flapping_back_from_terminal_is_not_believed() {
    let mut gets = 0;
    let mut held = None;
    let connected =
        connect(
            Server::legacy(all_tasks()),
            Handler::default(),
            move |m| match m["method"].as_str() {
                Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
                Some("tools/call") => vec![reply(m, created(json!({})))],
                Some("tasks/get") => {
                    gets += 1;
                    let status = if gets == 1 { "completed" } else { "working" };
                    vec![reply(m, task(status, json!({})))]
                }
                Some("tasks/result") => {
                    held = Some(m.clone());
                    Vec::new()
                }
                None if m["id"] == "release" => held
                    .take()
                    .map(|held: Value| vec![reply(&held, text("final", false))])
                    .unwrap_or_default(),
                _ => Vec::new(),
            },
        )
        .await;
    let state = slow_task(&connected).await;
    let (seen, options) = statuses();
    let (outcome, ()) = tokio::join!(connected.client.await_task(state, &options), async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        connected.push(status(task("working", json!({}))));
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Any message makes the script release the held tasks/result.
        connected.push(json!({"jsonrpc": "2.0", "id": "release", "method": "ping"}));
    });
    assert_eq!(completed_text(&outcome.unwrap()), "final");
    let seen = seen.lock().unwrap();
    let first_terminal = seen
        .iter()
        .position(|s| *s == TaskStatus::Completed)
        .unwrap();
    assert!(
        seen[first_terminal..]
            .iter()
            .all(|s| *s == TaskStatus::Completed),
        "{seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_sends_tasks_cancel_and_a_finished_task_cancels_as_a_no_op() {
    let mut cancels = 0;
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), move |m| {
        let known = m["params"]["taskId"] == TASK;
        match m["method"].as_str() {
            Some("tasks/cancel") if known => {
                cancels += 1;
                if cancels == 1 {
                    vec![reply(
                        m,
                        task("cancelled", json!({"statusMessage": "by request"})),
                    )]
                } else {
                    vec![refuse(
                        m,
                        -32602,
                        "Cannot cancel task in terminal status: completed",
                    )]
                }
            }
            Some("tasks/get") if known => vec![reply(m, task("completed", json!({})))],
            Some("tasks/result") if known => vec![reply(m, text("done first", false))],
            Some("tasks/cancel" | "tasks/get") => vec![refuse(m, -32602, "Task not found")],
            _ => unknown(m),
        }
    })
    .await;
    let client = &connected.client;
    let id = TaskId::new(TASK);
    let TaskOutcome::Cancelled(state) = client.cancel_and_wait(&id, &options()).await.unwrap()
    else {
        panic!("cancelled");
    };
    assert_eq!(
        (state.status.clone(), state.era()),
        (TaskStatus::Cancelled, Era::Legacy)
    );
    check_legacy(
        "CancelTaskRequest",
        &connected.log.of("tasks/cancel")[0].message,
    )
    .unwrap();

    // The task had completed: cancelling changes nothing, and the outcome
    // is its result, as in the extension.
    client.cancel(&id).await.unwrap();
    let outcome = client.cancel_and_wait(&id, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "done first");

    let error = client.cancel(&TaskId::new("gone")).await.unwrap_err();
    assert!(error.is_unknown_task(), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_stalled_task_is_given_up_and_cancelled() {
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        |m| match m["method"].as_str() {
            Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
            Some("tools/call") => vec![reply(m, created(json!({})))],
            Some("tasks/get") => vec![reply(m, task("input_required", json!({})))],
            Some("tasks/cancel") => vec![reply(m, task("cancelled", json!({})))],
            _ => Vec::new(),
        },
    )
    .await;
    let state = slow_task(&connected).await;
    let options = options().with_stall_detection(3, true);
    let error = connected
        .client
        .await_task(state, &options)
        .await
        .unwrap_err();
    let Error::Stalled {
        polls, cancel_sent, ..
    } = error
    else {
        panic!("expected a stall: {error}");
    };
    assert_eq!((polls, cancel_sent), (3, true));
    assert_eq!(connected.log.of("tasks/cancel").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_task_asking_for_what_the_resolver_leaves_unanswered_stalls_with_the_request() {
    let mut asked = false;
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), move |m| {
        match m["method"].as_str() {
            Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
            Some("tools/call") => vec![reply(m, created(json!({})))],
            Some("tasks/get") => vec![reply(m, task("input_required", json!({})))],
            // The first tasks/result carries the question, and stays open.
            Some("tasks/result") if !asked => {
                asked = true;
                vec![elicitation("e1")]
            }
            Some("tasks/cancel") => vec![reply(m, task("cancelled", json!({})))],
            _ => Vec::new(),
        }
    })
    .await;
    let state = slow_task(&connected).await;
    let offered = Arc::new(Mutex::new(0usize));
    let count = offered.clone();
    // A resolver that answers none of what it is offered.
    let declines = InputMode::resolver(move |_: BTreeMap<String, Value>| {
        *count.lock().unwrap() += 1;
        async { Ok::<_, InputError>(InputResponses::new()) }
    });
    let options = options().with_input(declines).with_stall_detection(3, true);
    let started = Instant::now();
    let error = connected
        .client
        .await_task(state, &options)
        .await
        .unwrap_err();
    let Error::Stalled {
        state,
        polls,
        cancel_sent,
    } = error
    else {
        panic!("expected a stall: {error}");
    };
    assert_eq!((polls, cancel_sent), (3, true));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "three polls, a second apart"
    );
    assert_eq!(state.status, TaskStatus::InputRequired);
    assert_eq!(
        state.input_requests["e1"]["method"], "elicitation/create",
        "the stall hands back the request in hand"
    );
    assert!(*offered.lock().unwrap() >= 1);
    assert!(
        answer_to(&connected.log, "e1").is_none(),
        "nothing was sent"
    );
    assert_eq!(connected.log.of("tasks/cancel").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn after_an_answer_a_task_asking_for_nothing_new_stalls_as_in_the_extension() {
    let mut asked = false;
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), move |m| {
        match m["method"].as_str() {
            Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
            Some("tools/call") => vec![reply(m, created(json!({})))],
            // Answered or not, the task keeps saying it waits for input.
            Some("tasks/get") => vec![reply(m, task("input_required", json!({})))],
            Some("tasks/result") if !asked => {
                asked = true;
                vec![elicitation("e1")]
            }
            _ => Vec::new(),
        }
    })
    .await;
    let state = slow_task(&connected).await;
    let options = options().with_stall_detection(3, false);
    let started = Instant::now();
    let error = connected
        .client
        .await_task(state, &options)
        .await
        .unwrap_err();
    let Error::Stalled {
        polls, cancel_sent, ..
    } = error
    else {
        panic!("expected a stall: {error}");
    };
    assert_eq!((polls, cancel_sent), (3, false));
    assert!(
        answer_to(&connected.log, "e1").is_some(),
        "the handler answered"
    );
    // The answer went out before the first poll; each of the three polls
    // after it found nothing new, as the extension's wait counts them.
    assert_eq!(
        connected.log.gaps("tasks/get", started),
        [ms(1000), ms(1000), ms(1000)]
    );
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert!(connected.log.of("tasks/cancel").is_empty());
}

/// A server as the TypeScript SDK one of `interop/ts-sdk` (a task
/// `input_required` from its creation, polled every 200 ms), whose
/// elicitation the test pushes apart from any request of the client (as
/// that server sends it on its GET stream), and whose `tasks/get` still
/// says `input_required` for `lag` polls after the answer before the task
/// completes with what was answered (`tasks/result` is held until then).
fn acts_late_on_the_answer(lag: usize) -> impl FnMut(&Value) -> Vec<Value> + Send + 'static {
    let every = json!({"pollInterval": 200});
    let mut held: Vec<Value> = Vec::new();
    let mut action: Option<String> = None;
    let mut polls_after = 0usize;
    move |m| match m["method"].as_str() {
        Some("tools/list") => vec![reply(m, tools(&[("confirm", Some("optional"))]))],
        Some("tools/call") => {
            let mut created = created(every.clone());
            created["task"]["status"] = json!("input_required");
            vec![reply(m, created)]
        }
        Some("tasks/get") => {
            let Some(action) = &action else {
                return vec![reply(m, task("input_required", every.clone()))];
            };
            polls_after += 1;
            if polls_after <= lag {
                return vec![reply(m, task("input_required", every.clone()))];
            }
            let done = not_confirmed(action);
            let mut out = vec![reply(m, task("completed", every.clone()))];
            out.extend(held.drain(..).map(|held| reply(&held, done.clone())));
            out
        }
        Some("tasks/result") => match &action {
            Some(action) if polls_after > lag => vec![reply(m, not_confirmed(action))],
            _ => {
                held.push(m.clone());
                Vec::new()
            }
        },
        None if m["id"] == "e1" => {
            action = m["result"]["action"].as_str().map(str::to_owned);
            Vec::new()
        }
        _ => unknown(m),
    }
}

/// What the server of [`acts_late_on_the_answer`] ends with.
fn not_confirmed(action: &str) -> Value {
    text(&format!("Not confirmed: drop ({action})"), false)
}

#[tokio::test(start_paused = true)]
async fn a_declined_answer_ends_the_task_that_stays_input_required_a_while_after_it() {
    // Whenever the request comes (at once, between two polls, just at a
    // poll, a few polls in), the answer goes out once, and the polls of the
    // task still input_required after it (fewer than stall_polls) wait for
    // it to act on the answer: they are no stall.
    for at in [0, 1, 150, 200, 201, 450, 1000] {
        let lag = 10;
        let connected = connect(
            Server::legacy(all_tasks()),
            Handler::default(),
            acts_late_on_the_answer(lag),
        )
        .await;
        let CallResponse::Task(state) = connected
            .client
            .call_tool("confirm", (), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("confirm should be a task");
        };
        let options = options().with_input(resolver(json!({"action": "decline"})));
        let (outcome, ()) = tokio::join!(connected.client.await_task(state, &options), async {
            tokio::time::sleep(ms(at)).await;
            connected.push(elicitation("e1"));
        });
        let outcome = outcome.unwrap_or_else(|error| panic!("request at {at} ms: {error}"));
        assert_eq!(
            completed_text(&outcome),
            "Not confirmed: drop (decline)",
            "request at {at} ms"
        );
        let answer = answer_to(&connected.log, "e1").expect("the elicitation was answered");
        assert_eq!(answer["result"], json!({"action": "decline"}));
        let answered_at = connected
            .log
            .all()
            .into_iter()
            .find(|received| received.message["id"] == "e1" && received.method().is_empty())
            .map(|received| received.at)
            .unwrap();
        let polls_after = connected
            .log
            .of("tasks/get")
            .into_iter()
            .filter(|get| get.at > answered_at)
            .count();
        assert_eq!(polls_after, lag + 1, "request at {at} ms");
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_the_server_lost_ends_as_a_stall_after_stall_polls() {
    // The same server, whose elicitation never reaches the client (the
    // TypeScript SDK drops a request sent on a GET stream not open yet):
    // the task asks for nothing the wait holds, for 60 states (the one the
    // call answered with, then 59 polls, 200 ms apart).
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        acts_late_on_the_answer(0),
    )
    .await;
    let CallResponse::Task(state) = connected
        .client
        .call_tool("confirm", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("confirm should be a task");
    };
    let options = options().with_input(resolver(json!({"action": "decline"})));
    let started = Instant::now();
    let error = connected
        .client
        .await_task(state, &options)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the task stayed input_required with nothing new to answer for 60 polls"
    );
    assert!(
        matches!(error, Error::Stalled { polls: 60, .. }),
        "{error:?}"
    );
    assert_eq!(started.elapsed(), ms(59 * 200));
    assert_eq!(connected.log.of("tasks/get").len(), 59);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_wait_with_the_last_state_and_notifications_do_not_put_polls_off() {
    let mut gets = 0;
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), move |m| {
        match m["method"].as_str() {
            Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
            Some("tools/call") => vec![reply(m, created(json!({})))],
            Some("tasks/get") => {
                gets += 1;
                let message = format!("step {gets}");
                vec![reply(m, task("working", json!({"statusMessage": message})))]
            }
            // tasks/result stays open: the task never ends.
            _ => Vec::new(),
        }
    })
    .await;
    let state = slow_task(&connected).await;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let record = seen.clone();
    let options = options()
        .with_deadline(Some(ms(3500)))
        .with_observer(move |state| record.lock().unwrap().push(state.status_message.clone()));
    let started = Instant::now();
    let (outcome, ()) = tokio::join!(connected.client.await_task(state, &options), async {
        tokio::time::sleep(ms(1500)).await;
        connected.push(status(task("working", json!({"statusMessage": "heard"}))));
    });
    let error = outcome.unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert_eq!(started.elapsed(), ms(3500));
    let last = error.task_state().expect("the last state read");
    assert_eq!(
        (&last.status, last.status_message.as_deref()),
        (&TaskStatus::Working, Some("step 3"))
    );
    assert_eq!(
        connected.log.gaps("tasks/get", started),
        [ms(1000), ms(1000), ms(1000)],
        "the notification at 1.5 s did not move the poll at 2 s"
    );
    let seen = seen.lock().unwrap();
    let messages: Vec<Option<&str>> = seen.iter().map(Option::as_deref).collect();
    assert_eq!(
        messages,
        [
            None,
            Some("step 1"),
            Some("heard"),
            Some("step 2"),
            Some("step 3")
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_and_wait_settles_at_the_settling_interval_and_reads_a_failure_first() {
    // tasks/cancel answers before the task has stopped; the polls settle it.
    let mut gets = 0;
    let connected =
        connect(
            Server::legacy(all_tasks()),
            Handler::default(),
            move |m| match m["method"].as_str() {
                Some("tasks/cancel") => vec![reply(m, task("working", json!({})))],
                Some("tasks/get") => {
                    gets += 1;
                    let status = if gets < 3 { "working" } else { "cancelled" };
                    vec![reply(m, task(status, json!({})))]
                }
                _ => unknown(m),
            },
        )
        .await;
    let (seen, observed) = statuses();
    let started = Instant::now();
    let outcome = connected
        .client
        .cancel_and_wait(&TaskId::new(TASK), &observed)
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    assert_eq!(
        connected.log.gaps("tasks/get", started),
        [ms(50), ms(100), ms(200)],
        "from the minimum interval, doubling"
    );
    use TaskStatus::{Cancelled, Working};
    assert_eq!(
        *seen.lock().unwrap(),
        [Working, Working, Working, Cancelled],
        "the state tasks/cancel answered with is the first"
    );
    assert!(connected.log.of("tasks/result").is_empty());

    // The task had failed: tasks/cancel is refused, and the outcome is the
    // JSON-RPC error its tasks/result answers with.
    let connected = connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        |m| match m["method"].as_str() {
            Some("tasks/cancel") => vec![refuse(
                m,
                -32602,
                "Cannot cancel task in terminal status: failed",
            )],
            Some("tasks/get") => vec![reply(m, task("failed", json!({})))],
            Some("tasks/result") => vec![refuse(m, -32000, "upstream down")],
            _ => unknown(m),
        },
    )
    .await;
    let outcome = connected
        .client
        .cancel_and_wait(&TaskId::new(TASK), &options())
        .await
        .unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("expected failed: {outcome:?}");
    };
    assert_eq!(
        (failure.error.code, failure.error.message.as_str()),
        (-32000, "upstream down")
    );
    assert_eq!(connected.log.of("tasks/result").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_of_both_eras_is_used_in_the_new_one() {
    let server = Server {
        discover: Some(discover_result(true)),
        ..Server::legacy(all_tasks())
    };
    let connected = connect(server, Handler::default(), |m| match m["method"].as_str() {
        Some("tools/list") => vec![reply(m, tools(&[("slow", Some("required"))]))],
        Some("tools/call") => vec![reply(
            m,
            json!({"resultType": "task", "taskId": TASK, "status": "working", "ttlMs": 1000,
                "createdAt": "2026-07-28T10:30:00Z", "lastUpdatedAt": "2026-07-28T10:30:00Z"}),
        )],
        _ => unknown(m),
    })
    .await;
    let client = &connected.client;
    assert_eq!(client.era(), Era::Extension);
    assert_eq!(
        client.task_methods(),
        Some(vec!["tasks/get", "tasks/update", "tasks/cancel"])
    );
    let state = slow_task(&connected).await;
    assert_eq!(state.era(), Era::Extension);
    let call = &connected.log.of("tools/call")[0];
    assert!(call.params().get("task").is_none());
    assert_eq!(
        call.params()["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"][TASKS],
        json!({})
    );
    assert!(connected.log.of("initialize").is_empty());
    assert!(connected.log.of("tools/list").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_tool_missing_from_the_listing_is_listed_once_more() {
    let mut listings = 0;
    let connected = connect(Server::legacy(all_tasks()), Handler::default(), move |m| {
        match m["method"].as_str() {
            Some("tools/list") => {
                listings += 1;
                // Listed late, as a server does that adds tools after initialize.
                let listing = if listings == 1 {
                    tools(&[("echo", Some("forbidden"))])
                } else {
                    tools(&[("echo", Some("forbidden")), ("late", Some("required"))])
                };
                vec![reply(m, listing)]
            }
            Some("tools/call") if m["params"].get("task").is_some() => {
                vec![reply(m, created(json!({})))]
            }
            Some("tools/call") => vec![reply(m, text("plain", false))],
            _ => unknown(m),
        }
    })
    .await;
    let response = connected
        .client
        .call_tool("late", (), CallOptions::default())
        .await;
    assert!(
        matches!(response, Ok(CallResponse::Task(_))),
        "{response:?}"
    );
    assert_eq!(connected.log.of("tools/list").len(), 2);
    // A tool no listing has is called plainly, after listing twice again.
    let response = connected
        .client
        .call_tool("nowhere", (), CallOptions::default())
        .await;
    assert!(
        matches!(response, Ok(CallResponse::Complete(_))),
        "{response:?}"
    );
    assert_eq!(connected.log.of("tools/list").len(), 4);
}
