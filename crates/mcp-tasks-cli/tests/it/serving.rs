//! `mcp-tasks serve --http` as a child process on any store, and a client
//! of it: for the tests that stop a server mid-task (SIGKILL, SIGTERM) and
//! start it again, or run several replicas of it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mcp_tasks::client::ListenChannel;
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, InputMode, TaskId, TaskOutcome, TaskState, TasksClient,
};
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, Implementation, JsonObject,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

use crate::support::BIN;

/// Declares form elicitation; answers nothing itself (the test updates).
#[derive(Debug, Clone, Default)]
pub(crate) struct Forms;

impl ClientHandler for Forms {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        ClientConfig::new(capabilities, Implementation::new("serving-tests", "0"))
    }
}

/// `mcp-tasks serve --http` on a store; killed when dropped.
pub(crate) struct Served {
    child: Child,
    pub(crate) url: String,
}

impl Served {
    /// Serves on 127.0.0.1 (`address`, e.g. `127.0.0.1:0`) with `--store
    /// store` and the further flags `extra`; returns once it listens.
    pub(crate) fn start(address: &str, store: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(["serve", "--http", address, "--store", store])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the server prints where it listens");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self { child, url }
    }

    /// The `host:port` it listens on.
    pub(crate) fn address(&self) -> &str {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
    }

    /// SIGKILL: no chance to end, hand over or write anything.
    pub(crate) fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (`TERM`, `INT`) and waits, up to `within`, for the
    /// server to exit; its exit status.
    #[allow(dead_code, reason = "for the drain tests")]
    pub(crate) fn signal_and_wait(&mut self, signal: &str, within: Duration) -> ExitStatus {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} failed");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {within:?} of SIG{signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A client of this server that listens over HTTP.
    pub(crate) async fn client(&self) -> TasksClient<Forms> {
        self.client_as(None).await
    }

    /// [`Served::client`] sending `token` as its bearer token (without
    /// `--auth-tokens` a caller's principal is a hash of what it sends).
    pub(crate) async fn client_as(&self, token: Option<&str>) -> TasksClient<Forms> {
        client_of(&self.url, token).await
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill_9();
    }
}

/// A client of the MCP endpoint at `url` that listens over HTTP.
pub(crate) async fn client_of(url: &str, token: Option<&str>) -> TasksClient<Forms> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let http = reqwest::Client::new();
    let channel = ListenChannel::http(http.clone(), &config);
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    TasksClient::new(
        serve_client_with_lifecycle(Forms, transport, lifecycle)
            .await
            .expect("connect"),
    )
    .with_listen(channel)
}

pub(crate) fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// Calls `tool`, which must make a task.
pub(crate) async fn start(client: &TasksClient<Forms>, tool: &str, arguments: Value) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("{tool} should make a task, got {other:?}"),
    }
}

/// Reads task `id` every 20 ms until `done` holds, for at most `within`.
pub(crate) async fn until(
    client: &TasksClient<Forms>,
    id: &TaskId,
    within: Duration,
    mut done: impl FnMut(&TaskState) -> bool,
) -> TaskState {
    let deadline = Instant::now() + within;
    loop {
        let state = client.get(id).await.expect("tasks/get");
        if done(&state) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {:?} {:?}",
            state.status,
            state.status_message
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The text of a completed task's result.
pub(crate) fn text_of(outcome: &TaskOutcome) -> String {
    match outcome {
        TaskOutcome::Completed(result) => serde_json::to_value(result).expect("json")["content"][0]
            ["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        other => panic!("expected a completed task, got {other:?}"),
    }
}

/// Await options: a 30 s deadline, input requests returned to the test.
pub(crate) fn returned() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(30)))
        .with_input(InputMode::Return)
}
