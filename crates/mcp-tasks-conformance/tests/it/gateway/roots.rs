//! The task gateway's own roots (`GatewayOptions::with_roots`,
//! `Gateway::set_roots`) in front of `plain-upstream`, which asks for its
//! client's roots for the session: at start-up (`--roots-at-start`) and
//! again at each `notifications/roots/list_changed`, as filesystem servers
//! do; its `startup_roots` tool says what it got.

// Roots are deprecated (SEP-2577) but upstreams of the 2025 era still ask.
#![allow(deprecated)]

use std::time::Duration;

use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream, root_for_path};
use mcp_tasks::server::TaskRuntime;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{CallOptions, CallResponse, TaskOutcome, TasksClient};
use rmcp::model::{ProtocolVersion, Root};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::support::{args, completed_text, serve_gateway, text, waiting};

const UPSTREAM: &str = env!("CARGO_BIN_EXE_plain-upstream");

/// A gateway in front of `plain-upstream --roots-at-start 0`, and a
/// 2026-07-28 client of it.
async fn gateway(options: GatewayOptions) -> (Gateway, TasksClient<()>) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let command = format!("{UPSTREAM} --roots-at-start 0");
    let gateway = Gateway::start(Upstream::command(command), runtime.clone(), options)
        .await
        .expect("the gateway starts in front of plain-upstream");
    let url = serve_gateway(gateway.clone(), runtime).await;
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let running = serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .expect("connect to the gateway");
    (gateway, TasksClient::new(running))
}

/// Two directories, `alpha` and `beta`, as roots (kept while the guard lives).
fn roots() -> (tempfile::TempDir, Root, Root) {
    let dir = tempfile::tempdir().unwrap();
    let made = ["alpha", "beta"].map(|name| {
        let path = dir.path().join(name);
        std::fs::create_dir(&path).unwrap();
        root_for_path(&path).unwrap()
    });
    let [alpha, beta] = made;
    (dir, alpha, beta)
}

/// How `startup_roots` words `roots`.
fn said(roots: &[&Root]) -> String {
    let listed: Vec<String> = roots
        .iter()
        .map(|root| format!("{} ({})", root.uri, root.name.as_deref().unwrap_or("?")))
        .collect();
    format!("roots: {}", listed.join(", "))
}

/// What `startup_roots` answers once it answers `want` (5 s at most; then
/// what it answered last), each ask `concurrent` calls at once (each on a
/// connection of its own).
async fn startup_roots(client: &TasksClient<()>, concurrent: usize, want: &str) -> Vec<String> {
    let mut answers = Vec::new();
    for _ in 0..100 {
        let calls = (0..concurrent).map(|_| async {
            let response = client
                .call_tool(
                    "startup_roots",
                    (),
                    CallOptions::default().with_declare_tasks(false),
                )
                .await
                .expect("tools/call");
            completed_text(response)
        });
        answers = futures::future::join_all(calls).await;
        if answers.iter().all(|answer| answer == want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    answers
}

#[tokio::test]
async fn the_upstreams_start_up_ask_is_answered_with_the_gateways_roots() {
    let (_dir, alpha, beta) = roots();
    assert!(alpha.uri.starts_with("file:///") && alpha.uri.ends_with("/alpha"));
    let options = GatewayOptions::default().with_roots([alpha.clone(), beta.clone()]);
    let (gateway, client) = gateway(options).await;
    assert_eq!(gateway.roots(), [alpha.clone(), beta.clone()]);
    let want = said(&[&alpha, &beta]);
    assert_eq!(startup_roots(&client, 1, &want).await, [want]);
}

#[tokio::test]
async fn set_roots_tells_every_open_session_which_asks_again() {
    let (_dir, alpha, beta) = roots();
    let options = GatewayOptions::default()
        .with_roots([alpha.clone()])
        .with_max_upstream_connections(2);
    let (gateway, client) = gateway(options).await;
    // Two connections (two processes), each with the roots it read at start.
    let want = said(&[&alpha]);
    assert_eq!(startup_roots(&client, 2, &want).await, [want.clone(), want]);

    assert!(gateway.set_roots([beta.clone()]).await);
    assert!(
        !gateway.set_roots([beta.clone()]).await,
        "no change, no news"
    );
    assert_eq!(gateway.roots(), std::slice::from_ref(&beta));
    let want = said(&[&beta]);
    assert_eq!(startup_roots(&client, 2, &want).await, [want.clone(), want]);
}

#[tokio::test]
async fn the_upstreams_ask_after_list_changed_is_the_sessions_even_during_a_call() {
    let (_dir, alpha, beta) = roots();
    let options = GatewayOptions::default()
        .with_roots([alpha.clone()])
        .with_max_upstream_connections(1);
    let (gateway, client) = gateway(options).await;
    let want = said(&[&alpha]);
    assert_eq!(startup_roots(&client, 1, &want).await, [want]);
    // Past the start-up window, a call is in flight on the one connection
    // when the roots change: the upstream's ask in return is answered by
    // the gateway, not relayed to the call's task.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let state = match client
        .call_tool(
            "progress",
            args(json!({"steps": 4, "ms": 250})),
            CallOptions::default(),
        )
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task, got {other:?}"),
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(gateway.set_roots([beta.clone()]).await);
    match client.await_task(state, &waiting()).await.unwrap() {
        TaskOutcome::Completed(result) => assert_eq!(text(&result), "done: 4 steps"),
        other => panic!("expected completed (no input asked), got {other:?}"),
    }
    let want = said(&[&beta]);
    assert_eq!(startup_roots(&client, 1, &want).await, [want]);
}
