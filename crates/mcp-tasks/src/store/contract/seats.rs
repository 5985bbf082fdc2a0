//! The contract of seat pools (see [`replicas`](crate::store::replicas),
//! "Seats"), for stores shared by several processes.

use std::sync::Arc;
use std::time::Duration;

use super::{id, record, replicas_of};
use crate::store::{
    Change, Principal, Replicas, RunnerId, SeatId, SeatPool, Seating, SharedStore, Swap, TaskRecord,
};
use crate::task::UnixMillis;

/// How long a check waits for news it expects (generous: no timing is
/// measured, a slow machine only makes it slower).
const NEWS: Duration = Duration::from_secs(10);

fn seat(name: &str) -> SeatId {
    SeatId::new(name)
}

async fn taken(replicas: &dyn Replicas, pool: &SeatPool) -> u64 {
    replicas.seats_taken(pool).await.expect("seats_taken")
}

async fn take(
    replicas: &dyn Replicas,
    name: &str,
    runner: &RunnerId,
    pools: &[(SeatPool, u64)],
) -> Seating {
    replicas
        .take_seats(&seat(name), runner, pools)
        .await
        .expect("take_seats")
}

async fn leased(replicas: &dyn Replicas, name: &str, hold: Duration) -> RunnerId {
    let runner = RunnerId::new(name);
    replicas.acquire(&runner, hold).await.expect("acquire");
    runner
}

/// Takes are all or nothing, idempotent, bounded by each pool's limit and
/// need a lease; frees give seats back and say so on `seats_freed`.
pub async fn seats_hold_their_limits(store: SharedStore) {
    let replicas = replicas_of(&store);
    let runner = leased(replicas, "seated", Duration::from_secs(60)).await;
    let caller = SeatPool::caller(&Principal::new("a caller: with spaces\n"));
    let tool = SeatPool::tool("slow");
    let both = [(caller.clone(), 2), (tool.clone(), 1)];
    assert_eq!(taken(replicas, &caller).await, 0, "a new pool is empty");
    assert_eq!(take(replicas, "s1", &runner, &both).await, Seating::Seated);
    assert_eq!(taken(replicas, &caller).await, 1);
    assert_eq!(taken(replicas, &tool).await, 1);
    assert_eq!(
        take(replicas, "s2", &runner, &both).await,
        Seating::Full(1),
        "the tool's pool is full"
    );
    assert_eq!(
        taken(replicas, &caller).await,
        1,
        "all or nothing: the caller's seat was not taken either"
    );
    assert_eq!(
        take(replicas, "s1", &runner, &both).await,
        Seating::Seated,
        "a seat held already is taken again, even in full pools"
    );
    assert_eq!(taken(replicas, &caller).await, 1, "and not twice");
    assert_eq!(taken(replicas, &tool).await, 1);
    let only_caller = [(caller.clone(), 2)];
    assert_eq!(
        take(replicas, "s2", &runner, &only_caller).await,
        Seating::Seated
    );
    assert_eq!(
        take(replicas, "s3", &runner, &only_caller).await,
        Seating::Full(0)
    );
    assert_eq!(
        take(replicas, "s3", &runner, &[(SeatPool::new("closed"), 0)]).await,
        Seating::Full(0),
        "a limit of 0 admits nobody"
    );
    let nobody = RunnerId::new("never-leased");
    assert_eq!(
        take(replicas, "s3", &nobody, &[(SeatPool::new("open"), 10)]).await,
        Seating::NoLease
    );
    assert_eq!(taken(replicas, &SeatPool::new("open")).await, 0);

    let mut freed = replicas.seats_freed();
    freed.borrow_and_update();
    replicas
        .free_seats(
            &seat("s1"),
            &[caller.clone(), tool.clone(), SeatPool::new("other")],
        )
        .await
        .expect("free_seats");
    assert_eq!(taken(replicas, &caller).await, 1);
    assert_eq!(taken(replicas, &tool).await, 0);
    tokio::time::timeout(NEWS, freed.changed())
        .await
        .expect("seats_freed goes up after a free")
        .expect("the store is alive");
    replicas
        .free_seats(&seat("s1"), std::slice::from_ref(&caller))
        .await
        .expect("freeing twice is no error");
    assert_eq!(
        take(replicas, "s3", &runner, &both).await,
        Seating::Seated,
        "a freed seat is room for another"
    );
    assert_eq!(taken(replicas, &caller).await, 2);
    for name in ["s2", "s3"] {
        replicas
            .free_seats(&seat(name), &[caller.clone(), tool.clone()])
            .await
            .expect("free_seats");
    }
    assert_eq!(taken(replicas, &caller).await, 0);
    assert_eq!(taken(replicas, &tool).await, 0);
}

