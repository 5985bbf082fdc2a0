//! Serving over Streamable HTTP (feature `http-server`): the recipe in one place.
//!
//! [`StreamableHttpServer`] builds the axum router for an rmcp server on our
//! [`TaskRuntime`]: rmcp's `StreamableHttpService`, stateless for 2026-07-28
//! (which has no sessions; clients that open with `initialize` get rmcp's
//! sessions, whose answers carry the 2025-11-25 task fields, see
//! [`legacy`](crate::server::legacy)), answering plain JSON where no notification
//! precedes the answer, without SSE keep-alives; and in front of it one
//! middleware that answers well-formed `tasks/*` polls straight from the
//! runtime, serves `subscriptions/listen` for tasks (rmcp 3.11 cannot: see
//! [`listen`](super::listen)) and well-formed `tools/call` requests (the
//! fast paths, each answering exactly as rmcp would), after a guard that
//! first checks who may reach the endpoint, for every route alike (the `Host`: loopback names by default, against DNS rebinding,
//! [`with_allowed_hosts`](StreamableHttpServer::with_allowed_hosts) for a
//! public name; a browser `Origin`: loopback ones by default; and with
//! [`with_bearer_tokens`](StreamableHttpServer::with_bearer_tokens) the
//! caller's token, see [`BearerTokens`]), then bounds the body (size and
//! time to arrive) and answers every malformed request with a JSON-RPC
//! error (-32700 for a body that is not JSON, -32600 for the rest, with the
//! HTTP status that fits: 400, 401, 403, ...). [`serve`]
//! runs a router on a listener with `TCP_NODELAY` on every accepted socket
//! (each answer goes out in one write instead of waiting on Nagle and
//! delayed ACKs), a bound on open connections (at which the connection
//! idle for the longest is closed to make room, see `connections`), a time
//! limit for a request's headers, so connections that send half a request,
//! or nothing, are closed, and an idle timeout for kept-alive connections.
//! Every refusal for load (a 503, or a 429) closes its connection
//! (`Connection: close`): a refused client leaves no idle connection behind
//! to fill the bound.
//!
//! ```no_run
//! # use mcp_tasks::server::TaskRuntime;
//! # use mcp_tasks::server::http::StreamableHttpServer;
//! # #[derive(Clone)] struct MyServer { runtime: TaskRuntime }
//! # impl rmcp::ServerHandler for MyServer {}
//! # async fn run(server: MyServer) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let runtime = server.runtime.clone();
//! StreamableHttpServer::new(server, runtime).serve(listener).await
//! # }
//! ```
//!
//! Which parts matter: statelessness is what 2026-07-28 asks for (a
//! 2025-11-25 client's session lives in the process that made it: behind a
//! load balancer, route its requests by `Mcp-Session-Id`); JSON
//! answers and `TCP_NODELAY` make small answers one write (together about a
//! tenfold throughput gain for `tasks/get` on loopback, see BENCHMARKS.md);
//! the fast paths skip rmcp's dispatch for polls and task creation, in one
//! middleware layer that reads each body once (a `tasks/get` or
//! `tasks/cancel` straight from its bytes, without a `serde_json::Value`);
//! the `Origin` list is the transport's required browser check.
//!
//! Behind a reverse proxy: allow the public name the proxy passes on in
//! `Host` (nginx: `proxy_set_header Host $host;`), and the origins of any
//! browser app; no `Forwarded` or `X-Forwarded-*` header is read (see
//! [`StreamableHttpServer::with_allowed_hosts`] and the nginx recipe
//! of `docs/deployment.md` in the repository).

mod access;
mod connections;
pub(crate) mod fast;
mod front;
pub(crate) mod guard;
mod reply;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

#[cfg(feature = "oauth")]
pub use access::require_oauth;
pub use access::{
    InvalidAllowEntry, LOOPBACK_HOSTS, require_bearer_tokens, validate_allowed_host,
    validate_allowed_origin,
};

