//! Small helpers the test files share.

use std::time::Duration;

use mcp_tasks::{AwaitOptions, CallResponse, InputMode};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

/// A JSON object as tool arguments (anything else: none).
pub(crate) fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// The text of a result's first content block.
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// The text of a call's plain result; anything else fails the test.
pub(crate) fn completed_text(response: CallResponse) -> String {
    match response {
        CallResponse::Complete(result) => text(&result),
        other => panic!("expected a plain result, got {other:?}"),
    }
}

/// Serves `gateway` over Streamable HTTP on a fresh loopback port, in the
/// background: its endpoint's URL.
pub(crate) async fn serve_gateway(
    gateway: mcp_tasks::gateway::Gateway,
    runtime: mcp_tasks::server::TaskRuntime,
) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(
        mcp_tasks::server::http::StreamableHttpServer::new(gateway, runtime).serve(listener),
    );
    url
}

/// Waits of at most 20 s that return at `input_required`.
pub(crate) fn waiting() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_input(InputMode::Return)
}

/// A fresh path for a `plain-upstream` log (`kind`: `cancel`, `life`),
/// unique to this test process and `line`; any file left there is removed.
pub(crate) fn fixture_log(kind: &str, line: u32) -> std::path::PathBuf {
    let log = std::env::temp_dir().join(format!(
        "plain-upstream-{kind}-{}-{line}.log",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    log
}

/// What `log` holds once it holds anything (at most 5 s of waiting; then
/// what it holds, perhaps nothing).
pub(crate) async fn first_lines(log: &std::path::Path) -> String {
    let mut heard = String::new();
    for _ in 0..100 {
        heard = std::fs::read_to_string(log).unwrap_or_default();
        if !heard.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    heard
}
