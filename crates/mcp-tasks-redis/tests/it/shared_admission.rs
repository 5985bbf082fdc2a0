//! Creation rates and fair turns kept in Redis for all replicas: two
//! stores (two replicas, each with its own connections and runner) on one
//! `redis-server`. Redis's clock is real, so the intervals are chosen long
//! enough that nothing here depends on how fast the machine is.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::server::{CreationRate, TaskRuntime};
use mcp_tasks::store::{
    FairTurn, Principal, RateBucket, RateTake, Replicas, RunnerId, SeatId, SeatPool, Seating,
    SharedStore,
};
use mcp_tasks::{CallOptions, CallResponse};
use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;

use crate::support::{Tools, cli, client, store};

fn replicas(store: &SharedStore) -> &dyn Replicas {
    store.replicas().expect("a Redis store has replicas")
}

async fn leased(store: &SharedStore, name: &str, hold: Duration) -> RunnerId {
    let runner = RunnerId::new(name);
    replicas(store)
        .acquire(&runner, hold)
        .await
        .expect("acquire");
    runner
}

/// Every key under `prefix`.
fn keys(redis: &RedisServer, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = cli(redis, &["keys", &format!("{prefix}*")])
        .lines()
        .map(str::to_owned)
        .filter(|key| !key.is_empty())
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_bucket_is_shared_by_two_replicas_on_the_stores_clock() {
    let redis = RedisServer::start();
    let a = store(&redis.url(), "rate:").await;
    let b = store(&redis.url(), "rate:").await;
    assert!(replicas(&a).supports_rate());
    let bucket = RateBucket::caller(&Principal::new("secret-label"));
    // One a second past a burst of 5: ten takes at once, five on each
    // replica, let 5 through in all (not 5 per replica).
    let interval = Duration::from_secs(1);
    let mut takers = Vec::new();
    for n in 0..10 {
        let store = Arc::clone(if n % 2 == 0 { &a } else { &b });
        let bucket = bucket.clone();
        takers.push(tokio::spawn(async move {
            replicas(&store)
                .take_rate(&bucket, interval, 5)
                .await
                .expect("take_rate")
        }));
    }
    let mut allowed = 0;
    let mut waits = Vec::new();
    for taker in takers {
        match taker.await.expect("join") {
            RateTake::Allowed => allowed += 1,
            RateTake::Limited { retry_after } => waits.push(retry_after),
        }
    }
    assert_eq!(allowed, 5, "the burst is the two replicas' together");
    assert_eq!(waits.len(), 5);
    assert!(
        waits
            .iter()
            .all(|wait| *wait > Duration::ZERO && *wait <= interval),
        "{waits:?}"
    );
    // Once the longest hint passed, one more is allowed, then none.
    let wait = waits.iter().max().copied().unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(20)).await;
    assert_eq!(
        replicas(&b).take_rate(&bucket, interval, 5).await.unwrap(),
        RateTake::Allowed
    );
    assert!(matches!(
        replicas(&a).take_rate(&bucket, interval, 5).await.unwrap(),
        RateTake::Limited { .. }
    ));
    // One key, named by a hash, that expires when the bucket is full again.
    let held = keys(&redis, "rate:rate:");
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(!held[0].contains("secret-label"), "{held:?}");
    let ttl: u64 = cli(&redis, &["pttl", &held[0]]).parse().expect("a PTTL");
    assert!(ttl > 0 && ttl <= 6_000, "{ttl}");
}

