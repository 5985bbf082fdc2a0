//! A client of the example servers (`server_sqlite_http`, `server_macros`):
//! it connects in one call, awaits a task with an observer, starts several
//! tasks and awaits them together, answers a form with a typed value,
//! cancels a task and reads an id the server does not know.
//!
//! `cargo run -p mcp-tasks-examples --bin client -- [URL]` (default
//! http://127.0.0.1:8080/mcp). Needs `mcp-tasks` with its default features.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, ConnectOptions, Elicited, Endpoint, InputMode,
    TasksClient,
};

/// The answer to the server's form: the same shape as the struct it was made from.
#[derive(serde::Serialize)]
struct Approval {
    approve: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:8080/mcp".into());
    // One call: `server/discover` (else `initialize`, for a 2025-11-25
    // server), and waits that listen for the task's notifications where the
    // server can (both example servers can). `()`: a handler that answers no
    // input itself (the form below is answered by the wait).
    let client = TasksClient::connect(Endpoint::url(url), (), ConnectOptions::default()).await?;
    println!("the server offers tasks: {}", client.server_supports());

    // 1. Await a task, printing each status message the wait sees.
    let watched = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(30)))
        .with_observer(|state| {
            if let Some(message) = &state.status_message {
                println!("  build: {} ({message})", state.status);
            }
        });
    let outcome = client
        .call_and_await("build", (), CallOptions::default(), &watched)
        .await?;
    println!("build: {}", outcome.into_text()?);

    // 2. Start three builds without waiting, then await them together: one
    // listen stream, one poll queue and one deadline for the set
    // (`await_each` yields each as it finishes, `await_any` the first).
    let mut builds = Vec::new();
    for _ in 0..3 {
        match client
            .start_tool(
                "build",
                (),
                CallOptions::default(),
                &AwaitOptions::default(),
            )
            .await?
        {
            CallResponse::Task(task) => builds.push(task),
            other => anyhow::bail!("build should have become a task: {other:?}"),
        }
    }
    let together = AwaitOptions::default().with_deadline(Some(Duration::from_secs(30)));
    let mut built = 0;
    for (_id, outcome) in client.await_all(&builds, &together).await {
        if outcome?.into_text()? == "built" {
            built += 1;
        }
    }
    println!("builds awaited together: {built} of {} built", builds.len());

    // 3. Answer the server's form with a typed value; the library builds the
    // answer and checks it against the form before it is sent.
    let approving = AwaitOptions::default().with_input(InputMode::forms(|form| async move {
        println!("  the server asks: {}", form.message());
        Ok(Elicited::Accept(Approval { approve: true }))
    }));
    let outcome = client
        .call_and_await("deploy", (), CallOptions::default(), &approving)
        .await?;
    println!("deploy: {}", outcome.into_text()?);

    // 4. Start a task, then cancel it and wait until the server says so.
    let CallResponse::Task(task) = client
        .call_tool("forever", (), CallOptions::default())
        .await?
    else {
        anyhow::bail!("forever should have become a task");
    };
    let ended = client
        .cancel_and_wait(&task.id, &AwaitOptions::default())
        .await?;
    println!("forever: {}", ended.status());

    // 5. An id the server does not know (or that belongs to another caller).
    let error = client.get(&"no-such-task".into()).await.unwrap_err();
    println!("no-such-task: {} error: {error}", error.kind());
    client.close().await;
    Ok(())
}
