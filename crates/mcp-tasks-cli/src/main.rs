//! `mcp-tasks`: call any tool on any MCP server and watch its task, answer
//! its input, cancel it with Ctrl-C; serve demo tools; `demo` shows it all.
#![allow(clippy::print_stdout)]

mod admin;
mod connect;
mod demo;
mod explain;
mod inapplicable;
mod inspect;
mod journal;
mod layout;
mod ls;
mod output;
mod prompt;
mod serve;
mod signin;
mod telemetry;
mod wait_many;
mod watch;

/// mimalloc, not glibc's allocator: a server that keeps many finished tasks
/// for their TTL fragmented glibc's heap until a third of its CPU went to
/// `malloc` (docs/benchmarks-history.md, "Against honest peers").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde_json::{Map, Value};

use mcp_tasks::TaskOutcome;

use crate::connect::Target;
use crate::output::{Report, code};

/// Call MCP tools and watch their tasks (the MCP Tasks extension).
#[derive(Debug, Parser)]
#[command(name = "mcp-tasks", version, about, long_about = None)]
struct Cli {
    /// More logging on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Call a tool, declaring the Tasks extension, and wait for its outcome.
    Call(CallArgs),
    /// Show a task's current state.
    Get(TaskArgs),
    /// Wait for a task's outcome (or several tasks'), answering its input.
    Wait(WaitArgs),
    /// Cancel a task and show how it ended.
    Cancel(TaskArgs),
    /// List the tasks in the journal, newest first.
    Ls(LsArgs),
    /// List the server's tools.
    Tools(ServerArgs),
    /// Show the server's protocol versions, capabilities and task support.
    Discover(ServerArgs),
    /// Serve the demo tools: long_job, confirm_action, failing_tool, sleep.
    Serve(Box<serve::ServeArgs>),
    /// A short guided tour in one process: a task, an input request, a cancel.
    Demo,
    /// Every caller's tasks, for an operator: ls, show, cancel, purge, hash.
    Admin(admin::AdminArgs),
    /// Forget the OAuth tokens kept for a server (the next command signs in again).
    Logout(signin::LogoutArgs),
}

#[derive(Debug, Args)]
struct ServerArgs {
    /// The server's Streamable HTTP endpoint.
    #[arg(long, conflicts_with = "stdio")]
    url: Option<String>,
    /// A command that runs the server on stdio, e.g. 'mcp-tasks serve --stdio'.
    #[arg(long)]
    stdio: Option<String>,
    /// An HTTP header for every request, 'Name: value' (repeatable; a server on stdio has none).
    #[arg(long = "header", value_name = "'Name: value'")]
    headers: Vec<String>,
    /// Connect to ADDR for the host NAME of --url, keeping NAME in the Host header, as curl's
    /// --resolve does (e.g. tasks.example.test=127.0.0.1; repeatable; NAME must be the URL's).
    #[arg(long = "resolve", value_name = "NAME=ADDR")]
    resolve: Vec<String>,
    #[command(flatten)]
    oauth: signin::OAuthArgs,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct InputArgs {
    /// How to answer input requests: prompt, accept, decline or fail
    /// (default: prompt on a terminal, fail otherwise).
    #[arg(long, value_parser = ["prompt", "accept", "decline", "fail"])]
    input: Option<String>,
    /// A form answer for --input accept, FIELD=VALUE (repeatable).
    #[arg(long = "answer", value_name = "FIELD=VALUE")]
    answers: Vec<String>,
    /// Insist on listening for the task's notifications: fail if the server
    /// cannot (by default a wait listens where it can and polls otherwise;
    /// not with call --no-wait, which does not wait).
    #[arg(long, conflicts_with = "poll")]
    listen: bool,
    /// Poll tasks/get instead of listening for notifications (not with call --no-wait).
    #[arg(long)]
    poll: bool,
    /// Give up after SECS seconds and exit 5, saying what was running (0: no limit).
    ///
    /// The whole command counts: its tools/call rounds, input prompts, polls and the wait.
    /// Ten minutes outlasts most tools a person watches at a terminal, and still ends a wait
    /// on a server that stopped answering; the task keeps running on the server, and `wait`
    /// resumes it.
    #[arg(
        long,
        value_name = "SECS",
        default_value = DEFAULT_TIMEOUT,
        value_parser = parse_timeout,
        allow_negative_numbers = true
    )]
    timeout: Timeout,
}

