//! PostgreSQL goes away and comes back (`PostgresServer::kill` is a SIGKILL
//! of the postmaster; `restart` starts it again on the same port and
//! files, with `fsync` and `synchronous_commit` on): nothing acknowledged
//! is lost, operations fail at once with an error of kind `Unavailable`
//! instead of hanging, and the same store object works again by itself,
//! its pool and its change feed reconnected; a tool parked for input on
//! the task runtime rides the outage out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::server::TaskRuntime;
use mcp_tasks::store::{
    Change, Modified, Principal, SharedStore, StoreErrorKind, TaskRecord, modify,
};
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TaskId, TaskOutcome, TaskStatus, Ttl};
use mcp_tasks::{InputMode, TaskState, TasksClient, UnixMillis};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};
use mcp_tasks_testkit::runtime_server::RuntimeServer;
use mcp_tasks_testkit::{Handler, in_process};
use serde_json::json;
use tokio::time::Instant;

/// The store's bound on one operation in these tests.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What a busy machine may add to an operation's bound (scheduling, not
/// PostgreSQL): an operation slower than `TIMEOUT + SLACK` hung.
const SLACK: Duration = Duration::from_secs(2);

async fn connect(server: &PostgresServer, schema: &str) -> SharedStore {
    let options = PostgresOptions::default()
        .with_schema(schema)
        .with_timeout(TIMEOUT);
    Arc::new(
        PostgresStore::connect_with(&server.url(), options)
            .await
            .expect("connect to the test's PostgreSQL"),
    )
}

/// Kills PostgreSQL (SIGKILL) off the runtime's threads.
async fn kill(server: PostgresServer) -> PostgresServer {
    tokio::task::spawn_blocking(move || {
        let mut server = server;
        server.kill();
        server
    })
    .await
    .expect("kill PostgreSQL")
}

/// Starts PostgreSQL again on its port and files, off the runtime's threads.
async fn restart(server: PostgresServer) -> PostgresServer {
    tokio::task::spawn_blocking(move || {
        let mut server = server;
        server.restart();
        server
    })
    .await
    .expect("restart PostgreSQL")
}

fn record(id: &TaskId) -> TaskRecord {
    TaskRecord::new(
        id.clone(),
        Principal::new("o"),
        UnixMillis::now(),
        Ttl::Unlimited,
        None,
    )
}

/// Waits until `done` holds, checking every 10 ms for at most `within`.
async fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What the workers of the burst saw.
#[derive(Default)]
struct Ledger {
    /// Creations that were acknowledged (returned `Ok`).
    created: Vec<TaskId>,
    /// Completions that were acknowledged, with the version they wrote.
    completed: Vec<(TaskId, u64)>,
    /// The failures: which operation, its error's kind and message, and
    /// how long it took.
    failures: Vec<(&'static str, StoreErrorKind, String, Duration)>,
    /// The slowest operation, failed or not.
    slowest: Duration,
    /// Creations acknowledged since the mark.
    created_since_mark: usize,
    /// Failures since the mark.
    failed_since_mark: usize,
}

impl Ledger {
    fn took(&mut self, took: Duration) {
        self.slowest = self.slowest.max(took);
    }

    fn failed(&mut self, what: &'static str, error: &mcp_tasks::store::StoreError, took: Duration) {
        self.failures
            .push((what, error.kind(), error.to_string(), took));
        self.failed_since_mark += 1;
    }

