//! Connecting: one call from a URL or a child process to a [`TasksClient`]
//! with everything a wait needs wired in, in the one order that works.
//!
//! [`TasksClient::connect`] opens the connection with the MCP lifecycle that
//! reaches servers of both eras, and builds it with:
//!
//! * a [`ListenChannel`] for the transport, so that waits hear their task's
//!   `notifications/tasks` instead of polling (without one a wait polls at
//!   the server's suggested interval: a 0.4 s task can take seconds);
//! * the legacy [`Handler`] around your own `ClientHandler` and its
//!   [`Tap`](legacy::Tap) on the transport, so that a 2025-11-25 server's
//!   tasks work through the same calls (rmcp drops what that era needs
//!   before a `TasksClient` could see it; see [`legacy`]);
//! * optionally a [`Journal`] that records every task the client creates.
//!
//! # Why the lifecycle matters
//!
//! A 2026-07-28 server is reached with `server/discover`: no handshake, the
//! client's capabilities declared on every request, and the methods this
//! crate listens with (`subscriptions/listen`) exist only there. A
//! 2025-11-25 server does not know `server/discover`; it is reached with
//! `initialize`, and its tasks are that era's. So the default lifecycle
//! ([`ConnectOptions::lifecycle`]) sends `server/discover` first, offering
//! 2026-07-28, and falls back to `initialize`, offering 2025-11-25, when the
//! server answers that it is a 2025-era server (or stays silent for 10 s).
//! rmcp's plain `serve_client` sends `initialize` only: against a server of
//! both eras that opens a 2025-era connection, on which waits cannot listen.
//!
//! # The order of the pieces
//!
//! On a byte stream (a child's stdout) the listen channel's demultiplexer
//! reads first and takes out the messages of this client's listen streams;
//! the line check counts the lines rmcp will drop; the answer bound cuts a
//! line past [`ConnectOptions::max_answer_bytes`] and hands on the error of
//! its request instead (see [`answer_bound`](super::answer_bound)); the tap
//! reads what is left, which is exactly what rmcp parses; rmcp reads
//! last. The handler must be in place before the first message (a
//! 2025-11-25 server's requests tied to a task go to the wait on it), and
//! the listen channel and the journal are given to the client before it is
//! returned. On Streamable HTTP the tap wraps the `reqwest::Client` of the
//! transport, and each listen stream is a POST of its own with the same
//! client, endpoint, headers and bound on an answer.

use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientLifecycleMode, RunningService, RxJsonRpcMessage, TxJsonRpcMessage,
    serve_client_with_lifecycle,
};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, RoleClient};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio_util::sync::CancellationToken;

use super::answer_bound::{BoundedReader, DEFAULT_MAX_ANSWER_BYTES};
#[cfg(feature = "http-client")]
use super::bearer::{BearerClient, BearerSource};
use super::journal::{Journal, ServerRef};
use super::legacy::{self, Handler};
use super::line_check::{CheckedReader, LineCheck};
use super::listen::DemuxReader;
use super::{Error, ListenChannel, TasksClient};

/// How long connecting may take by default.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a child process has to exit once its stdin is closed, before it
/// is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Where the server is: a Streamable HTTP endpoint or a child process that
/// speaks MCP on its stdin and stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endpoint {
    /// A Streamable HTTP endpoint, with headers for every request (an
    /// `Authorization: Bearer ..` header is sent as the transport's bearer
    /// token).
    #[cfg(feature = "http-client")]
    Url {
        /// The endpoint, e.g. `http://127.0.0.1:8080/mcp`.
        url: String,
        /// `(name, value)` pairs.
        headers: Vec<(String, String)>,
    },
    /// A program started with these arguments (no shell).
    Command {
        /// The program: a path, or a name looked up in `PATH`.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A command line run with `sh -c`.
    Shell(String),
}

impl Endpoint {
    /// A Streamable HTTP endpoint.
    #[cfg(feature = "http-client")]
    pub fn url(url: impl Into<String>) -> Self {
        Self::Url {
            url: url.into(),
            headers: Vec::new(),
        }
    }

