//! Three `mcp-tasks serve` processes over HTTP on one real `redis-server`,
//! and the same on one real PostgreSQL, as replicas behind one address
//! would be: a task made on A is read and
//! answered on B, cancelled on C, heard on C while it runs on A; A is
//! killed with SIGKILL mid-task, and its tasks end honestly within one lease
//! period, read from B (the resumable one runs again elsewhere). And two
//! task gateways (`serve --upstream`, each with its own upstream child) as
//! replicas on one Redis: the upstream call runs on A, its input is
//! answered and its task cancelled on B.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_tasks::store::STOPPED_MESSAGE;
use mcp_tasks::{CallOptions, ListenMode, TaskId, TaskState, TaskStatus, TasksClient};
use serde_json::json;

use crate::serving::{Forms, Served as Replica, args, returned, start, text_of, until};
use crate::shared_store::Shared;
use crate::support::BIN;

/// The lease period of the replicas.
const LEASE: Duration = Duration::from_secs(4);

/// A replica: `mcp-tasks serve --http` on the shared `store`.
fn replica(store: &Shared) -> Replica {
    replica_with(store, "replicas-test", &[])
}

/// [`replica`] in the deployment `name` (a key prefix or a schema of its
/// own) with further flags.
fn replica_with(store: &Shared, name: &str, extra: &[&str]) -> Replica {
    let lease = LEASE.as_millis().to_string();
    let namespace = store.namespace(name);
    let mut flags = vec![
        namespace[0].as_str(),
        &namespace[1],
        "--lease-period",
        &lease,
    ];
    flags.extend_from_slice(extra);
    // Polling would take a minute: whatever is seen sooner was heard.
    flags.extend_from_slice(&["--poll-interval", "60000"]);
    Replica::start(BIN, "127.0.0.1:0", &store.url(), &flags)
}