/// The default `--timeout` of `call` and `wait`, in seconds: ten minutes.
const DEFAULT_TIMEOUT: &str = "600";

/// A parsed `--timeout`: how long `call` or `wait` may take; `None`: no limit.
#[derive(Debug, Clone, Copy)]
struct Timeout(Option<Duration>);

/// Parses `--timeout SECS`: 0 is no limit; negative, NaN, infinite, too
/// large or not a number is a usage error.
fn parse_timeout(text: &str) -> Result<Timeout, String> {
    const WANTED: &str = "give a positive number of seconds, or 0 for no limit";
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number: {WANTED}"))?;
    if secs == 0.0 {
        return Ok(Timeout(None));
    }
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{text} is not allowed: {WANTED}"));
    }
    Duration::try_from_secs_f64(secs)
        .map(|limit| Timeout(Some(limit)))
        .map_err(|_| format!("{text} seconds is too long: {WANTED}"))
}

#[derive(Debug, Args)]
struct CallArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The tool.
    #[arg(required_unless_present = "resume")]
    tool: Option<String>,
    /// The arguments as a JSON object.
    json_args: Option<String>,
    /// An argument, key=value; the value is read as JSON if it parses, else as a string.
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    args: Vec<String>,
    /// Send again the newest call of the journal whose answer never came (a
    /// crash between send and answer), with its tool, arguments and
    /// idempotency key: the server answers with the task it made, if it
    /// made one, instead of making a second; then watch it as call does.
    #[arg(long, conflicts_with_all = ["tool", "json_args", "args"])]
    resume: bool,
    #[command(flatten)]
    input: InputArgs,
    /// Print the task id and exit without waiting (so without --detach, --listen or --poll).
    #[arg(long)]
    no_wait: bool,
    /// Ctrl-C leaves the task running (and journaled) instead of cancelling it (not with
    /// --no-wait, which does not wait).
    #[arg(long)]
    detach: bool,
    #[command(flatten)]
    journal: journal::JournalArgs,
}

#[derive(Debug, Args)]
struct TaskArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The task id; `-` reads it from stdin. Without --url or --stdio its
    /// server is found in the journal. An id may start with `-` (servers
    /// choose them: fastmcp's are base64url).
    #[arg(allow_hyphen_values = true)]
    task_id: String,
    #[command(flatten)]
    journal: journal::JournalArgs,
}

#[derive(Debug, Args)]
struct WaitArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The task id; `-` reads it from stdin. Without --url or --stdio its
    /// server is found in the journal. An id may start with `-`.
    #[arg(required_unless_present_any = ["last", "all"], allow_hyphen_values = true)]
    task_id: Option<String>,
    /// More tasks of the same server, awaited together on one connection
    /// (one listen stream, or one poll loop where the server cannot listen;
    /// one --timeout for all), each reported as it finishes (--json: one
    /// object a line); an id the server or the journal does not know gets
    /// its own error line. The exit code is the worst outcome's (0 < 1 < 3
    /// cancelled < 2 failed < 4 < 5 < 64 < 69 < 70). Ctrl-C stops waiting
    /// and leaves the tasks running. An id that starts with `-` goes first
    /// or after `--`.
    #[arg(value_name = "TASK_ID")]
    more_task_ids: Vec<String>,
    /// Resume the newest unfinished task in the journal (on the server of
    /// --url or --stdio, when given).
    #[arg(long, conflicts_with_all = ["task_id", "all"])]
    last: bool,
    /// Every unfinished task of the journal on the server (--url or --stdio;
    /// without them, the one server the journal's unfinished tasks are on),
    /// as with several ids.
    #[arg(long, conflicts_with = "task_id")]
    all: bool,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    journal: journal::JournalArgs,
}