/// A replica whose runtime limits each caller to `rate`.
async fn rated_replica(url: &str, prefix: &str, name: &'static str, rate: CreationRate) -> Tools {
    let runtime = TaskRuntime::builder(store(url, prefix).await)
        .with_poll_interval(Duration::from_millis(20))
        .with_rate_per_caller(Some(rate))
        .build();
    Tools::new(runtime, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runtimes_on_one_redis_share_one_creation_rate_per_caller() {
    let redis = RedisServer::start();
    let url = redis.url();
    // 5 a minute in bursts of 5: one creation every 12 s past the burst.
    let five = NonZeroU32::new(5).unwrap();
    let rate = CreationRate::per_minute(five).with_burst(five);
    let a = client(rated_replica(&url, "rated:", "a", rate).await).await;
    let b = client(rated_replica(&url, "rated:", "b", rate).await).await;
    let mut created = 0;
    let mut hints = Vec::new();
    for n in 0..10 {
        let client = if n % 2 == 0 { &a } else { &b };
        let arguments = json!({"ms": 10}).as_object().cloned();
        match client
            .call_tool("sleep", arguments, CallOptions::default())
            .await
        {
            Ok(CallResponse::Task(_)) => created += 1,
            Ok(other) => panic!("not a task: {other:?}"),
            Err(error) => {
                let data = error.rpc_error().and_then(|e| e.data.clone());
                let data = data.unwrap_or_else(|| panic!("a refusal with data: {error}"));
                assert_eq!(data["reason"], "rateLimited", "{data}");
                assert_eq!(data["ratePerCaller"], "5/min", "{data}");
                hints.push(data["retryAfterMs"].as_u64().expect("a hint"));
            }
        }
    }
    assert_eq!(
        created, 5,
        "per process each would let 5 through, 10 in all"
    );
    assert_eq!(hints.len(), 5);
    // The store's hint: the first creation past the burst is due 12 s
    // after the burst began.
    assert!(
        hints.iter().all(|ms| (1..=12_000).contains(ms)),
        "{hints:?}"
    );
}

/// A caller's fair turn at `running`, on stores with fair turns.
fn turn(caller: &SeatPool, share: u64, patience: Duration) -> FairTurn {
    FairTurn::start(caller.clone(), share, 0, patience)
}

/// Queues seat `seat` of the caller whose queued seats are in `caller`.
async fn queue(store: &SharedStore, runner: &RunnerId, seat: &SeatId, caller: &SeatPool) {
    let take = [(SeatPool::queued(), 1000), (caller.clone(), u64::MAX)];
    let turn = FairTurn::queue(caller.clone(), 0);
    let seating = replicas(store)
        .move_seats_fairly(seat, runner, &take, &[], &turn)
        .await
        .expect("queue");
    assert_eq!(seating, Seating::Seated);
}

/// One queued task: where it is, under which runner, of which caller.
#[derive(Clone)]
struct Waiter {
    store: SharedStore,
    runner: RunnerId,
    seat: SeatId,
    caller: SeatPool,
    share: u64,
    name: char,
}

impl Waiter {
    /// Tries once to start: swaps its queued seats for `running` (of 1).
    async fn try_start(&self, patience: Duration) -> Seating {
        let take = [(SeatPool::running(), 1)];
        let free = [SeatPool::queued(), self.caller.clone()];
        replicas(&self.store)
            .move_seats_fairly(
                &self.seat,
                &self.runner,
                &take,
                &free,
                &turn(&self.caller, self.share, patience),
            )
            .await
            .expect("move_seats_fairly")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_weighted_3_to_1_queued_on_two_replicas_get_turns_3_to_1() {
    let redis = RedisServer::start();
    let a = store(&redis.url(), "fair:").await;
    let b = store(&redis.url(), "fair:").await;
    assert!(replicas(&a).supports_fair_share());
    let hour = Duration::from_secs(3600);
    let runner_a = leased(&a, "runner-a", hour).await;
    let runner_b = leased(&b, "runner-b", hour).await;
    // Someone runs; then 16 tasks of each caller queue, each caller's
    // spread over both replicas.
    let first = SeatId::new("first");
    let running = [(SeatPool::running(), 1)];
    let other = SeatPool::waiting(&Principal::new("other"));
    let seating = replicas(&a)
        .move_seats_fairly(&first, &runner_a, &running, &[], &turn(&other, 3, hour))
        .await
        .unwrap();
    assert_eq!(seating, Seating::Seated, "nobody waits: it runs");
    let (heavy, light) = (
        SeatPool::waiting(&Principal::new("heavy")),
        SeatPool::waiting(&Principal::new("light")),
    );
    let mut waiters = Vec::new();
    for n in 0..32 {
        let (store, runner) = if n % 4 < 2 {
            (&a, &runner_a)
        } else {
            (&b, &runner_b)
        };
        let (caller, share, name) = if n % 2 == 0 {
            (&heavy, 1, 'h')
        } else {
            (&light, 3, 'l')
        };
        let seat = SeatId::new(format!("{name}{n}"));
        queue(store, runner, &seat, caller).await;
        waiters.push(Waiter {
            store: Arc::clone(store),
            runner: runner.clone(),
            seat,
            caller: caller.clone(),
            share,
            name,
        });
    }
    // Turn after turn: the running seat is freed, and every waiting task,
    // on both replicas at once, tries to take it. One does.
    let mut holder = first;
    let mut order = String::new();
    for _ in 0..16 {
        replicas(&a)
            .free_seats(&holder, &[SeatPool::running()])
            .await
            .unwrap();
        let tries: Vec<_> = waiters
            .iter()
            .cloned()
            .map(|waiter| {
                tokio::spawn(async move {
                    let seating = waiter.try_start(hour).await;
                    (waiter, seating)
                })
            })
            .collect();
        let mut started = Vec::new();
        for attempt in tries {
            let (waiter, seating) = attempt.await.expect("join");
            match seating {
                Seating::Seated => started.push(waiter),
                Seating::Full(0) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(started.len(), 1, "one running seat, one start");
        let winner = started.remove(0);
        order.push(winner.name);
        waiters.retain(|waiter| waiter.seat != winner.seat);
        holder = winner.seat;
    }
    let heavy_turns = order.chars().filter(|name| *name == 'h').count();
    assert!(
        (11..=13).contains(&heavy_turns),
        "weights 3:1 give about 12 of 16 turns to the heavier caller: {order}"
    );
    // Never more than a share apart: no four turns in a row for one caller
    // but the heavier's three (and one at a boundary).
    assert!(!order.contains("hhhhh") && !order.contains("ll"), "{order}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_held_back_for_a_less_served_caller_goes_to_others_after_the_patience() {
    let redis = RedisServer::start();
    let a = store(&redis.url(), "held:").await;
    let b = store(&redis.url(), "held:").await;
    let hour = Duration::from_secs(3600);
    let runner_a = leased(&a, "runner-a", hour).await;
    let (slow, busy) = (
        SeatPool::waiting(&Principal::new("slow")),
        SeatPool::waiting(&Principal::new("busy")),
    );
    // `busy` was served once while `slow` waited, so `slow` is owed the
    // next turn; but its task (on a replica that dies) never asks for it.
    let doomed = leased(&b, "doomed", Duration::from_millis(300)).await;
    queue(&b, &doomed, &SeatId::new("s1"), &slow).await;
    queue(&a, &runner_a, &SeatId::new("b1"), &busy).await;
    queue(&a, &runner_a, &SeatId::new("b2"), &busy).await;
    let busy_task = |seat: &str| Waiter {
        store: Arc::clone(&a),
        runner: runner_a.clone(),
        seat: SeatId::new(seat),
        caller: busy.clone(),
        share: 10,
        name: 'b',
    };
    let patience = Duration::from_millis(400);
    // Both at 0: `busy` may go first (a tie), and is then served more.
    assert_eq!(busy_task("b1").try_start(patience).await, Seating::Seated);
    replicas(&a)
        .free_seats(&SeatId::new("b1"), &[SeatPool::running()])
        .await
        .unwrap();
    let held_from = tokio::time::Instant::now();
    assert_eq!(
        busy_task("b2").try_start(patience).await,
        Seating::Full(0),
        "held back for the less served caller"
    );
    // Still held back before the patience ran out...
    tokio::time::sleep(Duration::from_millis(100)).await;
    if held_from.elapsed() < patience - Duration::from_millis(50) {
        assert_eq!(busy_task("b2").try_start(patience).await, Seating::Full(0));
    }
    // ...and given to it after: never held back for good.
    tokio::time::sleep(patience).await;
    assert_eq!(busy_task("b2").try_start(patience).await, Seating::Seated);
    replicas(&a)
        .free_seats(&SeatId::new("b2"), &[SeatPool::running()])
        .await
        .unwrap();

    // A caller whose replica died stops waiting once its lease is claimed
    // (its queued seats are freed with it): nothing is held back for it.
    queue(&a, &runner_a, &SeatId::new("b3"), &busy).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while replicas(&a).seats_taken(&slow).await.unwrap() > 0 {
        replicas(&a).orphans(16).await.expect("orphans");
        assert!(tokio::time::Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        busy_task("b3").try_start(hour).await,
        Seating::Seated,
        "the dead replica's caller waits no more"
    );
    replicas(&a)
        .free_seats(&SeatId::new("b3"), &[SeatPool::running()])
        .await
        .unwrap();
    // Nobody waits: the next take forgets the turns.
    let lone = SeatId::new("lone");
    let seating = replicas(&a)
        .move_seats_fairly(
            &lone,
            &runner_a,
            &[(SeatPool::running(), 1)],
            &[],
            &turn(&busy, 10, hour),
        )
        .await
        .unwrap();
    assert_eq!(seating, Seating::Seated);
    replicas(&a)
        .free_seats(&lone, &[SeatPool::running()])
        .await
        .unwrap();
    let left: Vec<String> = keys(&redis, "held:")
        .into_iter()
        .filter(|key| key.starts_with("held:fair:") || key.starts_with("held:seats:"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
