//! Seat pools shared by replicas: two stores on one `redis-server` (two
//! replicas, each with its own connections, subscription and runner) race
//! for seats, and a replica that stops renewing its lease gives its seats
//! back once another claims the lease; through a runtime, a task frees
//! only the seats it may hold (none when it took none), with the write of
//! its outcome (no script of its own). The single-store contract runs in
//! `contract.rs`.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::server::AdmissionLimits;
use mcp_tasks::store::{Principal, RunnerId, SeatId, SeatPool, Seating, SharedStore};
use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;

use crate::support::{bounded_replica, calls, client, start, status, store, until};

/// How long a test waits for news it expects (generous: nothing is timed).
const NEWS: Duration = Duration::from_secs(10);

async fn leased(store: &SharedStore, name: &str, hold: Duration) -> RunnerId {
    let runner = RunnerId::new(name);
    replicas(store)
        .acquire(&runner, hold)
        .await
        .expect("acquire");
    runner
}

fn replicas(store: &SharedStore) -> &dyn mcp_tasks::store::Replicas {
    store.replicas().expect("a Redis store has replicas")
}

async fn taken(store: &SharedStore, pool: &SeatPool) -> u64 {
    replicas(store)
        .seats_taken(pool)
        .await
        .expect("seats_taken")
}