    /// A program and its arguments, started without a shell.
    pub fn command<I, A>(program: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<String>,
    {
        Self::Command {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// A command line, run with `sh -c` (as `npx mcp-server-everything stdio`).
    pub fn shell(line: impl Into<String>) -> Self {
        Self::Shell(line.into())
    }

    /// Adds a header to every request to a URL (for example
    /// `("Authorization", "Bearer ..")`).
    ///
    /// A child process ([`Endpoint::command`], [`Endpoint::shell`]) has no
    /// headers: for one this is [`Error::Usage`], so that a header meant for
    /// a server (a token) is never dropped without a word. (A `Result` here
    /// rather than a refusal in [`TasksClient::connect`]: the mistake is
    /// reported where it is written, and an endpoint that cannot be served
    /// is never built.) The header's name and value are checked when it is
    /// sent ([`Error::InvalidHeader`]).
    ///
    /// ```
    /// use mcp_tasks::client::Endpoint;
    ///
    /// # fn main() -> Result<(), mcp_tasks::Error> {
    /// let server = Endpoint::url("https://tasks.example.com/mcp")
    ///     .with_header("Authorization", "Bearer my-token")?
    ///     .with_header("X-Tenant", "a")?;
    /// assert!(Endpoint::shell("my-server --stdio").with_header("X-Tenant", "a").is_err());
    /// # let _ = server;
    /// # Ok(()) }
    /// ```
    pub fn with_header(
        self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, Error> {
        match self {
            #[cfg(feature = "http-client")]
            Self::Url { url, mut headers } => {
                headers.push((name.into(), value.into()));
                Ok(Self::Url { url, headers })
            }
            Self::Command { .. } | Self::Shell(_) => {
                let _ = (name, value);
                Err(Error::Usage(
                    "a child process has no HTTP headers: Endpoint::with_header applies to \
                     Endpoint::url",
                ))
            }
        }
    }

    /// Where a journal says the server is: the URL, or the command line
    /// (arguments quoted for `sh`). Headers are left out: they are the
    /// caller's to give again.
    pub fn journal_ref(&self) -> ServerRef {
        match self {
            #[cfg(feature = "http-client")]
            Self::Url { url, .. } => ServerRef::Url(url.clone()),
            Self::Command { program, args } => ServerRef::Stdio(
                std::iter::once(program)
                    .chain(args)
                    .map(|word| shell_quoted(word))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            Self::Shell(line) => ServerRef::Stdio(line.clone()),
        }
    }

    /// The endpoint a journal names (`server`, as [`Endpoint::journal_ref`]
    /// wrote it): the URL, with no headers (a journal keeps none: add them
    /// again with [`Endpoint::with_header`]), or the command line, run with
    /// `sh -c` ([`Endpoint::shell`]). Its own [`Endpoint::journal_ref`] is
    /// `server` again, so a client connected to it updates the journal's
    /// entries. `None` for a URL when the crate is built without the
    /// `http-client` feature.
    pub fn from_journal_ref(server: &ServerRef) -> Option<Self> {
        match server {
            #[cfg(feature = "http-client")]
            ServerRef::Url(url) => Some(Self::url(url.clone())),
            #[cfg(not(feature = "http-client"))]
            ServerRef::Url(_) => None,
            ServerRef::Stdio(line) => Some(Self::shell(line.clone())),
        }
    }
}

/// `word` as `sh` reads it back: as it is when it holds nothing `sh` would
/// interpret, in single quotes otherwise.
fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// How [`TasksClient::connect`] connects.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// How the connection is opened (default: `server/discover` offering
    /// 2026-07-28, else `initialize` offering 2025-11-25; see the
    /// [module](self) docs for why). With
    /// [`ClientLifecycleMode::Initialize`] the version offered is the one of
    /// the handler's `ClientConfig`.
    pub lifecycle: ClientLifecycleMode,
    /// Give up when the lifecycle has not completed after this long
    /// (default 30 s; `None`: no limit).
    pub timeout: Option<Duration>,
    /// Record every task the client creates here, with where the server
    /// is ([`Endpoint::journal_ref`]); see [`TasksClient::with_journal`].
    pub journal: Option<Arc<dyn Journal>>,
    /// The HTTP client for a URL, for the transport and the listen streams
    /// alike (default: one that follows no redirects, so that headers never
    /// go anywhere but the endpoint).
    #[cfg(feature = "http-client")]
    pub http_client: Option<reqwest::Client>,
    /// Where the bearer token of every HTTP request comes from, when it can
    /// change while the connection is open (an OAuth access token that is
    /// refreshed); see [`bearer`](super::bearer).
    #[cfg(feature = "http-client")]
    pub bearer: Option<Arc<dyn BearerSource>>,
    /// Variables added to the environment of a child process (a command
    /// or a shell line; ignored for a URL), over the program's own.
    pub env: Vec<(String, String)>,
    /// The most bytes one answer of the server may take (default
    /// [`DEFAULT_MAX_ANSWER_BYTES`], 64 MiB): a stdio line, an HTTP body,
    /// an SSE event (listen streams included). An answer past it is not
    /// read whole: its request ends with [`Error::AnswerTooLarge`], which
    /// names this bound, and the connection goes on (the rest of the line
    /// is read and dropped, the HTTP response closed). See
    /// [`answer_bound`](super::answer_bound) for how.
    pub max_answer_bytes: usize,
    /// The Streamable HTTP session of an earlier connection to take over
    /// (the gateway's, to follow a task a 2025-11-25 server keeps for that
    /// session only); see `legacy::Link::adopt_http_session`.
    pub(crate) adopt_http_session: Option<Arc<str>>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            lifecycle: ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
            timeout: Some(CONNECT_TIMEOUT),
            journal: None,
            #[cfg(feature = "http-client")]
            http_client: None,
            #[cfg(feature = "http-client")]
            bearer: None,
            env: Vec::new(),
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            adopt_http_session: None,
        }
    }
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("ConnectOptions");
        debug
            .field("lifecycle", &self.lifecycle)
            .field("timeout", &self.timeout)
            .field("journal", &self.journal.as_ref().map(|_| ".."));
        #[cfg(feature = "http-client")]
        debug.field("http_client", &self.http_client.as_ref().map(|_| ".."));
        #[cfg(feature = "http-client")]
        debug.field("bearer", &self.bearer);
        // Names only: values may be secrets.
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        debug.field("env", &env);
        debug.field("max_answer_bytes", &self.max_answer_bytes);
        debug.finish()
    }
}

impl ConnectOptions {
    /// How the connection is opened (see [`ConnectOptions::lifecycle`]).
    pub fn with_lifecycle(mut self, lifecycle: ClientLifecycleMode) -> Self {
        self.lifecycle = lifecycle;
        self
    }

