//! `mcp-tasks serve`: the flags, then the server of `serve/mod.rs`. A flag
//! that cannot apply to the server the others make is refused first, in one
//! place ([`refuse_inapplicable`]); new flags' "applies to" rules go there.

use std::io::Write;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use mcp_tasks::gateway::{Gateway, GatewayConfig, GatewayOptions, GatewayResumes, Upstream};
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::http::{
    DEFAULT_MAX_CONNECTIONS, check_reserve, validate_allowed_host, validate_allowed_origin,
};
use mcp_tasks::server::{
    AdmissionLimits, CreationRate, DEFAULT_MAX_LISTEN_STREAMS, InvalidCreationRate, TaskRuntime,
};

use mcp_tasks_sqlite::SqliteSync;

use super::config::{ConfigFile, parse_policy, read_gateway};
use super::drain::{StopSignals, drain_on_signal};
use super::oauth::OAuthArgs;
use super::operator::BadFlag;
use super::operator::Operator;
use super::reload::{Reloader, on_sighup};
use super::{DemoServer, HttpAccess, Namespace, ServeOptions, StoreChoice};

/// The connection bound (HTTP) and the listen budgets, from the flags.
#[derive(Debug, Clone, Copy)]
struct StreamBounds {
    connections: usize,
    listen: usize,
    listen_per_caller: usize,
}

/// `--lease-period` when not given, in milliseconds (the library's default).
const DEFAULT_LEASE_PERIOD_MS: u64 = 10_000;

