//! Gateway tasks that outlive a deploy (`serve --upstream`,
//! `--upstream-url`): a task the upstream runs as a task of its own is
//! followed again by the gateway that takes it up next (the same gateway
//! started again on SQLite after a `kill -9` or a drain, another replica on
//! Redis after a drain), and the upstream runs it once; a call the
//! upstream answers itself is waited for by the drain, and what still runs
//! then is run again from the start when its tool is marked
//! `--rerun-on-restart`, or fails naming the upstream.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mcp_tasks::{TaskState, TaskStatus, TasksClient};
use serde_json::json;

use crate::serving::{Forms, Logs, Served, returned, start, text_of, until};
use crate::shared_store::Shared;
use crate::support::BIN;

/// The upstream's tasks in its SQLite file at `path`, by status.
fn upstream_tasks(path: &Path) -> Vec<(String, usize)> {
    let connection = rusqlite::Connection::open(path).expect("the upstream's store");
    let mut statement = connection
        .prepare("SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status")
        .expect("a query");
    statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                usize::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
            ))
        })
        .expect("rows")
        .map(|row| row.expect("a row"))
        .collect()
}

/// The upstream ran exactly one task, and it completed.
fn ran_once(path: &Path) {
    assert_eq!(
        upstream_tasks(path),
        [("completed".to_owned(), 1)],
        "the upstream's tasks"
    );
}

/// `mcp-tasks serve --stdio` on the SQLite file `db`: an upstream that makes
/// tasks of its own (its `long_job` resumable from its checkpoints).
fn stdio_upstream(db: &Path) -> String {
    format!(
        "{BIN} serve --stdio --store sqlite:{} --poll-interval 50",
        db.display()
    )
}

/// `mcp-tasks serve --http` on the SQLite file `upstream.db` in `dir`: an
/// upstream that makes tasks of its own and outlives the gateways in front
/// of it. The server and the file.
fn http_upstream(dir: &Path) -> (Served, std::path::PathBuf) {
    let db = dir.join("upstream.db");
    let store = format!("sqlite:{}", db.display());
    let upstream = Served::start(BIN, "127.0.0.1:0", &store, &["--poll-interval", "50"]);
    (upstream, db)
}

/// SIGKILLs every process whose command line names `what` (a gateway's
/// stdio upstream, orphaned by its gateway's SIGKILL, as a service manager
/// would kill the whole service).
fn kill_9_all(what: &Path) {
    let _ = Command::new("pkill")
        .args(["-9", "-f", &what.display().to_string()])
        .status();
}

/// Waits until the upstream's store at `db` holds a working task.
async fn upstream_working(client: &TasksClient<Forms>, task: &TaskState, db: &Path) {
    until(client, &task.id, Duration::from_secs(10), |_| {
        db.exists()
            && upstream_tasks(db)
                .iter()
                .any(|(status, n)| status == "working" && *n == 1)
    })
    .await;
}

