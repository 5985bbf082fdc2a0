//! `mcp-tasks admin`: every caller's tasks, for an operator. A thin shell
//! over `mcp_tasks::server::admin`, through a running server's operator
//! listener (`--server`, the only way for a SQLite file a server holds) or
//! a store opened here (`--store`: a SQLite file no server holds, or Redis
//! or PostgreSQL at any time, whose replicas hear every change on its
//! change feed). `migrate` brings a PostgreSQL schema to this binary's
//! version.
//!
//! Tasks are shown by their keyed hash (`th_...`) unless `--show-ids`;
//! callers by their token's label. Every action but `hash` writes an audit
//! line: on the server's log through `--server`, on stderr (and
//! `--audit-log FILE`) with `--store`.

mod backend;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use mcp_tasks::server::admin::{Filter, Show, TaskView};

use self::backend::{Backend, Failure};
use crate::output::{code, error_chain};
use crate::serve::{Namespace, StoreChoice};

/// `mcp-tasks admin ...`.
#[derive(Debug, Args)]
pub(crate) struct AdminArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// List every caller's tasks, oldest first (named by their hash).
    Ls(LsArgs),
    /// Show one task's record (by its id or its hash).
    Show(ShowArgs),
    /// Cancel a task: its tool is stopped on whichever server runs it.
    Cancel(NameArgs),
    /// Delete finished tasks that ended at least a duration ago.
    Purge(PurgeArgs),
    /// Print the hash that names a task in logs, metrics and traces.
    Hash(HashArgs),
    /// Make a running server reread its --config file (its upstreams) and its --auth-tokens
    /// file, as SIGHUP does; a file it refuses changes nothing.
    Reload(ReloadArgs),
    /// Bring a PostgreSQL store's schema to this binary's version (servers also do at start,
    /// when their role may); a schema newer than this binary is refused.
    Migrate(MigrateArgs),
}

/// Where to act.
#[derive(Debug, Args)]
struct Target {
    /// A running server's operator listener (its `serve --admin ADDR`), e.g. http://127.0.0.1:9090.
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "store",
        required_unless_present = "store"
    )]
    server: Option<String>,
    /// A file holding the admin token for --server (else the env MCP_TASKS_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE", requires = "server")]
    admin_token_file: Option<PathBuf>,
    /// A store no server holds (sqlite:PATH), or Redis or PostgreSQL at any time
    /// (redis://HOST:PORT/DB, postgres://USER@HOST:PORT/DB).
    #[arg(
        long,
        value_name = "sqlite:PATH|redis://HOST:PORT/DB|postgres://USER@HOST/DB"
    )]
    store: Option<String>,
    /// With a Redis --store: the servers' key prefix [default: mcp-tasks:].
    #[arg(long, value_name = "PREFIX")]
    redis_key_prefix: Option<String>,
    /// With a PostgreSQL --store: the servers' schema [default: mcp_tasks].
    #[arg(long, value_name = "NAME")]
    postgres_schema: Option<String>,
    /// With --store: also append each audit line to this file (not with hash, which writes none).
    #[arg(long, value_name = "FILE", requires = "store")]
    audit_log: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LsArgs {
    #[command(flatten)]
    target: Target,
    /// Only tasks in this status: working, input_required, completed, failed, cancelled, or
    /// unfinished (working or input_required).
    #[arg(long, value_name = "STATUS")]
    status: Option<String>,
    /// Only tasks of this tool.
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// Only tasks of callers with this label (the tokens file's; see docs/operator.md).
    #[arg(long, value_name = "LABEL")]
    principal: Option<String>,
    /// Only tasks created at least this long ago (30s, 5m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Option<Duration>,
    /// Only tasks created less than this long ago.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    newer_than: Option<Duration>,
    /// At most this many tasks.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    limit: usize,
    /// Show task ids (bearer tokens: whoever reads them may use the tasks).
    #[arg(long)]
    show_ids: bool,
    /// Print JSON (one array) instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ShowArgs {
    #[command(flatten)]
    target: Target,
    /// The task's id or hash.
    #[arg(value_name = "TASK")]
    task: String,
    /// Show the task id.
    #[arg(long)]
    show_ids: bool,
    /// Show the task's result or error.
    #[arg(long)]
    show_results: bool,
    /// Print JSON instead of lines.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct NameArgs {
    #[command(flatten)]
    target: Target,
    /// The task's id or hash.
    #[arg(value_name = "TASK")]
    task: String,
    /// Print JSON instead of a line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct PurgeArgs {
    #[command(flatten)]
    target: Target,
    /// Purge finished tasks that ended at least this long ago (30s, 5m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    older_than: Duration,
    /// Only list what would be purged.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON instead of lines.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct HashArgs {
    #[command(flatten)]
    target: Target,
    /// The task id.
    #[arg(value_name = "ID")]
    id: String,
}

