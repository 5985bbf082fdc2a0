//! The upstream server: where it is ([`Upstream`]), the connection to it in
//! whichever era it speaks, and keeping one open: a connection that closes
//! (a stdio child that exited or crashed) is made again with backoff, in
//! the background and by the next call, and the tool list is read again
//! after each connect and on `notifications/tools/list_changed`.
//!
//! **The era** ([`Eras`]) is found at start: `server/discover` first, else
//! `initialize` (a 2025-era server). An upstream that answers
//! `server/discover` without the Tasks extension is asked `initialize` too,
//! on a connection of its own: one that accepts it speaks both eras, and
//! its plain calls go on 2025-era connections, where it can ask for input
//! the way most servers do (a server-initiated request: fastmcp refuses
//! those on 2026-07-28 connections) and read the gateway's roots for its
//! session, while a tool that asks the 2026-07-28 way (an MRTR round,
//! which fastmcp refuses on 2025-era connections with -32602) is called on
//! a 2026-07-28 connection (see [`rounds`](super::rounds)). An upstream
//! that advertises the extension is reached on 2026-07-28 only: its tasks
//! need it.

use std::collections::HashMap;
use std::future::Future;
use std::process::Stdio;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rmcp::model::{ProtocolVersion, Tool};
use rmcp::service::{
    ClientLifecycleMode, RxJsonRpcMessage, TxJsonRpcMessage, serve_client_with_lifecycle,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::{ErrorData, RoleClient};
use serde_json::{Value, json};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::pool::Pool;
use super::relay::{Calls, RelayHandler};
use super::roots::{SessionRoots, SessionWindow};
use super::{Error, GatewayOptions};
use crate::client::listen::DemuxReader;
use crate::client::{Era, ListenChannel, TasksClient, legacy};
use crate::server::TaskPolicy;

/// Where the upstream MCP server is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Upstream {
    /// A command line, run with `sh -c`, that speaks MCP on stdin and stdout.
    Command(String),
    /// A Streamable HTTP endpoint, with headers for every request (an
    /// `Authorization` header is sent as the transport's bearer token).
    Url {
        /// The endpoint, e.g. `http://127.0.0.1:8080/mcp`.
        url: String,
        /// `(name, value)` pairs.
        headers: Vec<(String, String)>,
    },
}

impl Upstream {
    /// A child process: `command` run with `sh -c`.
    pub fn command(command: impl Into<String>) -> Self {
        Self::Command(command.into())
    }

    /// A Streamable HTTP endpoint.
    pub fn url(url: impl Into<String>) -> Self {
        Self::Url {
            url: url.into(),
            headers: Vec::new(),
        }
    }

    /// Adds a header to every request of an HTTP upstream (ignored for a command).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Self::Url { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

/// The client of one upstream connection.
pub(crate) type UpstreamClient = TasksClient<legacy::Handler>;

/// One connection to the upstream.
pub(crate) struct Connection {
    /// Names the connection to the relay: the upstream's requests on it go
    /// to the call in flight on it.
    pub(crate) id: u64,
    pub(crate) client: UpstreamClient,
    /// Fired when the transport closed (a stdio child's stdout ended).
    pub(super) closed: CancellationToken,
    /// When it was opened: one that closes soon after counts as a failure.
    pub(super) opened: Instant,
    /// Closed by the gateway itself (its call was cancelled, or it was
    /// idle): no failure.
    pub(super) retired: std::sync::atomic::AtomicBool,
    /// The gateway's own connection, in the pool too: never closed as idle.
    pub(super) own: std::sync::atomic::AtomicBool,
}

impl Connection {
    /// The era of the connection.
    pub(crate) fn era(&self) -> CallEra {
        if self.client.initialize_era() {
            CallEra::Handshake
        } else {
            CallEra::Modern
        }
    }