/// The task `task` (made on another process) read to its end on `server`.
async fn ended_on(server: &Served, task: &TaskState) -> TaskState {
    let client = server.client().await;
    until(&client, &task.id, Duration::from_secs(30), |state| {
        state.status.is_terminal()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_on_sqlite_follows_its_upstream_task_again_after_a_kill_and_after_a_drain() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let upstream_db = dir.path().join("upstream.db");
    let upstream = stdio_upstream(&upstream_db);
    let flags = [
        "--upstream",
        upstream.as_str(),
        "--poll-interval",
        "50",
        "--drain-timeout",
        "1",
    ];
    let mut first = Served::start(BIN, "127.0.0.1:0", &store, &flags);
    let client = first.client().await;
    let job = start(&client, "long_job", json!({"steps": 8, "step_ms": 300})).await;
    upstream_working(&client, &job, &upstream_db).await;
    // The gateway and its upstream die at once, as a crashed service does.
    first.kill_9();
    kill_9_all(&upstream_db);

    let second = Served::start(BIN, first.address(), &store, &flags);
    let ended = ended_on(&second, &job).await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    let outcome = client.await_task(&ended, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 8 steps");
    ran_once(&upstream_db);

    // A drain (SIGTERM) with the upstream's task still running: left for
    // the next start, where it is followed again; the upstream's task is
    // not cancelled by the drain.
    let mut second = second;
    let client = second.client().await;
    let job = start(&client, "long_job", json!({"steps": 8, "step_ms": 300})).await;
    until(&client, &job.id, Duration::from_secs(10), |state| {
        state.status_message.as_deref() == Some("step 2 of 8")
    })
    .await;
    second.signal("TERM");
    assert_eq!(second.exit_code(Duration::from_secs(20)), Some(0));
    let third = Served::start(BIN, first.address(), &store, &flags);
    let ended = ended_on(&third, &job).await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    assert_eq!(
        upstream_tasks(&upstream_db),
        [("completed".to_owned(), 2)],
        "each upstream task ran once, to its end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_while_it_follows_an_http_upstream_task_completes_it_after_restart() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (upstream, upstream_db) = http_upstream(dir.path());
    let store = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let flags = [
        "--upstream-url",
        upstream.url.as_str(),
        "--poll-interval",
        "50",
    ];
    let mut first = Served::start(BIN, "127.0.0.1:0", &store, &flags);
    let client = first.client().await;
    let job = start(&client, "long_job", json!({"steps": 6, "step_ms": 300})).await;
    upstream_working(&client, &job, &upstream_db).await;
    first.kill_9();
    // Down for a while: the upstream's task goes on meanwhile.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let second = Served::start(BIN, first.address(), &store, &flags);
    let ended = ended_on(&second, &job).await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    let outcome = client.await_task(&ended, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 6 steps", "the upstream's result");
    ran_once(&upstream_db);
}

/// After a restart, the task followed again relays as before: the
/// upstream's input request (asked before the kill) is answered through the
/// gateway started again, and a cancel there reaches the upstream's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_followed_again_after_a_restart_relays_input_and_cancel() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (upstream, upstream_db) = http_upstream(dir.path());
    let store = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let flags = [
        "--upstream-url",
        upstream.url.as_str(),
        "--poll-interval",
        "50",
    ];
    let mut first = Served::start(BIN, "127.0.0.1:0", &store, &flags);
    let client = first.client().await;
    let asked = start(&client, "confirm_action", json!({"action": "deploy"})).await;
    until(&client, &asked.id, Duration::from_secs(10), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;
    let sleeping = start(&client, "sleep", json!({"ms": 600_000})).await;
    until(&client, &sleeping.id, Duration::from_secs(10), |_| {
        upstream_tasks(&upstream_db)
            .iter()
            .any(|(status, n)| status == "working" && *n == 1)
    })
    .await;
    first.kill_9();

    let second = Served::start(BIN, first.address(), &store, &flags);
    let client = second.client().await;
    let waiting = until(&client, &asked.id, Duration::from_secs(10), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;
    let (key, request) = waiting
        .input_requests
        .iter()
        .next()
        .expect("the upstream's input request, relayed again");
    assert_eq!(request["method"], "elicitation/create");
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    client
        .update(&asked.id, [(key.clone(), yes)].into())
        .await
        .expect("tasks/update");
    let outcome = client.await_task(&asked, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "confirmed: deploy");
    // The sleep's task, taken up again (its follower reached the upstream
    // long before now): cancelled here, cancelled upstream.
    assert_eq!(
        client.get(&sleeping.id).await.expect("tasks/get").status,
        TaskStatus::Working
    );
    client.cancel(&sleeping.id).await.expect("tasks/cancel");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let statuses = upstream_tasks(&upstream_db);
        if statuses.contains(&("cancelled".to_owned(), 1)) {
            assert_eq!(
                statuses,
                [("cancelled".to_owned(), 1), ("completed".to_owned(), 1)],
                "each upstream task once"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream's task was not cancelled: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `tools/call` lines of a `plain-upstream --call-log` file for `tool`.
fn calls_of(log: &Path, tool: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.split_whitespace().next() == Some(tool))
        .count()
}

/// `plain-upstream` (no tasks of its own: each call lives in the gateway),
/// logging each `tools/call` to `log`.
fn plain_upstream(log: &Path) -> String {
    format!(
        "{} --call-log {}",
        mcp_tasks_testkit::serve::beside_tests("plain-upstream").display(),
        log.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_plain_calls_then_reruns_the_marked_and_fails_the_others() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = format!("sqlite:{}", dir.path().join("gateway.db").display());
    let log = dir.path().join("calls.log");
    let upstream = plain_upstream(&log);
    let flags = [
        "--upstream",
        upstream.as_str(),
        "--rerun-on-restart",
        "prog*",
        "--poll-interval",
        "50",
        "--drain-timeout",
        "1",
    ];
    let mut first = Served::start(BIN, "127.0.0.1:0", &store, &flags);
    let client = first.client().await;
    let quick = start(&client, "progress", json!({"steps": 2, "ms": 200})).await;
    let long = start(&client, "progress", json!({"steps": 10, "ms": 300})).await;
    let hung = start(&client, "hang", json!({})).await;
    until(&client, &long.id, Duration::from_secs(10), |state| {
        state.status_message.as_deref() == Some("1/10")
    })
    .await;
    first.signal("TERM");
    assert_eq!(first.exit_code(Duration::from_secs(20)), Some(0));
    let second = Served::start(BIN, first.address(), &store, &flags);
    let client = second.client().await;
    // The drain waited for the quick call: it finished.
    let quick = client.get(&quick.id).await.expect("tasks/get");
    assert_eq!(quick.status, TaskStatus::Completed, "{quick:?}");
    // The marked one runs again from the start, saying so, once.
    let mut seen = Vec::new();
    let ended = until(&client, &long.id, Duration::from_secs(30), |state| {
        seen.extend(state.status_message.clone());
        state.status.is_terminal()
    })
    .await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?} {seen:?}");
    let outcome = client.await_task(&ended, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 10 steps");
    assert_eq!(
        calls_of(&log, "progress"),
        3,
        "the quick call once, the long one twice"
    );
    // Any other fails, naming the upstream and the restart.
    let failed = until(&client, &hung.id, Duration::from_secs(10), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(failed.status, TaskStatus::Failed, "{failed:?}");
    let outcome = client.await_task(&failed, &returned()).await.expect("ends");
    let mcp_tasks::TaskOutcome::Failed(failure) = outcome else {
        panic!("{outcome:?}");
    };
    let message = failure.error.message.clone();
    assert_eq!(failed.status_message.as_deref(), Some(message.as_str()));
    assert!(
        message.contains("the upstream server") && message.contains("not marked rerun-on-restart"),
        "{message}"
    );
    assert_eq!(calls_of(&log, "hang"), 1, "not run again");
}

/// A gateway replica on `redis` in the deployment `name`, in front of the
/// upstream `upstream` (its flags), draining for up to a second.
fn replica(redis: &Shared, name: &str, upstream: &[&str]) -> Served {
    replica_draining(redis, name, "1", upstream)
}

/// [`replica`] draining for up to `drain` seconds.
fn replica_draining(redis: &Shared, name: &str, drain: &str, upstream: &[&str]) -> Served {
    let namespace = redis.namespace(name);
    let mut flags = vec![
        namespace[0].as_str(),
        &namespace[1],
        "--lease-period",
        "2000",
        "--drain-timeout",
        drain,
        "--poll-interval",
        "50",
    ];
    flags.extend_from_slice(upstream);
    Served::start(BIN, "127.0.0.1:0", &redis.url(), &flags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_replicas_on_redis_hand_upstream_tasks_and_marked_calls_over_in_a_drain() {
    replicas_hand_tasks_over(Shared::redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_replicas_on_postgres_hand_upstream_tasks_and_marked_calls_over_in_a_drain() {
    replicas_hand_tasks_over(Shared::postgres()).await;
}

/// Two gateway replicas on the shared `redis` (or PostgreSQL): an upstream's
/// task and marked plain calls handed over in a drain, a marked call that
/// ends within the drain waited for.
async fn replicas_hand_tasks_over(redis: Shared) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (upstream, upstream_db) = http_upstream(dir.path());
    let over_http = ["--upstream-url", upstream.url.as_str()];
    let mut a = replica(&redis, "gateway-restart-test", &over_http);
    let b = replica(&redis, "gateway-restart-test", &over_http);
    let (on_a, on_b) = (a.client().await, b.client().await);
    // Both list the same tools.
    let listed = |replica: &Served| {
        let answer = crate::serve_oauth_issuer::list_tools(replica.address(), None);
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.body["result"]["tools"].clone()
    };
    assert_eq!(listed(&a), listed(&b), "tools/list on A and on B");
    let job = start(&on_a, "long_job", json!({"steps": 10, "step_ms": 300})).await;
    upstream_working(&on_b, &job, &upstream_db).await;
    a.signal("TERM");
    assert_eq!(a.exit_code(Duration::from_secs(20)), Some(0));
    // B follows the upstream's task to its end.
    let ended = until(&on_b, &job.id, Duration::from_secs(30), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    let outcome = on_b.await_task(&ended, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 10 steps");
    ran_once(&upstream_db);

    // A plain call marked re-runnable, cut off by A's drain: B runs it
    // again on its own upstream (each replica runs its own child), once.
    let log = dir.path().join("calls.log");
    let plain = plain_upstream(&log);
    let over_stdio = [
        "--upstream",
        plain.as_str(),
        "--rerun-on-restart",
        "progress",
    ];
    let mut a = replica(&redis, "gateway-rerun-test", &over_stdio);
    let b = replica(&redis, "gateway-rerun-test", &over_stdio);
    let (on_a, on_b) = (a.client().await, b.client().await);
    let call = start(&on_a, "progress", json!({"steps": 10, "ms": 300})).await;
    until(&on_b, &call.id, Duration::from_secs(10), |state| {
        state.status_message.as_deref() == Some("1/10")
    })
    .await;
    a.signal("TERM");
    assert_eq!(a.exit_code(Duration::from_secs(20)), Some(0));
    let ended = until(&on_b, &call.id, Duration::from_secs(30), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    assert_eq!(calls_of(&log, "progress"), 2, "run again once, on B");
    drop((a, b));

    // A drain of 8 s waits for a marked call of 5 s: it ends on A, is not
    // handed over after the hand-off grace (3 s) and is not run again.
    let mut a = replica_draining(&redis, "gateway-wait-test", "8", &over_stdio);
    let b = replica_draining(&redis, "gateway-wait-test", "8", &over_stdio);
    let (on_a, on_b) = (a.client().await, b.client().await);
    let call = start(&on_a, "progress", json!({"steps": 10, "ms": 500})).await;
    until(&on_b, &call.id, Duration::from_secs(10), |state| {
        state.status_message.as_deref() == Some("1/10")
    })
    .await;
    a.signal("TERM");
    assert_eq!(a.exit_code(Duration::from_secs(20)), Some(0));
    let ended = on_b.get(&call.id).await.expect("tasks/get");
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    assert_eq!(calls_of(&log, "progress"), 3, "run once more, on A alone");
}

/// A reload of one gateway replica (SIGHUP, its config file changed) leaves
/// the tasks of both alone: the one the other replica follows and its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_one_gateway_replica_disturbs_no_task() {
    let redis = Shared::redis();
    let dir = tempfile::tempdir().expect("a temp dir");
    let upstream = Served::start(BIN, "127.0.0.1:0", "memory", &["--poll-interval", "50"]);
    let config = |timeout: u32| {
        format!(
            "[[upstream]]\nname = \"jobs\"\nurl = \"{}\"\ncall-timeout = {timeout}\n",
            upstream.url
        )
    };
    let (file_a, file_b) = (dir.path().join("a.toml"), dir.path().join("b.toml"));
    std::fs::write(&file_a, config(600)).unwrap();
    std::fs::write(&file_b, config(600)).unwrap();
    let a = replica(
        &redis,
        "gateway-reload-test",
        &["--config", &file_a.display().to_string()],
    );
    // B's stderr kept, for its reload line.
    let logs = Logs::default();
    let (url, namespace) = (redis.url(), redis.namespace("gateway-reload-test"));
    let b_file = file_b.display().to_string();
    let b_args = [
        "--http",
        "127.0.0.1:0",
        "--store",
        url.as_str(),
        namespace[0].as_str(),
        namespace[1].as_str(),
        "--lease-period",
        "2000",
        "--poll-interval",
        "50",
        "--config",
        b_file.as_str(),
    ];
    let b = Served::spawn(BIN, &b_args, &[], Some(&logs));
    let (on_a, on_b) = (a.client().await, b.client().await);
    let on_a_task = start(&on_a, "jobs__long_job", json!({"steps": 6, "step_ms": 300})).await;
    let on_b_task = start(&on_b, "jobs__long_job", json!({"steps": 6, "step_ms": 300})).await;
    std::fs::write(&file_b, config(900)).unwrap();
    b.signal("HUP");
    let said = b.stderr_line("reloaded", Duration::from_secs(10));
    assert!(said.contains("replaced: jobs"), "{said}");
    for (client, task) in [(&on_b, &on_a_task), (&on_a, &on_b_task)] {
        let outcome = client.await_task(task, &returned()).await.expect("ends");
        assert_eq!(text_of(&outcome), "done: 6 steps");
    }
}