/// `--sqlite-sync`: SQLite's `synchronous` pragma.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum SqliteSyncArg {
    Normal,
    Full,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Read flags and upstreams from this TOML file: each flag by its long name, `separator`,
    /// and `[[upstream]]` entries for many upstreams (docs/cli.md); flags given here win. SIGHUP
    /// or `mcp-tasks admin reload` rereads it, and the --auth-tokens file.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Serve Streamable HTTP at this address, e.g. 127.0.0.1:8080 (port 0: any free port).
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    http: Option<String>,
    /// Serve on stdin/stdout (the default).
    #[arg(long)]
    stdio: bool,
    /// Where tasks are kept: memory, sqlite:PATH, or for several replicas sharing their tasks
    /// redis://HOST:PORT/DB (also rediss://) or postgres://USER@HOST:PORT/DB (also postgresql://;
    /// what the URL leaves out comes from the PG* variables and ~/.pgpass) (default: SQLite in
    /// the user's data directory).
    #[arg(
        long,
        value_name = "memory|sqlite:PATH|redis://HOST:PORT/DB|postgres://USER@HOST/DB"
    )]
    store: Option<String>,
    /// With Redis: put before every key, so several deployments can share one Redis
    /// [default: mcp-tasks:].
    #[arg(long, value_name = "PREFIX")]
    redis_key_prefix: Option<String>,
    /// With PostgreSQL: the schema of every table, so several deployments can share one
    /// database (migrated at start if it is behind this binary) [default: mcp_tasks].
    #[arg(long, value_name = "NAME")]
    postgres_schema: Option<String>,
    /// On SIGTERM or Ctrl-C: how long to wait for running tasks before ending them (0: do not
    /// wait). New tasks are refused meanwhile (HTTP 503 with Retry-After); resumable ones are
    /// suspended on SQLite (they continue at the next start), handed over on Redis.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    drain_timeout: u64,
    /// With Redis or PostgreSQL: when a replica dies, another ends its tasks (or runs the
    /// resumable ones again) within this many milliseconds [default: 10000].
    #[arg(long, value_name = "MS")]
    lease_period: Option<u64>,
    /// With SQLite: when a commit reaches the disk. `normal` (the default) survives the death
    /// of the process; `full` also survives a power loss, at the cost of an fsync per commit.
    #[arg(long, value_name = "normal|full")]
    sqlite_sync: Option<SqliteSyncArg>,
    /// The poll interval suggested to clients, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    poll_interval: u64,
    /// The TTL of tasks, in seconds (default: 1 hour). It follows activity: a running task is
    /// kept alive, a task waiting for input expires this long after its last change.
    #[arg(long, value_name = "SECS")]
    ttl: Option<u64>,
    /// The longest a task may live, however often its TTL is extended, in seconds (0: no bound).
    #[arg(long, value_name = "SECS", default_value_t = mcp_tasks::server::DEFAULT_MAX_LIFETIME.as_secs())]
    max_lifetime: u64,
    /// How many unfinished tasks one caller may have at once (0: no limit).
    #[arg(long, value_name = "N", default_value_t = mcp_tasks::server::DEFAULT_MAX_TASKS_PER_CALLER)]
    max_tasks_per_caller: usize,
    /// How many tools run at once, server-wide (0: no bound). A task past it is queued: working,
    /// its status message saying how many are ahead, started when a slot frees.
    #[arg(long, value_name = "N", default_value_t = mcp_tasks::server::DEFAULT_MAX_RUNNING)]
    max_running: usize,
    /// How many tasks may wait to run (0: no bound); past it a call is refused (HTTP 503 with
    /// Retry-After) [default: 10000]. Not with --max-running 0 and no --tool-concurrency:
    /// then no task waits.
    #[arg(long, value_name = "N")]
    max_queued: Option<usize>,
    /// How many calls of TOOL run at once (repeatable; a TOOL the demo server does not have is
    /// refused).
    #[arg(long = "tool-concurrency", value_name = "TOOL=N", value_parser = tool_bound)]
    tool_concurrency: Vec<(String, usize)>,
    /// The share of the running slots that the callers of token LABEL get when others wait
    /// too (default 1; with --auth-tokens, or --oauth-issuer for a principal
    /// oauth:ISSUER#SUBJECT; repeatable).
    #[arg(long = "weight", value_name = "LABEL=N", value_parser = weight)]
    weights: Vec<(String, u32)>,
    /// Count each caller without --auth-tokens apart, by its Authorization header, for
    /// --max-tasks-per-caller and --rate-per-caller (default: all such callers count as one, so
    /// varying the header gains nothing). Use it behind a proxy that authenticates. With --http
    /// only, and not with --auth-tokens or --oauth-issuer, whose callers are counted by token.
    #[arg(long)]
    quota_by_header: bool,
    /// How fast one caller may create tasks in this process: N/s, N/min or N/h (default: no
    /// limit). Creations past it get HTTP 503 with Retry-After (over stdio, the JSON-RPC error).
    #[arg(long, value_name = "N/s|N/min|N/h", value_parser = parse_rate)]
    rate_per_caller: Option<CreationRate>,
    /// With --rate-per-caller: how many tasks a quiet caller may create at once (default: the
    /// rate's N).
    #[arg(long, value_name = "N", requires = "rate_per_caller", value_parser = parse_burst)]
    rate_burst: Option<NonZeroU32>,
    /// With --http: how many connections are open at once [default: 1024]. A further one is
    /// answered 503 with Retry-After at once, and closed. Each is a file descriptor: the soft
    /// open-file limit is raised to the hard one when it is short (a warning says when even
    /// the hard limit is).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// With --http: how long a kept-alive connection may wait for its next request before it is
    /// closed, in seconds [default: 75, longer than proxies keep an idle upstream connection].
    /// A connection busy with a request or a listen stream is not closed by it; at
    /// --max-connections the connection idle for the longest makes room for a new one.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: Option<u64>,
    /// How many listen streams are open at once, all callers together [default: half of
    /// --max-connections, 512]. Over HTTP each holds a connection, so it must be smaller than
    /// --max-connections: the rest answer tasks/get, calls and cancels. A further stream is
    /// refused (503 with Retry-After over HTTP) and its client polls.
    #[arg(long, value_name = "N")]
    max_listen_streams: Option<usize>,
    /// How many listen streams one caller may have open at once.
    #[arg(long, value_name = "N", default_value_t = mcp_tasks::server::DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER)]
    max_listen_streams_per_caller: usize,
    /// The most bytes of JSON one tool's result (or error) may weigh, e.g. 8388608, 8MiB or 512KiB
    /// (0: no bound) [default: 8MiB]. A task whose result is past it fails with an error naming
    /// both sizes, and nothing of the result is stored; a synchronous call gets that error;
    /// tasks/update input past it is refused. A gateway reads at most this much (and 64 KiB
    /// more for the message around it) of an upstream's answer (see docs/operator.md).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    max_result_bytes: Option<usize>,
    /// Durable tasks for callers that declare none (most hosts: coding agents, chat apps, CLIs):
    /// a call of a tool whose policy allows a task runs as one; if it outlasts --task-tools-wait
    /// the caller gets a handle naming the task instead of waiting on, and the task tools
    /// (tasks_wait, tasks_status, tasks_cancel, tasks_answer, tasks_list) follow it. Alone: every
    /// such tool; =TOOL,TOOL: only those, as callers call them. Off by default: the spec has a
    /// caller without tasks wait synchronously (see docs/task-tools.md).
    #[arg(
        long,
        value_name = "TOOL,...",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "*",
        value_delimiter = ','
    )]
    task_tools: Option<Vec<String>>,
    /// With --task-tools: how long a caller without tasks waits for its task before it gets a
    /// handle, in seconds (decimals allowed; 0: at once) [default: 5].
    #[arg(long, value_name = "SECS", requires = "task_tools", value_parser = super::task_tools::parse_window)]
    task_tools_wait: Option<Duration>,
    /// With --http: also answer requests whose Host is NAME (NAME:PORT for one port only), as
    /// behind a reverse proxy; the loopback names are always answered (repeatable).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// With --http: also answer browsers from ORIGIN (scheme://host, scheme://host:port or
    /// scheme://host:*); loopback origins are always answered (repeatable).
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// With --http: require a bearer token from FILE on every request: one `TOKEN [LABEL]` a
    /// line, the label being the caller's principal (see docs/deployment.md); others get HTTP
    /// 401.
    #[arg(long, value_name = "FILE")]
    auth_tokens: Option<PathBuf>,
    #[command(flatten)]
    oauth: OAuthArgs,
    /// Serve the tools of this MCP server (a command line, run with `sh -c`, speaking MCP on
    /// stdio) as tasks, instead of the demo tools: a task gateway.
    #[arg(long, value_name = "COMMAND", conflicts_with = "upstream_url")]
    upstream: Option<String>,
    /// Serve the tools of the MCP server at this Streamable HTTP URL as tasks (a task gateway).
    #[arg(long, value_name = "URL")]
    upstream_url: Option<String>,
    /// A header for every request to --upstream-url, 'Name: value' (repeatable).
    #[arg(long = "upstream-header", value_name = "HEADER")]
    upstream_headers: Vec<String>,
    /// The task policy of one upstream tool, TOOL=optional|required|forbidden (repeatable);
    /// it wins over the upstream's own mark (a `forbidden` mark counts only from an upstream that
    /// leaves some tools unmarked).
    #[arg(long = "tasks", value_name = "TOOL=MODE")]
    tool_policies: Vec<String>,
    /// The task policy of upstream tools not named by --tasks nor marked by the upstream
    /// [default: optional].
    #[arg(long, value_name = "MODE")]
    tasks_default: Option<String>,
    /// How many upstream connections may carry calls at once (each one call at a time, so the
    /// upstream's requests on it are that call's): child processes of --upstream, sessions of
    /// --upstream-url (default 8). Calls past it wait their turn.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    upstream_connections: Option<u16>,
    /// A root the gateway answers the upstream's own roots/list with (repeatable): a directory,
    /// as an absolute file:// URI. Servers that ask for roots once for their session (at
    /// start-up, as filesystem servers do) get these; a roots/list during a call still goes to
    /// the caller.
    #[arg(long = "upstream-root", value_name = "DIR")]
    upstream_roots: Vec<PathBuf>,
    /// An upstream tool whose call runs again from the start when a restart of the gateway cut
    /// it off (repeatable; a glob pattern of the upstream's tool names, `*` for all): for tools
    /// safe to run twice. Other calls the upstream answers itself fail then, naming the
    /// upstream; an upstream's own task is always followed again, never called twice.
    #[arg(long = "rerun-on-restart", value_name = "TOOL")]
    rerun_on_restart: Vec<String>,
    /// Serve the operator listener at this address (/metrics, /healthz, /readyz), apart from
    /// the MCP endpoint; a loopback address unless --admin-tokens is given (port 0: any free
    /// port).
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,
    /// With --admin: require a bearer token from FILE (one `TOKEN [LABEL]` a line) on the
    /// operator listener, except /healthz and /readyz.
    #[arg(long, value_name = "FILE")]
    admin_tokens: Option<PathBuf>,
    /// Export OpenTelemetry traces over OTLP (HTTP/protobuf) to the collector at this base URL,
    /// e.g. http://127.0.0.1:4318 (`/v1/traces` is added); it wins over the OTEL_EXPORTER_OTLP_*
    /// variables, which turn traces on without it (see docs/operator.md).
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
}

