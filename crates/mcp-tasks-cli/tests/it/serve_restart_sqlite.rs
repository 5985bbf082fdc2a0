//! `mcp-tasks serve` on a SQLite file, killed with SIGKILL mid-task and
//! started again on the same file: the resumable `long_job` continues from
//! its checkpoint (its steps are not run again), the other tasks fail
//! honestly, as they always did.

use std::time::Duration;

use mcp_tasks::TaskStatus;
use mcp_tasks::store::RESTARTED_MESSAGE;
use serde_json::json;

use crate::serving::{Served, returned, start, text_of, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_task_resumes_long_job_from_its_checkpoint_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let flags = ["--poll-interval", "50"];
    let mut first = Served::start(crate::support::BIN, "127.0.0.1:0", &store, &flags);
    let client = first.client().await;
    let job = start(&client, "long_job", json!({"steps": 6, "step_ms": 400})).await;
    let sleeper = start(&client, "sleep", json!({"ms": 60_000})).await;
    until(&client, &job.id, Duration::from_secs(10), |state| {
        state.status_message.as_deref() == Some("step 3 of 6")
    })
    .await;
    drop(client);
    first.kill_9();

    // Started again on the same port and file.
    let second = Served::start(crate::support::BIN, first.address(), &store, &flags);
    let client = second.client().await;
    // From now on the job shows only the steps after its checkpoint.
    let mut seen = Vec::new();
    let ended = until(&client, &job.id, Duration::from_secs(20), |state| {
        seen.push(state.status_message.clone());
        state.status.is_terminal()
    })
    .await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    let outcome = client
        .await_task(&ended, &returned())
        .await
        .expect("the outcome");
    assert_eq!(text_of(&outcome), "done: 6 steps");
    let steps: Vec<&str> = seen.iter().flatten().map(String::as_str).collect();
    for early in ["step 1 of 6", "step 2 of 6"] {
        assert!(
            !steps.contains(&early),
            "the job started over after the restart: {steps:?}"
        );
    }
    assert!(
        steps.contains(&"step 6 of 6") || steps.contains(&"step 5 of 6"),
        "the job's later steps ran: {steps:?}"
    );
    let failed = client.get(&sleeper.id).await.expect("tasks/get");
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.status_message.as_deref(), Some(RESTARTED_MESSAGE));
}

#[test]
fn sqlite_sync_is_refused_on_another_store_and_full_serves() {
    let refused = crate::support::run(&["serve", "--store", "memory", "--sqlite-sync", "full"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--sqlite-sync applies to a SQLite store"),
        "{stderr}"
    );
    let bad = crate::support::run(&["serve", "--sqlite-sync", "sometimes"]);
    assert_eq!(
        bad.status.code(),
        Some(64),
        "a usage error names the choices"
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("normal, full"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_full_sync_keeps_its_tasks() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let server = Served::start(
        crate::support::BIN,
        "127.0.0.1:0",
        &store,
        &["--sqlite-sync", "full"],
    );
    let client = server.client().await;
    let job = start(&client, "long_job", json!({"steps": 2, "step_ms": 10})).await;
    let outcome = client
        .await_task(&job, &returned())
        .await
        .expect("the outcome");
    assert_eq!(text_of(&outcome), "done: 2 steps");
}

/// A synchronous call (`sleep` without the Tasks extension) with an
/// idempotency key, running when the server is killed: sent again under
/// its key to the server started again on the same file, it is not run
/// again but told how the first run ended (its server restarted), at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_call_cut_by_a_kill_is_not_run_again_after_the_restart() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let mut first = Served::start(crate::support::BIN, "127.0.0.1:0", &store, &[]);
    let key = mcp_tasks::IdempotencyKey::new("deploy-42").expect("a key");
    let call = || {
        mcp_tasks::CallOptions::default()
            .with_declare_tasks(false)
            .with_idempotency_key(&key)
            .with_resend_lost(false)
    };
    let client = first.client().await;
    assert!(client.server_honours_idempotency());
    let first_send = call();
    let running = tokio::spawn(async move {
        let arguments = crate::serving::args(json!({"ms": 60_000}));
        client.call_tool("sleep", arguments, first_send).await
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    first.kill_9();
    let cut = running
        .await
        .expect("join")
        .expect_err("the server was killed");
    assert!(cut.is_transport(), "{cut}");

    let second = Served::start(crate::support::BIN, first.address(), &store, &[]);
    let client = second.client().await;
    let started = std::time::Instant::now();
    let again = client
        .call_tool("sleep", crate::serving::args(json!({"ms": 60_000})), call())
        .await
        .expect_err("the first run's end, not a second run");
    assert!(started.elapsed() < Duration::from_secs(10), "not run again");
    let error = again.rpc_error().expect("a JSON-RPC error");
    assert_eq!(error.message, RESTARTED_MESSAGE, "{again}");
}
