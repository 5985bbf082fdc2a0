//! One client code path on every transport: round trips against rmcp's own
//! task server (`rmcp-task-server` of the conformance crate, built on rmcp's
//! `TaskManager`) over a real child process (stdio) and over Streamable HTTP
//! on 127.0.0.1, and transient HTTP failures retried inside the deadline.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TaskOutcome, TaskStatus, TasksClient};
use rmcp::service::serve_client_with_lifecycle;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::json;
use tokio::process::Command;

use crate::support::serve::Served;
use crate::support::{Handler, args, completed_text, lifecycle};

/// The fixture server binary, a binary of the conformance crate
/// (`crates/mcp-tasks-conformance/src/bin/rmcp-task-server.rs`): it lives
/// there, not among this crate's targets, so that this library ships no test
/// program. `cargo test --workspace` builds it with the other packages'
/// binaries before any test runs; `cargo test -p mcp-tasks` alone does not.
pub(crate) fn server_binary() -> PathBuf {
    mcp_tasks_testkit::serve::beside_tests("rmcp-task-server")
}

/// Starts the fixture server over HTTP; the child lives as long as the value.
pub(crate) async fn http_server() -> (Served, String) {
    let mut command = std::process::Command::new(server_binary());
    command.args(["http", "127.0.0.1:0"]);
    let server = tokio::task::spawn_blocking(move || Served::command(command, None))
        .await
        .expect("the fixture server says where it listens");
    let url = server.url.clone();
    (server, url)
}

/// The same scenario on every transport.
async fn lifecycle_scenario(client: &TasksClient<Handler>) {
    assert!(client.server_supports());
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)));

    // A task with a status message, awaited to its result.
    let CallResponse::Task(state) = client
        .call_tool("slow", args(json!({"ms": 300})), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("slow must become a task")
    };
    assert_eq!(state.status, TaskStatus::Working);
    assert_eq!(state.poll_interval, Some(Duration::from_millis(50)));
    let messages = Arc::new(std::sync::Mutex::new(Vec::new()));
    let observing = options.clone().with_observer({
        let messages = messages.clone();
        move |state| messages.lock().unwrap().push(state.status_message.clone())
    });
    let outcome = client.await_task(&state, &observing).await.unwrap();
    assert_eq!(completed_text(&outcome), "slept 300 ms");
    assert!(
        messages
            .lock()
            .unwrap()
            .contains(&Some("halfway".to_owned()))
    );

    // Input answered by the client's handler through tasks/update.
    let outcome = client
        .call_and_await("ask_name", (), CallOptions::default(), &options)
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Ada!");

    // isError is a result; a JSON-RPC error is a failure.
    let outcome = client
        .call_and_await("is_error_tool", (), CallOptions::default(), &options)
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result.is_error, Some(true));
    let outcome = client
        .call_and_await("protocol_error_tool", (), CallOptions::default(), &options)
        .await
        .unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(failure.error.code, -32603);
    assert_eq!(failure.error.message, "boom");

    // Cancel, then the wait sees the task cancelled; cancelling again is harmless.
    let CallResponse::Task(state) = client
        .call_tool("forever", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("forever must become a task")
    };
    client.cancel(&state.id).await.unwrap();
    let outcome = client.await_task(&state.id, &options).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    client.cancel(&state.id).await.unwrap();
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::Cancelled
    );

    // Unknown ids.
    let error = client.get(&"no-such-task".into()).await.unwrap_err();
    assert!(error.is_unknown_task(), "{error}");
    assert_eq!(error.code(), Some(-32602));

    // Without the extension the required tool refuses; call_and_await retries with it.
    let refused = client
        .call_tool(
            "forever",
            (),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .unwrap_err();
    assert!(refused.requires_tasks_extension(), "{refused}");
    let outcome = client
        .call_and_await(
            "ask_name",
            (),
            CallOptions::default().with_declare_tasks(false),
            &options,
        )
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Ada!");
}

