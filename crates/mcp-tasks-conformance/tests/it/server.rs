//! The real `conformance-server` binary over HTTP and over stdio, with
//! both stores, and its usage errors.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::store::{SharedStore, StoreErrorKind};
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TaskOutcome, TasksClient};
use mcp_tasks_sqlite::SqliteStore;
use mcp_tasks_testkit::serve::Served;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::json;

use crate::support::{args, completed_text, text};

const BIN: &str = env!("CARGO_BIN_EXE_conformance-server");

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

async fn tool_names(client: &TasksClient<()>) -> Vec<String> {
    client
        .running()
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

#[tokio::test]
async fn http_prints_the_bound_address_then_serves_the_fixtures() {
    let mut command = Command::new(BIN);
    command.args(["--http", "127.0.0.1:0", "--poll-interval", "100"]);
    let server = Served::command(command, None);
    let url = server
        .url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .filter(|port| port.parse::<u16>().is_ok_and(|port| port != 0))
        .map(|port| format!("http://127.0.0.1:{port}/mcp"))
        .unwrap_or_else(|| panic!("unexpected address {:?}", server.url));

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let running = serve_client_with_lifecycle((), transport, lifecycle())
        .await
        .expect("connect over HTTP");
    let client = TasksClient::new(running);
    assert!(client.server_supports());
    let names = tool_names(&client).await;
    assert_eq!(names.len(), 18, "{names:?}");
    assert!(names.iter().any(|name| name == "test_tool_with_task"));
    assert!(!names.iter().any(|name| name == "long_job"), "{names:?}");
    let greeted = client
        .call_tool(
            "greet",
            args(json!({"name": "Ada"})),
            CallOptions::default(),
        )
        .await
        .expect("greet");
    assert_eq!(completed_text(greeted), "Hello, Ada!");
    let CallResponse::Task(state) = client
        .call_tool(
            "slow_compute",
            args(json!({"seconds": 0})),
            CallOptions::default(),
        )
        .await
        .expect("slow_compute")
    else {
        panic!("slow_compute is a task when declared");
    };
    assert_eq!(state.poll_interval, Some(Duration::from_millis(100)));
}

#[tokio::test]
async fn stdio_serves_with_a_sqlite_store_that_keeps_the_tasks() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("tasks.db");
    let mut command = tokio::process::Command::new(BIN);
    command.args(["--stdio", "--store", &format!("sqlite:{}", path.display())]);
    let transport = TokioChildProcess::new(command).expect("the server starts");
    let running = serve_client_with_lifecycle((), transport, lifecycle())
        .await
        .expect("connect over stdio");
    let client = TasksClient::new(running);
    let names = tool_names(&client).await;
    assert_eq!(names.first().map(String::as_str), Some("greet"));
    let CallResponse::Task(state) = client
        .call_tool(
            "slow_compute",
            args(json!({"seconds": 0.01, "label": "stdio"})),
            CallOptions::default(),
        )
        .await
        .expect("slow_compute")
    else {
        panic!("slow_compute is a task when declared");
    };
    let waiting = AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)));
    let outcome = client.await_task(&state, &waiting).await.expect("awaited");
    let TaskOutcome::Completed(result) = outcome else {
        panic!("completed expected: {outcome:?}");
    };
    assert_eq!(text(&result), "stdio: computed in 0.01 s");
    drop(client);
    // Another handle on the file sees the finished task, once the server
    // (which holds the file's lock while it runs) has exited.
    let store: SharedStore = Arc::new(open_once_released(&path).await);
    let record = store
        .get(&state.id)
        .await
        .expect("read")
        .expect("the task was kept");
    assert!(record.status().is_terminal());
}

/// The SQLite store at `path`, opened as soon as the server that held it
/// has exited (it holds the file's lock until then), within 10 s.
async fn open_once_released(path: &std::path::Path) -> SqliteStore {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match SqliteStore::open(path) {
            Ok(store) => return store,
            Err(error)
                if error.kind() == StoreErrorKind::InUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("the store opens again once the server exited: {error}"),
        }
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    for bad in [
        &["--http"][..],
        &["--stdio", "--http", "127.0.0.1:0"],
        &["--store", "redis://localhost"],
        &["--poll-interval", "soon"],
        &["--frobnicate"],
    ] {
        let output = Command::new(BIN)
            .args(bad)
            .stdin(Stdio::null())
            .output()
            .expect("the binary runs");
        assert_eq!(output.status.code(), Some(64), "{bad:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("usage: conformance-server"), "{stderr}");
    }
}
