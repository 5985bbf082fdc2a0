//! Serving over Streamable HTTP (feature `http`): the recipe in one place.
//!
//! [`StreamableHttpServer`] builds the axum router for an rmcp server on our
//! [`TaskRuntime`]: rmcp's `StreamableHttpService`, stateless (2026-07-28 has
//! no sessions), answering plain JSON where no notification precedes the
//! answer, without SSE keep-alives, with browser `Origin`s limited to
//! loopback (rmcp answers others with 403, and checks that `Host` is a
//! loopback name against DNS rebinding); and in front of it [`fast_tasks`],
//! which answers well-formed `tasks/*` polls straight from the runtime, and
//! [`listen_tasks`], which serves `subscriptions/listen` for tasks (rmcp
//! 3.11 cannot: see [`listen`](super::listen)).
//! [`serve`] runs a router on a listener with `TCP_NODELAY` on every
//! accepted socket, so each answer goes out in one write instead of waiting
//! on Nagle and delayed ACKs.
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
//! Which parts matter: statelessness is what 2026-07-28 asks for; JSON
//! answers and `TCP_NODELAY` make small answers one write (together about a
//! tenfold throughput gain for `tasks/get` on loopback, see BENCHMARKS.md);
//! `fast_tasks` skips rmcp's dispatch for polls; the `Origin` list is the
//! transport's required browser check.

mod fast;
mod listen;

use std::sync::Arc;

use rmcp::ServerHandler;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use fast::fast_tasks;
pub use listen::listen_tasks;

use crate::server::TaskRuntime;

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

/// The Streamable HTTP serving recipe for an rmcp server on a [`TaskRuntime`].
/// See the [module docs](self).
#[must_use]
pub struct StreamableHttpServer<S> {
    server: S,
    runtime: TaskRuntime,
    path: String,
    allowed_origins: Vec<String>,
}

impl<S> std::fmt::Debug for StreamableHttpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttpServer")
            .field("path", &self.path)
            .field("allowed_origins", &self.allowed_origins)
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
            allowed_origins: LOOPBACK_ORIGINS
                .iter()
                .map(|&origin| origin.to_owned())
                .collect(),
        }
    }

    /// The endpoint's path (default `/mcp`).
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// The browser origins allowed to call the endpoint, as rmcp reads them
    /// (`scheme://host:port`, `:*` for any port); default [`LOOPBACK_ORIGINS`].
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// The axum router: rmcp's service at the path, [`fast_tasks`] and
    /// [`listen_tasks`] in front.
    pub fn router(self) -> axum::Router {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_allowed_origins(self.allowed_origins)
            .enforce_origin_validation();
        let server = self.server;
        let service: StreamableHttpService<S, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
        let router = axum::Router::new().nest_service(&self.path, service);
        let router = fast_tasks(router, self.runtime.clone());
        listen_tasks(router, self.runtime)
    }

    /// Serves the router on `listener` until the process ends (see [`serve`]).
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        serve(listener, self.router()).await
    }

    /// Serves the router on `listener` until `shutdown` completes, then
    /// ends every open listen stream gracefully (each gets its listen
    /// result) and finishes the requests in flight.
    pub async fn serve_with_shutdown(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let runtime = self.runtime.clone();
        let listener = nodelay(listener);
        axum::serve(listener, self.router())
            .with_graceful_shutdown(async move {
                shutdown.await;
                runtime.end_subscriptions();
            })
            .await
    }
}

/// Serves `router` on `listener`, with `TCP_NODELAY` set on every accepted
/// socket, until the process ends or the listener fails.
pub async fn serve(listener: tokio::net::TcpListener, router: axum::Router) -> std::io::Result<()> {
    axum::serve(nodelay(listener), router).await
}

/// `listener` with `TCP_NODELAY` set on every accepted socket.
fn nodelay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Addr = std::net::SocketAddr> {
    axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    })
}