/// A queued task's start: `queued` swapped for `running` in one step, or
/// nothing at all when `running` is full.
pub async fn seats_move_atomically(store: SharedStore) {
    let replicas = replicas_of(&store);
    let runner = leased(replicas, "mover", Duration::from_secs(60)).await;
    let (queued, running) = (SeatPool::queued(), SeatPool::running());
    let caller = SeatPool::caller(&Principal::new("c"));
    for name in ["t1", "t2"] {
        assert_eq!(
            take(
                replicas,
                name,
                &runner,
                &[(caller.clone(), 5), (queued.clone(), 5)]
            )
            .await,
            Seating::Seated
        );
    }
    let start = [(running.clone(), 1)];
    let unqueue = [queued.clone()];
    let moved = |name: &'static str| {
        let (start, unqueue, runner) = (&start, &unqueue, &runner);
        async move {
            replicas
                .move_seats(&seat(name), runner, start, unqueue)
                .await
                .expect("move_seats")
        }
    };
    assert_eq!(moved("t1").await, Seating::Seated);
    assert_eq!(taken(replicas, &running).await, 1);
    assert_eq!(taken(replicas, &queued).await, 1, "t1 left the queue");
    assert_eq!(moved("t2").await, Seating::Full(0), "running is full");
    assert_eq!(taken(replicas, &queued).await, 1, "t2 is still queued");
    assert_eq!(taken(replicas, &running).await, 1);
    assert_eq!(
        moved("t1").await,
        Seating::Seated,
        "a move done already is done again"
    );
    replicas
        .free_seats(&seat("t1"), &[running.clone(), caller.clone()])
        .await
        .expect("free_seats");
    assert_eq!(moved("t2").await, Seating::Seated);
    assert_eq!(taken(replicas, &queued).await, 0);
    assert_eq!(taken(replicas, &running).await, 1);
    assert_eq!(taken(replicas, &caller).await, 1, "t2's caller seat stays");
}

/// A lease that ran out keeps its seats until it is claimed (it may still
/// be renewed); the claim frees them all at once.
pub async fn seats_of_a_claimed_runner_are_freed(store: SharedStore) {
    let replicas = replicas_of(&store);
    let pool = SeatPool::running();
    let other = SeatPool::tool("x");
    let live = leased(replicas, "live", Duration::from_secs(60)).await;
    let dying = leased(replicas, "dying", Duration::from_millis(300)).await;
    let late = leased(replicas, "late", Duration::from_millis(300)).await;
    for (name, runner) in [("d1", &dying), ("d2", &dying), ("l1", &late)] {
        assert_eq!(
            take(
                replicas,
                name,
                runner,
                &[(pool.clone(), 3), (other.clone(), 3)]
            )
            .await,
            Seating::Seated
        );
    }
    assert_eq!(
        take(replicas, "v1", &live, &[(pool.clone(), 3)]).await,
        Seating::Full(0)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        take(replicas, "v1", &live, &[(pool.clone(), 3)]).await,
        Seating::Full(0),
        "a lease that ran out but was not claimed keeps its seats"
    );
    assert!(
        replicas
            .renew(&late, Duration::from_secs(60))
            .await
            .expect("renew"),
        "a lease that ran out unclaimed is renewed"
    );
    let mut freed = replicas.seats_freed();
    freed.borrow_and_update();
    replicas.orphans(10).await.expect("orphans");
    assert_eq!(
        taken(replicas, &pool).await,
        1,
        "the claimed runner's seats are gone, the renewed one's stay"
    );
    assert_eq!(taken(replicas, &other).await, 1);
    tokio::time::timeout(NEWS, freed.changed())
        .await
        .expect("seats_freed goes up after a claim")
        .expect("the store is alive");
    assert_eq!(
        take(replicas, "v1", &live, &[(pool.clone(), 3)]).await,
        Seating::Seated
    );
    assert_eq!(
        take(replicas, "d3", &dying, &[(pool.clone(), 3)]).await,
        Seating::NoLease,
        "a claimed runner takes no seat"
    );
    replicas
        .free_seats(&seat("d1"), &[pool.clone(), other.clone()])
        .await
        .expect("freeing a seat the claim freed is no error");
    assert_eq!(taken(replicas, &pool).await, 2);
}

/// Many takes at once from two runners never pass a pool's limit.
pub async fn seat_takes_race(store: SharedStore) {
    const LIMIT: u64 = 5;
    let replicas = replicas_of(&store);
    let runners = [
        leased(replicas, "racer-a", Duration::from_secs(60)).await,
        leased(replicas, "racer-b", Duration::from_secs(60)).await,
    ];
    let pool = SeatPool::running();
    let mut takers = Vec::new();
    for n in 0..40 {
        let store = Arc::clone(&store);
        let runner = runners[n % 2].clone();
        let pool = pool.clone();
        takers.push(tokio::spawn(async move {
            let replicas = replicas_of(&store);
            take(replicas, &format!("r{n}"), &runner, &[(pool, LIMIT)]).await
        }));
    }
    let mut seated = 0;
    for taker in takers {
        match taker.await.expect("join") {
            Seating::Seated => seated += 1,
            Seating::Full(0) => {}
            other => panic!("a take answered {other:?}"),
        }
    }
    assert_eq!(seated, LIMIT, "exactly the limit was seated");
    assert_eq!(taken(replicas, &pool).await, LIMIT);
}