use crate::server::TaskRuntime;
use crate::server::auth::BearerTokens;
use crate::server::engine::admission::refusal::{Reason, Refusal, retry_after_secs};

/// Browser origins allowed by default: the loopback hosts, any port, `http`
/// or `https`. A request without `Origin` (not a browser) always passes.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// The limits of an HTTP endpoint; see [`StreamableHttpServer`]'s `with_*`
/// methods for what each bounds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpLimits {
    /// The largest request body (default 4 MiB).
    pub max_body_bytes: usize,
    /// How long a request's headers, and then its body, may take to arrive
    /// (default 30 s); the headers from their first byte, those of a new
    /// connection's first request from its accept.
    pub request_read_timeout: Duration,
    /// How many connections may be open at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`]); at the bound the connection idle for
    /// the longest is closed to make room for a new one, and when none is
    /// idle the new one is answered HTTP 503 with `Retry-After` and closed.
    pub max_connections: usize,
    /// How long a kept-alive connection may wait for its next request,
    /// from the end of its last answer to the first byte of the next
    /// request (default [`DEFAULT_IDLE_TIMEOUT`]); then it is closed.
    pub idle_timeout: Duration,
}

/// How many connections the serving recipe keeps open at once, unless
/// told otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// How long the serving recipe keeps an idle connection open, unless told
/// otherwise: 75 s, longer than a reverse proxy or a load balancer keeps an
/// idle connection to its upstream (nginx's `keepalive_timeout` in an
/// `upstream` block and the usual cloud load balancer's idle timeout are 60
/// s), so the server is not the one closing a connection the proxy is about
/// to send a request on (which the proxy answers 502). An idle connection
/// costs a file descriptor and a few KiB, and gives way to a new one at the
/// bound.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);

/// How many connections past the bound are being answered 503 at once;
/// further ones are closed without an answer.
const MAX_REFUSING: usize = 64;

/// `Retry-After` of a connection refused past the bound.
const CONNECTIONS_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How long a refused connection may take to send its request's headers
/// before it is closed without its 503.
const REFUSAL_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 << 20,
            request_read_timeout: Duration::from_secs(30),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// The serving recipe cannot start: the runtime's listen-stream budget
/// leaves no connection for ordinary requests.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "a listen budget of {max_listen_streams} streams leaves no reserve within \
     {max_connections} connections: every connection could be held by a listen \
     stream, and tasks/get, creations and cancels would go unanswered (make the \
     listen budget smaller than the connection bound)"
)]
#[non_exhaustive]
pub struct NoReserve {
    /// The runtime's listen budget
    /// ([`TaskRuntimeBuilder::with_max_listen_streams`](crate::server::TaskRuntimeBuilder::with_max_listen_streams)).
    pub max_listen_streams: usize,
    /// The connection bound
    /// ([`StreamableHttpServer::with_max_connections`]).
    pub max_connections: usize,
}

/// Checks that `max_listen_streams` leaves a reserve of connections within
/// `max_connections` for ordinary requests (it must be smaller).
pub fn check_reserve(max_listen_streams: usize, max_connections: usize) -> Result<(), NoReserve> {
    if max_listen_streams >= max_connections {
        return Err(NoReserve {
            max_listen_streams,
            max_connections,
        });
    }
    Ok(())
}

/// The Streamable HTTP serving recipe for an rmcp server on a [`TaskRuntime`].
/// See the [module docs](self).
#[must_use]
pub struct StreamableHttpServer<S> {
    server: S,
    runtime: TaskRuntime,
    path: String,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    tokens: Option<Arc<BearerTokens>>,
    #[cfg(feature = "oauth")]
    oauth: Option<Arc<crate::server::auth::oauth::OAuthResourceServer>>,
    limits: HttpLimits,
}

