//! The contract of creation rates and fair turns kept by a store for all
//! replicas (see [Rates and fair turns](crate::store::replicas#rates-and-fair-turns)),
//! for stores whose [`Replicas::supports_rate`] and
//! [`Replicas::supports_fair_share`] are true. Each check takes a function
//! that opens another handle on the same (empty) store, as a second
//! replica would. The store's clock is real, so the intervals are long
//! enough that nothing here depends on how fast the machine is.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::replicas_of as replicas;
use crate::store::{
    FairTurn, Principal, RateBucket, RateTake, RunnerId, SeatId, SeatPool, Seating, SharedStore,
};

async fn leased(store: &SharedStore, name: &str, hold: Duration) -> RunnerId {
    let runner = RunnerId::new(name);
    replicas(store)
        .acquire(&runner, hold)
        .await
        .expect("acquire");
    runner
}

/// A creation-rate bucket taken from two handles of one store at once
/// counts one burst for both, on the store's clock, and answers how long to
/// wait (see [Rates and fair turns](crate::store::replicas#rates-and-fair-turns)).
/// `connect` opens a handle on the same store each time.
pub async fn rates_are_shared<F, Fut>(connect: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedStore>,
{
    let a = connect().await;
    let b = connect().await;
    assert!(replicas(&a).supports_rate(), "a store that counts rates");
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

/// Two callers weighted 3:1, their tasks queued on two handles of one
/// store, racing for one running seat turn after turn, get about 12 and 4
/// of 16 turns, never more than a share apart (see [`FairTurn`]).
pub async fn fair_turns_follow_the_weights<F, Fut>(connect: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedStore>,
{
    let a = connect().await;
    let b = connect().await;
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

/// A seat held back for a less served caller goes to the others once the
/// patience ran out, and at once when that caller's replica died and its
/// lease was claimed; once nobody waits, a take forgets the turns (the
/// store's own test checks that nothing of them is left).
pub async fn held_seats_are_given_after_the_patience<F, Fut>(connect: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedStore>,
{
    let a = connect().await;
    let b = connect().await;
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
}