#[tokio::test]
async fn round_trips_over_stdio_with_rmcp_task_manager() {
    let mut command = Command::new(server_binary());
    command.arg("stdio");
    let transport = TokioChildProcess::new(command).expect("spawn the fixture server");
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect over stdio");
    lifecycle_scenario(&TasksClient::new(running)).await;
}

#[tokio::test]
async fn round_trips_over_streamable_http_with_rmcp_task_manager() {
    let (_server, url) = http_server().await;
    let transport = StreamableHttpClientTransport::from_uri(url);
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect over HTTP");
    lifecycle_scenario(&TasksClient::new(running)).await;
}

/// rmcp's usual connection (`serve_client`: `initialize`, which negotiates
/// 2025-11-25) to a server that advertises the extension in its
/// `initialize` answer: the extension is still what the client uses.
#[tokio::test]
async fn round_trips_over_an_initialize_connection_to_an_extension_server() {
    let mut command = Command::new(server_binary());
    command.arg("stdio");
    let transport = TokioChildProcess::new(command).expect("spawn the fixture server");
    let running = rmcp::service::serve_client(Handler::default(), transport)
        .await
        .expect("connect over stdio with initialize");
    let client = TasksClient::new(running);
    assert!(
        client
            .running()
            .peer_info()
            .is_some_and(|info| info.protocol_version.has_initialize()),
        "the connection must be an initialize one for this test to mean anything"
    );
    assert_eq!(client.era(), mcp_tasks::Era::Extension);
    assert_eq!(
        client.task_methods(),
        Some(vec!["tasks/get", "tasks/update", "tasks/cancel"])
    );
    lifecycle_scenario(&client).await;
}

/// A proxy in front of the HTTP server that answers the first `failures`
/// `tasks/get` requests with 503, forwarding everything else.
async fn flaky_proxy(upstream: String, failures: usize) -> (String, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::new();
    let counter = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let (client, upstream, counter) = (client.clone(), upstream.clone(), counter.clone());
            async move {
                let is_get = headers
                    .get("mcp-method")
                    .is_some_and(|method| method == "tasks/get");
                if is_get && counter.fetch_add(1, Ordering::SeqCst) < failures {
                    return Response::builder()
                        .status(StatusCode::SERVICE_UNAVAILABLE)
                        .body(Body::from("try later"))
                        .expect("a response");
                }
                let mut request = client.post(&upstream).body(body);
                for (name, value) in &headers {
                    if name != "host" && name != "content-length" {
                        request = request.header(name.as_str(), value.as_bytes());
                    }
                }
                let answer = request.send().await.expect("the upstream answers");
                let mut response = Response::builder().status(answer.status().as_u16());
                for (name, value) in answer.headers() {
                    response = response.header(name.as_str(), value.as_bytes());
                }
                let bytes = answer.bytes().await.expect("the upstream body");
                response.body(Body::from(bytes)).expect("a response")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let address = listener.local_addr().expect("the proxy address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/mcp"), seen)
}

#[tokio::test]
async fn transient_http_failures_are_retried_inside_the_deadline() {
    let (_server, upstream) = http_server().await;
    let (url, gets) = flaky_proxy(upstream, 3).await;
    let transport = StreamableHttpClientTransport::from_uri(url);
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect through the proxy");
    let client = TasksClient::new(running);
    let options = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_retry_backoff(Duration::from_millis(20));
    let outcome = client
        .call_and_await(
            "slow",
            args(json!({"ms": 100})),
            CallOptions::default(),
            &options,
        )
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "slept 100 ms");
    assert!(
        gets.load(Ordering::SeqCst) > 3,
        "the failed gets were retried"
    );

    // A direct get sees the 503 as a transport error, not a JSON-RPC one.
    let (_server, upstream) = http_server().await;
    let (url, _) = flaky_proxy(upstream, usize::MAX).await;
    let transport = StreamableHttpClientTransport::from_uri(url);
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect through the proxy");
    let error = TasksClient::new(running)
        .get(&"anything".into())
        .await
        .unwrap_err();
    assert!(error.is_transport(), "{error}");
}