    /// Whether the upstream makes tasks of its own: a 2026-07-28 upstream
    /// that advertises the extension, or a 2025-11-25 upstream that
    /// declared `tasks.requests.tools.call`.
    pub(crate) fn makes_tasks(&self) -> bool {
        if self.client.initialize_era() {
            self.client
                .legacy_server_tasks()
                .flatten()
                .is_some_and(|tasks| tasks.tools_call())
        } else {
            self.client.server_supports()
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
            || self.client.running().is_closed()
            || self.client.running().peer().is_transport_closed()
    }

    /// Completes when the transport has closed (or the connection was
    /// given up as lost).
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Whether the upstream answers a `ping` within `timeout`: with a
    /// result or with a JSON-RPC error (a 2026-07-28 server may not know
    /// `ping`); a timeout or a transport failure is no answer.
    pub(super) async fn answers_ping(&self, timeout: Duration) -> bool {
        let ping = rmcp::model::ClientRequest::PingRequest(rmcp::model::PingRequest {
            method: Default::default(),
            extensions: Default::default(),
        });
        let mut options = rmcp::service::PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        let peer = self.client.running().peer();
        match peer.send_request_with_option(ping, options).await {
            Ok(handle) => matches!(
                handle.await_response().await,
                Ok(_) | Err(rmcp::service::ServiceError::McpError(_))
            ),
            Err(_) => false,
        }
    }
}

/// How long a stdio upstream has to exit once its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A child process's stdio as an rmcp transport, through the legacy tap,
/// that says when the child's stdout ends.
struct ChildTransport {
    io: AsyncRwTransport<RoleClient, DemuxReader<legacy::TapRead<ChildStdout>>, ChildStdin>,
    child: Child,
    closed: CancellationToken,
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sending = self.io.send(item);
        let closed = self.closed.clone();
        async move {
            let sent = sending.await;
            if sent.is_err() {
                closed.cancel();
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.io.receive().await;
        if message.is_none() {
            self.closed.cancel();
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed.cancel();
        self.io.close().await?;
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// The eras an upstream is reached in (see the [module](self) docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Eras {
    /// Only `initialize` (a 2025-era server).
    Handshake,
    /// Only 2026-07-28 (a modern-only server, or one that makes tasks with
    /// the extension).
    Modern,
    /// Both: plain calls on 2025-era connections, calls of tools that ask
    /// by MRTR on 2026-07-28 ones.
    Both,
}

/// The era of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallEra {
    /// Opened with `initialize`.
    Handshake,
    /// 2026-07-28.
    Modern,
}

/// How a connection is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// `server/discover`, else `initialize`.
    Probe,
    /// `initialize`, offering 2025-11-25.
    Handshake,
    /// `server/discover` only.
    Modern,
}

impl Lifecycle {
    /// How a connection of `era` is opened to an upstream that speaks `eras`.
    pub(crate) fn of(eras: Eras, era: CallEra) -> Self {
        match (eras, era) {
            (Eras::Both, CallEra::Handshake) => Self::Handshake,
            (Eras::Both, CallEra::Modern) => Self::Modern,
            // An upstream of one era is probed each time, as at start.
            _ => Self::Probe,
        }
    }
}

/// What every connection to the upstream shares: the calls in flight the
/// upstream's messages go to, and the gateway's roots.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) calls: Arc<Calls>,
    pub(crate) roots: Arc<SessionRoots>,
}

/// Opens a connection to `upstream` (within `timeout`), in the era
/// `lifecycle` says: with [`Lifecycle::Probe`] whichever it speaks,
/// 2026-07-28 by `server/discover`, else `initialize` (2025-11-25, or an
/// older version the server settles on).
pub(super) async fn connect(
    upstream: &Upstream,
    shared: &Shared,
    options: &GatewayOptions,
    lifecycle: Lifecycle,
) -> Result<Connection, Error> {
    let id = shared.calls.next_connection();
    let timeout = options.connect_timeout;
    let (lifecycle, handshake_version) = match lifecycle {
        Lifecycle::Probe => (
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            None,
        ),
        Lifecycle::Handshake => (
            ClientLifecycleMode::Initialize,
            Some(ProtocolVersion::V_2025_11_25),
        ),
        Lifecycle::Modern => (
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            None,
        ),
    };
    let window = SessionWindow::default();
    let relay = RelayHandler::new(
        shared.calls.clone(),
        shared.roots.clone(),
        id,
        options.startup_window,
        window.clone(),
        handshake_version,
    );
    let handler = legacy::Handler::new(relay);
    let tap = handler.tap();
    let closed = CancellationToken::new();
    let connecting = async {
        match upstream {
            Upstream::Command(command) => {
                let mut child = tokio::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!("exec {command}"))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|source| Error::Spawn { source })?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    return Err(Error::Spawn {
                        source: std::io::Error::other("the child has no stdin or stdout"),
                    });
                };
                let (listen, stdout) = ListenChannel::stdio(tap.read(stdout));
                let transport = ChildTransport {
                    io: AsyncRwTransport::new_client(stdout, stdin),
                    child,
                    closed: closed.clone(),
                };
                let running = serve_client_with_lifecycle(handler, transport, lifecycle)
                    .await
                    .map_err(|source| Error::Initialize {
                        source: Box::new(source),
                    })?;
                Ok((running, listen))
            }
            Upstream::Url { url, headers } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    if name.eq_ignore_ascii_case("authorization") {
                        let token = value.strip_prefix("Bearer ").unwrap_or(value);
                        config = config.auth_header(token);
                    } else {
                        let name = http::HeaderName::try_from(name.as_str())
                            .map_err(|_| Error::Header { name: name.clone() })?;
                        let value = http::HeaderValue::try_from(value.as_str()).map_err(|_| {
                            Error::Header {
                                name: name.to_string(),
                            }
                        })?;
                        custom.insert(name, value);
                    }
                }
                if !custom.is_empty() {
                    config = config.custom_headers(custom);
                }
                // Redirects are not followed: the upstream is where it was told.
                let http = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|source| Error::Http {
                        source: Box::new(source),
                    })?;
                // Listen streams are POSTs of their own, to the same endpoint.
                let listen = ListenChannel::http(http.clone(), &config);
                let transport = StreamableHttpClientTransport::with_client(tap.http(http), config);
                let running = serve_client_with_lifecycle(handler, transport, lifecycle)
                    .await
                    .map_err(|source| Error::Initialize {
                        source: Box::new(source),
                    })?;
                Ok((running, listen))
            }
        }
    };
    let (running, listen) = tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| Error::ConnectTimeout(timeout))??;
    window.open();
    if running
        .peer()
        .peer_info()
        .is_some_and(|info| info.protocol_version.has_initialize())
    {
        // A session: told when the gateway's roots change.
        shared.roots.register(running.peer().clone(), window);
    }
    Ok(Connection {
        id,
        // An upstream task is awaited on a listen stream where the upstream
        // serves one (2026-07-28), by polling otherwise.
        client: TasksClient::new(running).with_listen(listen),
        closed,
        opened: Instant::now(),
        retired: std::sync::atomic::AtomicBool::new(false),
        own: std::sync::atomic::AtomicBool::new(false),
    })
}