impl<S> std::fmt::Debug for StreamableHttpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttpServer")
            .field("path", &self.path)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("tokens", &self.tokens)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S> StreamableHttpServer<S>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    /// Serves `server` (cloned for each request; clones must share
    /// `runtime`) at `/mcp`, with `tasks/*` answered from `runtime`.
    pub fn new(server: S, runtime: TaskRuntime) -> Self {
        Self {
            server,
            runtime,
            path: "/mcp".to_owned(),
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|&host| host.to_owned()).collect(),
            allowed_origins: LOOPBACK_ORIGINS
                .iter()
                .map(|&origin| origin.to_owned())
                .collect(),
            tokens: None,
            #[cfg(feature = "oauth")]
            oauth: None,
            limits: HttpLimits::default(),
        }
    }

    /// The largest request body, on every route (default 4 MiB); a larger
    /// one gets HTTP 413 with a JSON-RPC error.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_body_bytes = bytes;
        self
    }

    /// How long a request's headers, and then its body, may take to arrive
    /// (default 30 s): the headers from their first byte (a new
    /// connection's first request: from its accept). A connection whose
    /// headers are late is closed (by [`StreamableHttpServer::serve`]); a
    /// late body gets HTTP 408.
    pub fn with_request_read_timeout(mut self, timeout: Duration) -> Self {
        self.limits.request_read_timeout = timeout;
        self
    }

    /// How long [`StreamableHttpServer::serve`] keeps a kept-alive
    /// connection open without a request: from the end of its last answer
    /// to the first byte of the next request (default
    /// [`DEFAULT_IDLE_TIMEOUT`], 75 s, which says why). A connection busy
    /// with a request, a listen stream's included, is never closed by it.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.limits.idle_timeout = timeout;
        self
    }

    /// How many connections [`StreamableHttpServer::serve`] keeps open at
    /// once (default [`DEFAULT_MAX_CONNECTIONS`], 1024). At the bound a new
    /// connection makes room as nginx does: the open connection idle for
    /// the longest (between two requests, or accepted and silent so far) is
    /// closed and the new one admitted. Only when every open connection is
    /// busy with a request (or in the middle of sending one) is the new one
    /// answered at once with HTTP 503, `Retry-After: 1` and a JSON-RPC
    /// error (-32603, `data: {"reason": "connections", "retryAfterMs",
    /// "maxConnections"}`), then closed. It must exceed the runtime's
    /// listen budget
    /// ([`TaskRuntimeBuilder::with_max_listen_streams`](crate::server::TaskRuntimeBuilder::with_max_listen_streams),
    /// default 512): the difference is the reserve that keeps answering
    /// `tasks/get`, creations and cancels when every listen stream is open.
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.limits.max_connections = connections.max(1);
        self
    }

    /// The endpoint's path (default `/mcp`).
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// The browser origins allowed to call the endpoint, on every route, as
    /// rmcp reads them (`scheme://host:port`, `:*` for any port, `null`);
    /// default [`LOOPBACK_ORIGINS`]. A request that carries another
    /// `Origin` gets HTTP 403; one without `Origin` (not a browser) passes.
    /// This replaces the list: add [`LOOPBACK_ORIGINS`] to keep them.
    /// [`validate_allowed_origin`] checks an entry.
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// The `Host` values the endpoint answers, on every route, as rmcp
    /// reads them (`name` for any port, `name:port` for one; compared
    /// case-insensitively); default [`LOOPBACK_HOSTS`], which protects a
    /// server on a developer's machine from DNS rebinding. Behind a reverse
    /// proxy or a load balancer, the public names it passes on. Any other
    /// `Host` gets HTTP 403. This replaces the list: add [`LOOPBACK_HOSTS`]
    /// to keep them; an empty list answers any `Host` (not recommended).
    /// [`validate_allowed_host`] checks an entry.
    pub fn with_allowed_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// Requires a bearer token of `tokens` on every route, the `tasks/*`
    /// fast path and listen streams included: a request without one, or
    /// with an unknown one, gets HTTP 401 with a JSON-RPC error and
    /// `WWW-Authenticate: Bearer`. The principal of an accepted request is
    /// its token's label ([`Authenticated`](crate::server::Authenticated),
    /// read by [`default_principal`](crate::server::default_principal)).
    pub fn with_bearer_tokens(mut self, tokens: impl Into<Arc<BearerTokens>>) -> Self {
        self.tokens = Some(tokens.into());
        self
    }

    /// Makes the endpoint an OAuth 2.1 resource server (MCP authorization;
    /// see [`oauth`](crate::server::auth::oauth)): it publishes its protected
    /// resource metadata at `/.well-known/oauth-protected-resource` (and
    /// the form suffixed with the audience's path), and requires an access
    /// token from one of `oauth`'s issuers, for its audience, with its
    /// scopes, on every other request and route (401 `invalid_token` or 403
    /// `insufficient_scope` with a `WWW-Authenticate` challenge otherwise).
    /// The principal of an accepted request is `oauth:` + issuer + `#` +
    /// subject. With [`with_bearer_tokens`](Self::with_bearer_tokens) too, a
    /// token of the file is accepted as well (its label the principal).
    #[cfg(feature = "oauth")]
    pub fn with_oauth(
        mut self,
        oauth: impl Into<Arc<crate::server::auth::oauth::OAuthResourceServer>>,
    ) -> Self {
        self.oauth = Some(oauth.into());
        self
    }

    /// The axum router: the guard (host, origin, token, then the request's
    /// shape), then the fast paths for `tasks/*`, task listens and
    /// `tools/call` (in the same layer), then rmcp's service at the path.
    /// Its body limits apply wherever the router is served; the connection
    /// limits only with [`StreamableHttpServer::serve`].
    pub fn router(self) -> axum::Router {
        self.parts().0
    }

    fn parts(self) -> (axum::Router, HttpLimits) {
        // Sessions for initialize-era clients only (2026-07-28 requests are
        // served statelessly whatever this says): their 2025-11-25 tasks need
        // the server's requests on the session (see `server::legacy`).
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(true)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(self.limits.max_body_bytes)
            .with_allowed_hosts(self.allowed_hosts.clone())
            .with_allowed_origins(self.allowed_origins.clone())
            .enforce_origin_validation();
        let server = self.server;
        let calls = server.clone();
        let sessions = Arc::new(sessions::Sessions::new(self.runtime.clone()));
        let service: StreamableHttpService<S, sessions::Sessions> =
            StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
        let guard = guard::Guard {
            access: Arc::new({
                let access =
                    access::Access::new(&self.allowed_hosts, &self.allowed_origins, self.tokens);
                #[cfg(feature = "oauth")]
                let access = access.with_oauth(self.oauth);
                access
            }),
            max_body_bytes: self.limits.max_body_bytes,
            body_timeout: self.limits.request_read_timeout,
        };
        let front = Arc::new(front::Front {
            guard,
            runtime: self.runtime,
            calls: fast::call::ToolCalls::new(calls),
        });
        let router = axum::Router::new()
            .nest_service(&self.path, Shared(Arc::new(service)))
            .layer(axum::middleware::from_fn_with_state(
                front,
                front::front::<S>,
            ));
        (router, self.limits)
    }

    /// Serves the router on `listener` until the process ends (see
    /// [`serve_with_limits`]). Fails at once, with a [`NoReserve`] inside
    /// an [`InvalidInput`](std::io::ErrorKind::InvalidInput) error, when
    /// the runtime's listen budget is not smaller than the connection
    /// bound.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        self.check_reserve()?;
        let (router, limits) = self.parts();
        serve_with_limits(listener, router, &limits).await
    }

    /// Whether the runtime's listen budget leaves a reserve of connections
    /// (see [`check_reserve`]).
    pub fn check_reserve(&self) -> std::io::Result<()> {
        check_reserve(
            self.runtime.max_listen_streams(),
            self.limits.max_connections,
        )
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))
    }

    /// Serves the router on `listener` as [`StreamableHttpServer::serve`]
    /// does until `shutdown` completes; then stops accepting, ends every
    /// open listen stream gracefully (each gets its listen result), lets
    /// the requests in flight finish and returns. Fails at once as
    /// [`StreamableHttpServer::serve`] does.
    pub async fn serve_with_shutdown(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.check_reserve()?;
        let runtime = self.runtime.clone();
        let (router, limits) = self.parts();
        serve_until(listener, router, &limits, async move {
            shutdown.await;
            runtime.end_subscriptions();
        })
        .await
    }
}