#[derive(Debug, Args)]
struct LsArgs {
    /// Finished tasks too.
    #[arg(long)]
    all: bool,
    /// Ask each unfinished task's server for its current status ("gone": the
    /// server does not know the task any more, or not for these headers).
    #[arg(long)]
    refresh: bool,
    /// An HTTP header for --refresh requests to servers reached by URL, 'Name: value'
    /// (repeatable; only with --refresh).
    #[arg(long = "header", value_name = "'Name: value'")]
    headers: Vec<String>,
    /// Print a JSON array on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    journal: journal::JournalArgs,
}

fn main() -> ExitCode {
    // `serve --config FILE`: the file's flags go in where it is named.
    let argv = match serve::config::expand(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(serve::config::Expanded::Config(error)) => return usage(error),
        // Parsed again below, to be reported as any bad command line.
        Err(serve::config::Expanded::Clap) => std::env::args_os().collect(),
    };
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return match error.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(code::USAGE),
            };
        }
    };
    explain::set_verbose(cli.verbose);
    init_logging(cli.verbose, matches!(cli.command, Command::Serve(_)));
    let endpoint = match &cli.command {
        Command::Serve(args) => args.otlp_endpoint(),
        _ => None,
    };
    let telemetry = match telemetry::Telemetry::init(endpoint) {
        Ok(telemetry) => telemetry,
        Err(error) => return usage(format_args!("{error:#}")),
    };
    let runtime = match async_runtime(&cli.command) {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(code::PROTOCOL);
        }
    };
    let exit = runtime.block_on(run(cli));
    // Child servers and pending requests must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(2));
    // The spans of this run go out before it ends (after an error or a
    // Ctrl-C too: every command returns here).
    telemetry.shutdown();
    exit
}

/// Our own crates: what they log at warn is for the user; every other
/// crate's lines (rmcp's, a TLS verifier's) are details, shown with -v.
const OWN_TARGETS: [&str; 5] = [
    "mcp_tasks",
    "mcp_tasks_cli",
    "mcp_tasks_sqlite",
    "mcp_tasks_redis",
    "mcp_tasks_postgres",
];

/// Tokio's multi-threaded runtime, as `Runtime::new` makes it, but with one
/// worker for `serve` over stdio (unless `TOKIO_WORKER_THREADS` says how
/// many). A stdio server has one peer and one pipe whose messages come in
/// order; with a worker per core each message crossed threads (the reader,
/// rmcp's service loop, the handler and the writer each woken on whichever
/// worker was free), and those wake-ups cost more than the work: a stdio
/// upstream behind the gateway spent a third less CPU per task with one
/// worker (docs/benchmarks-history.md, "One worker for a stdio server").
/// Blocking work still has tokio's blocking pool, and the stores' own
/// threads are unchanged.
fn async_runtime(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let on_stdio = matches!(command, Command::Serve(args) if args.on_stdio());
    if on_stdio && std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(1);
    }
    builder.enable_all().build()
}

/// Logging on stderr: our crates at warn, and at the default verbosity no
/// other crate's line for a command at a terminal (a server keeps their
/// errors: an operator's log wants hyper's or the OTLP exporter's);
/// rmcp's, which the server reports in its own words, only with -v.
fn init_logging(verbose: u8, serving: bool) {
    let (own, others) = match (verbose, serving) {
        (0, false) => ("warn", "off"),
        (0, true) => ("warn", "error"),
        (1, _) => ("info", "warn"),
        _ => ("debug", "info"),
    };
    // The admin API's audit lines (`mcp_tasks::audit`, INFO) are shown by
    // default, whatever -v says; RUST_LOG decides when it is set.
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let own: Vec<String> = OWN_TARGETS
            .iter()
            .map(|target| format!("{target}={own}"))
            .collect();
        tracing_subscriber::EnvFilter::new(format!(
            "{others},{},{}=info",
            own.join(","),
            mcp_tasks::server::admin::AUDIT_TARGET
        ))
    });
    // rmcp logs whole JSON-RPC messages at debug and notifications at info:
    // task ids are bearer tokens, so rmcp never logs below warn here,
    // whatever -v or RUST_LOG say (and nothing at all by default).
    let rmcp = if verbose == 0 { "off" } else { "warn" };
    for target in ["rmcp", "rmcp::service", "rmcp::transport", "rmcp::handler"] {
        if let Ok(directive) = format!("{target}={rmcp}").parse() {
            filter = filter.add_directive(directive);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(explain::colour())
        .try_init();
}

/// A usage error: printed, exit 64.
pub(crate) fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code::USAGE)
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Call(args) => call(args).await,
        Command::Get(args) => task_command(args, TaskAction::Get).await,
        Command::Cancel(args) => task_command(args, TaskAction::Cancel).await,
        Command::Wait(args) => wait(args).await,
        Command::Ls(args) => ls::run(args).await,
        Command::Tools(args) => inspect::tools(args).await,
        Command::Discover(args) => inspect::discover(args).await,
        Command::Serve(args) => match serve::run(*args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) if error.is::<serve::BadFlag>() => usage(error),
            Err(error) => {
                eprintln!("error: {}", output::error_chain(error.as_ref()));
                ExitCode::from(code::UNREACHABLE)
            }
        },
        Command::Demo => demo::run().await,
        Command::Admin(args) => admin::run(args).await,
        Command::Logout(args) => signin::logout(&args),
    }
}