impl ServeArgs {
    /// `--otlp-endpoint`, read before the runtime starts.
    pub(crate) fn otlp_endpoint(&self) -> Option<&str> {
        self.otlp_endpoint.as_deref()
    }

    /// Whether this serves on stdin/stdout (no `--http`, from the command
    /// line or `--config`), read before the runtime starts.
    pub(crate) fn on_stdio(&self) -> bool {
        self.http.is_none()
    }
}

/// Reads `--rate-per-caller`.
fn parse_rate(text: &str) -> Result<CreationRate, String> {
    text.parse()
        .map_err(|error: InvalidCreationRate| error.to_string())
}

/// Reads `--rate-burst`: a whole number from 1.
fn parse_burst(text: &str) -> Result<NonZeroU32, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a whole number from 1 to 4294967295"))
}

/// Reads `--max-result-bytes`: a number of bytes, or one followed by KiB,
/// MiB or GiB.
fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => {
            return Err(format!(
                "{text:?} is not a size: give bytes, or N KiB, MiB or GiB"
            ));
        }
    };
    number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{text:?} is not a size: give bytes, or N KiB, MiB or GiB"))
}

/// What the gateway serves: the config file's upstreams, or the one of
/// --upstream or --upstream-url.
enum Upstreams {
    One(Upstream, Box<GatewayOptions>),
    Many(GatewayConfig),
}