/// Every key under `prefix`.
async fn keys(url: &str, prefix: &str) -> Vec<String> {
    let client = redis::Client::open(url).expect("url");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut connection)
        .await
        .expect("KEYS");
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_for_seats_never_pass_the_limits() {
    let redis = RedisServer::start();
    let a = store(&redis.url(), "race:").await;
    let b = store(&redis.url(), "race:").await;
    let runner_a = leased(&a, "runner-a", Duration::from_secs(60)).await;
    let runner_b = leased(&b, "runner-b", Duration::from_secs(60)).await;
    let running = SeatPool::running();
    let tool = SeatPool::tool("slow");
    // Rounds of 100 concurrent takes (each in running of 7 and, for every
    // other one, the tool of 3), then 100 concurrent frees of what was taken.
    for round in 0..5 {
        let mut takers = Vec::new();
        for n in 0..100 {
            let (store, runner) = if n % 2 == 0 {
                (Arc::clone(&a), runner_a.clone())
            } else {
                (Arc::clone(&b), runner_b.clone())
            };
            let mut pools = vec![(running.clone(), 7)];
            if n % 4 < 2 {
                pools.push((tool.clone(), 3));
            }
            takers.push(tokio::spawn(async move {
                let seat = SeatId::new(format!("{round}-{n}"));
                let seating = replicas(&store)
                    .take_seats(&seat, &runner, &pools)
                    .await
                    .expect("take_seats");
                (seat, pools, seating)
            }));
        }
        let mut seated = Vec::new();
        for taker in takers {
            let (seat, pools, seating) = taker.await.expect("join");
            match seating {
                Seating::Seated => seated.push((seat, pools)),
                Seating::Full(_) => {}
                Seating::NoLease => panic!("both runners hold a lease"),
                Seating::Existing => panic!("a take never finds an idempotency key"),
            }
        }
        let with_tool = seated.iter().filter(|(_, pools)| pools.len() == 2).count();
        assert_eq!(
            seated.len(),
            7,
            "round {round}: running is filled, never passed"
        );
        assert!(
            with_tool <= 3,
            "round {round}: {with_tool} seats in the tool's pool of 3"
        );
        assert_eq!(taken(&a, &running).await, 7);
        assert_eq!(taken(&b, &tool).await, with_tool as u64);
        let mut freers = Vec::new();
        for (n, (seat, pools)) in seated.into_iter().enumerate() {
            let store = Arc::clone(if n % 2 == 0 { &a } else { &b });
            freers.push(tokio::spawn(async move {
                let pools: Vec<SeatPool> = pools.into_iter().map(|(pool, _)| pool).collect();
                replicas(&store)
                    .free_seats(&seat, &pools)
                    .await
                    .expect("free_seats");
            }));
        }
        for freer in freers {
            freer.await.expect("join");
        }
        assert_eq!(taken(&a, &running).await, 0);
        assert_eq!(taken(&b, &tool).await, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_stops_renewing_gives_its_seats_back_once_its_lease_is_claimed() {
    let redis = RedisServer::start();
    let survivor = store(&redis.url(), "dead:").await;
    let live = leased(&survivor, "survivor", Duration::from_secs(60)).await;
    let running = SeatPool::running();
    let caller = SeatPool::caller(&Principal::new("someone"));
    let pools = [(running.clone(), 2), (caller.clone(), 5)];
    {
        // The replica that dies: its store is dropped, its lease never renewed.
        let doomed = store(&redis.url(), "dead:").await;
        let runner = leased(&doomed, "doomed", Duration::from_millis(300)).await;
        for seat in ["d1", "d2"] {
            let seating = replicas(&doomed)
                .take_seats(&SeatId::new(seat), &runner, &pools)
                .await
                .expect("take_seats");
            assert_eq!(seating, Seating::Seated);
        }
    }
    let mine = SeatId::new("s1");
    let take = || async {
        replicas(&survivor)
            .take_seats(&mine, &live, &pools)
            .await
            .expect("take_seats")
    };
    assert_eq!(
        take().await,
        Seating::Full(0),
        "the dead replica's seats count"
    );
    let mut freed = replicas(&survivor).seats_freed();
    let _ = freed.borrow_and_update();
    // The survivor's reaper claims the lease once it ran out, as the
    // runtime's does every quarter lease period; the seats then come back.
    let deadline = tokio::time::Instant::now() + NEWS;
    loop {
        replicas(&survivor).orphans(16).await.expect("orphans");
        if taken(&survivor, &running).await == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the seats of a lease that ran out did not come back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(taken(&survivor, &caller).await, 0);
    tokio::time::timeout(NEWS, freed.changed())
        .await
        .expect("the claim says seats were freed")
        .expect("the store is alive");
    assert_eq!(take().await, Seating::Seated);
    replicas(&survivor)
        .free_seats(&mine, &[running, caller])
        .await
        .expect("free_seats");
    // Nothing is left behind for pools and runners without seats.
    let left = keys(&redis.url(), "dead:").await;
    assert!(
        left.iter()
            .all(|key| !key.starts_with("dead:seats:") && !key.starts_with("dead:held:")),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seats_freed_on_one_replica_are_news_on_another_and_pools_are_keyed_by_a_hash() {
    let redis = RedisServer::start();
    let a = store(&redis.url(), "news:").await;
    let b = store(&redis.url(), "news:").await;
    let runner = leased(&a, "runner-a", Duration::from_secs(60)).await;
    let secret = "caller:token-label-or-hash";
    let pools = [(SeatPool::new(secret), 1), (SeatPool::queued(), 10)];
    let seat = SeatId::new("q1");
    let seating = replicas(&a)
        .take_seats(&seat, &runner, &pools)
        .await
        .expect("take_seats");
    assert_eq!(seating, Seating::Seated);
    let held = keys(&redis.url(), "news:").await;
    let seat_keys: Vec<&String> = held
        .iter()
        .filter(|key| key.starts_with("news:seats:"))
        .collect();
    assert_eq!(seat_keys.len(), 2, "{held:?}");
    assert!(
        held.iter().all(|key| !key.contains("token-label")),
        "a pool's name is not in its key: {held:?}"
    );
    let mut on_b = replicas(&b).seats_freed();
    let _ = on_b.borrow_and_update();
    // A move that frees `queued` (and takes a seat held already) is news too.
    let moved = replicas(&a)
        .move_seats(&seat, &runner, &pools[..1], &[SeatPool::queued()])
        .await
        .expect("move_seats");
    assert_eq!(moved, Seating::Seated);
    tokio::time::timeout(NEWS, on_b.changed())
        .await
        .expect("B hears that A freed a seat")
        .expect("the store is alive");
    assert_eq!(taken(&b, &SeatPool::queued()).await, 0);
    assert_eq!(taken(&b, &SeatPool::new(secret)).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_with_seats_racing_on_two_replicas_create_only_what_the_limit_admits() {
    use mcp_tasks::store::TaskRecord;
    use mcp_tasks::{TaskId, Ttl, UnixMillis};

    let redis = RedisServer::start();
    let a = store(&redis.url(), "create:").await;
    let b = store(&redis.url(), "create:").await;
    let runner_a = leased(&a, "runner-a", Duration::from_secs(60)).await;
    let runner_b = leased(&b, "runner-b", Duration::from_secs(60)).await;
    let caller = SeatPool::caller(&crate::support::process());
    let mut creators = Vec::new();
    for n in 0..60 {
        let (store, runner) = if n % 2 == 0 {
            (Arc::clone(&a), runner_a.clone())
        } else {
            (Arc::clone(&b), runner_b.clone())
        };
        let caller = caller.clone();
        creators.push(tokio::spawn(async move {
            let id = TaskId::new(format!("task-{n}"));
            let record = TaskRecord::new(
                id.clone(),
                crate::support::process(),
                UnixMillis::now(),
                Ttl::from_millis(600_000),
                None,
            )
            .with_runner(runner.clone(), None);
            let seat = SeatId::new(format!("seat-{n}"));
            let seating = replicas(&store)
                .create_seated(record, &seat, &runner, &[(caller, 11)])
                .await
                .expect("create_seated");
            (id, seating)
        }));
    }
    let mut created = 0;
    for creator in creators {
        let (id, seating) = creator.await.expect("join");
        let found = a.get(&id).await.expect("get").is_some();
        assert_eq!(found, seating == Seating::Seated, "{seating:?}");
        created += usize::from(found);
    }
    assert_eq!(created, 11);
    assert_eq!(taken(&b, &caller).await, 11);
}

/// How many `HGET`s Redis ran so far: freeing a task's seats reads the
/// holder of its seat in each pool with one (`MOVE_SEATS`); creating and
/// finishing a task run none.
fn hgets(redis: &RedisServer) -> u64 {
    calls(redis, "hget")
}

/// Runs one `sleep` task of 10 ms on a replica under `limits` and `cap`
/// to its end.
async fn one_task(url: &str, prefix: &str, limits: AdmissionLimits, cap: Option<usize>) {
    let tools = bounded_replica(url, prefix, "a", limits, cap).await;
    let runtime = tools.runtime.clone();
    let client = client(tools).await;
    let id = start(&client, "sleep", json!({"ms": 10})).await;
    until(&runtime, &id, NEWS, |task| status(task) == "completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_holds_no_seat_frees_none_and_one_that_holds_seats_frees_them() {
    let redis = RedisServer::start();
    let url = redis.url();
    let before = hgets(&redis);
    // Only the queue bounded, no cap: a task that runs at once takes no
    // seat, so its end costs no round trip for seats.
    let queue_only = AdmissionLimits::default().with_max_running(None);
    one_task(&url, "free-none:", queue_only, None).await;
    // Running bounded: its seat in `running` is freed at its end.
    one_task(&url, "free-one:", AdmissionLimits::default(), None).await;
    // Its seat is freed by the script that reads its holder.
    seats_become(&store(&url, "free-one:").await, &SeatPool::running(), 0).await;
    // Anything late from the first task would land by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        hgets(&redis) - before,
        1,
        "one pool freed (the bounded task's `running`); none for the task that held no seat"
    );
}

/// What Redis runs, as `redis-cli monitor` prints it, from when it is
/// made until [`Monitor::scripts`].
struct Monitor {
    child: std::process::Child,
    file: tempfile::NamedTempFile,
}

impl Monitor {
    async fn start(redis: &RedisServer) -> Self {
        let file = tempfile::NamedTempFile::new().expect("a temporary file");
        let child = std::process::Command::new("redis-cli")
            .args(["-p", &redis.port().to_string(), "monitor"])
            .stdout(file.reopen().expect("reopen"))
            .spawn()
            .expect("run redis-cli monitor");
        // It prints OK once it monitors.
        let deadline = tokio::time::Instant::now() + NEWS;
        while !std::fs::read_to_string(file.path()).is_ok_and(|text| text.starts_with("OK")) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-cli monitor never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Self { child, file }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The scripts run so far: each the commands it ran (a script's own
    /// commands follow its `EVALSHA`, Redis running one thing at a time).
    fn scripts(mut self) -> Vec<Vec<String>> {
        self.stop();
        let text = std::fs::read_to_string(self.file.path()).expect("read the monitor's output");
        let mut scripts: Vec<Vec<String>> = Vec::new();
        for line in text.lines() {
            let Some((_, command)) = line.split_once("] ") else {
                continue;
            };
            if command.starts_with("\"EVALSHA\"") && !line.contains("[0 lua]") {
                scripts.push(Vec::new());
            } else if line.contains(" lua] ")
                && let Some(script) = scripts.last_mut()
            {
                script.push(command.to_owned());
            }
        }
        scripts
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_gives_its_seats_up_with_the_write_of_its_outcome() {
    let redis = RedisServer::start();
    let url = redis.url();
    let monitor = Monitor::start(&redis).await;
    // Seats in `running` and in its caller's cap.
    one_task(&url, "seated:", AdmissionLimits::default(), Some(50)).await;
    let seats = store(&url, "seated:").await;
    seats_become(&seats, &SeatPool::running(), 0).await;
    seats_become(&seats, &SeatPool::caller(&Principal::new("process")), 0).await;
    // Anything late would land by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let scripts = monitor.scripts();
    let runs =
        |script: &[String], prefix: &str| script.iter().any(|command| command.starts_with(prefix));
    let freeing: Vec<&Vec<String>> = scripts
        .iter()
        .filter(|script| runs(script, "\"HDEL\" \"seated:seats:"))
        .collect();
    assert!(!freeing.is_empty(), "the seats were freed by a script");
    for script in freeing {
        assert!(
            runs(script, "\"HSET\" \"seated:task:"),
            "the seats were freed by a script that did not write the task: {script:#?}"
        );
    }
    assert_eq!(keys(&url, "seated:seats:").await, Vec::<String>::new());
    assert_eq!(keys(&url, "seated:held:").await, Vec::<String>::new());
}

/// Waits until `pool` holds `count` seats.
async fn seats_become(store: &SharedStore, pool: &SeatPool, count: u64) {
    let deadline = tokio::time::Instant::now() + NEWS;
    loop {
        let now = taken(store, pool).await;
        if now == count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{pool:?} holds {now} seats, not {count}, after {NEWS:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_gives_up_its_queued_seat_when_it_starts_or_is_cancelled() {
    let redis = RedisServer::start();
    let url = redis.url();
    let (running, queued) = (SeatPool::running(), SeatPool::queued());
    let limits = AdmissionLimits::default().with_max_running(Some(1));
    let tools = bounded_replica(&url, "queued:", "a", limits, None).await;
    let runtime = tools.runtime.clone();
    let client = client(tools).await;
    let seats = store(&url, "queued:").await;

    // One runs; the next waits, holding a queued seat, and starts when the
    // first ends: both end with no seat left anywhere.
    let first = start(&client, "sleep", json!({"ms": 300})).await;
    let second = start(&client, "sleep", json!({"ms": 10})).await;
    seats_become(&seats, &queued, 1).await;
    assert_eq!(taken(&seats, &running).await, 1);
    for id in [&first, &second] {
        until(&runtime, id, NEWS, |task| status(task) == "completed").await;
    }
    seats_become(&seats, &running, 0).await;
    seats_become(&seats, &queued, 0).await;

    // A queued task cancelled before it starts gives its queued seat up.
    let long = start(&client, "sleep", json!({"ms": 60_000})).await;
    let waiting = start(&client, "sleep", json!({"ms": 10})).await;
    seats_become(&seats, &queued, 1).await;
    for id in [&waiting, &long] {
        runtime
            .cancel_task_as(id, &crate::support::process())
            .await
            .expect("tasks/cancel");
        until(&runtime, id, NEWS, |task| status(task) == "cancelled").await;
    }
    seats_become(&seats, &queued, 0).await;
    seats_become(&seats, &running, 0).await;
}