/// How long an upstream that answered `server/discover` has to answer
/// `initialize` too, at start.
const HANDSHAKE_PROBE: Duration = Duration::from_secs(10);

/// Whether an upstream that answered `server/discover` without the Tasks
/// extension accepts `initialize` too: a 2025-era connection to it if it
/// does (see the [module](self) docs).
async fn handshake_too(
    upstream: &Upstream,
    shared: &Shared,
    options: &GatewayOptions,
) -> Option<Connection> {
    let options = options
        .clone()
        .with_connect_timeout(options.connect_timeout.min(HANDSHAKE_PROBE));
    match connect(upstream, shared, &options, Lifecycle::Handshake).await {
        Ok(connection) if connection.era() == CallEra::Handshake => Some(connection),
        // It settled on a version without a handshake: 2026-07-28 only.
        Ok(_) => None,
        Err(error) => {
            tracing::debug!(%error, "the upstream refuses initialize: reached on 2026-07-28 only");
            None
        }
    }
}

/// The upstream's tools as last read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tools {
    pub(crate) list: Arc<Vec<Tool>>,
    /// The task policy a 2025-11-25 upstream marks a tool with
    /// (`execution.taskSupport` `optional` or `required`, and `forbidden`
    /// from an upstream that leaves some tools unmarked), by name.
    pub(crate) marked: HashMap<String, TaskPolicy>,
}