/// rmcp's service behind an `Arc`. axum clones a route's service for each
/// request at every middleware layer, and rmcp's clone copies its whole
/// configuration (every allowed host and origin as a `String`): shared, a
/// request that the fast paths answer costs a reference count instead, and
/// one that reaches rmcp the one clone rmcp makes itself.
struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T, R> tower_service::Service<R> for Shared<T>
where
    T: tower_service::Service<R> + Clone,
{
    type Response = T::Response;
    type Error = T::Error;
    type Future = T::Future;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        // rmcp's service is always ready.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: R) -> Self::Future {
        (*self.0).clone().call(request)
    }
}

/// Serves `router` on `listener` with the default [`HttpLimits`] (see
/// [`serve_with_limits`]).
pub async fn serve(listener: tokio::net::TcpListener, router: axum::Router) -> std::io::Result<()> {
    serve_with_limits(listener, router, &HttpLimits::default()).await
}

/// Serves `router` (HTTP/1.1) on `listener` until the process ends or the
/// listener fails: `TCP_NODELAY` on every accepted socket, at most
/// `limits.max_connections` open at once, a connection closed when a
/// request's headers do not arrive within `limits.request_read_timeout`
/// (from their first byte; a new connection's first request from its
/// accept), and a kept-alive connection closed when its next request does
/// not start within `limits.idle_timeout` of its last answer.
///
/// At the bound, the connection idle for the longest (between requests, or
/// accepted and silent so far) is closed to make room for a new one. When
/// none is idle, the new connection is not left waiting in the backlog:
/// its request is answered HTTP 503 with `Retry-After: 1` and a JSON-RPC
/// error (-32603, `data.reason` `"connections"`, `data.maxConnections`),
/// and the connection closed. At most 64 such refusals are written at once
/// (each waits at most 5 s for its request's headers); past that a
/// connection is closed at once.
pub async fn serve_with_limits(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: &HttpLimits,
) -> std::io::Result<()> {
    serve_until(listener, router, limits, std::future::pending()).await
}