#[derive(Debug, Args)]
struct MigrateArgs {
    /// The PostgreSQL store (postgres://USER@HOST:PORT/DB; the PG* variables and ~/.pgpass fill
    /// in what it leaves out).
    #[arg(long, value_name = "postgres://USER@HOST/DB")]
    store: String,
    /// The schema [default: mcp_tasks].
    #[arg(long, value_name = "NAME")]
    postgres_schema: Option<String>,
    /// Print JSON instead of a line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ReloadArgs {
    /// The server's operator listener (its `serve --admin ADDR`), e.g. http://127.0.0.1:9090.
    #[arg(long, value_name = "URL")]
    server: String,
    /// A file holding the admin token (else the env MCP_TASKS_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// Print JSON instead of a line.
    #[arg(long)]
    json: bool,
}

/// Reads `30s`, `5m`, `2h`, `7d`, `500ms` or a number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: use 30s, 5m, 2h or 7d"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(number)),
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?} is not a duration: use 30s, 5m, 2h or 7d")),
    };
    Ok(Duration::from_secs(number.saturating_mul(secs)))
}

/// Runs `mcp-tasks admin ...`.
pub(crate) async fn run(args: AdminArgs) -> ExitCode {
    let result = match args.action {
        Action::Ls(args) => ls(args).await,
        Action::Show(args) => show(args).await,
        Action::Cancel(args) => cancel(args).await,
        Action::Purge(args) => purge(args).await,
        Action::Hash(args) => hash(args).await,
        Action::Reload(args) => reload(args).await,
        Action::Migrate(args) => migrate(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => crate::usage(message),
        Err(Failure::Unreachable(error)) => {
            eprintln!("error: {}", error_chain(error.as_ref()));
            ExitCode::from(code::UNREACHABLE)
        }
        Err(Failure::Failed(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code::TOOL_ERROR)
        }
    }
}

/// Whether an action writes an audit line: every one but `hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Audit {
    Written,
    None,
}

/// Where an action acts, once the flags that cannot apply to it are
/// refused ([`inapplicable`]).
async fn backend(target: &Target, audit: Audit) -> Result<Backend, Failure> {
    inapplicable(target, audit).map_err(Failure::Usage)?;
    match (&target.server, &target.store) {
        (Some(server), None) => {
            Backend::remote(server, admin_token(target.admin_token_file.as_ref())?)
        }
        (None, Some(store)) => {
            let namespace = Namespace::of(
                target.redis_key_prefix.as_deref(),
                target.postgres_schema.as_deref(),
            );
            Backend::local(store, namespace, target.audit_log.clone()).await
        }
        _ => Err(Failure::Usage("give one of --server or --store".into())),
    }
}

/// The flags of `target` that cannot apply to `action` (`admin`'s part of
/// the list in `crate::inapplicable`): a key prefix for a store that has
/// none, an audit log for an action that writes no audit line. (clap says
/// the rest: `--admin-token-file` needs `--server`, `--audit-log` `--store`.)
fn inapplicable(target: &Target, audit: Audit) -> Result<(), String> {
    let choice = target
        .store
        .as_deref()
        .and_then(|store| StoreChoice::parse(store).ok());
    let store = match &target.store {
        Some(store) => format!("the store {}", crate::serve::redacted(store)),
        None => "a server's operator listener (--server), whose server has its own".to_owned(),
    };
    if target.redis_key_prefix.is_some() && !matches!(choice, Some(StoreChoice::Redis(_))) {
        return Err(format!(
            "--redis-key-prefix applies to a Redis store (--store redis://...); this command \
             reaches {store}"
        ));
    }
    if target.postgres_schema.is_some() && !matches!(choice, Some(StoreChoice::Postgres(_))) {
        return Err(format!(
            "--postgres-schema applies to a PostgreSQL store (--store postgres://...); this \
             command reaches {store}"
        ));
    }
    if target.audit_log.is_some() && audit == Audit::None {
        return Err(
            "--audit-log receives the audit line of an action, and hash writes none: it reads \
             nothing and changes nothing"
                .to_owned(),
        );
    }
    Ok(())
}

/// The admin token: from `file`, else MCP_TASKS_ADMIN_TOKEN.
fn admin_token(file: Option<&PathBuf>) -> Result<Option<String>, Failure> {
    Ok(match file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|error| {
                    Failure::Usage(format!(
                        "cannot read the admin token file {}: {error}",
                        path.display()
                    ))
                })?
                .trim()
                .to_owned(),
        ),
        None => std::env::var("MCP_TASKS_ADMIN_TOKEN")
            .ok()
            .filter(|token| !token.is_empty()),
    })
}

async fn reload(args: ReloadArgs) -> Result<(), Failure> {
    let backend = Backend::remote(&args.server, admin_token(args.admin_token_file.as_ref())?)?;
    let reloaded = backend.reload().await?;
    if args.json {
        print_json(&reloaded);
    } else {
        // The server's own line.
        println!("{}", reloaded["summary"].as_str().unwrap_or("reloaded"));
    }
    Ok(())
}