/// The gateway's upstreams: the file's `[[upstream]]` entries, else the
/// flags' one (refused together).
fn gateway_upstreams(
    args: &ServeArgs,
    file: Option<&ConfigFile>,
) -> anyhow::Result<Option<Upstreams>> {
    let many = match file {
        Some(file) => read_gateway(file).map_err(|error| BadFlag(error.to_string()))?,
        None => None,
    };
    // (The flags of one upstream beside the file's entries are refused by
    // `refuse_inapplicable`.)
    let Some(many) = many else {
        return Ok(gateway_flags(args)?
            .map(|(upstream, options)| Upstreams::One(upstream, Box::new(options))));
    };
    Ok(Some(Upstreams::Many(many)))
}

/// The gateway's upstream and options, when --upstream or --upstream-url is given.
fn gateway_flags(args: &ServeArgs) -> anyhow::Result<Option<(Upstream, GatewayOptions)>> {
    let upstream = match (&args.upstream, &args.upstream_url) {
        (Some(command), _) => Upstream::command(command.clone()),
        (None, Some(url)) => {
            let mut upstream = Upstream::url(url.clone());
            for header in &args.upstream_headers {
                let (name, value) = crate::connect::parse_header(header)
                    .with_context(|| "--upstream-header".to_owned())?;
                upstream = upstream.with_header(name, value);
            }
            upstream
        }
        // (Its flags without it are refused by `refuse_inapplicable`.)
        (None, None) => return Ok(None),
    };
    let default = args.tasks_default.as_deref().unwrap_or("optional");
    let mut options = GatewayOptions::default()
        .with_default_policy(parse_policy(default).context("--tasks-default")?);
    for entry in &args.tool_policies {
        let Some((tool, mode)) = entry.split_once('=') else {
            anyhow::bail!("--tasks {entry:?} is not TOOL=MODE");
        };
        if tool.is_empty() {
            anyhow::bail!("--tasks {entry:?} names no tool");
        }
        options = options.with_tool_policy(tool, parse_policy(mode).context("--tasks")?);
    }
    if let Some(connections) = args.upstream_connections {
        options = options.with_max_upstream_connections(usize::from(connections));
    }
    let mut roots = Vec::new();
    for dir in &args.upstream_roots {
        let root = mcp_tasks::gateway::root_for_path(dir)
            .with_context(|| format!("--upstream-root {}", dir.display()))?;
        roots.push(root);
    }
    options = options
        .with_roots(roots)
        .with_rerun_on_restart(args.rerun_on_restart.iter().cloned());
    Ok(Some((upstream, options)))
}

/// `TOOL=N` of `--tool-concurrency`, N at least 1.
fn tool_bound(text: &str) -> Result<(String, usize), String> {
    let (tool, count) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?} is not TOOL=N"))?;
    let count: usize = count
        .parse()
        .map_err(|_| format!("{count:?} is not a number of calls"))?;
    if tool.is_empty() || count == 0 {
        return Err(format!("{text:?}: name a tool and at least 1 call"));
    }
    Ok((tool.to_owned(), count))
}

/// `LABEL=N` of `--weight`, N from 1 to 1000.
fn weight(text: &str) -> Result<(String, u32), String> {
    let (label, weight) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?} is not LABEL=N"))?;
    let weight: u32 = weight
        .parse()
        .map_err(|_| format!("{weight:?} is not a weight"))?;
    if label.is_empty() || !(1..=1000).contains(&weight) {
        return Err(format!(
            "{text:?}: name a label and a weight from 1 to 1000"
        ));
    }
    Ok((label.to_owned(), weight))
}