/// Reads every tool, following `nextCursor`. From a 2025-11-25 upstream the
/// raw JSON is read too, for each tool's `execution.taskSupport`.
async fn list_tools(client: &UpstreamClient) -> Result<Tools, ErrorData> {
    if client.era() == Era::Extension {
        let list = client
            .running()
            .peer()
            .list_all_tools()
            .await
            .map_err(|error| upstream_failure("tools/list", &error))?;
        return Ok(Tools {
            list: Arc::new(list),
            marked: HashMap::new(),
        });
    }
    let mut list = Vec::new();
    let mut marked = HashMap::new();
    let mut forbidden = Vec::new();
    // Whether some tool carries no `execution.taskSupport` at all.
    let mut some_unmarked = false;
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = client
            .send_legacy(
                "tools/list",
                params,
                &serde_json::Map::new(),
                Some(Duration::from_secs(60)),
            )
            .await
            .map_err(|error| crate::gateway::client_failure("tools/list", &error))?;
        for raw in page
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Ok(tool) = serde_json::from_value::<Tool>(raw.clone()) else {
                tracing::warn!("the upstream listed a tool that does not read as one; left out");
                continue;
            };
            let mark = raw.pointer("/execution/taskSupport");
            let policy = match mark.and_then(Value::as_str) {
                Some("optional") => Some(TaskPolicy::Optional),
                Some("required") => Some(TaskPolicy::Required),
                Some("forbidden") => {
                    forbidden.push(tool.name.to_string());
                    None
                }
                _ => None,
            };
            some_unmarked |= mark.is_none();
            if let Some(policy) = policy {
                marked.insert(tool.name.to_string(), policy);
            }
            list.push(tool);
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    // `forbidden` is also what an absent mark means, and the TypeScript SDK
    // v1 writes it on every tool not registered as a task tool: from an
    // upstream that marks every tool, `forbidden` is its default and says
    // nothing about the tool. It is kept only from an upstream that leaves
    // some tools unmarked, where it is a choice made for that tool.
    if some_unmarked {
        marked.extend(
            forbidden
                .into_iter()
                .map(|name| (name, TaskPolicy::Forbidden)),
        );
    }
    Ok(Tools {
        list: Arc::new(list),
        marked,
    })
}

/// An rmcp failure of a request to the upstream, as the JSON-RPC error the
/// gateway answers with: the upstream's own error as it sent it, a closed
/// connection said plainly.
pub(crate) fn upstream_failure(method: &str, error: &rmcp::service::ServiceError) -> ErrorData {
    use rmcp::service::ServiceError;
    match error {
        ServiceError::McpError(error) => error.clone(),
        ServiceError::TransportClosed => ErrorData::internal_error(
            format!(
                "the connection to the upstream server was lost during {method} (it exited or \
                 crashed, or stopped answering)"
            ),
            None,
        ),
        ServiceError::TransportSend(error) => ErrorData::internal_error(
            format!("{method} could not reach the upstream server: {error}"),
            None,
        ),
        other => ErrorData::internal_error(
            format!("{method} to the upstream server failed: {other}"),
            None,
        ),
    }
}

/// Keeps the gateway's own connection to the upstream open (it lists the
/// tools and carries the calls of an upstream that makes tasks), beside the
/// [`Pool`] of connections for calls of plain tools.
pub(crate) struct Link {
    pub(crate) upstream: Upstream,
    pub(crate) calls: Arc<Calls>,
    pub(crate) roots: Arc<SessionRoots>,
    pub(crate) pool: Arc<Pool>,
    options: GatewayOptions,
    state: tokio::sync::Mutex<State>,
    tools: RwLock<Tools>,
    /// Counts the changes of the tool list read (not its first reading).
    tools_version: tokio::sync::watch::Sender<u64>,
    /// Fired when the gateway is dropped: the supervisor stops.
    stop: CancellationToken,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Default)]
