//! `mcp-tasks serve`: an rmcp server on our [`TaskRuntime`] with the demo
//! tools of [`self::tools`], over stdio or stateless Streamable HTTP, and
//! `subscriptions/listen` for tasks on both (`notifications/tasks` pushed
//! as tasks change; see `mcp_tasks::server::listen`).
//!
//! With `--store redis://HOST:PORT/DB` (or `rediss://`), or
//! `--store postgres://...` (or `postgresql://`), several `serve`
//! processes share their tasks (see the crates `mcp-tasks-redis` and
//! `mcp-tasks-postgres`): any of them answers for any task, and when one
//! dies another ends its tasks within `--lease-period`, running `long_job`
//! and `confirm_action` again.
//!
//! Over HTTP the endpoint is `/mcp`, served by the library's recipe, which
//! checks on every route the `Host` header (loopback names, and those of
//! `--allowed-host`: DNS-rebinding protection) and the `Origin` header: a
//! request that carries an `Origin` other than `localhost`, `127.0.0.1` or
//! `[::1]` (any port, `http` or `https`) or one of `--allowed-origin` gets
//! `403 Forbidden`, as the 2026-07-28 transport requires; a request without
//! `Origin` (a non-browser client) passes. With `--auth-tokens` every
//! request needs a bearer token of the file (401 otherwise), and its label
//! is the caller's principal.

mod command;
pub(crate) mod config;
mod drain;
mod oauth;
mod operator;
mod os;
mod reload;
mod task_tools;
mod tools;

pub(crate) use command::{ServeArgs, run};
pub(crate) use operator::BadFlag;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mcp_tasks::Ttl;
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::http::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, LOOPBACK_HOSTS, LOOPBACK_ORIGINS,
    StreamableHttpServer,
};
use mcp_tasks::server::{
    AdmissionLimits, StdioTransport, TaskRuntime, TaskRuntimeBuilder, TaskTools,
};
use mcp_tasks::store::{MemoryStore, SharedStore};
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};
use mcp_tasks_redis::{RedisOptions, RedisStore};
use mcp_tasks_sqlite::{SqliteOptions, SqliteStore, SqliteSync};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer, ServerInitializeError};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

/// Where the server keeps its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreChoice {
    /// In memory: tasks end with the process.
    Memory,
    /// A SQLite file: tasks survive a restart (unfinished ones fail).
    Sqlite(PathBuf),
    /// Redis (`redis://HOST:PORT/DB` or `rediss://`): several replicas share
    /// the tasks.
    Redis(String),
    /// PostgreSQL (`postgres://...` or `postgresql://...`): several replicas
    /// share the tasks.
    Postgres(String),
}

/// What names a shared store's objects, so several deployments can share
/// one server: Redis's key prefix, PostgreSQL's schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Namespace<'a> {
    /// Put before every Redis key.
    pub(crate) redis_key_prefix: &'a str,
    /// The PostgreSQL schema of every table.
    pub(crate) postgres_schema: &'a str,
}

impl<'a> Namespace<'a> {
    /// The flags' values, or the stores' defaults.
    pub(crate) fn of(redis_key_prefix: Option<&'a str>, postgres_schema: Option<&'a str>) -> Self {
        Self {
            redis_key_prefix: redis_key_prefix.unwrap_or(mcp_tasks_redis::DEFAULT_KEY_PREFIX),
            postgres_schema: postgres_schema.unwrap_or(mcp_tasks_postgres::DEFAULT_SCHEMA),
        }
    }
}

impl Default for Namespace<'_> {
    fn default() -> Self {
        Self::of(None, None)
    }
}

