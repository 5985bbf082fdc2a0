//! A task gateway: any MCP server's tools, served to 2026-07-28 clients as
//! durable tasks.
//!
//! [`Gateway`] is an rmcp `ServerHandler` on a [`TaskRuntime`] whose tools
//! are those of an upstream server: a child process over stdio or a
//! Streamable HTTP endpoint ([`Upstream`]), reached in whichever era it
//! speaks (2026-07-28 by `server/discover`, else `initialize`: 2025-11-25,
//! 2025-06-18). The upstream needs no change: a slow tool that would hit an
//! HTTP or host timeout, or lose its work when the caller's connection
//! drops, becomes a task the caller polls, listens to, answers and cancels.
//!
//! Many upstreams go behind one gateway with [`Gateway::start_many`] and a
//! [`GatewayConfig`]: each upstream's tools are listed under its name and
//! a separator (`everything__echo`), callers see and call only what their
//! label may ([`UpstreamConfig::with_labels`]; others get -32602 as for an
//! unknown tool), calls carry the gateway's identity or the caller's
//! ([`Identity`], connections pooled per identity), and each upstream has
//! its own connections, call timeout and [`CircuitBreaker`], so one
//! failing does not touch the others. [`Gateway::reload`] changes the
//! upstreams of a running gateway without failing a running task.
//!
//! * **Eras**: an upstream that answers `server/discover` without the
//!   Tasks extension is asked `initialize` too. One that speaks both (as
//!   fastmcp 4.1.4 does, which refuses on each era the other's way of
//!   asking for input: `ctx.elicit` on 2026-07-28, an MRTR round on a
//!   2025-era session) has its calls made on 2025-era connections, where
//!   server-initiated requests and the session's roots work; a call it
//!   refuses there with -32602 is sent again on a 2026-07-28 connection,
//!   where that tool's calls start from then on. An upstream that
//!   advertises the extension is reached on 2026-07-28 only.
//! * **Tools** are listed at start and read again after every reconnect
//!   and on the upstream's `notifications/tools/list_changed`. When the
//!   list read differs, the gateway's clients are told with
//!   `notifications/tools/list_changed` (it declares `tools.listChanged`):
//!   2026-07-28 clients on their `subscriptions/listen` streams that ask
//!   for `toolsListChanged` (HTTP and stdio alike; such a stream ends
//!   gracefully with the runtime's own, at
//!   [`TaskRuntime::end_subscriptions`]), initialize-era clients directly.
//! * **Policy** per tool ([`GatewayOptions::with_tool_policy`], default
//!   [`GatewayOptions::with_default_policy`], optional unless told): a tool
//!   the upstream marks with a task policy (a 2025-11-25 tool's
//!   `execution.taskSupport`; 2026-07-28 tools carry none) keeps it unless
//!   told otherwise. `optional` and `required` are always kept. `forbidden`
//!   is kept only from an upstream that leaves some of its tools unmarked:
//!   2025-11-25 reads an absent mark as `forbidden`, and the TypeScript SDK
//!   v1 writes `forbidden` on every tool not registered as a task tool
//!   (server-everything 2026.8.31 so marks all but one of its tools, its
//!   `tasks` capability declared), so from an upstream that marks every
//!   tool it is the SDK's default and says only that the upstream makes no
//!   task itself, which is what the gateway is for: such a tool gets the
//!   default policy. A call that
//!   runs synchronously (policy forbidden, or the caller did not declare the
//!   extension) passes straight through (see below).
//! * **A call that becomes a task** runs the upstream call under the
//!   runtime: the upstream's result (`isError: true` too) completes the
//!   task, its JSON-RPC error fails it, and a connection that closes during
//!   the call (a stdio child that exited or crashed) fails it with a
//!   message saying so; the upstream is connected again with backoff in
//!   the background while the gateway keeps serving.
//! * **During the call** the upstream's requests (elicitation in form and URL
//!   mode, sampling, roots) become the task's `input_required`, and the
//!   answer of the client's `tasks/update` goes back as the response. So do
//!   the input requests of its MRTR rounds (a 2026-07-28 `tools/call`
//!   answered `input_required`): the call is then sent again on the same
//!   connection with the answers as `inputResponses` and its `requestState`
//!   echoed, round after round, until a result or an error; a task
//!   cancelled or expired while a round waits ends there. Its
//!   `notifications/progress` (`3/5: message`) become the task's status
//!   message (its log messages do not: a log line is not progress; the
//!   gateway logs them at debug). `tasks/cancel` (and expiry) cancels the
//!   upstream request (`notifications/cancelled`).
//!   Requests carry no link to their call, so each
//!   connection carries one call of a plain tool at a time and what comes
//!   on it is that call's, never guessed: a call takes a free connection,
//!   else opens one of its own (a further child process, a further HTTP
//!   session), up to [`GatewayOptions::with_max_upstream_connections`];
//!   past the bound it waits its turn, a task `working` with a status
//!   message saying so. The gateway's own connection (it lists the tools
//!   and hears `list_changed`) is the first of them, unless the upstream
//!   makes tasks itself: then it carries the calls that await the
//!   upstream's tasks, whose input names its task. Idle connections are
//!   reused (further ones closed after
//!   [`GatewayOptions::with_idle_connection_timeout`]); one whose call was
//!   cancelled is closed (the upstream might
//!   still ask on the cancelled call's behalf), one that died is dropped
//!   and fails only its own call. A stdio upstream that keeps state in its
//!   process sees concurrent calls in separate processes. A `roots/list`
//!   with no call in flight, or during a connection's handshake or within
//!   [`GatewayOptions::startup_window`] after it (default 1 s), is answered
//!   by the gateway, with its own roots ([`GatewayOptions::with_roots`],
//!   none by default): servers ask for roots once they are initialized,
//!   for the session (server-everything 350 ms after
//!   `notifications/initialized`, filesystem servers for their allowed
//!   folders), and that ask would otherwise land in whichever call runs
//!   then. [`Gateway::set_roots`] replaces them and sends
//!   `notifications/roots/list_changed` to every open 2025-era connection.
//! * **An upstream that answers with tasks** (the extension, or 2025-11-25
//!   tasks for tools it marks optional or required, when it declared
//!   `tasks.requests.tools.call`) answers first: its result or MRTR round
//!   goes back as it is, and its task becomes a gateway task. One whose
//!   creation says it has finished already (its tool answered at once) is
//!   read before the gateway's task is made (from the creation itself on
//!   an upstream of this crate, see
//!   [`CREATED_OUTCOME_EXTENSION`](crate::CREATED_OUTCOME_EXTENSION); with
//!   one `tasks/get` on any other), which is then made finished with its
//!   outcome, so the caller's `CreateTaskResult` says so too. Any other
//!   the gateway task awaits with [`TasksClient`](crate::TasksClient) (on
//!   a `subscriptions/listen` stream for the task where the upstream
//!   serves one, over HTTP or stdio, so its changes arrive as they happen;
//!   by polling at its
//!   `pollIntervalMs` where it refuses the stream, as fastmcp-tasks does,
//!   or speaks 2025-11-25), relays its status
//!   messages and input requests (under the gateway's own keys: the
//!   upstream's may name its task) and sends `tasks/cancel` on.
//! * **Synchronous calls** pass straight through, on a connection of their
//!   own like any call of a plain tool; a request the upstream sends during
//!   one (or an input request of its MRTR round) goes to the caller: on a
//!   2025-era session as a request on the caller's own connection, to a
//!   2026-07-28 caller as an MRTR round of the gateway's own (the
//!   `tools/call` answers `input_required` with a `requestState` naming the
//!   parked upstream call, and the retry's answers go to it; bound to the
//!   caller and the tool, kept for [`GatewayOptions::with_input_timeout`],
//!   then the upstream request is cancelled).
//! * **Across deploys** ([`GatewayResumes`], see `resume.rs`): a task the
//!   upstream runs as its own is followed again by whichever gateway takes
//!   the gateway's task up next (the same one started again on SQLite,
//!   another replica on Redis or PostgreSQL), never called twice; a call
//!   the upstream answers itself is waited for by a drain, and what still
//!   runs then is run again once if its tool is marked
//!   [`GatewayOptions::rerun_on_restart`], else fails naming the upstream.
//! * Whatever the runtime promises holds: tasks on SQLite survive a gateway
//!   restart, replicas share tasks on Redis and PostgreSQL, tasks are
//!   bound to their caller, ids are never logged (the
//!   upstream connections run in the [`quiet`](crate::quiet) scope, and so
//!   does the HTTP recipe; a gateway served otherwise is started in it, as
//!   below). Requests
//!   the gateway does not serve (resources, prompts, ...) get -32601.
//!
//! ```no_run
//! use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};
//! use mcp_tasks::server::{TaskPolicy, TaskRuntime};
//! use mcp_tasks::store::MemoryStore;
//! use rmcp::ServiceExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = TaskRuntime::builder(MemoryStore::new()).build();
//! let options = GatewayOptions::default().with_tool_policy("echo", TaskPolicy::Forbidden);
//! let gateway = Gateway::start(Upstream::command("npx mcp-server-everything stdio"), runtime, options).await?;
//! // In the quiet scope, so that rmcp's logs carry no task id (see `quiet`).
//! let running = mcp_tasks::quiet::scope(gateway.serve(rmcp::transport::stdio())).await?;
//! running.waiting().await?;
//! # Ok(()) }
//! ```

