//! `fastmcp-retry-check (--stdio 'CMD' | --url URL) TOOL`: calls TOOL through
//! `TasksClient::call_and_await` with `CallOptions::with_declare_tasks(false)`.
//! Prints one JSON line {"outcome", "text"} and exits 0 when the call completed.
//! Whether a -32021 came first is for the caller to read from the server's side
//! (server.py's FIXTURE_TRACE).

use std::time::Duration;

use mcp_tasks::{AwaitOptions, CallOptions, ConnectOptions, Endpoint, TaskOutcome, TasksClient};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::ClientLifecycleMode;
use rmcp::ClientHandler;

#[derive(Clone)]
struct Handler;

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("fastmcp-retry-check", "0.0.0"),
        )
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 || !["--stdio", "--url"].contains(&args[1].as_str()) {
        eprintln!("usage: fastmcp-retry-check (--stdio 'CMD' | --url URL) TOOL");
        std::process::exit(64);
    }
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let endpoint = if args[1] == "--stdio" {
        Endpoint::shell(args[2].clone())
    } else {
        Endpoint::url(args[2].clone())
    };
    let connect = ConnectOptions::default().with_lifecycle(lifecycle);
    let client = TasksClient::connect(endpoint, Handler, connect)
        .await
        .expect("connect");
    let call = CallOptions::default().with_declare_tasks(false);
    let wait = AwaitOptions::default().with_deadline(Some(Duration::from_secs(30)));
    let outcome = client.call_and_await(args[3].clone(), (), call, &wait).await;
    let (status, text) = match &outcome {
        Ok(TaskOutcome::Completed(result)) => (
            "completed".to_owned(),
            result
                .content
                .iter()
                .filter_map(|block| block.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Ok(other) => (other.status().to_string(), String::new()),
        Err(error) => (format!("error {:?}", error.code()), error.to_string()),
    };
    println!("{}", serde_json::json!({"outcome": status, "text": text}));
    std::process::exit(if status == "completed" { 0 } else { 1 });
}
