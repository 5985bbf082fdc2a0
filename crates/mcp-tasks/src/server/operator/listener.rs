//! The operator listener (feature `operator`): `/metrics` (Prometheus text),
//! `/healthz` (the process is up), `/readyz` (the store answers and the
//! server is not draining), with metrics the operator's page at `/` (the
//! tasks at a glance, charts of the last hour, the unfinished tasks with a
//! cancel button: `page`), and whatever routes it is given (the admin
//! API), on a listener of its own: never the MCP port, never behind the MCP
//! endpoint's guard or tokens.
//!
//! Who may reach it: with [`OperatorListener::with_tokens`], every route but
//! `/healthz` and `/readyz` needs `Authorization: Bearer` with a token of
//! the file, or the page's cookie (set by its sign-in form) sent by the
//! page itself (401 or 403 otherwise), and the request carries the token's
//! label as [`Authenticated`](crate::server::Authenticated)
//! for the routes behind. Without tokens it answers only requests whose
//! `Host` is a loopback name and that carry no `Origin` but its own (no
//! other web page, DNS rebinding included, can reach it), and
//! [`check_address`] refuses to bind it to anything but a loopback
//! address: an operator who opens it to a network gives it tokens.
//!
//! The metrics are recorded through the [`metrics`](crate::telemetry::metrics) facade
//! and rendered by `metrics-exporter-prometheus`, the recorder of the
//! facade's own project (one facade, so the library records without
//! knowing whether anyone exports, and a user who prefers another exporter
//! installs it instead). [`install_prometheus`] installs it once per
//! process, with the histogram buckets of each metric. The gauges of what
//! is open now are read from the runtime at each scrape.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use super::access::{Sessions, admit, loopback_only};
use super::page::Render;
use crate::server::auth::BearerTokens;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::task::TaskId;
use crate::telemetry::metrics::{
    LEASES_LOST, LISTEN_STREAMS_LIMIT, LISTEN_STREAMS_OPEN, MetricsObserver, REQUEST_DURATION,
    STORE_DURATION, TASK_DURATION, TASK_INPUT_REQUIRED, TASKS_LIVE, TASKS_QUEUED,
    TASKS_QUEUED_LIMIT, TASKS_QUEUED_OLDEST, TOOLS_RUNNING, TOOLS_RUNNING_LIMIT, describe,
};

/// How long `/readyz` waits for the store, unless told otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Buckets of the task histograms, in seconds: a tool of a tenth of a
/// second to one of a day.
const TASK_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0,
];

/// Buckets of the request and store histograms, in seconds: from a tenth of
/// a millisecond (a poll on loopback) to ten seconds.
const FAST_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0,
];

/// Why the Prometheus recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// Another metrics recorder is installed in this process.
    #[error("another metrics recorder is installed in this process")]
    OtherRecorder,
    /// The recorder refused its settings.
    #[error("the Prometheus recorder could not be built")]
    Build(#[source] metrics_exporter_prometheus::BuildError),
}

/// Installs the Prometheus recorder as the process's metrics recorder,
/// with the buckets of every histogram of [`metrics`](crate::telemetry::metrics), and
/// returns the handle that renders it. Once per process: later calls
/// return the same handle.
pub fn install_prometheus() -> Result<PrometheusHandle, InstallError> {
    static INSTALLED: OnceLock<PrometheusHandle> = OnceLock::new();
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(handle) = INSTALLED.get() {
        return Ok(handle.clone());
    }
    let recorder = prometheus_recorder()?;
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| InstallError::OtherRecorder)?;
    describe();
    Ok(INSTALLED.get_or_init(|| handle).clone())
}

/// The Prometheus recorder with the buckets of every histogram of
/// [`metrics`](crate::telemetry::metrics), not installed: for a user who wraps it in
/// a recorder of their own (then calls [`crate::telemetry::metrics::describe`] once it is installed).
pub fn prometheus_recorder() -> Result<PrometheusRecorder, InstallError> {
    Ok(PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(TASK_DURATION.into()), TASK_BUCKETS)
        .and_then(|builder| {
            builder.set_buckets_for_metric(Matcher::Full(TASK_INPUT_REQUIRED.into()), TASK_BUCKETS)
        })
        .and_then(|builder| {
            builder.set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), FAST_BUCKETS)
        })
        .and_then(|builder| {
            builder.set_buckets_for_metric(Matcher::Full(STORE_DURATION.into()), FAST_BUCKETS)
        })
        .map_err(InstallError::Build)?
        .build_recorder())
}

/// Why an operator listener's address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// A non-loopback address without tokens.
    #[error(
        "the operator listener on {0} would be open to the network without tokens: give it a \
         tokens file, or bind it to a loopback address such as 127.0.0.1:9090"
    )]
    OpenWithoutTokens(SocketAddr),
}

