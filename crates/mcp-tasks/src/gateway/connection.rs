//! One connection to the upstream: where the upstream is ([`Upstream`]),
//! the era a connection is opened in ([`Eras`], [`CallEra`],
//! [`Lifecycle`]; see the [`upstream`](super::upstream) docs for how it is
//! chosen), the transport of a stdio child, and the backoff between
//! attempts to connect.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::ClientLifecycleMode;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::breaker::{Health, the_upstream};
use super::relay::{Calls, RelayHandler};
use super::roots::{SessionRoots, SessionWindow};
use super::{Error, GatewayOptions};
use crate::client::connect::{self, Opened};
use crate::client::{ConnectOptions, Endpoint, Error as ClientError, TasksClient, legacy};
use rmcp::ErrorData;

/// Where the upstream MCP server is.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Upstream {
    /// A command line, run with `sh -c`, that speaks MCP on stdin and
    /// stdout, with variables added to its environment.
    Command {
        /// The command line.
        command: String,
        /// `(name, value)` pairs added to the gateway's own environment.
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP endpoint, with headers for every request (an
    /// `Authorization` header is sent as the transport's bearer token).
    Url {
        /// The endpoint, e.g. `http://127.0.0.1:8080/mcp`.
        url: String,
        /// `(name, value)` pairs.
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for Upstream {
    /// Names only, never a header's or a variable's value (they may be secrets).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| name.clone()).collect()
        };
        match self {
            Self::Command { command, env } => f
                .debug_struct("Command")
                .field("command", command)
                .field("env", &names(env))
                .finish(),
            Self::Url { url, headers } => f
                .debug_struct("Url")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

impl Upstream {
    /// Where the client half connects to.
    fn endpoint(&self) -> Endpoint {
        match self {
            Self::Command { command, .. } => Endpoint::shell(command.clone()),
            Self::Url { url, headers } => Endpoint::Url {
                url: url.clone(),
                headers: headers.clone(),
            },
        }
    }

    /// The variables added to a child's environment.
    fn env(&self) -> &[(String, String)] {
        match self {
            Self::Command { env, .. } => env,
            Self::Url { .. } => &[],
        }
    }

    /// A child process: `command` run with `sh -c`.
    pub fn command(command: impl Into<String>) -> Self {
        Self::Command {
            command: command.into(),
            env: Vec::new(),
        }
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

    /// Adds a variable to a child's environment (ignored for a URL).
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Self::Command { env, .. } = &mut self {
            env.push((name.into(), value.into()));
        }
        self
    }

    /// This upstream with the header `name` set to `value` alone (any
    /// header of that name, in any case, replaced): how a caller's identity
    /// is sent. A command is left as it is.
    pub(crate) fn with_only_header(mut self, name: &str, value: &str) -> Self {
        if let Self::Url { headers, .. } = &mut self {
            headers.retain(|(given, _)| !given.eq_ignore_ascii_case(name));
            headers.push((name.to_owned(), value.to_owned()));
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
    /// The upstream's name (the `upstream` label of its metrics).
    pub(crate) upstream: Arc<str>,
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
    /// The upstream's name and breaker, told of every attempt to connect.
    pub(crate) health: Arc<Health>,
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
    connect_on(upstream, shared, options, lifecycle, None).await
}

/// [`connect`] in `lifecycle`, taking over the Streamable HTTP session
/// `session` of an earlier connection (see `resume.rs`), which is then
/// never closed from here: other tasks of the gateway that made it may
/// still be followed on it.
pub(super) async fn connect_on(
    upstream: &Upstream,
    shared: &Shared,
    options: &GatewayOptions,
    lifecycle: Lifecycle,
    session: Option<Arc<str>>,
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
    let mut connect = ConnectOptions::default()
        .with_lifecycle(lifecycle)
        .with_timeout(Some(timeout))
        .with_env(upstream.env().iter().cloned())
        .with_max_answer_bytes(
            options
                .max_answer_bytes
                .unwrap_or(crate::client::DEFAULT_MAX_ANSWER_BYTES),
        );
    connect.adopt_http_session = session;
    // Redirects are not followed (the default): the upstream is where it was told.
    let Opened {
        running,
        listen,
        closed,
        lines,
    } = match connect::open(&upstream.endpoint(), relay, &connect).await {
        Ok(opened) => {
            shared.health.connected();
            opened
        }
        Err(error) => {
            shared.health.failed();
            return Err(upstream_error(error));
        }
    };
    window.open();
    if running
        .peer()
        .peer_info()
        .is_some_and(|info| info.protocol_version.has_initialize())
    {
        // A session: told when the gateway's roots change.
        shared.roots.register(running.peer().clone(), window);
    }
    // An upstream task is awaited on a listen stream where the upstream
    // serves one (2026-07-28), by polling otherwise.
    let client = match lines {
        Some(check) => TasksClient::new(running)
            .with_listen(listen)
            .with_line_check(check),
        None => TasksClient::new(running).with_listen(listen),
    };
    if connect.adopt_http_session.is_some() {
        client.keep_http_session();
    }
    Ok(Connection {
        id,
        upstream: shared.health.name.clone(),
        client,
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
pub(super) async fn handshake_too(
    upstream: &Upstream,
    shared: &Shared,
    options: &GatewayOptions,
) -> Option<Connection> {
    let options = options
        .clone()
        .with_connect_timeout(options.connect_timeout.min(HANDSHAKE_PROBE));
    // A refusal is an answer here, not a failure of the upstream.
    let shared = Shared {
        health: shared.health.unheeded(),
        ..shared.clone()
    };
    match connect(upstream, &shared, &options, Lifecycle::Handshake).await {
        Ok(connection) if connection.era() == CallEra::Handshake => Some(connection),
        // It settled on a version without a handshake: 2026-07-28 only.
        Ok(_) => None,
        Err(error) => {
            tracing::debug!(%error, "the upstream refuses initialize: reached on 2026-07-28 only");
            None
        }
    }
}

/// The gateway's error for a failure of the client half to connect.
fn upstream_error(error: ClientError) -> Error {
    match error {
        ClientError::Spawn { source, .. } => Error::Spawn { source },
        ClientError::HttpClient { source } => Error::Http { source },
        ClientError::InvalidHeader { name } => Error::Header { name },
        ClientError::ConnectTimeout(timeout) => Error::ConnectTimeout(timeout),
        ClientError::Lifecycle { source } => Error::Initialize { source },
        other => Error::Initialize {
            source: Box::new(other),
        },
    }
}

/// The pause before attempt `failures + 1`: `min`, doubling, up to `max`.
pub(crate) fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    min.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)))
        .min(max.max(min))
}

/// A connection to the upstream `upstream` (its name) that could not open,
/// as the error of the call that needed it: the name and every cause (a
/// refused identity says HTTP 401 so).
pub(crate) fn cannot_connect(upstream: &str, error: &Error) -> ErrorData {
    let mut why = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        why.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    ErrorData::internal_error(
        format!(
            "cannot open a connection to {}: {why}",
            the_upstream(upstream)
        ),
        None,
    )
}