/// The admission bounds of the flags.
fn admission(args: &ServeArgs) -> AdmissionLimits {
    let bound = |n: usize| (n > 0).then_some(n);
    let mut limits = AdmissionLimits::default()
        .with_max_running(bound(args.max_running))
        .with_max_queued(bound(
            args.max_queued
                .unwrap_or(mcp_tasks::server::DEFAULT_MAX_QUEUED),
        ));
    for (tool, count) in &args.tool_concurrency {
        limits = limits.with_tool_concurrency(tool.clone(), *count);
    }
    for (label, weight) in &args.weights {
        limits = limits.with_weight(mcp_tasks::server::Principal::new(label.clone()), *weight);
    }
    limits
}

/// The connection bound and the listen budgets of the flags: refused when
/// the listen budget leaves no connection for ordinary requests.
fn stream_bounds(args: &ServeArgs) -> anyhow::Result<StreamBounds> {
    let connections = args
        .max_connections
        .map_or(DEFAULT_MAX_CONNECTIONS, |n| n as usize);
    let listen = args.max_listen_streams.unwrap_or(if args.http.is_some() {
        connections / 2
    } else {
        DEFAULT_MAX_LISTEN_STREAMS
    });
    if args.http.is_some() && check_reserve(listen, connections).is_err() {
        anyhow::bail!(
            "--max-listen-streams {listen} leaves no reserve within --max-connections \
             {connections}: listen streams could hold every connection, and tasks/get, calls \
             and cancels would go unanswered; make --max-listen-streams smaller than \
             --max-connections"
        );
    }
    Ok(StreamBounds {
        connections,
        listen,
        listen_per_caller: args.max_listen_streams_per_caller,
    })
}

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(path) => Some(ConfigFile::read(path).map_err(|error| BadFlag(error.to_string()))?),
        None => None,
    };
    refuse_inapplicable(&args, file.as_ref())?;
    let mut access = http_access(&args)?;
    args.oauth.check()?;
    let bounds = stream_bounds(&args)?;
    access.max_connections = bounds.connections;
    if args.http.is_some() {
        super::os::ensure_open_files(bounds.connections);
        super::os::small_pages();
    }
    let gateway = gateway_upstreams(&args, file.as_ref())?;
    let operator = Operator::from_flags(args.admin.as_deref(), args.admin_tokens.as_ref())?;
    let choice = match &args.store {
        Some(text) => StoreChoice::parse(text)?,
        None => StoreChoice::default_sqlite()?,
    };
    // (--sqlite-sync on another store, or --redis-key-prefix on one that is
    // not Redis, and so on, were refused by `refuse_inapplicable`.)
    let sync = match args.sqlite_sync {
        None | Some(SqliteSyncArg::Normal) => SqliteSync::Normal,
        Some(SqliteSyncArg::Full) => SqliteSync::Full,
    };
    let namespace = Namespace::of(
        args.redis_key_prefix.as_deref(),
        args.postgres_schema.as_deref(),
    );
    let store = choice.open(namespace, sync).await?;
    let (store, observers) = match &operator {
        Some(operator) => operator.instrument(store, &choice)?,
        None => (store, Vec::new()),
    };
    let options = ServeOptions {
        observers,
        store,
        poll_interval: Duration::from_millis(args.poll_interval.max(1)),
        ttl: args.ttl.map(Duration::from_secs),
        max_lifetime: (args.max_lifetime > 0).then(|| Duration::from_secs(args.max_lifetime)),
        max_tasks_per_caller: (args.max_tasks_per_caller > 0).then_some(args.max_tasks_per_caller),
        admission: admission(&args),
        quota_by_header: args.quota_by_header,
        rate_per_caller: args.rate_per_caller.map(|rate| match args.rate_burst {
            Some(burst) => rate.with_burst(burst),
            None => rate,
        }),
        lease_period: Duration::from_millis(
            args.lease_period.unwrap_or(DEFAULT_LEASE_PERIOD_MS).max(12),
        ),
        max_listen_streams: bounds.listen,
        max_listen_streams_per_caller: bounds.listen_per_caller,
        max_result_bytes: match args.max_result_bytes {
            None => Some(mcp_tasks::server::DEFAULT_MAX_RESULT_BYTES),
            Some(0) => None,
            Some(limit) => Some(limit),
        },
        task_tools: super::task_tools::task_tools(args.task_tools.as_deref(), args.task_tools_wait),
    };
    let tokens = args.auth_tokens.clone().zip(access.tokens.clone());
    match gateway {
        None => {
            let server = DemoServer::new(&options);
            let runtime = server.runtime().clone();
            let reloader = Reloader::new(file.as_ref(), tokens, None);
            serve(&args, server, runtime, access, operator, reloader).await
        }
        Some(Upstreams::One(upstream, gateway)) => {
            let described = upstream.clone();
            let resumes = GatewayResumes::new();
            let runtime = resumes.install(options.runtime()).build();
            let server = Gateway::start(upstream, runtime, *gateway)
                .await
                .with_context(|| format!("cannot serve the upstream {}", describe(&described)))?;
            resumes.attach(&server);
            let runtime = server.runtime().clone();
            let reloader = Reloader::new(file.as_ref(), tokens, None);
            serve(&args, server, runtime, access, operator, reloader).await
        }
        Some(Upstreams::Many(config)) => {
            let resumes = GatewayResumes::new();
            let runtime = resumes.install(options.runtime()).build();
            let server = match Gateway::start_many(runtime, config).await {
                Ok(server) => server,
                Err(error @ mcp_tasks::gateway::Error::Config { .. }) => {
                    let path = file.as_ref().map(|file| file.path().display().to_string());
                    return Err(BadFlag(format!("{}: {error}", path.unwrap_or_default())).into());
                }
                Err(error) => return Err(error).context("cannot serve the gateway's upstreams"),
            };
            resumes.attach(&server);
            let runtime = server.runtime().clone();
            let reloader = Reloader::new(file.as_ref(), tokens, Some(server.clone()));
            serve(&args, server, runtime, access, operator, reloader).await
        }
    }
}