/// Refuses a non-loopback `address` unless the listener has tokens.
pub fn check_address(address: SocketAddr, has_tokens: bool) -> Result<(), AddressError> {
    if address.ip().is_loopback() || has_tokens {
        Ok(())
    } else {
        Err(AddressError::OpenWithoutTokens(address))
    }
}

/// Whether the server is draining: `/readyz` answers 503 once it is, so a
/// load balancer sends new work elsewhere. Cheap to clone; clones share the
/// flag.
#[derive(Debug, Clone, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    /// Marks the server as draining (for good).
    pub fn start(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Draining::start`] was called.
    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The operator listener: build it, give it tokens, routes and metrics,
/// then [`serve`](OperatorListener::serve) it or take its
/// [`router`](OperatorListener::router).
///
/// ```no_run
/// # use mcp_tasks::server::TaskRuntime;
/// # async fn run(runtime: TaskRuntime) -> anyhow::Result<()> {
/// use mcp_tasks::server::operator::{OperatorListener, install_prometheus};
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
/// OperatorListener::new(runtime)
///     .with_metrics(install_prometheus()?)
///     .serve(listener)
///     .await?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct OperatorListener {
    runtime: TaskRuntime,
    tokens: Option<Arc<BearerTokens>>,
    routes: Router,
    metrics: Option<PrometheusHandle>,
    page: bool,
    draining: Draining,
    ready_timeout: Duration,
}

impl std::fmt::Debug for OperatorListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorListener")
            .field("tokens", &self.tokens.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("page", &self.page)
            .field("ready_timeout", &self.ready_timeout)
            .finish_non_exhaustive()
    }
}

impl OperatorListener {
    /// A listener for `runtime`, without tokens (loopback only), without
    /// metrics (`/metrics` answers 404) and without extra routes.
    pub fn new(runtime: TaskRuntime) -> Self {
        Self {
            runtime,
            tokens: None,
            routes: Router::new(),
            metrics: None,
            page: true,
            draining: Draining::default(),
            ready_timeout: DEFAULT_READY_TIMEOUT,
        }
    }

    /// Requires a bearer token of `tokens` on every route but `/healthz`
    /// and `/readyz`.
    pub fn with_tokens(mut self, tokens: impl Into<Arc<BearerTokens>>) -> Self {
        self.tokens = Some(tokens.into());
        self
    }

    /// Serves `routes` too (the admin API), behind the same token check.
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.routes = self.routes.merge(routes);
        self
    }

    /// Serves `/metrics` from `handle`, and the operator's page at `/`
    /// (which reads the same numbers): the handle of the installed
    /// recorder ([`install_prometheus`]), since the runtime records into
    /// the installed one. The runtime should have a [`MetricsObserver`]
    /// (see [`metrics_observer`]) for the task metrics.
    pub fn with_metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Serves no operator's page (`/`, `/ui/...`), for a listener whose
    /// routes ([`OperatorListener::with_routes`]) have a `/` of their own.
    pub fn without_page(mut self) -> Self {
        self.page = false;
        self
    }

    /// Uses `draining` as the flag `/readyz` reads (by default a flag of
    /// its own, see [`OperatorListener::draining`]).
    pub fn with_draining(mut self, draining: Draining) -> Self {
        self.draining = draining;
        self
    }

    /// How long `/readyz` waits for the store before answering 503.
    pub fn with_ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// The flag that makes `/readyz` answer 503 once set.
    pub fn draining(&self) -> Draining {
        self.draining.clone()
    }

    /// The routes, with the token (or loopback) check in front.
    pub fn router(self) -> Router {
        let Self {
            runtime,
            tokens,
            routes,
            metrics,
            page: serve_page,
            draining,
            ready_timeout,
        } = self;
        let mut protected = routes;
        let mut page = None;
        let sessions = Arc::new(Sessions::default());
        if let Some(handle) = metrics {
            // Counted from zero at once, so that the first lost lease is an
            // increase (an alert's `increase()` sees none in a new series).
            metrics::counter!(LEASES_LOST).increment(0);
            let render: Render = {
                let runtime = runtime.clone();
                Arc::new(move || render(&runtime, &handle))
            };
            let is_draining: Arc<dyn Fn() -> bool + Send + Sync> = {
                let (runtime, draining) = (runtime.clone(), draining.clone());
                Arc::new(move || draining.is_draining() || runtime.is_draining())
            };
            page = serve_page.then(|| {
                super::page::routes(
                    runtime.clone(),
                    tokens.clone(),
                    sessions.clone(),
                    render.clone(),
                    is_draining,
                )
            });
            protected =
                protected.route("/metrics", get(move || std::future::ready(scrape(&render))));
        }
        // A listener of health only (no routes, no metrics) has nothing to
        // check (and axum refuses a layer on no route).
        let checked = if !protected.has_routes() {
            protected
        } else {
            let tokens = tokens.clone();
            protected.route_layer(axum::middleware::from_fn(
                move |request: Request, next: Next| {
                    let (tokens, sessions) = (tokens.clone(), sessions.clone());
                    async move { admit(tokens.as_deref(), &sessions, request, next).await }
                },
            ))
        };
        let open_check = tokens.is_none();
        let health = Router::new()
            .route("/healthz", get(|| async { (StatusCode::OK, "ok\n") }))
            .route(
                "/readyz",
                get(move || ready(runtime.clone(), draining.clone(), ready_timeout)),
            )
            .route_layer(axum::middleware::from_fn(
                move |request: Request, next: Next| async move {
                    if open_check && let Err(refusal) = loopback_only(request.headers()) {
                        return refusal;
                    }
                    next.run(request).await
                },
            ));
        let served = checked.merge(health);
        match page {
            Some(page) => served.merge(page),
            None => served,
        }
    }

    /// Serves the routes on `listener` until the process ends.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        crate::server::transport::http::serve(listener, self.router()).await
    }
}

