//! `mcp-tasks demo`: a server on an embedded SQLite store, served on
//! 127.0.0.1, and a short tour against it: a task with live status, an
//! input request, a cancelled task, and a summary.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TaskOutcome};
use serde_json::json;

use crate::connect::{Target, connect};
use crate::output::code;
use crate::prompt::InputPolicy;
use crate::serve::{DemoServer, ServeOptions, serve_http};
use crate::watch::{CANCEL_GRACE, Watch, short_id};

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
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let serving = tokio::spawn(serve_http(server, listener));
    println!("mcp-tasks demo: a task server on an embedded SQLite store at {url}\n");
    let client = connect(&Target::Url(url), &[]).await?;
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

    println!("1/3  long_job: a task that reports its progress");
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

    println!("\n2/3  confirm_action: the task asks for input (tasks/update answers it)");
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

    println!("\n3/3  sleep: a task cancelled with tasks/cancel");
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
            let state = client.cancel_and_wait(&state.id, &grace).await?;
            println!("     {}", state.status);
            state.status.to_string()
        }
        other => format!("no task: {other:?}"),
    };
    summary.push(("sleep", cancelled, started.elapsed(), "cancelled"));

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
            "  {tool:<16} {ended:<12} {:>5.1}s  {mark}",
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

fn outcome_name(outcome: &Result<TaskOutcome, mcp_tasks::Error>) -> String {
    match outcome {
        Ok(outcome) => outcome.status().to_string(),
        Err(error) => format!("error: {error}"),
    }
}