// Roots are deprecated (SEP-2577) but upstreams of the 2025 era still ask.
#![allow(deprecated)]

mod breaker;
mod call;
mod connection;
mod dispatch;
mod held;
mod pool;
mod relay;
mod resume;
mod roots;
mod rounds;
mod routes;
mod sync;
mod team;
mod upstream;

use breaker::SINGLE;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, Root, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData, Peer, ServerHandler};

pub use connection::Upstream;
pub use resume::GatewayResumes;
pub use roots::root_for_path;
pub use team::{
    CircuitBreaker, DEFAULT_SEPARATOR, GatewayConfig, Identity, ReloadReport, ToolLabels,
    UpstreamConfig,
};

use crate::server::{TaskPolicy, TaskRuntime};
use routes::Routes;

/// Why a gateway could not start (or a path could not be a root).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The upstream command could not be started.
    #[error("cannot start the upstream command")]
    Spawn {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The upstream did not complete the MCP handshake (it is not reachable,
    /// exited, or does not speak MCP).
    #[error("the upstream server did not complete the MCP handshake")]
    Initialize {
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The HTTP client could not be built.
    #[error("cannot build an HTTP client for the upstream")]
    Http {
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A header for the upstream is not a valid HTTP header.
    #[error("the upstream header {name:?} is not a valid HTTP header")]
    Header {
        /// The header's name.
        name: String,
    },
    /// The upstream did not answer the handshake in time.
    #[error("the upstream server did not answer within {0:?}")]
    ConnectTimeout(Duration),
    /// The upstream's tools could not be listed.
    #[error("cannot list the upstream's tools: {message}")]
    ListTools {
        /// The upstream's error message.
        message: String,
    },
    /// A configuration that cannot be served ([`GatewayConfig::check`]), or
    /// two upstreams that list one tool name.
    #[error("{message}")]
    Config {
        /// What is wrong, naming it.
        message: String,
    },
    /// One of several upstreams could not start.
    #[error("the upstream {name:?}: {source}")]
    Upstream {
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A path cannot be a root ([`root_for_path`]): nothing is there.
    #[error("{} cannot be a root", path.display())]
    Root {
        /// The path, made absolute.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    fn upstream(name: &str, source: Self) -> Self {
        match source {
            config @ Self::Config { .. } => config,
            source => Self::Upstream {
                name: name.to_owned(),
                source: Box::new(source),
            },
        }
    }
}

/// How a [`Gateway`] serves the upstream's tools.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// The policy of tools neither named in `policies` nor marked by the
    /// upstream (default [`TaskPolicy::Optional`]).
    pub default_policy: TaskPolicy,
    /// Policies by tool name; they win over the upstream's marks.
    pub policies: HashMap<String, TaskPolicy>,
    /// How long connecting to the upstream may take (default 30 s).
    pub connect_timeout: Duration,
    /// The pause before connecting again after a failed attempt (default
    /// 250 ms), doubled on each further failure up to `restart_backoff_max`.
    pub restart_backoff_min: Duration,
    /// The longest pause between attempts (default 10 s).
    pub restart_backoff_max: Duration,
    /// How often an HTTP upstream is pinged (default 5 s; zero: never). One
    /// that does not answer within as long is given up as lost: the calls
    /// in flight on it fail, and the next call connects again (a new
    /// session).
    pub health_check: Duration,
    /// How many connections to the upstream may carry calls of plain tools
    /// at once (default 8; at least 1). Each carries one call at a time, so
    /// that the upstream's requests on it are that call's:
    /// a stdio upstream runs as that many child processes at most, an HTTP
    /// upstream is reached in that many sessions (one more of either for
    /// an upstream that makes tasks itself, whose tasks are awaited on the
    /// gateway's own connection). A call past the bound waits for a
    /// connection to come free (a task stays `working`, its status message
    /// saying it waits).
    pub max_upstream_connections: usize,
    /// How long a further connection (beyond the gateway's own) may stay
    /// idle before it is closed (default 60 s; zero: kept until it dies).
    pub idle_connection_timeout: Duration,
    /// How long a synchronous call of a 2026-07-28 caller, parked for the
    /// caller's input (an MRTR round), waits for the retry (default
    /// 5 min); past it the upstream request is cancelled.
    pub input_timeout: Duration,
    /// How long after the handshake a `roots/list` from the upstream is taken
    /// as its start-up ask (default 1 s): servers ask for the client's roots
    /// once they are initialized, for the whole session (server-everything
    /// 350 ms after), and the gateway answers that itself, with its own
    /// roots (see `roots`), even when a call is in flight. Later ones during
    /// a call are relayed.
    /// The same window opens when the gateway tells the upstream its roots
    /// changed ([`Gateway::set_roots`]), for the upstream's ask in return.
    pub startup_window: Duration,
    /// The roots the gateway answers an upstream's session-level
    /// `roots/list` with (default none): one asked at start-up (see
    /// `startup_window`) or with no call in flight. They are the
    /// gateway's, for every caller; a `roots/list` during a call goes to
    /// that call's caller. Replaced at run time by [`Gateway::set_roots`].
    pub roots: Vec<Root>,
    /// The most bytes of one answer of the upstream the gateway reads (a
    /// stdio line, an HTTP body or SSE event). `None` (the default): its
    /// runtime's result budget
    /// ([`TaskRuntimeBuilder::with_max_result_bytes`](crate::server::TaskRuntimeBuilder::with_max_result_bytes))
    /// and [`ANSWER_ENVELOPE`] for the message around the result, without
    /// bound when the runtime has none. An answer past it is not read whole:
    /// the call (or its task) fails with an error that says so, and the
    /// connection goes on. A result within it but past the runtime's
    /// budget fails its task as any tool's does.
    pub max_answer_bytes: Option<usize>,
    /// The upstream's tools (glob patterns of their own names; `*`: all)
    /// whose calls run again from the start when a restart cut them off
    /// (default none). A call the upstream answers with a result, not a
    /// task of its own, lives in the gateway process: a drain waits for it
    /// (up to its timeout), and what still runs then, or when the gateway
    /// crashed, is run again once by the gateway that takes the task up
    /// next (the same one started again on SQLite, another replica on a
    /// shared store), its status message saying so. Other tools' calls
    /// fail then, naming the upstream. Only where the gateway's runtime
    /// resumes its tasks ([`GatewayResumes`]); an upstream's own task is
    /// always followed again, never called twice.
    pub rerun_on_restart: Vec<String>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            default_policy: TaskPolicy::Optional,
            policies: HashMap::new(),
            connect_timeout: Duration::from_secs(30),
            restart_backoff_min: Duration::from_millis(250),
            restart_backoff_max: Duration::from_secs(10),
            health_check: Duration::from_secs(5),
            max_upstream_connections: 8,
            idle_connection_timeout: Duration::from_secs(60),
            input_timeout: Duration::from_secs(300),
            startup_window: Duration::from_secs(1),
            roots: Vec::new(),
            max_answer_bytes: None,
            rerun_on_restart: Vec::new(),
        }
    }
}

impl GatewayOptions {
    /// The policy of tools not named and not marked by the upstream.
    pub fn with_default_policy(mut self, policy: TaskPolicy) -> Self {
        self.default_policy = policy;
        self
    }

    /// The policy of the tool `name`, over the upstream's mark.
    pub fn with_tool_policy(mut self, name: impl Into<String>, policy: TaskPolicy) -> Self {
        self.policies.insert(name.into(), policy);
        self
    }

    /// How long connecting to the upstream may take.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How often an HTTP upstream is pinged (zero: never; see [`GatewayOptions::health_check`]).
    pub fn with_health_check(mut self, interval: Duration) -> Self {
        self.health_check = interval;
        self
    }

    /// How many connections may carry calls at once (at least 1; see
    /// [`GatewayOptions::max_upstream_connections`]).
    pub fn with_max_upstream_connections(mut self, connections: usize) -> Self {
        self.max_upstream_connections = connections.max(1);
        self
    }

    /// How long a further connection may stay idle (see
    /// [`GatewayOptions::idle_connection_timeout`]).
    pub fn with_idle_connection_timeout(mut self, timeout: Duration) -> Self {
        self.idle_connection_timeout = timeout;
        self
    }

    /// How long a synchronous call parked for its caller's input waits for
    /// the retry (see [`GatewayOptions::input_timeout`]).
    pub fn with_input_timeout(mut self, timeout: Duration) -> Self {
        self.input_timeout = timeout;
        self
    }

    /// How long after the handshake the upstream's `roots/list` is answered by
    /// the gateway (see [`GatewayOptions::startup_window`]).
    pub fn with_startup_window(mut self, window: Duration) -> Self {
        self.startup_window = window;
        self
    }

    /// The roots the gateway answers the upstream's session-level
    /// `roots/list` with (see [`GatewayOptions::roots`];
    /// [`root_for_path`] makes one of a directory).
    pub fn with_roots(mut self, roots: impl IntoIterator<Item = Root>) -> Self {
        self.roots = roots.into_iter().collect();
        self
    }

    /// The most bytes of one upstream answer the gateway reads (see
    /// [`GatewayOptions::max_answer_bytes`]).
    pub fn with_max_answer_bytes(mut self, bytes: usize) -> Self {
        self.max_answer_bytes = Some(bytes);
        self
    }

    /// Runs the calls of the tools matching `patterns` (glob patterns of
    /// the upstream's own tool names; `*`: all) again from the start when
    /// a restart cut them off (see [`GatewayOptions::rerun_on_restart`]).
    pub fn with_rerun_on_restart<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        patterns: I,
    ) -> Self {
        self.rerun_on_restart
            .extend(patterns.into_iter().map(Into::into));
        self
    }

    /// The backoff between attempts to connect again: from `min`, doubling, up to `max`.
    pub fn with_restart_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.restart_backoff_min = min;
        self.restart_backoff_max = max;
        self
    }
}