impl StoreChoice {
    /// Reads `memory`, `sqlite:PATH`, `redis://...`, `rediss://...`,
    /// `postgres://...` or `postgresql://...`.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        match text.split_once(':') {
            _ if text == "memory" => Ok(Self::Memory),
            Some(("sqlite", path)) if !path.is_empty() => Ok(Self::Sqlite(PathBuf::from(path))),
            Some(("sqlite", _)) => {
                anyhow::bail!("sqlite: needs a file path, as in sqlite:tasks.db")
            }
            Some(("redis" | "rediss", rest)) if rest.starts_with("//") && rest.len() > 2 => {
                Ok(Self::Redis(text.to_owned()))
            }
            Some(("redis" | "rediss", _)) => {
                anyhow::bail!("a Redis store is a URL, as in redis://127.0.0.1:6379/0")
            }
            _ if mcp_tasks_postgres::is_postgres_url(text) => Ok(Self::Postgres(text.to_owned())),
            Some(("postgres" | "postgresql", _)) => {
                anyhow::bail!("a PostgreSQL store is a URL, as in postgres://USER@HOST:5432/DB")
            }
            _ => anyhow::bail!(
                "unknown store {:?}: use memory, sqlite:PATH, redis://HOST:PORT/DB or \
                 postgres://USER@HOST:PORT/DB",
                redacted(text)
            ),
        }
    }

    /// The SQLite file `mcp-tasks/tasks.db` in the user's data directory
    /// (`$XDG_DATA_HOME`, `~/.local/share`, ...), creating the folder.
    pub(crate) fn default_sqlite() -> anyhow::Result<Self> {
        let data = dirs::data_dir().context("this system has no user data directory")?;
        Self::sqlite_in(data)
    }

    /// The SQLite file `mcp-tasks/tasks.db` under `data`, creating the
    /// folder `0700` (an existing one open to others gets a warning).
    fn sqlite_in(data: impl Into<PathBuf>) -> anyhow::Result<Self> {
        let folder = data.into().join("mcp-tasks");
        mcp_tasks::private_files::create_private_dir(&folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        Ok(Self::Sqlite(folder.join("tasks.db")))
    }

    /// Opens the store. A SQLite file is opened at once (blocking file
    /// I/O: call this at start-up), syncing as `sync` says; its unfinished
    /// tasks from an earlier run are failed, but for the resumable ones,
    /// which the runtime runs again. Redis is connected to (within 2 s)
    /// under the namespace's key prefix; PostgreSQL in its schema, which
    /// is migrated to this binary's version if it is behind.
    pub(crate) async fn open(
        &self,
        namespace: Namespace<'_>,
        sync: SqliteSync,
    ) -> anyhow::Result<SharedStore> {
        Ok(match self {
            Self::Memory => Arc::new(MemoryStore::new()),
            Self::Sqlite(path) => Arc::new(
                SqliteStore::open_with(path, &SqliteOptions::default().with_sync(sync)).map_err(
                    |error| match error.kind() {
                        // Two servers on one file, as two `serve`s with the
                        // default store: say how to give each its own.
                        mcp_tasks::store::StoreErrorKind::InUse => anyhow::anyhow!(
                            "another process holds the task store {} (another mcp-tasks \
                             serve?): give this server a store of its own, --store \
                             sqlite:PATH, or --store memory (its tasks end with it)",
                            path.display()
                        ),
                        _ => anyhow::Error::new(error)
                            .context(format!("cannot open the task store {}", path.display())),
                    },
                )?,
            ),
            Self::Postgres(url) => {
                let options = PostgresOptions::default().with_schema(namespace.postgres_schema);
                Arc::new(
                    PostgresStore::connect_with(url, options)
                        .await
                        .with_context(|| format!("cannot open the task store {}", redacted(url)))?,
                )
            }
            Self::Redis(url) => {
                let options = RedisOptions::default().with_key_prefix(namespace.redis_key_prefix);
                Arc::new(
                    RedisStore::connect_with(url, options)
                        .await
                        .with_context(|| format!("cannot open the task store {}", redacted(url)))?,
                )
            }
        })
    }
}