/// [`serve_with_limits`] until `shutdown` completes: then no connection is
/// accepted, each open one finishes the request in flight and closes, and
/// this returns once they all have.
async fn serve_until(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: &HttpLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let seats = limits.max_connections.max(1);
    let connections =
        connections::Connections::new(seats, limits.idle_timeout, limits.request_read_timeout);
    let refusing = Arc::new(tokio::sync::Semaphore::new(MAX_REFUSING));
    let refusal = Bytes::from(connections_refusal(seats));
    let (stop, stopping) = tokio::sync::watch::channel(false);
    // Each connection's task holds a sender: once all are dropped, every
    // connection has closed.
    let (open, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            // Out of file descriptors, or a connection aborted before it
            // was accepted: keep serving the others.
            Err(error) if accept_error_is_transient(&error) => {
                tracing::warn!(%error, "cannot accept a connection; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(error) => return Err(error),
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let Some(seat) = connections.admit() else {
            // Past the bound with none idle: a clear 503 rather than
            // silence in the backlog.
            crate::telemetry::metrics::refused(Reason::Connections.cause());
            if let Ok(turn) = refusing.clone().try_acquire_owned() {
                tokio::spawn(refuse_connection(stream, refusal.clone(), turn));
            }
            continue;
        };
        let connection = Arc::clone(seat.connection());
        let io = hyper_util::rt::TokioIo::new(connections::Watched::new(
            stream,
            Arc::clone(&connection),
        ));
        let service = answering(&router, connection);
        let mut stopping = stopping.clone();
        let open = open.clone();
        // In the quiet scope: whatever router it serves, the service loops
        // rmcp starts for its requests log no message (see `crate::quiet`).
        tokio::spawn(crate::quiet::scope(async move {
            // The timers are the seat's (see `connections`): hyper's own
            // header timer cannot tell an idle connection from a slow one.
            let connection = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(None)
                .serve_connection(io, service);
            let mut connection = std::pin::pin!(connection);
            // A connection that breaks off is the peer's business.
            tokio::select! {
                _ = connection.as_mut() => {}
                // Idle too long, or a request's headers late: closed as
                // hyper's header timer would, without an answer.
                () = seat.timed_out() => {}
                () = async {
                    tokio::select! {
                        () = seat.evicted() => {}
                        () = async { drop(stopping.wait_for(|stop| *stop).await) } => {}
                    }
                } => {
                    // Closes an idle connection at once, and one with a
                    // request in flight once it is answered.
                    connection.as_mut().graceful_shutdown();
                    tokio::select! {
                        _ = connection.as_mut() => {}
                        () = seat.timed_out() => {}
                    }
                }
            }
            drop((seat, open));
        }));
    }
    drop(listener);
    let _ = stop.send(true);
    drop(open);
    // `None` once every connection's sender is gone.
    let _ = all_closed.recv().await;
    Ok(())
}

/// The service of one connection: `router`'s answers, with the connection
/// marked busy from a request's headers until its answer is written.
fn answering(
    router: &axum::Router,
    connection: Arc<connections::Connection>,
) -> impl hyper::service::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<connections::Answered>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Send
+ 'static {
    let service = hyper_util::service::TowerToHyperService::new(router.clone());
    hyper::service::service_fn(move |request| {
        connection.busy();
        let answer = hyper::service::Service::call(&service, request);
        let connection = Arc::clone(&connection);
        async move {
            let response = answer.await?;
            Ok(response.map(|body| connections::Answered::new(body, connection)))
        }
    })
}

/// The body of the 503 a connection past the bound gets.
fn connections_refusal(max_connections: usize) -> Vec<u8> {
    let mut extra = serde_json::Map::new();
    extra.insert("maxConnections".into(), serde_json::json!(max_connections));
    let error = Refusal::new(
        Reason::Connections,
        "the server has as many connections open as it may; try again shortly",
        CONNECTIONS_RETRY_AFTER,
        extra,
    )
    .into_error(None);
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": error})
        .to_string()
        .into_bytes()
}

/// Answers the first request of a connection past the bound with HTTP 503
/// and `Retry-After`, then closes it.
async fn refuse_connection(
    stream: tokio::net::TcpStream,
    body: Bytes,
    _turn: tokio::sync::OwnedSemaphorePermit,
) {
    let service =
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            let body = body.clone();
            async move {
                // Read what little body came along (a JSON-RPC request), so
                // that closing does not reset the connection before the client
                // has read the answer.
                let read = http_body_util::Limited::new(request.into_body(), 64 << 10);
                let _ = tokio::time::timeout(
                    REFUSAL_HEADER_TIMEOUT,
                    http_body_util::BodyExt::collect(read),
                )
                .await;
                http::Response::builder()
                    .status(http::StatusCode::SERVICE_UNAVAILABLE)
                    .header(
                        http::header::RETRY_AFTER,
                        retry_after_secs(CONNECTIONS_RETRY_AFTER),
                    )
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(http_body_util::Full::new(body))
            }
        });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(REFUSAL_HEADER_TIMEOUT)
        .keep_alive(false)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    // A peer that breaks off is its own business.
    let _ = connection.await;
}

fn accept_error_is_transient(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
    ) || matches!(error.raw_os_error(), Some(23 | 24)) // ENFILE, EMFILE
}