/// What the gateway reads of an upstream answer beyond its runtime's
/// result budget, for the message around the result (its JSON-RPC
/// envelope, a task's fields): 64 KiB.
pub const ANSWER_ENVELOPE: usize = 64 << 10;

/// Refuses an upstream tool served under the name of a task tool
/// ([`TaskTools`](crate::server::TaskTools)), naming both.
fn refuse_task_tool_names(table: &routes::Table) -> Result<(), Error> {
    let clash = table
        .tools(None)
        .into_iter()
        .find(|(tool, _, _)| crate::server::is_task_tool(&tool.name));
    match clash {
        Some((tool, route, upstream_tool)) => Err(Error::Config {
            message: format!(
                "the upstream {:?}'s tool {upstream_tool:?} would be served as {:?}, the name of a \
                 task tool (--task-tools); prefix the upstream, deny the tool, or list only other \
                 tools in --task-tools",
                route.name(),
                tool.name
            ),
        }),
        None => Ok(()),
    }
}

/// `config` with each upstream's bound on an answer that has none set from
/// `runtime`'s result budget (see [`GatewayOptions::max_answer_bytes`]).
fn answers_bounded(mut config: GatewayConfig, runtime: &TaskRuntime) -> GatewayConfig {
    let bound = runtime
        .max_result_bytes()
        .map_or(usize::MAX, |limit| limit.saturating_add(ANSWER_ENVELOPE));
    for upstream in &mut config.upstreams {
        upstream.options.max_answer_bytes.get_or_insert(bound);
    }
    config
}

