//! `mcp-tasks serve --store postgres://…` while PostgreSQL is down: the
//! operator listener's `/readyz` answers 503 and a `tools/call` a clear
//! JSON-RPC error, the task parked for input rides the outage out, and once
//! PostgreSQL is back (SIGKILLed, then started again on the same port and
//! files) `/readyz` is 200 and calls work, with no restart of `serve`. And
//! `serve` on a port where no PostgreSQL listens exits at once, naming the
//! store without its password.

use std::time::{Duration, Instant};

use mcp_tasks::{CallOptions, TaskStatus};
use mcp_tasks_postgres::testing::PostgresServer;
use serde_json::json;

use crate::serving::{Served, args, returned, start, text_of, until};
use crate::support::{BIN, raw_http, run};

/// Reads `/readyz` of the operator listener `admin` every 50 ms until it
/// answers `status`, for at most `within`: the answer's body.
fn readyz_until(admin: &str, status: u16, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let answer = raw_http(admin, "GET", "/readyz", &[], "");
        if answer.status == status {
            return answer.body;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz did not answer {status} within {within:?}: {} {}",
            answer.status,
            answer.body
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_postgres_answers_503_and_clear_errors_while_it_is_down_and_recovers_by_itself() {
    let mut postgres = PostgresServer::start();
    let url = postgres.url();
    let served = Served::spawn(
        BIN,
        &[
            "--http",
            "127.0.0.1:0",
            "--store",
            &url,
            "--postgres-schema",
            "outage",
            "--admin",
            "127.0.0.1:0",
            "--poll-interval",
            "50",
        ],
        &[],
        None,
    );
    assert_eq!(readyz_until(&served.admin, 200, Duration::ZERO), "ready\n");
    let client = served.client().await;
    let asked = start(&client, "confirm_action", json!({"action": "deploy"})).await;
    until(&client, &asked.id, Duration::from_secs(10), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;

    tokio::task::block_in_place(|| postgres.kill());
    let body =
        tokio::task::block_in_place(|| readyz_until(&served.admin, 503, Duration::from_secs(10)));
    assert!(body.contains("task store"), "{body}");
    assert_eq!(
        raw_http(&served.admin, "GET", "/healthz", &[], "").status,
        200
    );
    let calling = Instant::now();
    let call = client
        .call_tool("sleep", args(json!({"ms": 10})), CallOptions::default())
        .await;
    let error = call.expect_err("tools/call fails while PostgreSQL is down");
    assert!(
        error
            .to_string()
            .contains("the task store cannot be reached"),
        "{error}"
    );
    assert!(
        calling.elapsed() < Duration::from_secs(10),
        "tools/call took {:?}",
        calling.elapsed()
    );
    let read = client.get(&asked.id).await;
    let error = read.expect_err("tasks/get fails while PostgreSQL is down");
    assert!(
        error
            .to_string()
            .contains("the task store cannot be reached"),
        "{error}"
    );

    tokio::task::block_in_place(|| postgres.restart());
    // The same process, on the same ports: it reconnected by itself.
    let body =
        tokio::task::block_in_place(|| readyz_until(&served.admin, 200, Duration::from_secs(30)));
    assert_eq!(body, "ready\n");
    let back = until(&client, &asked.id, Duration::from_secs(10), |_| true).await;
    assert_eq!(back.status, TaskStatus::InputRequired, "{back:?}");
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    client
        .update(&asked.id, [("confirm".to_owned(), yes)].into())
        .await
        .expect("tasks/update");
    let outcome = client
        .await_task(&asked, &returned())
        .await
        .expect("the parked task ends");
    assert_eq!(text_of(&outcome), "confirmed: deploy");
    let slept = start(&client, "sleep", json!({"ms": 10})).await;
    let outcome = client
        .await_task(&slept, &returned())
        .await
        .expect("a new task ends");
    assert_eq!(text_of(&outcome), "slept 10 ms");
}

#[test]
fn serve_on_a_postgres_port_where_nothing_listens_exits_naming_the_store_without_its_password() {
    let port = mcp_tasks_testkit::wait::free_port();
    let url = format!("postgres://app:s3cret@127.0.0.1:{port}/x");
    let started = Instant::now();
    let output = run(&["serve", "--http", "127.0.0.1:0", "--store", &url]);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    // The CLI hides the whole user part, as it does in every line it logs.
    assert!(
        stderr.contains(&format!(
            "cannot open the task store postgres://***@127.0.0.1:{port}/x"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("PostgreSQL"), "{stderr}");
    assert!(
        !stderr.contains("s3cret") && !stdout.contains("s3cret"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("listening on"),
        "it never listened: {stdout}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
}