/// The target and HTTP options of a command, or a usage error.
fn target(server: &ServerArgs) -> Result<(Target, connect::HttpOptions), ExitCode> {
    let target = match (&server.url, &server.stdio) {
        (Some(url), None) => Target::Url(url.clone()),
        (None, Some(command)) => Target::Stdio(command.clone()),
        _ => return Err(usage("give one of --url or --stdio")),
    };
    let options = http_options(server, &target)?;
    Ok((target, options))
}

/// The parsed `--header`s and `--resolve`s and the sign-in, for `target`
/// (given, or found in the journal); a usage error for flags that cannot
/// apply to it ([`inapplicable::server_flags`]).
fn http_options(server: &ServerArgs, target: &Target) -> Result<connect::HttpOptions, ExitCode> {
    let resolve = server
        .resolve
        .iter()
        .map(|text| connect::parse_resolve(text))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(usage)?;
    inapplicable::server_flags(server, target, &resolve).map_err(usage)?;
    // Sign-in applies to URLs.
    let oauth = match target {
        Target::Url(_) => Some(
            server
                .oauth
                .options()
                .map_err(|error| usage(format_args!("{error:#}")))?,
        ),
        Target::Stdio(_) => None,
    };
    Ok(connect::HttpOptions {
        headers: headers_of(&server.headers)?,
        resolve,
        oauth,
    })
}

async fn connect_or_exit(server: &ServerArgs) -> Result<connect::Client, ExitCode> {
    let (target, options) = target(server)?;
    connect_to(&target, &options, None, server.json).await
}

async fn connect_to(
    target: &Target,
    options: &connect::HttpOptions,
    journal: Option<std::sync::Arc<dyn mcp_tasks::client::journal::Journal>>,
    json: bool,
) -> Result<connect::Client, ExitCode> {
    connect::connect(target, options, journal)
        .await
        .map_err(|error| {
            let report = Report {
                status: "error".into(),
                task_id: None,
                status_message: None,
                result: None,
                error: Some(serde_json::json!({"message": explain::unreachable(target, &error)})),
                exit: code::UNREACHABLE,
                no_task: false,
            };
            report.print(json)
        })
}

/// The client of a command about one task: its server from --url or
/// --stdio, else from the journal; with the journal attached.
async fn task_client(
    server: &ServerArgs,
    id: &mcp_tasks::TaskId,
    journal: &journal::JournalArgs,
) -> Result<connect::Client, ExitCode> {
    let opened = if server.url.is_none() && server.stdio.is_none() {
        match journal.open().await {
            Ok(Some(opened)) => Some(opened),
            Ok(None) => return Err(usage("give --url or --stdio (the journal is off)")),
            Err(error) => return Err(usage(format!("give --url or --stdio: {error}"))),
        }
    } else {
        journal.open_or_warn().await
    };
    let (target, options) = match (&server.url, &server.stdio, &opened) {
        (None, None, Some(opened)) => {
            let entry = journal::find(opened, id).await?;
            let target = journal::target_of(&entry.server)
                .ok_or_else(|| usage("the journal names a server this CLI cannot reach"))?;
            let options = http_options(server, &target)?;
            (target, options)
        }
        _ => target(server)?,
    };
    let opened = opened.map(|opened| opened as _);
    let options = journal.beside(options);
    connect_to(&target, &options, opened, server.json).await
}