    fn mark(&mut self) {
        self.created_since_mark = 0;
        self.failed_since_mark = 0;
    }
}

/// One worker of the burst: creates tasks and completes every other one,
/// as fast as the store answers, until `stop`; a failure is noted and the
/// worker goes on with its next task.
async fn worker(
    store: SharedStore,
    number: usize,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let id = TaskId::new(format!("burst-{number}-{n:05}"));
        n += 1;
        let started = Instant::now();
        let created = store.create(record(&id)).await;
        let took = started.elapsed();
        let failed = {
            let mut ledger = ledger.lock().unwrap();
            ledger.took(took);
            match created {
                Ok(()) => {
                    ledger.created.push(id.clone());
                    ledger.created_since_mark += 1;
                    false
                }
                Err(error) => {
                    ledger.failed("create", &error, took);
                    true
                }
            }
        };
        if failed {
            // A pause, not a wait for anything: a refused connection fails
            // in microseconds.
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        if n % 2 == 1 {
            continue;
        }
        let started = Instant::now();
        let completed = modify(
            &*store,
            &id,
            &Change::Complete(json!({"content": [], "n": n})),
            UnixMillis::now(),
            Duration::from_secs(3600),
        )
        .await;
        let took = started.elapsed();
        let failed = {
            let mut ledger = ledger.lock().unwrap();
            ledger.took(took);
            match completed {
                Ok(Modified::Applied(record)) => {
                    ledger.completed.push((id, record.version()));
                    false
                }
                Ok(other) => panic!("completing a fresh task: {other:?}"),
                Err(error) => {
                    ledger.failed("complete", &error, took);
                    true
                }
            }
        };
        if failed {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// A burst of creations and completions from 8 workers on one store while
/// PostgreSQL is SIGKILLed and started again: every acknowledged creation
/// and completion is in the database afterwards; every operation during
/// the outage failed within the store's timeout with an `Unavailable`
/// error that names PostgreSQL; the same store object, never made again,
/// acknowledges new writes after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_across_a_sigkill_of_postgres_loses_nothing_acknowledged_and_the_store_reconnects()
{
    let server = PostgresServer::start();
    let store = connect(&server, "burst").await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|number| {
            tokio::spawn(worker(
                Arc::clone(&store),
                number,
                Arc::clone(&ledger),
                Arc::clone(&stop),
            ))
        })
        .collect();
    wait_for(
        "40 creations before the kill",
        Duration::from_secs(30),
        || ledger.lock().unwrap().created.len() >= 40,
    )
    .await;

    ledger.lock().unwrap().mark();
    let server = kill(server).await;
    let killed = Instant::now();
    // Every worker runs into the outage, several times, for a second at
    // least.
    wait_for("failures after the kill", Duration::from_secs(20), || {
        ledger.lock().unwrap().failed_since_mark >= 40 && killed.elapsed() >= Duration::from_secs(1)
    })
    .await;
    let down_for = killed.elapsed();
    let before_restart = ledger.lock().unwrap().failures.len();

    let server = restart(server).await;
    ledger.lock().unwrap().mark();
    let restarted = Instant::now();
    // The same store, never made again: its pool makes new connections.
    wait_for(
        "40 creations after the restart",
        Duration::from_secs(30),
        || ledger.lock().unwrap().created_since_mark >= 40,
    )
    .await;
    let back_after = restarted.elapsed();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("a worker");
    }

    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    assert!(
        before_restart >= 40,
        "the outage was seen: {before_restart} failures"
    );
    for (what, kind, message, took) in &ledger.failures {
        assert_eq!(*kind, StoreErrorKind::Unavailable, "{what}: {message}");
        assert!(message.contains("PostgreSQL"), "{what}: {message}");
        assert!(
            *took <= TIMEOUT + SLACK,
            "{what} failed only after {took:?}: {message}"
        );
    }
    // Not one operation hung: a completion is a read (maybe) and a write.
    assert!(
        ledger.slowest <= TIMEOUT * 2 + SLACK,
        "an operation took {:?}",
        ledger.slowest
    );

    // What PostgreSQL holds after recovering from its write-ahead log.
    let rows: HashMap<String, u64> = server
        .psql("SELECT id || ' ' || version FROM burst.tasks")
        .lines()
        .map(|line| {
            let (id, version) = line.split_once(' ').expect("id and version");
            (id.to_owned(), version.parse().expect("a version"))
        })
        .collect();
    for id in &ledger.created {
        assert!(
            rows.contains_key(id.expose()),
            "an acknowledged creation is lost ({} rows)",
            rows.len()
        );
    }
    for (id, version) in &ledger.completed {
        assert!(
            rows[id.expose()] >= *version,
            "an acknowledged completion is lost: version {} < {version}",
            rows[id.expose()]
        );
    }
    // And the store reads them too.
    for (id, _) in ledger.completed.iter().rev().take(20) {
        let record = store.get(id).await.expect("get").expect("the task");
        assert_eq!(*record.status(), TaskStatus::Completed);
    }
    eprintln!(
        "burst: {} created, {} completed, {} failures ({before_restart} while down for \
         {down_for:?}), back {back_after:?} after the restart, slowest operation {:?}",
        ledger.created.len(),
        ledger.completed.len(),
        ledger.failures.len(),
        ledger.slowest
    );
}

/// The change feed's LISTEN connection is lost with PostgreSQL and made
/// again by itself: `feed_gaps` goes up; then a change made on another
/// store reaches this store's feed and its read cache, which is live again
/// (it answers what it read) and drops what the change made stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_feed_listens_again_after_a_restart_and_its_changes_reach_the_read_cache() {
    let server = PostgresServer::start();
    let here = connect(&server, "feed").await;
    let other = connect(&server, "feed").await;
    let replicas = here.replicas().expect("a shared store");
    let mut gaps = replicas.feed_gaps();
    let gaps_before = *gaps.borrow_and_update();
    let cached = TaskId::new("cached");
    let changed = TaskId::new("changed");
    for id in [&cached, &changed] {
        here.create(record(id)).await.expect("create");
    }

    let server = kill(server).await;
    // The read cache may answer until the feed sees its connection close
    // (at once on a kill); then reads fail, promptly.
    let killed = Instant::now();
    let error = loop {
        let asked = Instant::now();
        match here.get(&changed).await {
            Err(error) => {
                assert!(
                    asked.elapsed() <= TIMEOUT + SLACK,
                    "took {:?}",
                    asked.elapsed()
                );
                break error;
            }
            Ok(_) => {
                assert!(
                    killed.elapsed() < TIMEOUT + SLACK,
                    "the cache still answered {:?} after the kill",
                    killed.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains("PostgreSQL"), "{error}");

    let server = restart(server).await;
    tokio::time::timeout(Duration::from_secs(20), gaps.changed())
        .await
        .expect("the feed listens again within 20 s of the restart")
        .expect("the store is alive");
    assert!(*gaps.borrow() > gaps_before, "the gap is counted");

    // The cache is live again: a record read now is answered from it, even
    // once its row is gone behind the store's back (no notification).
    let read = here.get(&cached).await.expect("get").expect("the task");
    assert_eq!(read.version(), 0);
    server.psql("DELETE FROM feed.tasks WHERE id = 'cached'");
    assert!(
        here.get(&cached).await.expect("get").is_some(),
        "answered from the cache"
    );

    // A change on the other store is heard here, and the stale record is
    // dropped from the cache.
    assert_eq!(
        here.get(&changed)
            .await
            .expect("get")
            .expect("task")
            .version(),
        0
    );
    let mut feed = here.changes();
    let modified = modify(
        &*other,
        &changed,
        &Change::StatusMessage("after the restart".into()),
        UnixMillis::now(),
        Duration::from_secs(3600),
    )
    .await
    .expect("modify on the other store");
    assert!(matches!(modified, Modified::Applied(_)), "{modified:?}");
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match feed.recv().await {
                Ok(id) if id == changed => return,
                Ok(_) => {}
                Err(error) => panic!("the feed: {error}"),
            }
        }
    })
    .await;
    assert!(heard.is_ok(), "the change was not heard within 10 s");
    let fresh = here.get(&changed).await.expect("get").expect("the task");
    assert_eq!(fresh.version(), 1, "the cache dropped the stale record");
    assert_eq!(fresh.status_message(), Some("after the restart"));
}

/// A runtime on the store, its `ask` tool parked for input, and a client of
/// it in process.
async fn runtime(server: &PostgresServer, schema: &str) -> (TaskRuntime, TasksClient<Handler>) {
    let runtime = TaskRuntime::builder(connect(server, schema).await)
        .with_poll_interval(Duration::from_millis(20))
        .with_lease_period(LEASE)
        .build();
    let client = in_process(RuntimeServer::new(runtime.clone())).await;
    (runtime, client)
}

/// The runtime's lease period: the outage below is shorter.
const LEASE: Duration = Duration::from_secs(10);

async fn ask(client: &TasksClient<Handler>) -> TaskState {
    match client
        .call_tool("ask", (), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("ask should answer with a task, got {other:?}"),
    }
}

/// Reads task `id` every 20 ms until `done` holds, for at most `within`;
/// a read that fails (PostgreSQL still starting) is tried again until then.
async fn until(
    client: &TasksClient<Handler>,
    id: &TaskId,
    within: Duration,
    done: impl Fn(&TaskState) -> bool,
) -> TaskState {
    let deadline = Instant::now() + within;
    loop {
        let last = match client.get(id).await {
            Ok(state) if done(&state) => return state,
            Ok(state) => format!("{:?} {:?}", state.status, state.status_message),
            Err(error) => format!("tasks/get: {error}"),
        };
        assert!(Instant::now() < deadline, "not within {within:?}: {last}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A tool parked in `request_input` when PostgreSQL is killed: while it is
/// down, tasks/get and tools/call answer a clear JSON-RPC error at once;
/// once it is back (sooner than the lease period), the same runtime
/// answers again, the parked task is intact, and the tool gets the answer
/// sent after the outage and completes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_waiting_for_input_rides_out_an_outage_shorter_than_its_lease() {
    let server = PostgresServer::start();
    let (_runtime, client) = runtime(&server, "parked").await;
    let asked = ask(&client).await;
    until(&client, &asked.id, Duration::from_secs(10), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;

    let server = kill(server).await;
    let killed = Instant::now();
    // The cached state may be answered until the feed sees the kill.
    let error = loop {
        let reading = Instant::now();
        match client.get(&asked.id).await {
            Err(error) => {
                assert!(
                    reading.elapsed() <= TIMEOUT + SLACK,
                    "took {:?}",
                    reading.elapsed()
                );
                break error;
            }
            Ok(state) => {
                assert_eq!(state.status, TaskStatus::InputRequired, "the cached state");
                assert!(
                    killed.elapsed() < TIMEOUT + SLACK,
                    "still answered {:?} after the kill",
                    killed.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    assert!(
        error
            .to_string()
            .contains("the task store cannot be reached"),
        "{error}"
    );
    let calling = Instant::now();
    let call = client.call_tool("ask", (), CallOptions::default()).await;
    let error = call.expect_err("tools/call fails while PostgreSQL is down");
    assert!(
        error
            .to_string()
            .contains("the task store cannot be reached"),
        "{error}"
    );
    assert!(
        calling.elapsed() <= TIMEOUT * 2 + SLACK,
        "tools/call took {:?}",
        calling.elapsed()
    );

    let server = restart(server).await;
    let down_for = killed.elapsed();
    assert!(
        down_for < LEASE,
        "the outage ({down_for:?}) is shorter than the lease"
    );
    // Recovered by itself: the same runtime and store, no reconnect call.
    let back = until(&client, &asked.id, Duration::from_secs(20), |_| true).await;
    assert_eq!(back.status, TaskStatus::InputRequired, "{back:?}");
    assert!(back.input_requests.contains_key("name"), "{back:?}");
    let answer = json!({"action": "accept", "content": {"name": "after"}});
    client
        .update(&asked.id, [("name".to_owned(), answer)].into())
        .await
        .expect("tasks/update");
    let options = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_input(InputMode::Return);
    match client
        .await_task(&asked, &options)
        .await
        .expect("the task ends")
    {
        TaskOutcome::Completed(result) => {
            assert_eq!(mcp_tasks_testkit::calls::text(&result), "Hello, after!");
        }
        other => panic!("the parked tool should complete, got {other:?}"),
    }
    // And new calls work.
    let fresh = ask(&client).await;
    until(&client, &fresh.id, Duration::from_secs(10), |state| {
        state.status == TaskStatus::InputRequired
    })
    .await;
    drop(server);
}

/// PostgreSQL's processes (the postmaster and every child of it) stopped
/// with SIGSTOP: a server that accepts TCP connections (the kernel does)
/// and answers nothing, as one behind a dead network path or on a host
/// that froze. Continued (SIGCONT) when dropped, so that a failing test
/// leaves no stopped process behind.
struct Frozen {
    pids: Vec<String>,
}

impl Frozen {
    fn freeze(server: &PostgresServer) -> Self {
        let pid_file = std::fs::read_to_string(server.dir().join("data/postmaster.pid"))
            .expect("postmaster.pid");
        let postmaster = pid_file.lines().next().expect("its pid").trim().to_owned();
        // The postmaster first, so that it forks nothing after the list.
        signal("STOP", std::slice::from_ref(&postmaster));
        let children: Vec<String> = std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let pid = entry.file_name().to_str()?.to_owned();
                let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
                // `pid (comm) state ppid ...`: comm may hold spaces.
                let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
                (ppid == postmaster).then_some(pid)
            })
            .collect();
        assert!(!children.is_empty(), "PostgreSQL has backends");
        signal("STOP", &children);
        let mut pids = vec![postmaster];
        pids.extend(children);
        Self { pids }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal("CONT", &self.pids);
    }
}

fn signal(name: &str, pids: &[String]) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids)
        .status()
        .expect("kill runs");
    // A child may have exited meanwhile: that is not a failure.
    let _ = status;
}

/// PostgreSQL stops answering without closing anything: every operation
/// fails within the store's timeout, as `Unavailable`, instead of hanging;
/// the change feed's ping notices the silent connection, so the read cache
/// stops answering; once PostgreSQL answers again the same store works,
/// and its feed listens again (`feed_gaps` goes up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_that_stops_answering_fails_operations_within_the_timeout_and_the_store_recovers()
 {
    let server = PostgresServer::start();
    let store = connect(&server, "frozen").await;
    let mut gaps = store.replicas().expect("a shared store").feed_gaps();
    let gaps_before = *gaps.borrow_and_update();
    let known = TaskId::new("known");
    store.create(record(&known)).await.expect("create");

    let frozen = Frozen::freeze(&server);
    let frozen_at = Instant::now();
    // Nothing closes: a read the cache cannot answer, and writes, wait for
    // PostgreSQL until the timeout and no longer.
    for attempt in 0..2 {
        let asked = Instant::now();
        let error = store
            .get(&TaskId::new("absent"))
            .await
            .expect_err("PostgreSQL answers nothing");
        let took = asked.elapsed();
        assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{error}");
        assert!(error.to_string().contains("PostgreSQL"), "{error}");
        assert!(took <= TIMEOUT + SLACK, "read {attempt} took {took:?}");
        let asked = Instant::now();
        let error = store
            .create(record(&TaskId::new(format!("frozen-{attempt}"))))
            .await
            .expect_err("PostgreSQL answers nothing");
        let took = asked.elapsed();
        assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{error}");
        assert!(took <= TIMEOUT + SLACK, "creation {attempt} took {took:?}");
    }
    // Neither connecting a new store nor `admin migrate` waits for ever.
    let asked = Instant::now();
    let options = PostgresOptions::default()
        .with_schema("frozen")
        .with_timeout(TIMEOUT);
    let connecting = tokio::time::timeout(
        TIMEOUT * 2 + SLACK,
        PostgresStore::connect_with(&server.url(), options),
    )
    .await
    .expect("connecting gives up within its timeout");
    let error = connecting.expect_err("PostgreSQL answers nothing");
    assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains("PostgreSQL"), "{error}");
    assert!(
        asked.elapsed() <= TIMEOUT + SLACK,
        "took {:?}",
        asked.elapsed()
    );
    let asked = Instant::now();
    let migrating = tokio::time::timeout(
        Duration::from_secs(20),
        PostgresStore::migrate(&server.url(), "frozen"),
    )
    .await
    .expect("admin migrate gives up on a silent PostgreSQL within 20 s");
    let error = migrating.expect_err("PostgreSQL answers nothing");
    assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{error}");
    assert!(error.to_string().contains("PostgreSQL"), "{error}");
    assert!(
        asked.elapsed() <= TIMEOUT + SLACK,
        "took {:?}",
        asked.elapsed()
    );
    // The feed's ping finds the connection silent: the cache stops
    // answering what it knew.
    let deadline = frozen_at + Duration::from_secs(20);
    let error = loop {
        match store.get(&known).await {
            Err(error) => break error,
            Ok(_) => {
                assert!(
                    Instant::now() < deadline,
                    "the cache still answers 20 s after PostgreSQL went silent"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{error}");

    drop(frozen);
    tokio::time::timeout(Duration::from_secs(20), gaps.changed())
        .await
        .expect("the feed listens again within 20 s of PostgreSQL answering")
        .expect("the store is alive");
    assert!(*gaps.borrow() > gaps_before);
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = TaskId::new("after");
    while let Err(error) = store.create(record(&after)).await {
        assert!(
            Instant::now() < deadline,
            "no creation works again: {error}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let read = store.get(&known).await.expect("get").expect("the task");
    assert_eq!(read.version(), 0);
}