struct State {
    current: Option<Arc<Connection>>,
    /// Connection attempts that failed (or connections that closed soon
    /// after they opened) in a row, and when the next attempt may be made.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Link {
    /// Connects (the first attempt must succeed), finds the eras the
    /// upstream speaks (see the [module](self) docs) and reads the tools.
    pub(crate) async fn start(
        upstream: Upstream,
        options: GatewayOptions,
    ) -> Result<Arc<Self>, Error> {
        let shared = Shared {
            calls: Arc::new(Calls::default()),
            roots: Arc::new(SessionRoots::new(options.roots.clone())),
        };
        let probe = connect(&upstream, &shared, &options, Lifecycle::Probe).await?;
        let (connection, eras, spare) = match probe.era() {
            CallEra::Handshake => (probe, Eras::Handshake, None),
            CallEra::Modern if probe.client.server_supports() => (probe, Eras::Modern, None),
            CallEra::Modern => match handshake_too(&upstream, &shared, &options).await {
                Some(session) => (session, Eras::Both, Some(probe)),
                None => (probe, Eras::Modern, None),
            },
        };
        tracing::info!(?eras, "connected to the upstream server");
        let tools = list_tools(&connection.client)
            .await
            .map_err(|error| Error::ListTools {
                message: error.message.to_string(),
            })?;
        let pool = Arc::new(Pool::new(
            upstream.clone(),
            shared.clone(),
            options.clone(),
            eras,
        ));
        let connection = Arc::new(connection);
        pool.adopt(&connection);
        if let Some(spare) = spare {
            // The 2026-07-28 connection of the probe: kept for the first
            // call that needs one, closed when idle as any further one.
            pool.keep(Arc::new(spare));
        }
        let link = Arc::new(Self {
            upstream,
            calls: shared.calls,
            roots: shared.roots,
            pool,
            options,
            state: tokio::sync::Mutex::new(State {
                current: Some(connection),
                ..State::default()
            }),
            tools: RwLock::new(tools),
            tools_version: tokio::sync::watch::Sender::new(0),
            stop: CancellationToken::new(),
        });
        let health = matches!(link.upstream, Upstream::Url { .. })
            .then_some(link.options.health_check)
            .filter(|interval| !interval.is_zero());
        tokio::spawn(supervise(Arc::downgrade(&link), link.stop.clone(), health));
        tokio::spawn(follow_tools(Arc::downgrade(&link), link.stop.clone()));
        Ok(link)
    }

    fn shared(&self) -> Shared {
        Shared {
            calls: self.calls.clone(),
            roots: self.roots.clone(),
        }
    }

    /// The open connection, made again if it closed (after the backoff
    /// since the last failed attempt).
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>, ErrorData> {
        let mut state = self.state.lock().await;
        if let Some(current) = state.current.take() {
            if !current.is_closed() {
                state.current = Some(current.clone());
                return Ok(current);
            }
            // An upstream that keeps exiting soon after it starts is started
            // again ever more slowly; one that ran a while, or that the
            // gateway closed itself, at once.
            if current.retired.load(std::sync::atomic::Ordering::Acquire) {
                state.retry_at = None;
            } else if current.opened.elapsed() < self.options.restart_backoff_max {
                state.failures = state.failures.saturating_add(1);
                state.retry_at = Some(Instant::now() + self.backoff(state.failures));
            } else {
                state.failures = 0;
            }
        }
        if let Some(at) = state.retry_at {
            tokio::time::sleep_until(at).await;
        }
        // The gateway's own connection is a 2025-era one where the upstream
        // speaks both eras.
        let lifecycle = Lifecycle::of(self.pool.eras(), CallEra::Handshake);
        let attempt = connect(&self.upstream, &self.shared(), &self.options, lifecycle).await;
        match attempt {
            Ok(connection) => {
                let connection = Arc::new(connection);
                state.current = Some(connection.clone());
                state.retry_at = None;
                drop(state);
                self.pool.adopt(&connection);
                tracing::info!("connected to the upstream server again");
                self.refresh_tools(&connection).await;
                Ok(connection)
            }
            Err(error) => {
                state.current = None;
                state.failures = state.failures.saturating_add(1);
                let backoff = self.backoff(state.failures);
                state.retry_at = Some(Instant::now() + backoff);
                tracing::warn!(%error, retry_in = ?backoff, "cannot reach the upstream server");
                Err(ErrorData::internal_error(
                    format!("the upstream server is not reachable: {error}"),
                    None,
                ))
            }
        }
    }