    /// Adds `variables` to a child process's environment (see
    /// [`ConnectOptions::env`]).
    pub fn with_env<I, K, V>(mut self, variables: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.env
            .extend(variables.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// The most bytes one answer of the server may take (see
    /// [`ConnectOptions::max_answer_bytes`]; at least 1 KiB).
    pub fn with_max_answer_bytes(mut self, bytes: usize) -> Self {
        self.max_answer_bytes = bytes.max(1024);
        self
    }

    /// How long the lifecycle may take (`None`: no limit).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Records the client's tasks in `journal` (see [`ConnectOptions::journal`]).
    pub fn with_journal(mut self, journal: Arc<dyn Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// The HTTP client for a URL (for example one with its own TLS roots,
    /// proxy or name overrides).
    #[cfg(feature = "http-client")]
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// Asks `source` for the bearer token of every HTTP request (the
    /// transport's, the listen streams', the legacy tap's), and again after
    /// a 401; its token replaces an `Authorization: Bearer` header of the
    /// [`Endpoint`]. See [`bearer`](super::bearer).
    #[cfg(feature = "http-client")]
    pub fn with_bearer_source(mut self, source: Arc<dyn BearerSource>) -> Self {
        self.bearer = Some(source);
        self
    }
}

impl TasksClient<Handler> {
    /// Connects to the server at `endpoint` and returns a client that can
    /// listen, drives 2025-11-25 servers' tasks too, and records its tasks
    /// when `options` has a journal. `handler`, your rmcp `ClientHandler`,
    /// answers what the server asks (elicitation, sampling, roots) and
    /// declares the client's capabilities; [`legacy::Handler::inner`] gives
    /// it back. See the [module](self) docs for what is wired and why.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), mcp_tasks::Error> {
    /// use mcp_tasks::client::{ConnectOptions, Endpoint};
    /// use mcp_tasks::{AwaitOptions, CallOptions, TasksClient};
    ///
    /// let server = Endpoint::url("https://tasks.example.com/mcp")
    ///     .with_header("Authorization", "Bearer my-token")?;
    /// let client = TasksClient::connect(server, (), ConnectOptions::default()).await?;
    /// let outcome = client
    ///     .call_and_await("export", (), CallOptions::default(), &AwaitOptions::default())
    ///     .await?;
    /// println!("{}", outcome.into_text()?);
    /// # Ok(()) }
    /// ```
    ///
    /// A child process is [`Endpoint::command`] (a program and its
    /// arguments) or [`Endpoint::shell`] (a command line); closing the client
    /// closes its stdin, gives it 3 s to exit, then kills it.
    ///
    /// Fails with [`Error::Spawn`], [`Error::HttpClient`] or
    /// [`Error::InvalidHeader`] before anything is sent, with
    /// [`Error::Lifecycle`] when the server does not complete the lifecycle
    /// (it is unreachable, exits, or does not speak MCP), and with
    /// [`Error::ConnectTimeout`] past [`ConnectOptions::timeout`].
    pub async fn connect<H: ClientHandler>(
        endpoint: Endpoint,
        handler: H,
        options: ConnectOptions,
    ) -> Result<Self, Error> {
        let opened = open(&endpoint, handler, &options).await?;
        let mut client = Self::new(opened.running).with_listen(opened.listen);
        if let Some(check) = opened.lines {
            client = client.with_line_check(check);
        }
        Ok(match options.journal {
            Some(journal) => client.with_journal(journal, endpoint.journal_ref()),
            None => client,
        })
    }
}

/// A connection [`open`] made: the running rmcp client (on the legacy
/// handler), its listen channel, and the signal of its transport's end.
pub(crate) struct Opened {
    pub(crate) running: RunningService<RoleClient, Handler>,
    pub(crate) listen: ListenChannel,
    /// Fired when a child's stdout ends or its stdin cannot be written
    /// (never for HTTP).
    #[cfg_attr(
        not(feature = "gateway"),
        allow(dead_code, reason = "read by the gateway")
    )]
    pub(crate) closed: CancellationToken,
    /// What counts the lines rmcp drops, for a child process.
    pub(crate) lines: Option<LineCheck>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").finish_non_exhaustive()
    }
}

/// Opens a connection to `endpoint` with `handler` wrapped in the legacy
/// handler, its tap and a listen channel on the transport, in the
/// lifecycle and within the timeout of `options` (its journal is the
/// caller's to attach). What [`TasksClient::connect`] and the gateway's
/// upstream connections are built on.
pub(crate) async fn open<H: ClientHandler>(
    endpoint: &Endpoint,
    handler: H,
    options: &ConnectOptions,
) -> Result<Opened, Error> {
    let handler = Handler::new(handler);
    if let Some(session) = &options.adopt_http_session {
        handler.link.adopt_http_session(session.clone());
    }
    let tap = handler.tap();
    let closed = CancellationToken::new();
    let lifecycle = options.lifecycle.clone();
    let bound = options.max_answer_bytes;
    let connecting = async {
        match endpoint {
            #[cfg(feature = "http-client")]
            Endpoint::Url { url, headers } => {
                let config = http_config(url, headers)?
                    .max_sse_event_size(bound)
                    .max_json_response_size(bound);
                let http = match &options.http_client {
                    Some(client) => client.clone(),
                    None => reqwest::Client::builder()
                        .redirect(reqwest::redirect::Policy::none())
                        .build()
                        .map_err(|source| Error::HttpClient {
                            source: Box::new(source),
                        })?,
                };
                // Listen streams are POSTs of their own, to the same endpoint.
                let running = match &options.bearer {
                    None => {
                        let listen = ListenChannel::http(http.clone(), &config);
                        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                            tap.http(http),
                            config,
                        );
                        (
                            serve_client_with_lifecycle(handler, transport, lifecycle).await,
                            listen,
                        )
                    }
                    Some(source) => {
                        let bearer = |client| BearerClient::new(client, source.clone());
                        let listen = ListenChannel::http(bearer(http.clone()), &config);
                        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                            BearerClient::new(tap.http(http), source.clone()),
                            config,
                        );
                        (
                            serve_client_with_lifecycle(handler, transport, lifecycle).await,
                            listen,
                        )
                    }
                };
                let (running, listen) = running;
                let running = running.map_err(|source| Error::Lifecycle {
                    source: Box::new(source),
                })?;
                Ok((running, listen, None))
            }
            Endpoint::Command { program, args } => {
                let mut command = tokio::process::Command::new(program);
                command.args(args).envs(options.env.iter().cloned());
                let (listen, check, transport) =
                    ChildTransport::spawn(command, program, &tap, &closed, bound)?;
                let running = serve_client_with_lifecycle(handler, transport, lifecycle)
                    .await
                    .map_err(|source| Error::Lifecycle {
                        source: Box::new(source),
                    })?;
                Ok((running, listen, Some(check)))
            }
            Endpoint::Shell(line) => {
                let mut command = tokio::process::Command::new("sh");
                command
                    .arg("-c")
                    .arg(format!("exec {line}"))
                    .envs(options.env.iter().cloned());
                let (listen, check, transport) =
                    ChildTransport::spawn(command, "sh", &tap, &closed, bound)?;
                let running = serve_client_with_lifecycle(handler, transport, lifecycle)
                    .await
                    .map_err(|source| Error::Lifecycle {
                        source: Box::new(source),
                    })?;
                Ok::<_, Error>((running, listen, Some(check)))
            }
        }
    };
    // In the quiet scope: the service loop and transport worker rmcp starts
    // here stay in it, so the server's messages (task ids in them) never
    // reach the program's log (see `crate::quiet`).
    let connecting = crate::quiet::scope(connecting);
    let (running, listen, lines) = match options.timeout {
        Some(timeout) => tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| Error::ConnectTimeout(timeout))??,
        None => connecting.await?,
    };
    if let Some(info) = running.peer_info() {
        tracing::debug!(version = %info.protocol_version, "connected");
    }
    Ok(Opened {
        running,
        listen,
        closed,
        lines,
    })
}

