//! The one harness that starts a server binary as a child process and reads
//! where it listens: `mcp-tasks serve --http ...` (whose first stdout line
//! is `listening on URL`, then `operator listener on http://ADDR` with
//! `--admin`), or a fixture binary that prints the same line. The caller
//! names the binary (`env!("CARGO_BIN_EXE_mcp-tasks")` in the CLI crate's
//! tests, [`beside_tests`] elsewhere); the child is killed when dropped.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_tasks::TasksClient;
use mcp_tasks::client::ListenChannel;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::IntoTransport;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClient;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};

/// The prefix of the line a server prints once it listens.
pub const LISTENING_ON: &str = "listening on ";

/// The prefix of the line `serve --admin` prints next.
pub const OPERATOR_ON: &str = "operator listener on http://";

/// The URL of a `listening on URL` line, if `line` is one.
pub fn listening_url(line: &str) -> Option<&str> {
    line.trim().strip_prefix(LISTENING_ON)
}

/// The path of binary `name` of this workspace, beside the test (or bench)
/// executable: `target/debug/NAME` for `target/debug/deps/it-HASH`. For a
/// binary of another package, which `cargo test --workspace` builds but
/// `cargo test -p THIS` does not: panics saying how to build it.
pub fn beside_tests(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (which builds \
         every package's binaries) or `cargo build --bin {name}` first",
        path.display()
    );
    path
}

/// Every stderr line of one or several servers, in the order read.
pub type Logs = Arc<Mutex<Vec<String>>>;

/// A server binary as a child process that has said where it listens;
/// killed (SIGKILL) when dropped.
pub struct Served {
    child: Child,
    /// The endpoint of its `listening on` line (`http://ADDR/mcp` for `serve`).
    pub url: String,
    /// The operator listener's `host:port`, when started with `--admin`
    /// (else empty).
    pub admin: String,
    /// From spawn to the `listening on` line.
    pub listening: Duration,
    /// Its stderr lines, when kept ([`Served::spawn`]).
    logs: Option<Logs>,
    /// The thread that reads them, joined once the server is gone.
    reader: Option<std::thread::JoinHandle<()>>,
    /// How many of `logs` [`Served::stderr_line`] has read past.
    read: std::cell::Cell<usize>,
}

impl Served {
    /// `binary serve --http ADDRESS --store STORE EXTRA` (`address` e.g.
    /// `127.0.0.1:0`); returns once it listens.
    pub fn start(binary: impl AsRef<OsStr>, address: &str, store: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--http", address, "--store", store];
        args.extend_from_slice(extra);
        Self::spawn(binary, &args, &[], None)
    }

    /// `binary serve ARGS` (which serve HTTP) with the environment variables
    /// `env`; returns once it prints where it listens (and, with `--admin`,
    /// where its operator listener is). With `logs`, its stderr lines go
    /// there (and are echoed), else to the test's stderr.
    pub fn spawn(
        binary: impl AsRef<OsStr>,
        args: &[&str],
        env: &[(&str, &str)],
        logs: Option<&Logs>,
    ) -> Self {
        let mut command = Command::new(binary);
        command.arg("serve").args(args).envs(env.iter().copied());
        Self::command(command, logs)
    }