/// The parsed `--header`s.
fn headers_of(headers: &[String]) -> Result<Vec<(String, String)>, ExitCode> {
    headers
        .iter()
        .map(|header| connect::parse_header(header))
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(usage)
}

/// The tool arguments from JSON_ARGS and --arg.
fn tool_arguments(
    json_args: Option<&str>,
    args: &[String],
) -> anyhow::Result<Option<Map<String, Value>>> {
    let mut arguments = match json_args {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => anyhow::bail!("JSON_ARGS must be a JSON object"),
            Err(error) => anyhow::bail!("JSON_ARGS is not valid JSON: {error}"),
        },
    };
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else {
            anyhow::bail!("--arg {arg:?} is not KEY=VALUE");
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        arguments.insert(key.to_owned(), value);
    }
    Ok((json_args.is_some() || !args.is_empty()).then_some(arguments))
}

/// The wait's options from the input flags.
fn await_options(
    input: &InputArgs,
) -> Result<(mcp_tasks::AwaitOptions, prompt::InputPolicy), ExitCode> {
    // --answer implies accept; otherwise prompt on a terminal, fail elsewhere.
    let mode = input.input.clone().unwrap_or_else(|| {
        if !input.answers.is_empty() {
            "accept"
        } else if std::io::stdin().is_terminal() {
            "prompt"
        } else {
            "fail"
        }
        .to_owned()
    });
    let policy = prompt::InputPolicy::parse(&mode, &input.answers).map_err(usage)?;
    let Timeout(deadline) = input.timeout;
    let listen = match (input.listen, input.poll) {
        (true, _) => mcp_tasks::ListenMode::Required,
        (_, true) => mcp_tasks::ListenMode::Poll,
        _ => mcp_tasks::ListenMode::Auto,
    };
    Ok((
        mcp_tasks::AwaitOptions::default()
            .with_deadline(deadline)
            .with_listen(listen),
        policy,
    ))
}

async fn call(args: CallArgs) -> ExitCode {
    if let Err(why) = inapplicable::call_flags(&args) {
        return usage(why);
    }
    let (options, policy) = match await_options(&args.input) {
        Ok(options) => options,
        Err(exit) => return exit,
    };
    let (tool, arguments, target, http, journal, call) = if args.resume {
        match journal::resume(
            &args.journal,
            args.server.url.as_deref(),
            args.server.stdio.as_deref(),
        )
        .await
        {
            Ok((pending, target, journal)) => {
                let http = match http_options(&args.server, &target) {
                    Ok(http) => http,
                    Err(exit) => return exit,
                };
                // Sent again only to a server that honours the key.
                let call = mcp_tasks::CallOptions::default().with_resent_key(&pending.key);
                (
                    pending.tool,
                    pending.arguments,
                    target,
                    http,
                    Some(journal as _),
                    call,
                )
            }
            Err(exit) => return exit,
        }
    } else {
        let arguments = match tool_arguments(args.json_args.as_deref(), &args.args) {
            Ok(arguments) => arguments,
            Err(error) => return usage(error),
        };
        let (target, http) = match target(&args.server) {
            Ok(target) => target,
            Err(exit) => return exit,
        };
        let journal = args
            .journal
            .open_or_warn()
            .await
            .map(|journal| journal as _);
        let tool = args.tool.clone().unwrap_or_default();
        (
            tool,
            arguments,
            target,
            http,
            journal,
            mcp_tasks::CallOptions::default(),
        )
    };
    let http = args.journal.beside(http);
    let client = match connect_to(&target, &http, journal, args.server.json).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let watch = watch::Watch::new(args.server.json).detached(args.detach);
    let options = watch.options(options, &policy);
    let exit = if args.no_wait {
        // MRTR rounds are answered, the task is created, no poll is made.
        let starting = client.start_tool(tool, arguments, call, &options);
        match watch.run(&client, starting).await {
            watch::Watched::Finished(Ok(mcp_tasks::CallResponse::Task(state))) => {
                watch.clear();
                if args.server.json {
                    let value = serde_json::json!({"status": state.status.as_str(), "taskId": state.id.expose()});
                    println!("{value}");
                } else {
                    println!("{}", state.id.expose());
                }
                ExitCode::SUCCESS
            }
            other => other.and_then(not_a_task).finish(&watch, args.server.json),
        }
    } else {
        let waiting = client.call_and_await(tool, arguments, call, &options);
        watch
            .run(&client, waiting)
            .await
            .finish(&watch, args.server.json)
    };
    client.close().await;
    exit
}