/// The transport configuration of `url` with `headers`: a bearer
/// `Authorization` goes as rmcp's bearer token, every other header as is.
#[cfg(feature = "http-client")]
fn http_config(
    url: &str,
    headers: &[(String, String)],
) -> Result<rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig, Error> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let invalid = || Error::InvalidHeader { name: name.clone() };
        if name.eq_ignore_ascii_case("authorization")
            && let Some((scheme, token)) = value.trim().split_once(' ')
            && scheme.eq_ignore_ascii_case("bearer")
        {
            http::HeaderValue::try_from(token.trim()).map_err(|_| invalid())?;
            config = config.auth_header(token.trim());
            continue;
        }
        let header = http::HeaderName::try_from(name.as_str()).map_err(|_| invalid())?;
        let value = http::HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
        custom.insert(header, value);
    }
    if !custom.is_empty() {
        config = config.custom_headers(custom);
    }
    Ok(config.max_concurrent_requests(MAX_HTTP_REQUESTS_IN_FLIGHT))
}

/// The most requests one Streamable HTTP connection has in flight at once
/// (rmcp's default is 16). A 2025-11-25 task awaited keeps one
/// `tasks/result` open until it ends (its payload and its input requests
/// come on it), so with rmcp's 16, the 17th task awaited on one connection
/// (a gateway following many upstream tasks, `wait` on many) left every
/// other request waiting behind the long polls, pings included: the
/// gateway then gave the connection up as not answering and failed every
/// task on it. Each request in flight holds an HTTP connection of its own.
#[cfg(feature = "http-client")]
const MAX_HTTP_REQUESTS_IN_FLIGHT: usize = 1024;