/// A [`MetricsObserver`] for
/// [`TaskRuntimeBuilder::with_observer`](crate::server::TaskRuntimeBuilder::with_observer).
pub fn metrics_observer() -> Arc<dyn crate::server::TaskObserver> {
    Arc::new(MetricsObserver::new())
}

/// The metrics as `/metrics` shows them: the gauges of now, read from the
/// runtime, then the text.
fn render(runtime: &TaskRuntime, handle: &PrometheusHandle) -> String {
    if let Some((working, asking)) = runtime.live_by_status() {
        metrics::gauge!(TASKS_LIVE, "status" => "working").set(working as f64);
        metrics::gauge!(TASKS_LIVE, "status" => "input_required").set(asking as f64);
    }
    metrics::gauge!(LISTEN_STREAMS_OPEN).set(runtime.open_subscriptions() as f64);
    metrics::gauge!(LISTEN_STREAMS_LIMIT).set(runtime.max_listen_streams() as f64);
    let load = runtime.load();
    metrics::gauge!(TOOLS_RUNNING).set(load.running as f64);
    metrics::gauge!(TASKS_QUEUED).set(load.queued as f64);
    metrics::gauge!(TASKS_QUEUED_OLDEST).set(
        load.oldest_queued
            .map_or(0.0, |waited| waited.as_secs_f64()),
    );
    let limits = runtime.admission_limits();
    if let Some(max) = limits.max_running() {
        metrics::gauge!(TOOLS_RUNNING_LIMIT).set(max as f64);
    }
    if let Some(max) = limits.max_queued() {
        metrics::gauge!(TASKS_QUEUED_LIMIT).set(max as f64);
    }
    handle.run_upkeep();
    handle.render()
}

/// `/metrics`.
fn scrape(render: &Render) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        render(),
    )
        .into_response()
}

/// The id `/readyz` reads: no task has it (ids are hex and dashes).
const PROBE_ID: &str = "readyz-probe";

/// `/readyz`: 200 when the store answers within `timeout` and the server
/// is not draining (flagged, or its runtime drains), 503 with the reason
/// otherwise.
async fn ready(runtime: TaskRuntime, draining: Draining, timeout: Duration) -> Response {
    if draining.is_draining() || runtime.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    let probe = TaskId::new(PROBE_ID);
    match tokio::time::timeout(timeout, runtime.store().get(&probe)).await {
        Ok(Ok(_)) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(_)) => (StatusCode::SERVICE_UNAVAILABLE, "the task store fails\n").into_response(),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the task store does not answer\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::store::MemoryStore;

    /// `GET path` on a listener serving `operator`: the status line.
    async fn status_of(operator: OperatorListener, path: &str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(operator.serve(listener));
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer.lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn the_page_comes_with_the_metrics_unless_left_out() {
        let runtime = TaskRuntime::builder(MemoryStore::new()).build();
        let metrics = || prometheus_recorder().unwrap().handle();
        let with_page = OperatorListener::new(runtime.clone()).with_metrics(metrics());
        assert!(status_of(with_page, "/").await.contains("200"));
        let without = OperatorListener::new(runtime.clone())
            .with_metrics(metrics())
            .without_page();
        assert!(status_of(without, "/").await.contains("404"));
        let own = Router::new().route("/", get(|| async { "mine" }));
        let theirs = OperatorListener::new(runtime.clone())
            .with_metrics(metrics())
            .with_routes(own)
            .without_page();
        assert!(status_of(theirs, "/").await.contains("200"));
        let no_metrics = OperatorListener::new(runtime);
        assert!(status_of(no_metrics, "/ui/state").await.contains("404"));
    }
}
