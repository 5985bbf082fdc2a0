//! `mcp-tasks demo`: a server on an embedded SQLite store, served on
//! 127.0.0.1, and a short tour against it: a task with live status, an
//! input request, a cancelled task, how late a change is seen when the
//! client listens and when it polls, the task gateway in front of a child
//! server, and a summary.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, ListenMode, TaskOutcome, TaskState};
use serde_json::json;

use crate::connect::{HttpOptions, Target, connect};
use crate::output::code;
use crate::prompt::InputPolicy;
use crate::serve::{DemoServer, HttpAccess, ServeOptions, serve_http};
use crate::watch::{CANCEL_GRACE, Watch, short_id};
use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};

pub(crate) async fn run() -> ExitCode {
    match tour().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(code::PROTOCOL),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(code::UNREACHABLE)
        }
    }
}

fn args(value: serde_json::Value) -> Option<rmcp::model::JsonObject> {
    match value {
        serde_json::Value::Object(object) => Some(object),
        _ => None,
    }
}

async fn tour() -> anyhow::Result<bool> {
    let path = std::env::temp_dir().join(format!("mcp-tasks-demo-{}.db", std::process::id()));
    let store = mcp_tasks_sqlite::SqliteStore::open(&path)?;
    let server = DemoServer::new(&ServeOptions {
        store: Arc::new(store),
        poll_interval: Duration::from_millis(200),
        ttl: None,
        max_tasks_per_caller: Some(mcp_tasks::server::DEFAULT_MAX_TASKS_PER_CALLER),
        admission: mcp_tasks::server::AdmissionLimits::default(),
        quota_by_header: false,
        rate_per_caller: None,
        lease_period: Duration::from_secs(10),
        max_lifetime: Some(mcp_tasks::server::DEFAULT_MAX_LIFETIME),
        max_listen_streams: mcp_tasks::server::DEFAULT_MAX_LISTEN_STREAMS,
        max_listen_streams_per_caller: mcp_tasks::server::DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER,
        max_result_bytes: Some(mcp_tasks::server::DEFAULT_MAX_RESULT_BYTES),
        task_tools: mcp_tasks::server::TaskTools::off(),
        observers: Vec::new(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let serving = tokio::spawn(serve_http(
        server.clone(),
        server.runtime().clone(),
        listener,
        HttpAccess::default(),
        std::future::pending(),
    ));
    println!("mcp-tasks demo: a task server on an embedded SQLite store at {url}\n");
    let client = connect(&Target::Url(url), &HttpOptions::default(), None).await?;
    println!(
        "server supports the Tasks extension: {}\n",
        if client.server_supports() {
            "yes"
        } else {
            "no"
        }
    );
    let mut summary = Vec::new();
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(30)));

    println!("1/5  long_job: a task that reports its progress (heard as it happens)");
    let started = Instant::now();
    let watch = Watch::new(false);
    let watching = watch.options(options.clone(), &InputPolicy::Fail);
    let waiting = client.call_and_await(
        "long_job",
        args(json!({"steps": 4, "step_ms": 500})),
        CallOptions::default(),
        &watching,
    );
    let Some(outcome) = watch.run(&client, waiting).await.outcome() else {
        return Ok(false);
    };
    let ended = outcome_name(&outcome);
    watch.report(outcome).print(false);
    summary.push(("long_job", ended, started.elapsed(), "completed"));

    println!("\n2/5  confirm_action: the task asks for input (tasks/update answers it)");
    let policy = if std::io::stdin().is_terminal() {
        InputPolicy::Prompt
    } else {
        println!("     (stdin is not a terminal: answering confirm=true automatically)");
        InputPolicy::parse("accept", &["confirm=true".to_owned()])?
    };
    let started = Instant::now();
    let watch = Watch::new(false);
    let watching = watch.options(options.clone(), &policy);
    let waiting = client.call_and_await(
        "confirm_action",
        args(json!({"action": "tidy up the demo"})),
        CallOptions::default(),
        &watching,
    );
    let Some(outcome) = watch.run(&client, waiting).await.outcome() else {
        return Ok(false);
    };
    let ended = outcome_name(&outcome);
    watch.report(outcome).print(false);
    summary.push(("confirm_action", ended, started.elapsed(), "completed"));

    println!("\n3/5  sleep: a task cancelled with tasks/cancel");
    let started = Instant::now();
    let cancelled = match client
        .call_tool("sleep", args(json!({"ms": 60_000})), CallOptions::default())
        .await?
    {
        CallResponse::Task(state) => {
            println!(
                "     task {} is {}; cancelling in 1 s",
                short_id(&state.id),
                state.status
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
            let grace = AwaitOptions::default().with_deadline(Some(CANCEL_GRACE));
            let outcome = client.cancel_and_wait(&state.id, &grace).await?;
            println!("     {}", outcome.status());
            outcome.status().to_string()
        }
        other => format!("no task: {other:?}"),
    };
    summary.push(("sleep", cancelled, started.elapsed(), "cancelled"));

    println!(
        "\n4/5  listen or poll: how late long_job's changes are seen (the server suggests 200 ms polls)"
    );
    for (mode, name) in [(ListenMode::Required, "listen"), (ListenMode::Poll, "poll")] {
        let started = Instant::now();
        let delays = Arc::new(Mutex::new(Delays::default()));
        let watching = options.clone().with_listen(mode).with_observer({
            let delays = delays.clone();
            move |state| delays.lock().unwrap_or_else(|p| p.into_inner()).saw(state)
        });
        let outcome = client
            .call_and_await(
                "long_job",
                args(json!({"steps": 5, "step_ms": 300})),
                CallOptions::default(),
                &watching,
            )
            .await;
        let delays = delays.lock().unwrap_or_else(|p| p.into_inner());
        println!("     {name:<6} {}", delays.summary());
        let tool = if name == "listen" {
            "long_job, listen"
        } else {
            "long_job, poll"
        };
        summary.push((tool, outcome_name(&outcome), started.elapsed(), "completed"));
    }

    println!(
        "\n5/5  the gateway: another server's tools as tasks (mcp-tasks serve --upstream 'COMMAND')"
    );
    let started = Instant::now();
    let ended = gateway_step(&options).await?;
    summary.push(("long_job, gateway", ended, started.elapsed(), "completed"));

    println!("\nsummary");
    let mut all_as_expected = true;
    for (tool, ended, took, expected) in &summary {
        let mark = if ended == expected {
            "ok"
        } else {
            "UNEXPECTED"
        };
        all_as_expected &= ended == expected;
        println!(
            "  {tool:<18} {ended:<12} {:>5.1}s  {mark}",
            took.as_secs_f64()
        );
    }
    serving.abort();
    client.close().await;
    let _ = std::fs::remove_file(&path);
    for suffix in ["-wal", "-shm"] {
        let mut side = path.clone().into_os_string();
        side.push(suffix);
        let _ = std::fs::remove_file(side);
    }
    Ok(all_as_expected)
}

/// The gateway step: a gateway in this process in front of a child
/// `mcp-tasks serve --stdio` (this binary), served on 127.0.0.1, and
/// `long_job` called through it; returns how the task ended.
async fn gateway_step(options: &AwaitOptions) -> anyhow::Result<String> {
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy().replace('\'', r"'\''");
    let upstream = format!("'{exe}' serve --stdio --store memory --poll-interval 100");
    println!(
        "     upstream: a child `mcp-tasks serve --stdio --store memory --poll-interval 100`; any \
         MCP server's command works the same"
    );
    let runtime = mcp_tasks::server::TaskRuntime::builder(mcp_tasks::store::MemoryStore::new())
        .with_poll_interval(Duration::from_millis(200))
        .build();
    let gateway = Gateway::start(
        Upstream::command(upstream),
        runtime.clone(),
        GatewayOptions::default(),
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let serving = tokio::spawn(serve_http(
        gateway,
        runtime,
        listener,
        HttpAccess::default(),
        std::future::pending(),
    ));
    println!("     gateway at {url}");
    let client = connect(&Target::Url(url), &HttpOptions::default(), None).await?;
    let watch = Watch::new(false);
    let watching = watch.options(options.clone(), &InputPolicy::Fail);
    let waiting = client.call_and_await(
        "long_job",
        args(json!({"steps": 3, "step_ms": 300})),
        CallOptions::default(),
        &watching,
    );
    let ended = match watch.run(&client, waiting).await.outcome() {
        Some(outcome) => {
            let ended = outcome_name(&outcome);
            watch.report(outcome).print(false);
            ended
        }
        None => "interrupted".to_owned(),
    };
    client.close().await;
    serving.abort();
    Ok(ended)
}

/// How long after each change (its `lastUpdatedAt`) the client saw it.
#[derive(Default)]
struct Delays {
    seen: HashSet<String>,
    delays: Vec<Duration>,
}

impl Delays {
    fn saw(&mut self, state: &TaskState) {
        let Some(updated) = &state.last_updated_at else {
            return;
        };
        if !self.seen.insert(updated.as_str().to_owned()) {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        if let Some(at) = unix_millis(updated.as_str()) {
            let late = u64::try_from(now.saturating_sub(at)).unwrap_or(u64::MAX);
            self.delays.push(Duration::from_millis(late));
        }
    }

    fn summary(&self) -> String {
        let Some(worst) = self.delays.iter().max() else {
            return "no change seen".to_owned();
        };
        let total: Duration = self.delays.iter().sum();
        let count = u32::try_from(self.delays.len()).unwrap_or(u32::MAX);
        format!(
            "{} changes seen, on average {} ms after they happened (at most {} ms)",
            self.delays.len(),
            (total / count).as_millis(),
            worst.as_millis()
        )
    }
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as this server
/// writes them (`2026-07-28T10:30:00.123Z`).
fn unix_millis(text: &str) -> Option<u128> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (clock, millis) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock = clock.splitn(3, ':').map(str::parse::<i64>);
    let (hours, minutes, seconds) = (
        clock.next()?.ok()?,
        clock.next()?.ok()?,
        clock.next()?.ok()?,
    );
    let millis: i64 = format!("{millis:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let of_era = year - era * 400;
    let of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let of_era_days = of_era * 365 + of_era / 4 - of_era / 100 + of_year;
    let days = era * 146_097 + of_era_days - 719_468;
    let total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds;
    u128::try_from(total * 1000 + millis).ok()
}

fn outcome_name(outcome: &Result<TaskOutcome, mcp_tasks::Error>) -> String {
    match outcome {
        Ok(outcome) => outcome.status().to_string(),
        Err(error) => format!("error: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::unix_millis;

    #[test]
    fn server_timestamps_are_read() {
        assert_eq!(unix_millis("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            unix_millis("2026-07-28T10:30:00.123Z"),
            Some(1_785_234_600_123)
        );
        assert_eq!(unix_millis("2000-03-01T00:00:01Z"), Some(951_868_801_000));
        assert_eq!(unix_millis("yesterday"), None);
    }
}
