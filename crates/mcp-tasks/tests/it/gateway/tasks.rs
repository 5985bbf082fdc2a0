//! The task gateway in front of an upstream that makes tasks itself: the
//! conformance fixture server (2026-07-28 with the extension) over
//! Streamable HTTP (`Upstream::url`), its runtime held by the test so that
//! what reaches the upstream can be checked there.

use std::time::Duration;

use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};
use mcp_tasks::server::{Principal, TaskRuntime};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{CallOptions, CallResponse, InputMode, TaskOutcome, TaskStatus, TasksClient};
use mcp_tasks_conformance::{FixtureServer, serve_http};
use rmcp::model::{InputResponses, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::args;
use crate::support::calls::{text, waiting};
use crate::support::runtime_server::serve_recipe as serve_gateway;

/// The fixture server on HTTP (its runtime returned), the gateway in front
/// of it on HTTP, and a client of the gateway.
async fn setup() -> (TaskRuntime, TasksClient<()>) {
    setup_with(Duration::from_millis(50)).await
}

/// [`setup`] with an upstream that suggests `poll_interval` for its tasks.
async fn setup_with(poll_interval: Duration) -> (TaskRuntime, TasksClient<()>) {
    let upstream_runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(poll_interval)
        .build();
    let fixture = FixtureServer::new(upstream_runtime.clone()).expect("a random key");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_http(fixture, listener));

    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let gateway = Gateway::start(
        Upstream::url(upstream_url),
        runtime.clone(),
        GatewayOptions::default(),
    )
    .await
    .expect("the gateway starts in front of the fixture server");
    let url = serve_gateway(gateway, runtime).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let running = serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .expect("connect to the gateway");
    (upstream_runtime, TasksClient::new(running))
}

#[tokio::test]
async fn an_upstream_task_is_awaited_and_its_outcomes_relayed() {
    let (_upstream, client) = setup().await;
    let outcome = client
        .call_and_await(
            "slow_compute",
            args(json!({"seconds": 0.2, "label": "sum"})),
            CallOptions::default(),
            &waiting(),
        )
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("expected completed, got {outcome:?}");
    };
    assert!(text(&result).contains("sum"), "{}", text(&result));

    let outcome = client
        .call_and_await("failing_job", (), CallOptions::default(), &waiting())
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("expected completed with isError, got {outcome:?}");
    };
    assert_eq!(result.is_error, Some(true));

    let outcome = client
        .call_and_await("protocol_error_job", (), CallOptions::default(), &waiting())
        .await
        .unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("expected failed, got {outcome:?}");
    };
    assert_eq!(failure.error.code, -32603);
    assert!(
        failure
            .error
            .message
            .contains("protocol_error_job failed on purpose")
    );

    // Without the extension the call passes through: the fixture's -32021.
    let error = client
        .call_tool(
            "failing_job",
            (),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .unwrap_err();
    assert!(error.requires_tasks_extension(), "{error}");
}

#[tokio::test]
async fn an_upstream_task_made_finished_makes_the_gateways_finished() {
    // The fixture's failing_job and protocol_error_job end in their first
    // step: the upstream's CreateTaskResult says completed or failed, and
    // the gateway's says the same, its outcome read already.
    let (_upstream, client) = setup().await;
    for (tool, status) in [
        ("failing_job", TaskStatus::Completed),
        ("protocol_error_job", TaskStatus::Failed),
    ] {
        let CallResponse::Task(state) = client
            .call_tool(tool, (), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("{tool}: a task expected");
        };
        assert_eq!(state.status, status, "{tool}: {state:?}");
        let read = client.get(&state.id).await.unwrap();
        assert_eq!(read.status, status, "{tool}: {read:?}");
        match read.outcome().unwrap() {
            TaskOutcome::Completed(result) => {
                assert_eq!(result.is_error, Some(true));
                assert_eq!(text(&result), "failing_job failed on purpose");
            }
            TaskOutcome::Failed(failure) => {
                assert_eq!(failure.error.code, -32603);
                assert_eq!(
                    failure.error.message,
                    "protocol_error_job failed on purpose"
                );
            }
            other => panic!("{tool}: {other:?}"),
        }
    }
    // A task that runs on is made working and awaited, as before.
    let CallResponse::Task(state) = client
        .call_tool(
            "slow_compute",
            args(json!({"seconds": 0.2, "label": "sum"})),
            CallOptions::default(),
        )
        .await
        .unwrap()
    else {
        panic!("slow_compute: a task expected");
    };
    assert_eq!(state.status, TaskStatus::Working, "{state:?}");
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)), "{outcome:?}");
}