/// A child process's stdio as an rmcp transport: its stdout read through
/// the listen channel's demultiplexer and the tap. Closing it closes the
/// child's stdin, gives it [`EXIT_GRACE`] to exit, then kills it; dropping
/// it unclosed kills the child. `closed` fires when the child's stdout ends
/// or its stdin cannot be written.
struct ChildTransport {
    io: AsyncRwTransport<
        RoleClient,
        legacy::TapRead<BoundedReader<CheckedReader<DemuxReader<ChildStdout>>>>,
        ChildStdin,
    >,
    child: Child,
    closed: CancellationToken,
}

impl ChildTransport {
    /// Starts `command` with piped stdin and stdout (`program` names it in
    /// errors), and wires its stdout: the listen channel's demultiplexer
    /// reads first, then the line check, then the bound of `bound` bytes on
    /// a line, then `tap`, then rmcp (the one order; see the module docs).
    /// Returns the listen channel, the line check and the transport.
    fn spawn(
        mut command: tokio::process::Command,
        program: &str,
        tap: &legacy::Tap,
        closed: &CancellationToken,
        bound: usize,
    ) -> Result<(ListenChannel, LineCheck, Self), Error> {
        let spawn_error = |source| Error::Spawn {
            program: program.to_owned(),
            source,
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_error)?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(spawn_error(std::io::Error::other(
                "the child has no stdin or stdout",
            )));
        };
        let (listen, stdout) = ListenChannel::stdio(stdout);
        // Counts the lines rmcp will drop, so that garbage ends a request.
        let (check, stdout) = LineCheck::stdio(stdout);
        // A line past the bound ends its request (see `answer_bound`); rmcp,
        // which would drop it unsaid, reads no line longer than the bound.
        let stdout = BoundedReader::new(stdout, bound, check.clone());
        let transport = Self {
            io: AsyncRwTransport::new_client(tap.read(stdout), stdin)
                .with_max_line_length(bound.saturating_add(2)),
            child,
            closed: closed.clone(),
        };
        Ok((listen, check, transport))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_journaled_as_sh_reads_them_back() {
        let endpoint = Endpoint::command("/opt/my server", ["--flag", "it's", "a=b", ""]);
        assert_eq!(
            endpoint.journal_ref(),
            ServerRef::Stdio(r"'/opt/my server' --flag 'it'\''s' a=b ''".into())
        );
        assert_eq!(
            Endpoint::shell("npx srv stdio").journal_ref(),
            ServerRef::Stdio("npx srv stdio".into())
        );
    }