/// How an upstream is named in messages (a URL without its password).
fn describe(upstream: &Upstream) -> String {
    match upstream {
        Upstream::Command { command, .. } => format!("command {command:?}"),
        Upstream::Url { url, .. } => super::redacted(url),
        _ => "server".to_owned(),
    }
}

async fn serve<S>(
    args: &ServeArgs,
    server: S,
    runtime: TaskRuntime,
    access: HttpAccess,
    operator: Option<Operator>,
    reloader: Option<Arc<Reloader>>,
) -> anyhow::Result<()>
where
    S: rmcp::ServerHandler + Clone + Send + Sync + 'static,
{
    if let Some(reloader) = &reloader {
        on_sighup(reloader.clone()).context("cannot listen for SIGHUP")?;
    }
    // SIGTERM or Ctrl-C drains while the server keeps answering, then
    // ends the serving (over HTTP, the listen streams gracefully); from
    // the signal on, /readyz says it is draining.
    let draining = operator.as_ref().map(|operator| operator.draining.clone());
    let signals = StopSignals::listen().context("cannot listen for SIGTERM and Ctrl-C")?;
    let stop = {
        let runtime = runtime.clone();
        let timeout = Duration::from_secs(args.drain_timeout);
        async move {
            drain_on_signal(signals, &runtime, draining, timeout).await;
        }
    };
    match &args.http {
        None => {
            // Stdout is the MCP connection: the operator's address goes to stderr.
            if let Some(operator) = operator {
                operator
                    .start(runtime.clone(), reloader, &mut std::io::stderr())
                    .await?;
            }
            super::serve_stdio(server, &runtime, stop).await
        }
        Some(address) => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address}"))?;
            let local = listener.local_addr().context("no local address")?;
            let mut access = access;
            access.oauth = args.oauth.resource_server(address, local).await?;
            tracing::info!(%local, "serving Streamable HTTP at /mcp");
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "listening on http://{local}/mcp")?;
            stdout.flush()?;
            if let Some(operator) = operator {
                operator
                    .start(runtime.clone(), reloader, &mut stdout)
                    .await?;
            }
            drop(stdout);
            super::serve_http(server, runtime, listener, access, stop).await
        }
    }
}

