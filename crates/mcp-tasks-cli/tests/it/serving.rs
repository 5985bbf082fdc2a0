//! `mcp-tasks serve --http` as a child process on any store, and a client
//! of it: for the tests that stop a server mid-task (SIGKILL, SIGTERM) and
//! start it again, or run several replicas of it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
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

/// Every stderr line of one or several servers, in the order read.
pub(crate) type Logs = Arc<Mutex<Vec<String>>>;

/// `mcp-tasks serve --http` as a child process; killed when dropped.
pub(crate) struct Served {
    child: Child,
    /// The MCP endpoint, `http://ADDR/mcp`.
    pub(crate) url: String,
    /// The operator listener's `host:port`, when started with `--admin`.
    pub(crate) admin: String,
    /// Its stderr lines, when kept ([`Served::spawn`]).
    logs: Option<Logs>,
    /// How many of `logs` [`Served::stderr_line`] has read past.
    read: std::cell::Cell<usize>,
}

impl Served {
    /// Serves on 127.0.0.1 (`address`, e.g. `127.0.0.1:0`) with `--store
    /// store` and the further flags `extra`; returns once it listens.
    pub(crate) fn start(address: &str, store: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--http", address, "--store", store];
        args.extend_from_slice(extra);
        Self::spawn(&args, &[], None)
    }

    /// `mcp-tasks serve ARGS` (which serve HTTP) with the environment
    /// variables `env`; returns once it prints where it listens (and,
    /// with `--admin`, where its operator listener is). With `logs`, its
    /// stderr lines go there (and are echoed), else to the test's stderr.
    pub(crate) fn spawn(args: &[&str], env: &[(&str, &str)], logs: Option<&Logs>) -> Self {
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(match logs {
                Some(_) => Stdio::piped(),
                None => Stdio::inherit(),
            })
            .spawn()
            .expect("the server starts");
        // Read from the start, so that a server that ends early says why.
        let mut reader = logs.map(|logs| {
            let stderr = child.stderr.take().expect("stderr");
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    eprintln!("server: {line}");
                    logs.lock().unwrap().push(line);
                }
            })
        });
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut next = |prefix: &str| {
            let Some(line) = lines.next() else {
                // Its stderr, read to its end (it ended).
                let said = match (reader.take(), logs) {
                    (Some(reader), Some(logs)) => {
                        let _ = reader.join();
                        logs.lock().unwrap().join("\n")
                    }
                    _ => "(on the test's stderr)".to_owned(),
                };
                panic!("the server ended before it printed where it listens: {said}");
            };
            let line = line.expect("readable");
            line.strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
                .to_owned()
        };
        let url = next("listening on ");
        let admin = match args.contains(&"--admin") {
            true => next("operator listener on http://"),
            false => String::new(),
        };
        Self {
            child,
            url,
            admin,
            logs: logs.cloned(),
            read: std::cell::Cell::new(0),
        }
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

    /// Sends `signal` (`TERM`, `INT`) to the server.
    pub(crate) fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// The exit code, waiting up to `within` for the server to exit.
    pub(crate) fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Ctrl-C (SIGINT), then waits up to 40 s for a clean exit.
    pub(crate) fn interrupt(&mut self) {
        self.signal("INT");
        assert_eq!(
            self.exit_code(Duration::from_secs(40)),
            Some(0),
            "the server did not stop cleanly on SIGINT"
        );
    }

    /// The next line of its stderr (kept with [`Served::spawn`]'s `logs`)
    /// that contains `text`, after the last one this returned, waiting up
    /// to `within`.
    pub(crate) fn stderr_line(&self, text: &str, within: Duration) -> String {
        let logs = self.logs.as_ref().expect("started with its stderr kept");
        let deadline = Instant::now() + within;
        loop {
            let found = logs
                .lock()
                .unwrap()
                .iter()
                .enumerate()
                .skip(self.read.get())
                .find(|(_, line)| line.contains(text))
                .map(|(at, line)| (at, line.clone()));
            if let Some((at, line)) = found {
                self.read.set(at + 1);
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "no line with {text:?} on stderr within {within:?}"
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
