//! Listen mode against a server that does not listen: rmcp's own
//! `TaskManager` fixture (`rmcp-task-server` of the conformance crate), over a real
//! child process and over Streamable HTTP. It answers `subscriptions/listen`
//! with -32601: a wait polls it, or fails when it must listen.

use std::process::Stdio;

use mcp_tasks::client::ListenChannel;
use mcp_tasks::{CallOptions, ListenMode, TasksClient};
use rmcp::service::serve_client_with_lifecycle;
use serde_json::json;
use tokio::process::Command;

use super::listening;
use crate::client::transports::{http_server, server_binary};
use crate::support::listening::http_client;
use crate::support::{Handler, args, completed_text, lifecycle};

async fn scenario(client: &TasksClient<Handler>) {
    assert!(client.can_listen());
    let outcome = client
        .call_and_await(
            "slow",
            args(json!({"ms": 100})),
            CallOptions::default(),
            &listening(ListenMode::Auto),
        )
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "slept 100 ms");
    let error = client
        .call_and_await(
            "slow",
            args(json!({"ms": 100})),
            CallOptions::default(),
            &listening(ListenMode::Required),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32601), "{error}");
}

#[tokio::test]
async fn a_server_without_listen_over_stdio_is_polled() {
    let mut child = Command::new(server_binary())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the fixture server");
    let stdout = child.stdout.take().expect("piped stdout");
    let stdin = child.stdin.take().expect("piped stdin");
    let (channel, stdout) = ListenChannel::stdio(stdout);
    let running = serve_client_with_lifecycle(Handler::default(), (stdout, stdin), lifecycle())
        .await
        .expect("connect over stdio");
    scenario(&TasksClient::new(running).with_listen(channel)).await;
}

#[tokio::test]
async fn a_server_without_listen_over_http_is_polled() {
    let (_server, url) = http_server().await;
    scenario(&http_client(&url, None, Handler::default()).await).await;
}