    #[test]
    fn a_journaled_command_line_is_run_by_sh_as_it_was_given() {
        let endpoint = Endpoint::command("/opt/my server", ["--flag", "it's", ""]);
        let server = endpoint.journal_ref();
        let again = Endpoint::from_journal_ref(&server).unwrap();
        assert_eq!(
            again,
            Endpoint::shell(r"'/opt/my server' --flag 'it'\''s' ''")
        );
        assert_eq!(again.journal_ref(), server, "the same entries");
    }

    #[cfg(feature = "http-client")]
    #[test]
    fn a_journaled_url_comes_back_without_headers() {
        let endpoint = Endpoint::url("http://127.0.0.1:1/mcp")
            .with_header("X-Tenant", "a")
            .unwrap();
        let again = Endpoint::from_journal_ref(&endpoint.journal_ref()).unwrap();
        assert_eq!(again, Endpoint::url("http://127.0.0.1:1/mcp"));
        assert_eq!(again.journal_ref(), endpoint.journal_ref());
    }

    #[cfg(feature = "http-client")]
    #[test]
    fn headers_go_to_the_url_and_a_bearer_token_as_the_token() {
        let endpoint = Endpoint::url("http://127.0.0.1:1/mcp")
            .with_header("Authorization", "Bearer secret")
            .and_then(|endpoint| endpoint.with_header("X-Tenant", "a"))
            .unwrap();
        assert_eq!(
            endpoint.journal_ref(),
            ServerRef::Url("http://127.0.0.1:1/mcp".into()),
            "no header in the journal"
        );
        let Endpoint::Url { url, headers } = &endpoint else {
            panic!("a URL");
        };
        let config = http_config(url, headers).unwrap();
        assert_eq!(config.auth_header.as_deref(), Some("secret"));
        assert_eq!(config.custom_headers.len(), 1);
        let basic = http_config(url, &[("Authorization".into(), "Basic abc".into())]).unwrap();
        assert_eq!(basic.auth_header, None, "only a bearer token is the token");
        assert_eq!(basic.custom_headers.len(), 1);
        let error = http_config(url, &[("Bad Name".into(), "x".into())]).unwrap_err();
        assert!(matches!(error, Error::InvalidHeader { ref name } if name == "Bad Name"));
    }

    #[test]
    fn a_header_for_a_child_process_is_a_usage_error() {
        for child in [
            Endpoint::shell("srv"),
            Endpoint::command("srv", ["--stdio"]),
        ] {
            let error = child.with_header("Authorization", "Bearer t").unwrap_err();
            assert!(matches!(error, Error::Usage(_)), "{error}");
            assert_eq!(error.kind(), crate::client::ErrorKind::Usage);
            assert!(
                error
                    .to_string()
                    .contains("a child process has no HTTP headers"),
                "{error}"
            );
        }
    }
}