/// Who may reach the HTTP endpoint: the loopback names and origins, the
/// ones given, and the tokens file. Read before the store is opened, so a
/// bad flag changes nothing on disk.
fn http_access(args: &ServeArgs) -> anyhow::Result<HttpAccess> {
    // (Without --http they were refused by `refuse_inapplicable`.)
    for host in &args.allowed_hosts {
        validate_allowed_host(host).context("--allowed-host")?;
    }
    for origin in &args.allowed_origins {
        validate_allowed_origin(origin).context("--allowed-origin")?;
    }
    let tokens = match &args.auth_tokens {
        None => None,
        Some(path) => Some(
            BearerTokens::read(path)
                .with_context(|| format!("--auth-tokens {}", path.display()))?,
        ),
    };
    let mut access = HttpAccess::default();
    access.hosts.extend(args.allowed_hosts.iter().cloned());
    access.origins.extend(args.allowed_origins.iter().cloned());
    access.tokens = tokens;
    if let Some(seconds) = args.idle_timeout {
        access.idle_timeout = Duration::from_secs(seconds);
    }
    Ok(access)
}

/// Refuses, before anything is opened (exit 64), the flags that cannot
/// apply to this server as the other flags make it, each with a sentence
/// saying why: a flag that parsed and then did nothing would let its author
/// believe it did something. This and the four functions below it are
/// `serve`'s whole list, by family (a key of `--config FILE` is its flag;
/// the client commands' list is `crate::inapplicable`); a value wrong in
/// itself is its parser's.
fn refuse_inapplicable(args: &ServeArgs, file: Option<&ConfigFile>) -> Result<(), BadFlag> {
    let store = args
        .store
        .as_deref()
        .map(StoreChoice::parse)
        .transpose()
        .map_err(|error| BadFlag(format!("--store: {error:#}")))?;
    let entries = file.filter(|file| file.has_upstreams());
    let gateway = args.upstream.is_some() || args.upstream_url.is_some() || entries.is_some();
    let refused = access_refusal(args)
        .or_else(|| admission_refusal(args, gateway))
        .or_else(|| store_refusal(args, store.as_ref()))
        .or_else(|| gateway_refusal(args, entries))
        .or_else(|| super::task_tools::refusal(args.task_tools.as_deref(), gateway))
        .or_else(|| {
            (args.admin_tokens.is_some() && args.admin.is_none()).then(|| {
                "--admin-tokens applies to --admin only: it guards the operator listener, and \
                 without --admin there is none"
                    .to_owned()
            })
        });
    match refused {
        Some(why) => Err(BadFlag(why)),
        None => Ok(()),
    }
}

/// Who may call: flags of HTTP requests without `--http`, OAuth's without
/// an issuer, a count by header where every caller has a token.
fn access_refusal(args: &ServeArgs) -> Option<String> {
    let http = args.http.is_some();
    let oauth = args.oauth.enabled();
    let no_token = "the one caller is the process that started the server";
    let http_only = [
        (
            args.max_connections.is_some(),
            "--max-connections",
            "the one connection is stdin and stdout",
        ),
        (
            args.idle_timeout.is_some(),
            "--idle-timeout",
            "the one connection is stdin and stdout",
        ),
        (
            !args.allowed_hosts.is_empty(),
            "--allowed-host",
            "no request has a Host header",
        ),
        (
            !args.allowed_origins.is_empty(),
            "--allowed-origin",
            "no request has an Origin header",
        ),
        (args.auth_tokens.is_some(), "--auth-tokens", no_token),
        (oauth, "--oauth-issuer", no_token),
        (
            args.oauth.given().is_some(),
            args.oauth.given().unwrap_or_default(),
            no_token,
        ),
        (args.quota_by_header, "--quota-by-header", no_token),
    ];
    if let Some((_, flag, why)) = http_only.iter().find(|(given, _, _)| *given && !http) {
        return Some(format!("{flag} applies to --http only: over stdio {why}"));
    }
    if let Some(flag) = args.oauth.given().filter(|_| !oauth) {
        return Some(format!(
            "{flag} needs --oauth-issuer: it says how that issuer's tokens are checked"
        ));
    }
    (args.quota_by_header && (args.auth_tokens.is_some() || oauth)).then(|| {
        "--quota-by-header counts unauthenticated callers apart by their Authorization header, \
         and with --auth-tokens or --oauth-issuer every caller is authenticated and counted by \
         its token"
            .to_owned()
    })
}