#[tokio::test]
async fn an_upstream_task_is_listened_to_not_polled() {
    // The upstream suggests polling every 20 s: a gateway that polled would
    // hear neither the status message nor the outcome within the bound.
    let (_upstream, client) = setup_with(Duration::from_secs(20)).await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let options = waiting()
        .with_deadline(Some(Duration::from_secs(5)))
        .with_observer(move |state| {
            if let Some(message) = &state.status_message {
                log.lock().unwrap().push(message.clone());
            }
        });
    let started = std::time::Instant::now();
    let outcome = client
        .call_and_await(
            "slow_compute",
            args(json!({"seconds": 1.0, "label": "sum"})),
            CallOptions::default(),
            &options,
        )
        .await
        .expect("the relayed outcome within 5 s");
    let elapsed = started.elapsed();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("expected completed, got {outcome:?}");
    };
    assert!(text(&result).contains("sum"), "{}", text(&result));
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|message| message == "computing sum"),
        "the upstream's status message was relayed while it ran: {seen:?}"
    );
}

#[tokio::test]
async fn the_upstream_tasks_input_is_relayed_both_ways() {
    let (_upstream, client) = setup().await;
    let state = match client
        .call_tool(
            "confirm_delete",
            args(json!({"filename": "notes.txt"})),
            CallOptions::default(),
        )
        .await
        .unwrap()
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task, got {other:?}"),
    };
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    let (key, request) = asking.input_requests.iter().next().expect("one request");
    assert!(
        key.starts_with("upstream-task-"),
        "the gateway's own key: {key}"
    );
    assert_eq!(request["method"], "elicitation/create");
    let mut answer = InputResponses::new();
    answer.insert(
        key.clone(),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    client.update(&asking.id, answer).await.unwrap();
    let outcome = client.await_task(&asking.id, &waiting()).await.unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("expected completed, got {outcome:?}");
    };
    assert!(text(&result).contains("notes.txt"), "{}", text(&result));
}

#[tokio::test]
async fn an_mrtr_round_before_the_upstream_task_is_relayed_too() {
    let (_upstream, client) = setup().await;
    let options = waiting().with_input(InputMode::resolver(|requests| async move {
        let mut answers = InputResponses::new();
        for key in requests.keys() {
            answers.insert(
                key.clone(),
                json!({"action": "accept", "content": {"name": "Alice"}}),
            );
        }
        Ok(answers)
    }));
    let outcome = client
        .call_and_await("test_tool_with_task", (), CallOptions::default(), &options)
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("expected completed, got {outcome:?}");
    };
    assert!(text(&result).contains("Alice"), "{}", text(&result));
}

#[tokio::test]
async fn tasks_cancel_is_sent_on_to_the_upstream_task() {
    let (upstream, client) = setup().await;
    // The gateway calls its upstream without a token: the upstream counts
    // it, as every unauthenticated HTTP caller, under one quota principal.
    let gateway = Principal::new("http:unauthenticated");
    let state = match client
        .call_tool(
            "slow_compute",
            args(json!({"seconds": 30})),
            CallOptions::default(),
        )
        .await
        .unwrap()
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task, got {other:?}"),
    };
    for _ in 0..100 {
        if upstream.unfinished_tasks_of(&gateway) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        upstream.unfinished_tasks_of(&gateway),
        1,
        "the upstream task runs"
    );
    client.cancel_and_wait(&state.id, &waiting()).await.unwrap();
    for _ in 0..100 {
        if upstream.unfinished_tasks_of(&gateway) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        upstream.unfinished_tasks_of(&gateway),
        0,
        "the upstream task was not cancelled"
    );
}

#[tokio::test]
async fn two_upstream_input_requests_answered_one_at_a_time() {
    let (_upstream, client) = setup().await;
    let state = match client
        .call_tool("multi_input", (), CallOptions::default())
        .await
        .unwrap()
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task, got {other:?}"),
    };
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    assert_eq!(
        asking.input_requests.len(),
        2,
        "{:?}",
        asking.input_requests
    );
    let keys: Vec<String> = asking.input_requests.keys().cloned().collect();
    let answer_for = |key: &str| {
        let request = &asking.input_requests[key];
        let properties = request["params"]["requestedSchema"]["properties"].clone();
        let content: serde_json::Map<String, Value> = properties
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, schema)| {
                let value = match schema["type"].as_str() {
                    Some("boolean") => json!(true),
                    _ => json!("Alice"),
                };
                (name.clone(), value)
            })
            .collect();
        json!({"action": "accept", "content": content})
    };
    let mut first = InputResponses::new();
    first.insert(keys[0].clone(), answer_for(&keys[0]));
    client.update(&asking.id, first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = client.get(&asking.id).await.unwrap();
    assert_eq!(now.status, mcp_tasks::TaskStatus::InputRequired, "{now:?}");
    assert_eq!(
        now.input_requests.keys().cloned().collect::<Vec<_>>(),
        vec![keys[1].clone()]
    );
    let mut second = InputResponses::new();
    second.insert(keys[1].clone(), answer_for(&keys[1]));
    client.update(&asking.id, second).await.unwrap();
    let outcome = client.await_task(&asking.id, &waiting()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)), "{outcome:?}");
}