/// A creation with seats creates the record only when the seats were
/// taken, and takes nothing when the record cannot be created.
pub async fn creations_take_seats(store: SharedStore) {
    let replicas = replicas_of(&store);
    let runner = leased(replicas, "creator", Duration::from_secs(60)).await;
    let (running, caller) = (SeatPool::running(), SeatPool::caller(&Principal::new("c")));
    let pools = [(caller.clone(), 5), (running.clone(), 1)];
    let of = |name: &str| record(name, 1, Some(600_000)).with_runner(runner.clone(), None);
    let create = |name: &'static str, seat_name: &'static str, runner: RunnerId| {
        let pools = &pools;
        let made = of(name);
        async move {
            replicas
                .create_seated(made, &seat(seat_name), &runner, pools)
                .await
        }
    };
    assert_eq!(
        create("a", "sa", runner.clone())
            .await
            .expect("create_seated"),
        Seating::Seated
    );
    assert!(store.get(&id("a")).await.expect("get").is_some(), "created");
    assert_eq!(taken(replicas, &running).await, 1);
    assert_eq!(
        create("b", "sb", runner.clone())
            .await
            .expect("create_seated"),
        Seating::Full(1)
    );
    assert_eq!(
        store.get(&id("b")).await.expect("get"),
        None,
        "no seat, no record"
    );
    assert_eq!(taken(replicas, &caller).await, 1, "and no seat taken");
    replicas
        .free_seats(&seat("sa"), std::slice::from_ref(&running))
        .await
        .expect("free_seats");
    assert!(
        create("a", "sc", runner.clone()).await.is_err(),
        "an existing id is an error"
    );
    assert_eq!(taken(replicas, &running).await, 0, "and takes no seat");
    assert_eq!(
        create("d", "sd", RunnerId::new("unleased"))
            .await
            .expect("create_seated"),
        Seating::NoLease
    );
    assert_eq!(store.get(&id("d")).await.expect("get"), None);
}

/// A store that [frees seats with a swap](Replicas::frees_with_swap) gives
/// them up only when the swap happens: not on a conflict, nor for a
/// missing record; and says so on `seats_freed`. One that does not answers
/// an error and swaps nothing.
pub async fn swaps_free_seats(store: SharedStore) {
    let replicas = replicas_of(&store);
    let runner = leased(replicas, "ender", Duration::from_secs(60)).await;
    let (running, caller) = (SeatPool::running(), SeatPool::caller(&Principal::new("e")));
    let pools = [(running.clone(), 5), (caller.clone(), 5)];
    let free = [running.clone(), caller.clone()];
    let created = record("ends", 1, Some(600_000)).with_runner(runner.clone(), None);
    assert_eq!(
        replicas
            .create_seated(created.clone(), &seat("se"), &runner, &pools)
            .await
            .expect("create_seated"),
        Seating::Seated
    );
    let message = |text: &str| Change::StatusMessage(text.into());
    let retention = Duration::from_secs(60);
    let transition = |record: &TaskRecord, text: &str| {
        record
            .apply(&message(text), UnixMillis::new(2), retention)
            .expect("apply")
    };
    if !replicas.frees_with_swap() {
        let refused = replicas
            .compare_and_swap_freeing(transition(&created, "refused"), &seat("se"), &free)
            .await;
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(store.get(&id("ends")).await.expect("get"), Some(created));
        return;
    }
    let newer = transition(&created, "newer");
    assert_eq!(
        store.compare_and_swap(newer).await.expect("swap"),
        Swap::Swapped
    );
    let mut freed = replicas.seats_freed();
    freed.borrow_and_update();

    // Made from the record as created: a conflict, and nothing freed.
    let swap = replicas
        .compare_and_swap_freeing(transition(&created, "stale"), &seat("se"), &free)
        .await
        .expect("swap");
    assert!(matches!(swap, Swap::Conflict(_)), "{swap:?}");
    assert_eq!(taken(replicas, &running).await, 1);
    assert_eq!(taken(replicas, &caller).await, 1);

    // Made from the current record: swapped, and the seat given up in both.
    let current = store.get(&id("ends")).await.expect("get").expect("stored");
    let swap = replicas
        .compare_and_swap_freeing(transition(&current, "ended"), &seat("se"), &free)
        .await
        .expect("swap");
    assert_eq!(swap, Swap::Swapped);
    let stored = store.get(&id("ends")).await.expect("get").expect("stored");
    assert_eq!(stored.status_message(), Some("ended"));
    assert_eq!(taken(replicas, &running).await, 0);
    assert_eq!(taken(replicas, &caller).await, 0);
    tokio::time::timeout(NEWS, freed.changed())
        .await
        .expect("the freeing is announced")
        .expect("the feed is open");

    // A missing record: nothing swapped, nothing freed.
    assert_eq!(take(replicas, "sm", &runner, &pools).await, Seating::Seated);
    store.delete(&id("ends")).await.expect("delete");
    let swap = replicas
        .compare_and_swap_freeing(transition(&stored, "gone"), &seat("sm"), &free)
        .await
        .expect("swap");
    assert_eq!(swap, Swap::Missing);
    assert_eq!(taken(replicas, &running).await, 1);
}