    fn backoff(&self, failures: u32) -> Duration {
        backoff(
            self.options.restart_backoff_min,
            self.options.restart_backoff_max,
            failures,
        )
    }
    /// The tools as last read; read again first when the upstream said its
    /// list changed.
    pub(crate) async fn tools(&self) -> Tools {
        if self.calls.take_tools_stale()
            && let Ok(connection) = self.connection().await
        {
            self.refresh_tools(&connection).await;
        }
        self.tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The tools as last read, without reading them again.
    pub(crate) fn cached_tools(&self) -> Tools {
        self.tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Tells of every change of the tool list read from now on.
    pub(crate) fn watch_tools(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tools_version.subscribe()
    }

    async fn refresh_tools(&self, connection: &Connection) {
        match list_tools(&connection.client).await {
            Ok(tools) => {
                let changed = {
                    let mut current = self
                        .tools
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let changed = current.list != tools.list || current.marked != tools.marked;
                    *current = tools;
                    changed
                };
                if changed {
                    self.tools_version.send_modify(|version| *version += 1);
                }
            }
            Err(error) => {
                // The next list_changed, call or reconnect tries again.
                self.calls.tools_still_stale();
                tracing::warn!(message = %error.message, "cannot read the upstream's tools");
            }
        }
    }
}

/// Reads the tool list again as soon as the upstream says it changed (and
/// so tells the gateway's clients, see [`Link::watch_tools`]), until the
/// gateway is dropped.
async fn follow_tools(link: Weak<Link>, stop: CancellationToken) {
    let Some(calls) = link.upgrade().map(|link| link.calls.clone()) else {
        return;
    };
    loop {
        tokio::select! {
            () = calls.tools_change() => {}
            () = stop.cancelled() => return,
        }
        let Some(link) = link.upgrade() else { return };
        if link.calls.take_tools_stale()
            && let Ok(connection) = link.connection().await
        {
            link.refresh_tools(&connection).await;
        }
    }
}

/// The pause before attempt `failures + 1`: `min`, doubling, up to `max`.
pub(super) fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    min.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
        .min(max.max(min))
}

/// Restarts the upstream as soon as its connection closes (with the
/// backoff of [`Link::connection`]), until the gateway is dropped. With
/// `health`, pings the upstream that often and gives a connection up as
/// lost when a ping goes unanswered that long: an HTTP upstream that
/// restarted has lost its session, and rmcp never answers a request that
/// its error response names no id for (server-everything's "No valid
/// session ID provided"), so without this the calls would hang.
async fn supervise(link: Weak<Link>, stop: CancellationToken, health: Option<Duration>) {
    loop {
        let Some(strong) = link.upgrade() else { return };
        let connection = tokio::select! {
            connection = strong.connection() => connection,
            () = stop.cancelled() => return,
        };
        drop(strong);
        // On failure `connection` waits out the backoff before its next attempt.
        if let Ok(connection) = connection {
            let mut check = tokio::time::interval(health.unwrap_or(Duration::from_secs(1)));
            check.tick().await;
            loop {
                tokio::select! {
                    () = connection.closed() => break,
                    _ = check.tick() => {
                        if connection.is_closed() {
                            break;
                        }
                        if let Some(timeout) = health
                            && !connection.answers_ping(timeout).await
                        {
                            tracing::warn!("the upstream server does not answer; connecting again");
                            connection.closed.cancel();
                            break;
                        }
                    }
                    () = stop.cancelled() => return,
                }
            }
            tracing::warn!("the upstream server closed the connection; connecting again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_bound() {
        let (min, max) = (Duration::from_millis(250), Duration::from_secs(10));
        let pauses: Vec<u128> = (1..=8).map(|n| backoff(min, max, n).as_millis()).collect();
        assert_eq!(pauses, [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
        assert_eq!(backoff(min, max, u32::MAX), max);
    }
}