/// Who may reach the HTTP endpoint.
#[derive(Debug, Clone)]
pub(crate) struct HttpAccess {
    /// The `Host` values answered.
    pub(crate) hosts: Vec<String>,
    /// The browser origins answered.
    pub(crate) origins: Vec<String>,
    /// The bearer tokens required, if any.
    pub(crate) tokens: Option<BearerTokens>,
    /// The OAuth resource server, if tokens of an authorization server are required.
    pub(crate) oauth: Option<Arc<mcp_tasks::server::oauth::OAuthResourceServer>>,
    /// How many connections are open at once.
    pub(crate) max_connections: usize,
    /// How long a kept-alive connection may wait for its next request.
    pub(crate) idle_timeout: Duration,
}

impl Default for HttpAccess {
    /// Loopback names and origins only, no token required.
    fn default() -> Self {
        Self {
            hosts: LOOPBACK_HOSTS.iter().map(|&host| host.to_owned()).collect(),
            origins: LOOPBACK_ORIGINS
                .iter()
                .map(|&origin| origin.to_owned())
                .collect(),
            tokens: None,
            oauth: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// `text` with any password of a URL in it replaced by `***`: the user
/// part, and a `password=` parameter (PostgreSQL's URLs may carry one).
pub(crate) fn redacted(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let url = match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => text.to_owned(),
    };
    match url.split_once('?') {
        Some((base, query)) => {
            let query: Vec<&str> = query
                .split('&')
                .map(|pair| {
                    if pair.starts_with("password=") {
                        "password=***"
                    } else {
                        pair
                    }
                })
                .collect();
            format!("{base}?{}", query.join("&"))
        }
        None => url,
    }
}

/// How the server runs its tasks.
#[derive(Clone)]
pub(crate) struct ServeOptions {
    /// Where tasks are kept.
    pub(crate) store: SharedStore,
    /// The `pollIntervalMs` suggested to clients.
    pub(crate) poll_interval: Duration,
    /// The TTL of tasks; `None`: the runtime's default (1 h).
    pub(crate) ttl: Option<Duration>,
    /// The longest a task may live; `None`: no bound.
    pub(crate) max_lifetime: Option<Duration>,
    /// How many unfinished tasks one caller may have at once; `None`: no limit.
    pub(crate) max_tasks_per_caller: Option<usize>,
    /// The bounds on running and queued tasks.
    pub(crate) admission: AdmissionLimits,
    /// Whether unauthenticated callers are counted apart, by their
    /// `Authorization` header, for the cap and the rate.
    pub(crate) quota_by_header: bool,
    /// How fast one caller may create tasks; `None`: no limit.
    pub(crate) rate_per_caller: Option<mcp_tasks::server::CreationRate>,
    /// The lease period on a store shared by several replicas (Redis).
    pub(crate) lease_period: Duration,
    /// How many listen streams are open at once, all callers together.
    pub(crate) max_listen_streams: usize,
    /// How many listen streams one caller may have open at once.
    pub(crate) max_listen_streams_per_caller: usize,
    /// The most bytes of JSON one tool outcome may weigh; `None`: no bound.
    pub(crate) max_result_bytes: Option<usize>,
    /// Handles and the task tools for callers that declare no tasks.
    pub(crate) task_tools: TaskTools,
    /// What hears each task's events (the metrics of `--admin`).
    pub(crate) observers: Vec<Arc<dyn mcp_tasks::server::TaskObserver>>,
}

/// The demo server: an rmcp `ServerHandler` that runs the tools of
/// [`self::tools`] on a [`TaskRuntime`]. Cheap to clone; clones share the
/// runtime, so one value can serve every HTTP request.
#[derive(Debug, Clone)]
pub(crate) struct DemoServer {
    runtime: TaskRuntime,
}

impl ServeOptions {
    /// A runtime builder with these options.
    pub(crate) fn runtime(&self) -> TaskRuntimeBuilder {
        let mut runtime = TaskRuntime::builder(self.store.clone())
            .with_poll_interval(self.poll_interval)
            .with_max_tasks_per_caller(self.max_tasks_per_caller)
            .with_admission(self.admission.clone())
            .with_quota_by_header(self.quota_by_header)
            .with_rate_per_caller(self.rate_per_caller)
            .with_lease_period(self.lease_period)
            .with_max_lifetime(self.max_lifetime)
            .with_max_listen_streams(self.max_listen_streams)
            .with_max_listen_streams_per_caller(self.max_listen_streams_per_caller)
            .with_max_result_bytes(self.max_result_bytes)
            .with_task_tools(self.task_tools.clone());
        if let Some(ttl) = self.ttl {
            runtime = runtime.with_default_ttl(Ttl::Limited(ttl));
        }
        for observer in &self.observers {
            runtime = runtime.with_observer(observer.clone());
        }
        runtime
    }
}

impl DemoServer {
    /// Starts the runtime (its sweeper runs until the last clone is
    /// dropped). Must be called inside a tokio runtime.
    pub(crate) fn new(options: &ServeOptions) -> Self {
        // On a shared store, the resumable demo tools of a replica that
        // stopped run again here.
        let runtime = options.runtime().with_resume(tools::resume).build();
        tools::advertise(&runtime);
        Self { runtime }
    }

    /// The runtime its tasks run on.
    pub(crate) fn runtime(&self) -> &TaskRuntime {
        &self.runtime
    }
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            self.runtime.declare_idempotency(
                ServerCapabilities::builder()
                    .enable_tools()
                    .enable_tasks()
                    .build(),
            ),
        )
        .with_server_info(Implementation::new("mcp-tasks", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "Demo tools for the MCP Tasks extension: {}. Task changes are pushed as \
             notifications/tasks on subscriptions/listen with notifications.taskIds.",
            tools::names().collect::<Vec<_>>().join(", ")
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listed = self.runtime.list_tools_for(tools::list(), &context);
        Ok(ListToolsResult::with_all_items(listed))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::find(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        tools::call(&self.runtime, request, context).await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// Serves on stdin and stdout until stdin closes (also before any message).
/// Serves `server` on stdin/stdout until the client closes it or `stop`
/// completes (after a drain: see `drain.rs`).
pub(crate) async fn serve_stdio<S>(
    server: S,
    runtime: &TaskRuntime,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()>
where
    S: ServerHandler + Send + Sync + 'static,
{
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // Each request in its span (the library's `otel` feature).
    let running = match mcp_tasks::server::Traced::stdio(server)
        .serve(StdioTransport::new(runtime, stdin, stdout))
        .await
    {
        Ok(running) => running,
        // The client went away before its first message: nothing to serve.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(error).context("cannot start the MCP server on stdio"),
    };
    let token = running.cancellation_token();
    let stopping = tokio::spawn(async move {
        stop.await;
        token.cancel();
    });
    let quit = running.waiting().await;
    stopping.abort();
    quit.context("the MCP server on stdio stopped")?;
    Ok(())
}

/// Serves Streamable HTTP at `/mcp` on `listener` with the library's
/// serving recipe, answering whom `access` allows (with at most its
/// `max_connections` open at once, idle ones closed after its
/// `idle_timeout`), until `shutdown` completes, then ends
/// the listen streams gracefully and finishes the requests in flight.
pub(crate) async fn serve_http<S>(
    server: S,
    runtime: TaskRuntime,
    listener: tokio::net::TcpListener,
    access: HttpAccess,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let mut recipe = StreamableHttpServer::new(server, runtime)
        .with_max_connections(access.max_connections)
        .with_idle_timeout(access.idle_timeout)
        .with_allowed_hosts(access.hosts)
        .with_allowed_origins(access.origins);
    if let Some(tokens) = access.tokens {
        recipe = recipe.with_bearer_tokens(tokens);
    }
    if let Some(oauth) = access.oauth {
        recipe = recipe.with_oauth(oauth);
    }
    recipe
        .serve_with_shutdown(listener, shutdown)
        .await
        .context("the HTTP server stopped")
}

/// Test helpers (shared with the tool tests of `self::tools`) and the
/// tests of discovery, HTTP and stores.
#[cfg(test)]
pub(crate) mod tests;