/// Who runs when: weights without labels, a queue bound where nothing
/// waits, a tool bound for a tool the demo server does not have (`gateway`:
/// the tools are an upstream's, unknown here).
fn admission_refusal(args: &ServeArgs, gateway: bool) -> Option<String> {
    let labels = args.auth_tokens.is_some() || args.oauth.enabled();
    // A task waits for a running slot only under a bound.
    let waits = args.max_running > 0 || !args.tool_concurrency.is_empty();
    let nothing_waits = "with --max-running 0 and no --tool-concurrency no task ever waits";
    if !args.weights.is_empty() && !labels {
        return Some(
            "--weight gives the callers of a token label their share of the running slots, and \
             without --auth-tokens (or --oauth-issuer) no caller has a label"
                .to_owned(),
        );
    }
    if !args.weights.is_empty() && !waits {
        return Some(format!(
            "--weight shares the running slots among callers waiting for one, and {nothing_waits}"
        ));
    }
    if args.max_queued.is_some() && !waits {
        return Some(format!(
            "--max-queued bounds the tasks waiting for a running slot, and {nothing_waits}"
        ));
    }
    let demo = |tool: &String| super::tools::names().any(|name| name == tool);
    let (tool, count) = args
        .tool_concurrency
        .iter()
        .find(|(tool, _)| !gateway && !demo(tool))?;
    let tools: Vec<_> = super::tools::names().collect();
    Some(format!(
        "--tool-concurrency {tool}={count} names no tool of this server: it serves the demo \
         tools, {} (an upstream's tools are its own: --upstream)",
        tools.join(", ")
    ))
}

/// Where tasks are kept: a store's own flags for another store (`store`:
/// `--store` parsed, `None` the default SQLite file).
fn store_refusal(args: &ServeArgs, store: Option<&StoreChoice>) -> Option<String> {
    let this = match store {
        None => "SQLite in the user's data directory (the default)".to_owned(),
        Some(StoreChoice::Memory) => "memory".to_owned(),
        Some(StoreChoice::Sqlite(path)) => format!("sqlite:{}", path.display()),
        Some(StoreChoice::Redis(url) | StoreChoice::Postgres(url)) => super::redacted(url),
    };
    let sqlite = matches!(store, None | Some(StoreChoice::Sqlite(_)));
    let redis = matches!(store, Some(StoreChoice::Redis(_)));
    let postgres = matches!(store, Some(StoreChoice::Postgres(_)));
    let refused = [
        (
            args.sqlite_sync.is_some() && !sqlite,
            "--sqlite-sync applies to a SQLite store (--store sqlite:PATH)",
            "not a SQLite file",
        ),
        (
            args.lease_period.is_some() && !redis && !postgres,
            "--lease-period applies to a store replicas share (--store redis://... or \
             postgres://...)",
            "which one process holds: it has no leases",
        ),
        (
            args.redis_key_prefix.is_some() && !redis,
            "--redis-key-prefix applies to a Redis store (--store redis://...)",
            "which has no keys to prefix",
        ),
        (
            args.postgres_schema.is_some() && !postgres,
            "--postgres-schema applies to a PostgreSQL store (--store postgres://...)",
            "which has no schema",
        ),
    ];
    let (_, applies, why) = refused.iter().find(|(refused, _, _)| *refused)?;
    Some(format!("{applies}; this server's store is {this}, {why}"))
}

/// What is served: one upstream's flags without it, or beside the
/// `[[upstream]]` entries of the file (`entries`), and a header for a
/// command.
fn gateway_refusal(args: &ServeArgs, entries: Option<&ConfigFile>) -> Option<String> {
    let one_upstream = [
        (args.upstream.is_some(), "--upstream"),
        (args.upstream_url.is_some(), "--upstream-url"),
        (!args.upstream_headers.is_empty(), "--upstream-header"),
        (!args.tool_policies.is_empty(), "--tasks"),
        (args.tasks_default.is_some(), "--tasks-default"),
        (
            args.upstream_connections.is_some(),
            "--upstream-connections",
        ),
        (!args.upstream_roots.is_empty(), "--upstream-root"),
        (!args.rerun_on_restart.is_empty(), "--rerun-on-restart"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag));
    let gateway = args.upstream.is_some() || args.upstream_url.is_some();
    match (entries, one_upstream) {
        (Some(file), Some(flag)) => Some(format!(
            "{flag} cannot be used with the [[upstream]] entries of {}: give each upstream its \
             keys there",
            file.path().display()
        )),
        (None, Some(flag)) if !gateway => Some(format!(
            "{flag} applies to --upstream or --upstream-url only (a gateway); without one this \
             server serves the demo tools"
        )),
        _ => (args.upstream.is_some() && !args.upstream_headers.is_empty()).then(|| {
            "--upstream-header applies to --upstream-url only: the upstream of --upstream is a \
             command on stdio, which has no HTTP headers"
                .to_owned()
        }),
    }
}