    /// Spawns `command` (any server binary; its stderr as the command says
    /// unless `logs` keeps it) and reads its `listening on` line, then its
    /// `operator listener on` line if its arguments have `--admin`; panics
    /// with what it said if it ends first. Its stdin is a pipe left open
    /// until it is dropped.
    pub fn command(command: Command, logs: Option<&Logs>) -> Self {
        Self::try_command(command, logs).unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`Served::command`], with an error instead of a panic (for benches).
    pub fn try_command(mut command: Command, logs: Option<&Logs>) -> Result<Self, String> {
        let wants_admin = command.get_args().any(|arg| arg == "--admin");
        // Its stdin stays open while it runs: fixtures such as
        // `rmcp-task-server http` stop at its end.
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        if logs.is_some() {
            command.stderr(Stdio::piped());
        }
        let spawned = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|error| format!("start {command:?}: {error}"))?;
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
        let mut next = |prefix: &str| -> Result<String, String> {
            let Some(line) = lines.next() else {
                // Its stderr, read to its end (it ended).
                let said = match (reader.take(), logs) {
                    (Some(reader), Some(logs)) => {
                        let _ = reader.join();
                        logs.lock().unwrap().join("\n")
                    }
                    _ => "(on the test's stderr)".to_owned(),
                };
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the server ended before it printed where it listens: {said}"
                ));
            };
            let line = line.map_err(|error| format!("its stdout: {error}"))?;
            line.trim()
                .strip_prefix(prefix)
                .map(str::to_owned)
                .ok_or_else(|| format!("expected {prefix:?}, got {line:?}"))
        };
        let url = next(LISTENING_ON);
        let listening = spawned.elapsed();
        let admin = match (&url, wants_admin) {
            (Ok(_), true) => next(OPERATOR_ON),
            _ => Ok(String::new()),
        };
        let mut served = Self {
            child,
            url: String::new(),
            admin: String::new(),
            listening,
            logs: logs.cloned(),
            reader,
            read: std::cell::Cell::new(0),
        };
        served.url = url?;
        served.admin = admin?;
        Ok(served)
    }

    /// The `host:port` it listens on.
    pub fn address(&self) -> &str {
        self.url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no chance to end, hand over or write anything. Its kept
    /// stderr ([`Served::spawn`]'s `logs`) is then read to its end.
    pub fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    /// Sends `signal` (`TERM`, `INT`) to the server.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// The exit code, waiting up to `within` for the server to exit.
    pub fn exit_code(&mut self, within: Duration) -> Option<i32> {
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
    pub fn interrupt(&mut self) {
        self.signal("INT");
        assert_eq!(
            self.exit_code(Duration::from_secs(40)),
            Some(0),
            "the server did not stop cleanly on SIGINT"
        );
    }

    /// Every line of its stderr read so far (kept with [`Served::spawn`]'s
    /// `logs`; all of them once [`Served::kill_9`] returned).
    pub fn stderr(&self) -> Vec<String> {
        let logs = self.logs.as_ref().expect("started with its stderr kept");
        logs.lock().unwrap().clone()
    }

    /// The next line of its stderr (kept with [`Served::spawn`]'s `logs`)
    /// that contains `text`, after the last one this returned, waiting up
    /// to `within`.
    pub fn stderr_line(&self, text: &str, within: Duration) -> String {
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
    pub async fn client(&self) -> TasksClient<Forms> {
        self.client_as(None).await
    }

    /// [`Served::client`] sending `token` as its bearer token (without
    /// `--auth-tokens` a caller's principal is a hash of what it sends).
    pub async fn client_as(&self, token: Option<&str>) -> TasksClient<Forms> {
        client_of(&self.url, token).await
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill_9();
    }
}

/// Declares form elicitation; answers nothing itself (the test updates).
#[derive(Debug, Clone, Default)]
pub struct Forms;

impl ClientHandler for Forms {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        ClientConfig::new(capabilities, Implementation::new("serving-tests", "0"))
    }
}

/// A 2026-07-28 client of the MCP endpoint at `url` that listens over HTTP.
pub async fn client_of(url: &str, token: Option<&str>) -> TasksClient<Forms> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let http = reqwest::Client::new();
    let channel = ListenChannel::http(http.clone(), &config);
    let transport = StreamableHttpClientTransport::with_client(http, config);
    discover(transport).await.with_listen(channel)
}

/// A 2026-07-28 client of the MCP endpoint at `url` over `http` (reqwest's
/// client, rmcp's `AuthClient`) that polls: no listen stream.
pub async fn polling_client_over<C>(url: &str, http: C) -> TasksClient<Forms>
where
    C: StreamableHttpClient + Send + Sync + 'static,
{
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    discover(StreamableHttpClientTransport::with_client(http, config)).await
}

/// A [`Forms`] client over `transport`, opened with `server/discover`.
async fn discover<T, E, A>(transport: T) -> TasksClient<Forms>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    TasksClient::new(
        serve_client_with_lifecycle(Forms, transport, lifecycle)
            .await
            .expect("connect"),
    )
}