/// `admin migrate`: the PostgreSQL schema brought to this binary's version.
async fn migrate(args: MigrateArgs) -> Result<(), Failure> {
    let url = match StoreChoice::parse(&args.store) {
        Ok(StoreChoice::Postgres(url)) => url,
        Ok(_) => {
            return Err(Failure::Usage(format!(
                "migrate applies to a PostgreSQL store (--store postgres://...), not {}: a \
                 SQLite file brings its schema up to date when a server opens it, and Redis \
                 keeps none",
                crate::serve::redacted(&args.store)
            )));
        }
        Err(error) => return Err(Failure::Usage(format!("--store: {error:#}"))),
    };
    let schema = Namespace::of(None, args.postgres_schema.as_deref()).postgres_schema;
    let migrated = mcp_tasks_postgres::PostgresStore::migrate(&url, schema)
        .await
        .map_err(|error| {
            Failure::Unreachable(anyhow::Error::new(error).context(format!(
                "cannot migrate the schema {schema} of {}",
                crate::serve::redacted(&url)
            )))
        })?;
    if args.json {
        print_json(&serde_json::json!({
            "schema": schema,
            "from": migrated.from,
            "to": migrated.to,
        }));
    } else if migrated.from == migrated.to {
        println!(
            "schema {schema} is at version {}: nothing to do",
            migrated.to
        );
    } else {
        println!(
            "schema {schema} migrated from version {} to {}",
            migrated.from, migrated.to
        );
    }
    Ok(())
}

fn print_json(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
    );
}

/// The name a table shows: the id when asked and given, else the hash.
fn name(view: &TaskView) -> &str {
    view.id.as_deref().unwrap_or(&view.task)
}

fn age(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

async fn ls(args: LsArgs) -> Result<(), Failure> {
    let backend = backend(&args.target, Audit::Written).await?;
    let mut filter = Filter::default();
    filter.status = args.status;
    filter.tool = args.tool;
    filter.principal = args.principal;
    filter.older_than_ms = args
        .older_than
        .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
    filter.newer_than_ms = args
        .newer_than
        .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
    let show = Show::default().with_ids(args.show_ids);
    let mut tasks = backend.list(filter, args.limit, show).await?;
    if !args.show_ids {
        for task in &mut tasks {
            task.id = None;
        }
    }
    if args.json {
        print_json(&tasks);
    } else if tasks.is_empty() {
        eprintln!("no tasks");
    } else {
        println!(
            "{:<44} {:<16} {:<5} {:<20} PRINCIPAL",
            "TASK", "STATUS", "AGE", "TOOL"
        );
        for task in &tasks {
            println!(
                "{:<44} {:<16} {:<5} {:<20} {}",
                name(task),
                task.status,
                age(task.age_secs),
                task.tool.as_deref().unwrap_or("-"),
                task.principal
            );
        }
    }
    Ok(())
}

async fn show(args: ShowArgs) -> Result<(), Failure> {
    let backend = backend(&args.target, Audit::Written).await?;
    let show = Show::default()
        .with_ids(args.show_ids)
        .with_results(args.show_results);
    let view = backend.show(&args.task, show).await?;
    if args.json {
        print_json(&view);
        return Ok(());
    }
    println!("task        {}", view.task);
    if let Some(id) = &view.id {
        println!("id          {id}");
    }
    println!("status      {}", view.status);
    if let Some(message) = &view.status_message {
        println!("message     {message}");
    }
    println!("tool        {}", view.tool.as_deref().unwrap_or("-"));
    println!("principal   {}", view.principal);
    println!(
        "created     {} ({} ago)",
        view.created_at,
        age(view.age_secs)
    );
    println!("updated     {}", view.updated_at);
    if let Some(at) = &view.expires_at {
        println!("expires     {at}");
    }
    if view.cancel_requested {
        println!("cancel      requested");
    }
    if view.input_requests > 0 {
        println!("input       {} request(s) waiting", view.input_requests);
    }
    if let Some(result) = &view.result {
        println!("result      {result}");
    }
    if let Some(error) = &view.error {
        println!("error       {error}");
    }
    Ok(())
}

async fn cancel(args: NameArgs) -> Result<(), Failure> {
    let backend = backend(&args.target, Audit::Written).await?;
    let view = backend.cancel(&args.task).await?;
    if args.json {
        print_json(&view);
    } else {
        println!("{}: cancel requested ({})", view.task, view.status);
    }
    Ok(())
}

async fn purge(args: PurgeArgs) -> Result<(), Failure> {
    let backend = backend(&args.target, Audit::Written).await?;
    let purged = backend.purge(args.older_than, args.dry_run).await?;
    if args.json {
        print_json(&purged);
        return Ok(());
    }
    for task in &purged.tasks {
        println!("{task}");
    }
    eprintln!(
        "{} {} finished task(s)",
        if purged.dry_run {
            "would purge"
        } else {
            "purged"
        },
        purged.tasks.len()
    );
    Ok(())
}

async fn hash(args: HashArgs) -> Result<(), Failure> {
    let backend = backend(&args.target, Audit::None).await?;
    println!("{}", backend.hash(&args.id).await?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("h").is_err());
    }
}