/// SIGKILLs `replica` while it runs task `id`, and reads the task through
/// `other` until it ends, for at most two lease periods: the task failed
/// with [`STOPPED_MESSAGE`], and how long after the kill it ended.
async fn killed_mid_task(
    replica: &mut Replica,
    other: &TasksClient<Forms>,
    id: &TaskId,
) -> (TaskState, Duration) {
    replica.kill_9();
    let killed = Instant::now();
    let failed = until(other, id, LEASE * 2, |state| state.status.is_terminal()).await;
    let took = killed.elapsed();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.status_message.as_deref(), Some(STOPPED_MESSAGE));
    (failed, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_one_redis_share_tasks_and_survive_a_sigkill() {
    three_replicas_share_tasks_and_survive_a_sigkill(Shared::redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_one_postgres_share_tasks_and_survive_a_sigkill() {
    three_replicas_share_tasks_and_survive_a_sigkill(Shared::postgres()).await;
}

async fn three_replicas_share_tasks_and_survive_a_sigkill(store: Shared) {
    let mut a = replica(&store);
    let b = replica(&store);
    let c = replica(&store);
    let (on_a, on_b, on_c) = (a.client().await, b.client().await, c.client().await);

    // Made on A, read and answered on B: the tool parked on A goes on.
    let asked = start(&on_a, "confirm_action", json!({"action": "deploy"})).await;
    let waiting = until(&on_b, &asked.id, Duration::from_secs(5), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;
    assert!(waiting.input_requests.contains_key("confirm"));
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    on_b.update(&asked.id, [("confirm".to_owned(), yes)].into())
        .await
        .expect("tasks/update on B");
    let outcome = on_b
        .await_task(&asked, &returned().with_listen(ListenMode::Required))
        .await
        .expect("the task ends");
    assert_eq!(text_of(&outcome), "confirmed: deploy");

    // Cancelled on C while it runs on A.
    let sleeping = start(&on_a, "sleep", json!({"ms": 600_000})).await;
    on_c.cancel(&sleeping.id).await.expect("tasks/cancel on C");
    let cancelled = until(&on_b, &sleeping.id, Duration::from_secs(5), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(cancelled.status, TaskStatus::Cancelled);

    // Heard on C while it runs on A: every step, with polls a minute apart.
    let job = start(&on_a, "long_job", json!({"steps": 3, "step_ms": 300})).await;
    let heard = Arc::new(Mutex::new(Vec::new()));
    let seen = heard.clone();
    let listening = returned()
        .with_listen(ListenMode::Required)
        .with_observer(move |state| {
            if let Some(message) = &state.status_message {
                seen.lock().unwrap().push(message.clone());
            }
        });
    let outcome = on_c.await_task(&job, &listening).await.expect("heard on C");
    assert_eq!(text_of(&outcome), "done: 3 steps");
    let heard = heard.lock().unwrap().clone();
    for step in ["step 1 of 3", "step 2 of 3", "step 3 of 3"] {
        assert!(
            heard.iter().any(|m| m == step),
            "{step:?} not heard: {heard:?}"
        );
    }

    // A dies mid-task: its tasks end within one lease period, read from B.
    let stuck = start(&on_a, "sleep", json!({"ms": 600_000})).await;
    let resumable = start(&on_a, "long_job", json!({"steps": 4, "step_ms": 500})).await;
    until(&on_b, &resumable.id, Duration::from_secs(5), |state| {
        state.status_message.as_deref() == Some("step 1 of 4")
    })
    .await;
    let (failed, took) = killed_mid_task(&mut a, &on_b, &stuck.id).await;
    let error = failed.error.as_ref().expect("a failed task has its error");
    assert_eq!(error.message, STOPPED_MESSAGE);
    // One lease period, and the time of a few polls of B.
    assert!(
        took <= LEASE + Duration::from_millis(300),
        "the task of the killed replica ended after {took:?}"
    );
    // The resumable job runs again on B or C, from its checkpoint, and completes.
    let outcome = on_b
        .await_task(&resumable, &returned())
        .await
        .expect("the resumed job ends");
    assert_eq!(text_of(&outcome), "done: 4 steps");
}

/// How many tasks of the SQLite store at `path` have `status`.
fn upstream_tasks(path: &std::path::Path, status: &str) -> usize {
    let Ok(connection) = rusqlite::Connection::open(path) else {
        return 0;
    };
    connection
        .query_row(
            "SELECT count(*) FROM tasks WHERE status = ?1",
            [status],
            |row| row.get::<_, i64>(0),
        )
        .map_or(0, |count| usize::try_from(count).unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateway_replicas_on_one_redis_relay_each_others_callers() {
    let redis = Shared::redis();
    let folder = tempfile::tempdir().unwrap();
    // Each gateway runs its own upstream, `mcp-tasks serve --stdio` on a
    // SQLite file of its own, so what the upstream did can be read after.
    let upstream_db = |name: &str| folder.path().join(format!("{name}.db"));
    let upstream = |db: &std::path::Path| {
        format!(
            "{BIN} serve --stdio --store sqlite:{} --poll-interval 50",
            db.display()
        )
    };
    let (a_db, b_db) = (upstream_db("upstream-a"), upstream_db("upstream-b"));
    let (a_upstream, b_upstream) = (upstream(&a_db), upstream(&b_db));
    let name = "gateway-replicas-test";
    let mut a = replica_with(&redis, name, &["--upstream", &a_upstream]);
    let b = replica_with(&redis, name, &["--upstream", &b_upstream]);
    let (on_a, on_b) = (a.client().await, b.client().await);
    let stranger = b.client_as(Some("someone-else")).await;

    // Made on A (its upstream asks), read and answered on B: the answer
    // reaches the upstream call on A, and the result is read on B.
    let asked = start(&on_a, "confirm_action", json!({"action": "deploy"})).await;
    let waiting = until(&on_b, &asked.id, Duration::from_secs(10), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;
    let (key, request) = waiting
        .input_requests
        .iter()
        .next()
        .expect("the upstream's input request");
    assert_eq!(request["method"], "elicitation/create");
    // Another caller sees nothing of it, on either replica.
    for replica in [&stranger, &a.client_as(Some("someone-else")).await] {
        let error = replica.get(&asked.id).await.unwrap_err();
        assert_eq!(error.code(), Some(-32602), "{error}");
    }
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    on_b.update(&asked.id, [(key.clone(), yes)].into())
        .await
        .expect("tasks/update on B");
    let outcome = on_b
        .await_task(&asked, &returned())
        .await
        .expect("the task ends");
    assert_eq!(text_of(&outcome), "confirmed: deploy");
    assert_eq!(upstream_tasks(&a_db, "completed"), 1, "ran on A's upstream");
    assert_eq!(upstream_tasks(&b_db, "completed"), 0, "not on B's");

    // Cancelled on B while A's upstream runs it: A cancels its upstream task.
    let sleeping = start(&on_a, "sleep", json!({"ms": 600_000})).await;
    until(&on_b, &sleeping.id, Duration::from_secs(10), |_| {
        upstream_tasks(&a_db, "working") == 1
    })
    .await;
    on_b.cancel(&sleeping.id).await.expect("tasks/cancel on B");
    let cancelled = until(&on_b, &sleeping.id, Duration::from_secs(5), |state| {
        state.status.is_terminal()
    })
    .await;
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    let deadline = Instant::now() + Duration::from_secs(5);
    while upstream_tasks(&a_db, "cancelled") != 1 {
        assert!(
            Instant::now() < deadline,
            "A's upstream task was not cancelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A dies mid-call: B takes its task up within one lease period, read
    // from B, but cannot follow the upstream's task: it lived in A's own
    // upstream child (a relayed call is not repeated elsewhere).
    let stuck = start(&on_a, "sleep", json!({"ms": 600_000})).await;
    until(&on_b, &stuck.id, Duration::from_secs(10), |_| {
        upstream_tasks(&a_db, "working") == 1
    })
    .await;
    a.kill_9();
    let killed = Instant::now();
    let failed = until(&on_b, &stuck.id, LEASE * 2, |state| {
        state.status.is_terminal()
    })
    .await;
    let took = killed.elapsed();
    assert_eq!(failed.status, TaskStatus::Failed);
    let message = failed.status_message.unwrap_or_default();
    assert!(
        message.contains("could not take it up again: it does not know the task"),
        "{message}"
    );
    assert!(
        took <= LEASE + Duration::from_millis(300),
        "the task of the killed gateway ended after {took:?}"
    );
    // B goes on serving, on its own upstream.
    let job = start(&on_b, "long_job", json!({"steps": 2, "step_ms": 50})).await;
    let outcome = on_b.await_task(&job, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 2 steps");
}

/// The status message of a task whose turn came on its replica while all
/// replicas together are at `--max-running`.
const WAITING_FOR_SEATS: &str = "queued: waiting for a free slot on the servers";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_redis_hold_the_running_bound_and_the_cap_together() {
    two_replicas_hold_the_running_bound_and_the_cap_together(Shared::redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_postgres_hold_the_running_bound_and_the_cap_together() {
    two_replicas_hold_the_running_bound_and_the_cap_together(Shared::postgres()).await;
}

async fn two_replicas_hold_the_running_bound_and_the_cap_together(store: Shared) {
    let flags = [
        "--max-running",
        "2",
        "--max-tasks-per-caller",
        "4",
        "--quota-by-header",
    ];
    let mut a = replica_with(&store, "admission-test", &flags);
    let b = replica_with(&store, "admission-test", &flags);
    let (alice_a, alice_b) = (
        a.client_as(Some("Bearer alice")).await,
        b.client_as(Some("Bearer alice")).await,
    );
    let bob_b = b.client_as(Some("Bearer bob")).await;

    // Two tools run on A: the bound of both is reached, so B's task waits.
    for _ in 0..2 {
        start(&alice_a, "sleep", json!({"ms": 60_000})).await;
    }
    let on_b = start(&alice_b, "long_job", json!({"steps": 1, "step_ms": 60_000})).await;
    until(&alice_b, &on_b.id, Duration::from_secs(5), |state| {
        state.status_message.as_deref() == Some(WAITING_FOR_SEATS)
    })
    .await;
    let bobs = start(&bob_b, "long_job", json!({"steps": 1, "step_ms": 60_000})).await;

    // Alice's cap of 4 counts her tasks on both replicas: 3, then 4, then refused.
    let fourth = start(&alice_b, "long_job", json!({"steps": 1, "step_ms": 60_000})).await;
    let refused = alice_a
        .call_tool("sleep", args(json!({"ms": 10})), CallOptions::default())
        .await
        .expect_err("a fifth unfinished task is refused");
    let data = refused.rpc_error().and_then(|error| error.data.clone());
    assert_eq!(
        data.as_ref()
            .map(|data| (&data["reason"], &data["maxTasksPerCaller"])),
        Some((&json!("callerTasks"), &json!(4))),
        "{refused}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    for id in [&on_b.id, &fourth.id] {
        let state = alice_b.get(id).await.expect("tasks/get");
        assert_ne!(
            state.status_message.as_deref(),
            Some("step 1 of 1"),
            "ran past the bound"
        );
    }

    // A dies: its seats come back once B claims its lease, and two of B's
    // three waiting tasks start, never three.
    a.kill_9();
    let started = Instant::now();
    until(&alice_b, &on_b.id, LEASE * 2, |state| {
        state.status_message.as_deref() == Some("step 1 of 1")
    })
    .await;
    let returned_after = started.elapsed();
    eprintln!("seats came back {returned_after:?} after the kill (lease {LEASE:?})");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut running = 1;
    for (client, id) in [(&bob_b, &bobs.id), (&alice_b, &fourth.id)] {
        let state = client.get(id).await.expect("tasks/get");
        if state.status_message.as_deref() == Some("step 1 of 1") {
            running += 1;
        } else {
            // Waiting here (B's own two slots are taken) or for a seat.
            let message = state.status_message.unwrap_or_default();
            assert!(message.starts_with("queued"), "{message}");
        }
    }
    assert_eq!(running, 2, "the bound holds after the takeover");
    assert!(
        returned_after < LEASE * 2,
        "seats returned {returned_after:?} after the kill (lease {LEASE:?})"
    );
}
