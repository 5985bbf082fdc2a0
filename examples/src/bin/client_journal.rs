//! A client that keeps a journal of its tasks in a SQLite file, so that a
//! run killed while it waits is resumed by the next: it calls `crunch` (a
//! tool of `server_macros` that works for a few seconds) and awaits it;
//! started again with `--resume`, it awaits every task the journal holds
//! unfinished, on the server each was made on, and the journal records how
//! each ended.
//!
//! ```sh
//! cargo run -p mcp-tasks-examples --bin server_macros &
//! cargo run -p mcp-tasks-examples --bin client_journal -- [URL]   # kill it while it waits
//! cargo run -p mcp-tasks-examples --bin client_journal -- --resume
//! ```
//!
//! `--journal FILE` (default mcp-tasks-example-journal.sqlite3 in the
//! temporary folder), `--seconds N` (how long `crunch` works, default 5),
//! URL (default http://127.0.0.1:8080/mcp). A token in `MCP_TOKEN` is sent as a bearer token to URL; a journal keeps no
//! header, so `--resume` gives it again, to that server only (a journal may
//! name others). A server `--resume` cannot reach is left for the next run. Needs `mcp-tasks` (default features) and
//! `mcp-tasks-sqlite`.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::sync::Arc;

use mcp_tasks::client::resume;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, ConnectOptions, Endpoint, TasksClient};
use mcp_tasks_sqlite::SqliteJournal;

/// What the command line asks.
struct Args {
    resume: bool,
    journal: PathBuf,
    url: String,
    seconds: u64,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args {
        resume: false,
        // In the temporary folder by default: an example leaves nothing in
        // the folder it is run from, and `--resume` finds it there.
        journal: std::env::temp_dir().join("mcp-tasks-example-journal.sqlite3"),
        url: "http://127.0.0.1:8080/mcp".into(),
        seconds: 5,
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let mut value = || {
            given
                .next()
                .ok_or_else(|| anyhow::anyhow!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--resume" => args.resume = true,
            "--journal" => args.journal = value()?.into(),
            "--seconds" => args.seconds = value()?.parse()?,
            url if !url.starts_with("--") => args.url = url.to_owned(),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

/// The arguments of `crunch`.
#[derive(serde::Serialize)]
struct Crunch {
    seconds: u64,
}

/// `endpoint` with the caller's token, if there is one and `url`, where the
/// endpoint goes, is `ours`, the server the token is for: the journal keeps
/// no header, so the first run and the resume both add it, and a journal
/// that names other servers never sends them this token.
fn with_token(endpoint: Endpoint, url: Option<&str>, ours: &str) -> anyhow::Result<Endpoint> {
    match std::env::var("MCP_TOKEN") {
        Ok(token) if url == Some(ours) => {
            Ok(endpoint.with_header("Authorization", format!("Bearer {token}"))?)
        }
        _ => Ok(endpoint),
    }
}

/// A minute for the wait, printing how far each task got.
fn watching() -> AwaitOptions {
    AwaitOptions::default().with_observer(|state| {
        if let Some(message) = &state.status_message {
            println!("  {} ({message})", state.status);
        }
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let journal = Arc::new(SqliteJournal::open(&args.journal)?);
    if args.resume {
        resume(journal, &args.url).await
    } else {
        call(journal, args.url, args.seconds).await
    }
}

/// Calls `crunch` with the journal attached, and awaits it.
async fn call(journal: Arc<SqliteJournal>, url: String, seconds: u64) -> anyhow::Result<()> {
    // Every task this client creates is in the journal before `call_tool`
    // returns it, and every status it learns is written as it comes.
    let options = ConnectOptions::default().with_journal(journal);
    let endpoint = with_token(Endpoint::url(&url), Some(&url), &url)?;
    let client = TasksClient::connect(endpoint, (), options).await?;
    let arguments = Crunch { seconds };
    let CallResponse::Task(task) = client
        .call_tool("crunch", arguments, CallOptions::default())
        .await?
    else {
        anyhow::bail!("crunch should have become a task");
    };
    println!("crunch: started and journaled; waiting (kill me, then run me with --resume)");
    let outcome = client.await_task(&task, &watching()).await?;
    println!("crunch: {}", outcome.into_text()?);
    client.close().await;
    Ok(())
}

/// Awaits every unfinished task of the journal, server by server.
async fn resume(journal: Arc<SqliteJournal>, url: &str) -> anyhow::Result<()> {
    // One call: the unfinished tasks by server, each with its endpoint.
    let servers = resume::unfinished(journal.clone()).await?;
    if servers.is_empty() {
        println!("nothing to resume");
    }
    for server in servers {
        println!(
            "resuming {} task(s) on {}",
            server.tasks.len(),
            server.server
        );
        let endpoint = with_token(server.endpoint()?, server.url(), url)?;
        let options = ConnectOptions::default().with_journal(journal.clone());
        let client = match TasksClient::connect(endpoint, (), options).await {
            Ok(client) => client,
            // Its tasks stay in the journal for the next run; the other
            // servers' are resumed all the same.
            Err(error) => {
                println!(
                    "{}: cannot connect ({error}); left for the next run",
                    server.server
                );
                continue;
            }
        };
        // All of this server's tasks on one connection, each as it ends;
        // the journal has its outcome before it comes out here.
        let mut resumed = client.resume(&server, &watching());
        while let Some(task) = resumed.next().await {
            let tool = &task.task.tool;
            if task.is_gone() {
                // Expired and purged (or another caller's): marked in the
                // journal, so the next resume does not ask again.
                println!("{tool}: gone (the server does not know it any more)");
                continue;
            }
            match task.outcome.and_then(|outcome| outcome.into_text()) {
                Ok(text) => println!("{tool}: {text}"),
                Err(error) => println!("{tool}: {error}"),
            }
        }
        client.close().await;
    }
    Ok(())
}
