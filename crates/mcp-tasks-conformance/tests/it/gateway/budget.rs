//! The gateway's result budget in front of an upstream that answers too
//! much: `plain-upstream`'s `big` tool, a real child process over stdio,
//! behind a gateway on a runtime whose budget is 100,000 bytes. A result
//! past the budget but within what the gateway reads of one answer fails
//! its task as any tool's does, naming both sizes; one far past it is not
//! read (the gateway's bound on an upstream answer) and fails its call or
//! task saying so; the upstream connection goes on.

use std::time::Duration;

use mcp_tasks::gateway::{ANSWER_ENVELOPE, Gateway, GatewayOptions, Upstream};
use mcp_tasks::server::TaskRuntime;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, Error, TaskOutcome, TasksClient};
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

use crate::support::{args, text};

const UPSTREAM: &str = env!("CARGO_BIN_EXE_plain-upstream");

const BUDGET: usize = 100_000;

/// A gateway on a runtime of [`BUDGET`] in front of `plain-upstream`, over
/// HTTP, and a client of it.
async fn gateway() -> (Gateway, TasksClient<()>) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(20))
        .with_max_result_bytes(Some(BUDGET))
        .build();
    let gateway = Gateway::start(
        Upstream::command(UPSTREAM),
        runtime.clone(),
        // One connection carries every call: the one that read too much too.
        GatewayOptions::default().with_max_upstream_connections(1),
    )
    .await
    .expect("the gateway starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(StreamableHttpServer::new(gateway.clone(), runtime).serve(listener));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let running =
        serve_client_with_lifecycle((), StreamableHttpClientTransport::from_uri(url), lifecycle)
            .await
            .expect("connect to the gateway");
    (gateway, TasksClient::new(running))
}

/// The size of `big {bytes}`'s result as JSON.
fn result_bytes(bytes: usize) -> usize {
    let result = json!({"content": [{"type": "text", "text": "x".repeat(bytes)}]});
    serde_json::to_vec(&result).unwrap().len()
}

fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The error `big {bytes}` ends with: as a task's failure when `task`, as
/// the refusal of a synchronous call otherwise.
async fn failure(client: &TasksClient<()>, bytes: usize, task: bool) -> (String, Value) {
    let options = CallOptions::default().with_declare_tasks(task);
    let wait = AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)));
    let outcome = client
        .call_and_await("big", args(json!({"bytes": bytes})), options, &wait)
        .await;
    match outcome {
        Ok(TaskOutcome::Failed(failure)) if task => (
            failure.error.message.clone(),
            failure.error.data.clone().unwrap_or_default(),
        ),
        Err(Error::Rpc { error, .. }) if !task => (
            error.message.clone(),
            error.data.clone().unwrap_or_default(),
        ),
        other => panic!("big {bytes} (task: {task}): {other:?}"),
    }
}

#[tokio::test]
async fn a_result_past_the_budget_fails_naming_both_sizes() {
    let (_gateway, client) = gateway().await;
    let bytes = 120_000;
    assert!(result_bytes(bytes) + 1024 < BUDGET + ANSWER_ENVELOPE);
    for task in [true, false] {
        let (message, data) = failure(&client, bytes, task).await;
        assert_eq!(data["resultBytes"], result_bytes(bytes), "{data}");
        assert_eq!(data["maxResultBytes"], BUDGET, "{data}");
        assert_eq!(
            message,
            format!(
                "the tool's result is {} bytes, past this server's limit of {} bytes \
                 (max-result-bytes)",
                grouped(result_bytes(bytes)),
                grouped(BUDGET)
            ),
            "task: {task}"
        );
    }
}

#[tokio::test]
async fn an_upstream_answer_past_the_gateways_bound_is_not_read() {
    let (_gateway, client) = gateway().await;
    let bound = grouped(BUDGET + ANSWER_ENVELOPE);
    for task in [true, false] {
        let (message, data) = failure(&client, 2_000_000, task).await;
        // Counted to the end of its line, not kept.
        assert!(
            data["answerBytes"]
                .as_u64()
                .is_some_and(|size| size > 2_000_000),
            "{data}"
        );
        assert_eq!(data["maxAnswerBytes"], BUDGET + ANSWER_ENVELOPE, "{data}");
        assert!(
            message.starts_with("tools/call to the upstream server: the answer is 2,000,0"),
            "{message}"
        );
        assert!(
            message.contains(&format!(
                "past what this gateway reads of one upstream answer ({bound} bytes: its \
                 max-result-bytes and 64 KiB for the message around the result)"
            )),
            "{message}"
        );
        // The connection goes on: the next call on it is answered.
        let answer = client
            .call_tool(
                "echo",
                args(json!({"text": "still here"})),
                CallOptions::default().with_declare_tasks(false),
            )
            .await
            .expect("echo");
        let CallResponse::Complete(result) = answer else {
            panic!("a result: {answer:?}");
        };
        assert_eq!(text(&result), "still here");
    }
}