async fn wait(args: WaitArgs) -> ExitCode {
    if args.all || !args.more_task_ids.is_empty() {
        return wait_many::run(args).await;
    }
    let (options, policy) = match await_options(&args.input) {
        Ok(options) => options,
        Err(exit) => return exit,
    };
    if args.last {
        return wait_many::last(args, options, &policy).await;
    }
    let Some(text) = &args.task_id else {
        return usage("give a task id, --last or --all");
    };
    let id = match journal::task_id(text) {
        Ok(id) => id,
        Err(exit) => return exit,
    };
    let client = match task_client(&args.server, &id, &args.journal).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let watch = watch::Watch::new(args.server.json);
    let options = watch.options(options, &policy);
    let waiting = client.await_task(id, &options);
    let exit = watch
        .run(&client, waiting)
        .await
        .finish(&watch, args.server.json);
    client.close().await;
    exit
}

/// The outcome of a `tools/call` the server did not make a task of.
fn not_a_task(response: mcp_tasks::CallResponse) -> Result<TaskOutcome, mcp_tasks::Error> {
    match response {
        mcp_tasks::CallResponse::Complete(result) => Ok(TaskOutcome::Completed(result)),
        // The CLI's waits answer with a resolver, or return input (--input fail).
        mcp_tasks::CallResponse::InputRequired(request) => Ok(TaskOutcome::CallInputRequired {
            request,
            unanswered: mcp_tasks::client::Unanswered::Returned,
        }),
        _ => Err(mcp_tasks::Error::Usage(
            "the server answered with something this client does not know",
        )),
    }
}

enum TaskAction {
    Get,
    Cancel,
}

async fn task_command(args: TaskArgs, action: TaskAction) -> ExitCode {
    let id = match journal::task_id(&args.task_id) {
        Ok(id) => id,
        Err(exit) => return exit,
    };
    let client = match task_client(&args.server, &id, &args.journal).await {
        Ok(client) => client,
        Err(exit) => return exit,
    };
    let report = match action {
        TaskAction::Get => client
            .get(&id)
            .await
            .map(|state| Report::from_state(&state)),
        TaskAction::Cancel => {
            let grace = mcp_tasks::AwaitOptions::default().with_deadline(Some(watch::CANCEL_GRACE));
            client
                .cancel_and_wait(&id, &grace)
                .await
                .map(|outcome| Report::outcome(&outcome, Some(&id)))
        }
    };
    let exit = match report {
        Ok(report) => report.print(args.server.json),
        Err(error) => Report::error(&error).print(args.server.json),
    };
    client.close().await;
    exit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(args: &[&str]) -> usize {
        let cli = Cli::try_parse_from(args).expect("the arguments parse");
        let runtime = async_runtime(&cli.command).expect("the runtime starts");
        runtime.metrics().num_workers()
    }

    #[test]
    fn a_stdio_server_runs_on_one_worker_and_the_rest_as_tokio_chooses() {
        // CI does not set TOKIO_WORKER_THREADS; with it set, its count wins.
        if std::env::var_os("TOKIO_WORKER_THREADS").is_some() {
            panic!("this test reads tokio's own choice: run it without TOKIO_WORKER_THREADS");
        }
        let tokio_default = tokio::runtime::Runtime::new()
            .expect("tokio's runtime starts")
            .metrics()
            .num_workers();
        assert_eq!(workers(&["mcp-tasks", "serve", "--stdio"]), 1);
        assert_eq!(workers(&["mcp-tasks", "serve", "--store", "memory"]), 1);
        let http = ["mcp-tasks", "serve", "--http", "127.0.0.1:0"];
        assert_eq!(workers(&http), tokio_default);
        assert_eq!(workers(&["mcp-tasks", "ls"]), tokio_default);
    }
}