/// The gateway: an rmcp `ServerHandler` serving upstreams' tools as
/// tasks (see the [module](self) docs). Cheap to clone; clones share the
/// upstream connections and the runtime, so one value serves every HTTP
/// request.
#[derive(Clone)]
pub struct Gateway {
    runtime: TaskRuntime,
    routes: Arc<Routes>,
    /// The initialize-era clients, told of tool list changes directly.
    legacy_peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
}

impl fmt::Debug for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = self.routes.current();
        let upstreams: Vec<&Upstream> = table
            .routes
            .iter()
            .map(|route| &route.config.upstream)
            .collect();
        f.debug_struct("Gateway")
            .field("upstreams", &upstreams)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Connects to `upstream` and lists its tools (both must succeed), then
    /// serves them on `runtime` under their own names. Keeps the upstream
    /// connected until the last clone is dropped. Must be called inside a
    /// tokio runtime.
    pub async fn start(
        upstream: Upstream,
        runtime: TaskRuntime,
        options: GatewayOptions,
    ) -> Result<Self, Error> {
        let config = GatewayConfig::default().with_upstream(
            UpstreamConfig::new(SINGLE, upstream)
                .with_options(options)
                .unprefixed(),
        );
        Self::start_with(runtime, config, true)
            .await
            .map_err(|error| match error {
                Error::Upstream { source, .. } => *source,
                other => other,
            })
    }

    /// Connects to every upstream of `config` and lists its tools (no two
    /// may serve one tool name), then serves them all on `runtime` (see the
    /// [module](self) docs). An upstream that cannot be reached (its
    /// command does not complete the handshake, its URL does not answer in
    /// time) does not stop the others: the gateway starts without its
    /// tools, says so in one warning, tries it again with backoff (up to
    /// [`GatewayOptions::restart_backoff_max`] apart), and serves its tools
    /// once it answers, telling clients the list changed
    /// ([`Gateway::waiting_upstreams`] names those still waited for). A
    /// configuration that cannot be served is an error. Must be called
    /// inside a tokio runtime.
    pub async fn start_many(runtime: TaskRuntime, config: GatewayConfig) -> Result<Self, Error> {
        Self::start_with(runtime, config, false).await
    }

    /// [`Gateway::start_many`]; with `all_or_nothing`, an upstream that
    /// cannot be reached is an error.
    async fn start_with(
        runtime: TaskRuntime,
        config: GatewayConfig,
        all_or_nothing: bool,
    ) -> Result<Self, Error> {
        let config = answers_bounded(config, &runtime);
        let routes = Routes::start(config, all_or_nothing).await?;
        if runtime.task_tools().is_on() {
            refuse_task_tool_names(&routes.current())?;
        }
        let legacy_peers = Arc::default();
        tokio::spawn(tell_legacy_peers(
            routes.version.subscribe(),
            Arc::downgrade(&legacy_peers),
        ));
        Ok(Self {
            runtime,
            routes,
            legacy_peers,
        })
    }

    /// Serves `config` from now on, or, when it cannot be served, goes on
    /// as it was (see [`ReloadReport`]): upstreams whose configuration is
    /// unchanged are kept as they are; new and changed ones are started
    /// first (one that cannot start refuses the reload, naming it); removed
    /// and replaced ones take no new call, and close when their running
    /// calls end, so that a reload fails no task. Clients are told the
    /// tool list changed (on their listen streams, and 2025-era sessions
    /// directly). One reload runs at a time.
    pub async fn reload(&self, config: GatewayConfig) -> Result<ReloadReport, Error> {
        self.routes
            .reload(answers_bounded(config, &self.runtime))
            .await
    }

    /// The upstreams that could not be reached when the gateway started
    /// and have not answered since, by name ([`Gateway::start_many`]).
    pub fn waiting_upstreams(&self) -> Vec<String> {
        self.routes
            .current()
            .pending
            .iter()
            .map(|waiting| waiting.config.name.clone())
            .collect()
    }

    /// The runtime the tasks run on.
    pub fn runtime(&self) -> &TaskRuntime {
        &self.runtime
    }

    /// The roots the gateway answers the (first) upstream's session-level
    /// `roots/list` with (see [`GatewayOptions::roots`]).
    pub fn roots(&self) -> Vec<Root> {
        self.routes
            .current()
            .routes
            .first()
            .map(|route| route.link.roots.current())
            .unwrap_or_default()
    }

    /// Replaces the roots of every upstream (as a reload of its
    /// configuration would). When they differ, every open 2025-era
    /// connection to the upstream is sent `notifications/roots/list_changed`
    /// (a 2026-07-28 connection has no session to tell), and the
    /// `roots/list` it asks in return within
    /// [`GatewayOptions::startup_window`] is answered with the new roots,
    /// even during a call; connections opened later are answered with them
    /// too. Returns whether they differed for some upstream.
    pub async fn set_roots(&self, roots: impl IntoIterator<Item = Root>) -> bool {
        let roots: Vec<Root> = roots.into_iter().collect();
        let mut differed = false;
        for route in &self.routes.current().routes {
            differed |= route.link.roots.replace(roots.clone()).await;
        }
        differed
    }

    /// The tools served, under the names they are called by, as last read
    /// (for every caller: access rules are not applied).
    pub fn tools(&self) -> Vec<Tool> {
        self.routes
            .current()
            .tools(None)
            .into_iter()
            .map(|(tool, _, _)| tool)
            .collect()
    }

    /// The policy the gateway applies to the tool `name` (as it is called):
    /// the one given for it, else the upstream's mark, else the default.
    pub fn policy(&self, name: &str) -> TaskPolicy {
        let table = self.routes.current();
        table
            .tools(None)
            .into_iter()
            .find(|(tool, _, _)| tool.name == name)
            .map(|(_, route, tool)| route.policy(&tool))
            .or_else(|| {
                table
                    .routes
                    .first()
                    .map(|route| route.options.default_policy)
            })
            .unwrap_or_default()
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            self.runtime.declare_idempotency(
                ServerCapabilities::builder()
                    .enable_tools()
                    .enable_tool_list_changed()
                    .enable_tasks()
                    .build(),
            ),
        )
        .with_server_info(Implementation::new(
            "mcp-tasks-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "A task gateway: the tools of an upstream MCP server, each call run as a task \
             (io.modelcontextprotocol/tasks) where its policy allows.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.runtime.principal_of(&context.extensions);
        let table = self.routes.current();
        for route in &table.routes {
            // Only reads where the upstream said its list changed.
            route.link.tools().await;
        }
        let mut listed = Vec::new();
        for (tool, route, name) in table.tools(Some(&caller)) {
            // What 2025-11-25 clients read in the list (execution.taskSupport).
            self.runtime
                .advertise_tool(tool.name.as_ref(), route.policy(&name));
            listed.push(tool);
        }
        let listed = self.runtime.list_tools_for(listed, &context);
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Only tool list changes: the gateway serves no prompts or resources.
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.routes.version.subscribe();
        changes.mark_unchanged();
        // Ended with the runtime's own streams, before a graceful shutdown.
        let ending = self.runtime.subscriptions_ending();
        if context.accepted().tools_list_changed != Some(true) {
            tokio::select! {
                () = context.cancelled() => {}
                () = ending.cancelled() => {}
            }
            return Ok(());
        }
        loop {
            tokio::select! {
                () = ending.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        // The gateway is going away: end the stream gracefully.
                        return Ok(());
                    }
                    if context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                () = context.cancelled() => return Ok(()),
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self
            .legacy_peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }

    crate::delegate_task_methods!(runtime);
}

/// Sends `notifications/tools/list_changed` to every initialize-era client
/// after each change of the upstream's tool list (2026-07-28 clients hear
/// it on their `subscriptions/listen` streams), until the gateway is gone.
async fn tell_legacy_peers(
    mut changes: tokio::sync::watch::Receiver<u64>,
    peers: Weak<Mutex<Vec<Peer<RoleServer>>>>,
) {
    while changes.changed().await.is_ok() {
        let Some(peers) = peers.upgrade() else { return };
        let open: Vec<Peer<RoleServer>> = {
            let mut peers = peers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in open {
            // A client that went away meanwhile misses nothing it could hear.
            let _ = peer.notify_tool_list_changed().await;
        }
    }
}

/// A client error of a request to the upstream, as the JSON-RPC error the
/// gateway answers with: the upstream's own JSON-RPC error as it sent it,
/// anything else as -32603 saying what went wrong.
pub(crate) fn client_failure(what: &str, error: &crate::client::Error) -> ErrorData {
    if let crate::client::Error::AnswerTooLarge { bound, size, .. } = error {
        return upstream::answer_too_large(what, *bound, *size);
    }
    match error.rpc_error() {
        Some(rpc) => ErrorData::new(
            rmcp::model::ErrorCode(i32::try_from(rpc.code).unwrap_or(-32603)),
            rpc.message.clone(),
            rpc.data.clone(),
        ),
        None if error.is_transport() => ErrorData::internal_error(
            format!(
                "{what}: the connection to the upstream server was lost (it exited or crashed, \
                 or stopped answering)"
            ),
            None,
        ),
        None => ErrorData::internal_error(format!("{what} failed: {error}"), None),
    }
}
