//! The contract every [`TaskStore`](super::TaskStore) backend must pass.
//!
//! A backend's tests call [`run_all`] with a function that makes a fresh,
//! empty store; each check panics with a message naming what broke. A
//! store shared by several processes (one with [`Replicas`](super::Replicas))
//! also runs [`run_replicas`].
//!
//! ```ignore
//! mcp_tasks::store::contract::run_all(|| async { Arc::new(MyStore::open_temp()) as SharedStore }).await;
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{
    Change, Modified, Orphan, Principal, RunnerId, STOPPED_MESSAGE, SharedStore, Swap, TaskRecord,
    TransitionError, modify, modify_as,
};
use crate::task::{TaskId, TaskStatus, Ttl, UnixMillis};

mod admin;
mod admission;
mod feed;
mod keyed;
mod seats;

pub use admin::{hash_key_is_shared, hash_key_is_stable, list_all_pages};
pub use admission::{
    fair_turns_follow_the_weights, held_seats_are_given_after_the_patience, rates_are_shared,
};
pub use feed::a_finished_task_is_never_answered_as_running;
pub use keyed::{
    keyed_creation_finds_the_same_record, keyed_creations_race, keyed_index_goes_with_the_record,
    seated_creations_respect_the_key,
};
pub use seats::{
    creations_take_seats, seat_takes_race, seats_hold_their_limits, seats_move_atomically,
    seats_of_a_claimed_runner_are_freed, swaps_free_seats,
};

const RETENTION: Duration = Duration::from_secs(60);

/// Runs every check, each on a fresh store from `make`.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedStore>,
{
    create_and_get(make().await).await;
    compare_and_swap(make().await).await;
    fields_round_trip(make().await).await;
    terminal_states_stay(make().await).await;
    expiry_index(make().await).await;
    change_feed(make().await).await;
    concurrent_updates_are_not_lost(make().await).await;
    cancel_races_complete(make().await).await;
    runners_round_trip(make().await).await;
    list_owned_pages(make().await).await;
    list_owned_follows_changes(make().await).await;
    hash_key_is_stable(make().await).await;
    list_all_pages(make().await).await;
    keyed_creation_finds_the_same_record(make().await).await;
    keyed_creations_race(make().await).await;
    keyed_index_goes_with_the_record(make().await).await;
}

/// Runs the checks of a store shared by several processes: leases, their
/// claims, the orphaned tasks they leave, and seat pools, races included.
/// Leases are timed by the store's clock, so these checks sleep for real
/// (about 2 s).
pub async fn run_replicas<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = SharedStore>,
{
    leases_run_out_and_are_claimed(make().await).await;
    takeovers_race(make().await).await;
    seats_hold_their_limits(make().await).await;
    seats_move_atomically(make().await).await;
    seats_of_a_claimed_runner_are_freed(make().await).await;
    seat_takes_race(make().await).await;
    creations_take_seats(make().await).await;
    seated_creations_respect_the_key(make().await).await;
    swaps_free_seats(make().await).await;
}

fn id(name: &str) -> TaskId {
    TaskId::new(name)
}

fn at(ms: u64) -> UnixMillis {
    UnixMillis::new(ms)
}

fn record(name: &str, now: u64, ttl: Option<u64>) -> TaskRecord {
    TaskRecord::new(
        id(name),
        Principal::new("owner-a"),
        at(now),
        ttl.map_or(Ttl::Unlimited, Ttl::from_millis),
        Some(Duration::from_millis(100)),
    )
}

fn owned(name: &str, owner: &str) -> TaskRecord {
    TaskRecord::new(
        id(name),
        Principal::new(owner),
        at(1),
        Ttl::from_millis(600_000),
        Some(Duration::from_millis(100)),
    )
}

/// The ids `list_owned` gives, after checking each record is `owner`'s.
async fn listed(
    store: &SharedStore,
    owner: &str,
    after: Option<&str>,
    limit: usize,
) -> Vec<String> {
    let owner = Principal::new(owner);
    let after = after.map(id);
    let records = store
        .list_owned(&owner, after.as_ref(), limit)
        .await
        .expect("list_owned");
    assert!(records.len() <= limit, "at most `limit` records");
    records
        .into_iter()
        .map(|record| {
            assert_eq!(
                record.owner(),
                &owner,
                "only the owner's records are listed"
            );
            record.id().expose().to_owned()
        })
        .collect()
}

/// `record` after `changes`, applied in memory (not stored).
fn changed(mut record: TaskRecord, changes: &[Change]) -> TaskRecord {
    for change in changes {
        record = record
            .apply(change, record.updated_at(), RETENTION)
            .expect("the change applies")
            .into_record();
    }
    record
}

/// Create is atomic and strongly consistent; a duplicate id is refused.
pub async fn create_and_get(store: SharedStore) {
    assert_eq!(
        store.get(&id("a")).await.expect("get"),
        None,
        "an empty store has no record"
    );
    store.create(record("a", 1, None)).await.expect("create");
    let read = store
        .get(&id("a"))
        .await
        .expect("get")
        .expect("a created record is found at once");
    assert_eq!(read, record("a", 1, None));
    assert!(
        store.create(record("a", 2, None)).await.is_err(),
        "a duplicate id is refused"
    );
    store.delete(&id("a")).await.expect("delete");
    assert_eq!(
        store.get(&id("a")).await.expect("get"),
        None,
        "a deleted record is gone"
    );
    store
        .delete(&id("a"))
        .await
        .expect("deleting a missing record is not an error");
}

/// Compare-and-set swaps only on the expected version.
pub async fn compare_and_swap(store: SharedStore) {
    store.create(record("a", 1, None)).await.expect("create");
    let v0 = store.get(&id("a")).await.expect("get").expect("record");
    let v1 = v0
        .apply(&Change::StatusMessage("one".into()), at(2), RETENTION)
        .expect("apply");
    let expected = v1.record().clone();
    assert_eq!(
        store.compare_and_swap(v1).await.expect("cas"),
        Swap::Swapped
    );
    let stale = v0
        .apply(&Change::StatusMessage("lost".into()), at(3), RETENTION)
        .expect("apply");
    match store.compare_and_swap(stale).await.expect("cas") {
        Swap::Conflict(current) => {
            assert_eq!(*current, expected, "a conflict returns the current record");
        }
        other => panic!("a stale version must conflict, got {other:?}"),
    }
    let missing = record("nope", 1, None)
        .apply(&Change::RequestCancel, at(2), RETENTION)
        .expect("apply");
    assert_eq!(
        store.compare_and_swap(missing).await.expect("cas"),
        Swap::Missing
    );
}

/// Every field survives the store.
pub async fn fields_round_trip(store: SharedStore) {
    let full = changed(
        record("a", 1_000, Some(5_000)),
        &[
            Change::StatusMessage("héllo ✓".into()),
            Change::RequestInput {
                key: "old".into(),
                request: json!({"method": "elicitation/create", "params": {"message": "?"}}),
            },
            Change::ProvideInput(
                [(
                    "old".to_owned(),
                    json!({"action": "accept", "content": {"n": 1.5}}),
                )]
                .into(),
            ),
            Change::RequestInput {
                key: "k".into(),
                request: json!({"method": "roots/list"}),
            },
            Change::RequestCancel,
            Change::ExtendTtl(Duration::from_secs(9)),
        ],
    );
    assert_eq!(full.status(), &TaskStatus::InputRequired);
    store.create(full.clone()).await.expect("create");
    assert_eq!(
        store.get(&id("a")).await.expect("get").as_ref(),
        Some(&full)
    );
    let complete = Change::Complete(json!({"content": [], "isError": true}));
    let done = full
        .apply(&complete, at(2_000), RETENTION)
        .expect("complete");
    let expected = done.record().clone();
    store.compare_and_swap(done).await.expect("cas");
    assert_eq!(store.get(&id("a")).await.expect("get"), Some(expected));
}

/// Through the store, a finished task refuses every change.
pub async fn terminal_states_stay(store: SharedStore) {
    store.create(record("a", 1, None)).await.expect("create");
    let fail = Change::Fail(json!({"code": -1, "message": "x"}));
    let failed = modify(&*store, &id("a"), &fail, at(2), RETENTION)
        .await
        .expect("modify");
    assert!(matches!(failed, Modified::Applied(_)));
    for change in [Change::Cancel, Change::Complete(json!({})), Change::Expire] {
        let outcome = modify(&*store, &id("a"), &change, at(3), RETENTION)
            .await
            .expect("modify");
        assert!(
            matches!(outcome, Modified::Refused(..)),
            "{change:?} changed a failed task"
        );
    }
    let read = store.get(&id("a")).await.expect("get").expect("record");
    assert_eq!(read.status(), &TaskStatus::Failed);
    assert!(matches!(
        modify(&*store, &id("zz"), &Change::Cancel, at(1), RETENTION)
            .await
            .expect("modify"),
        Modified::Missing
    ));
}

/// The expiry index finds due records in order, follows changes and deletes.
pub async fn expiry_index(store: SharedStore) {
    for (name, ttl) in [
        ("late", Some(300)),
        ("early", Some(100)),
        ("mid", Some(200)),
        ("never", None),
    ] {
        store.create(record(name, 0, ttl)).await.expect("create");
    }
    let due = async |now: u64, limit: usize| -> Vec<String> {
        store
            .expired(at(now), limit)
            .await
            .expect("expired")
            .into_iter()
            .map(TaskId::into_inner)
            .collect()
    };
    assert_eq!(due(99, 10).await, Vec::<String>::new());
    assert_eq!(due(250, 10).await, ["early", "mid"]);
    assert_eq!(
        due(1_000, 2).await,
        ["early", "mid"],
        "limit, soonest first"
    );
    // A heartbeat moves "early" later; finishing "mid" moves it to now + retention.
    modify(
        &*store,
        &id("early"),
        &Change::ExtendTtl(Duration::from_secs(1)),
        at(50),
        RETENTION,
    )
    .await
    .expect("modify");
    modify(
        &*store,
        &id("mid"),
        &Change::Cancel,
        at(60),
        Duration::from_millis(10),
    )
    .await
    .expect("modify");
    assert_eq!(due(250, 10).await, ["mid"]);
    store.delete(&id("mid")).await.expect("delete");
    assert_eq!(due(2_000, 10).await, ["late", "early"]);
}

/// Creates and changes are announced on the change feed.
pub async fn change_feed(store: SharedStore) {
    let mut feed = store.changes();
    store.create(record("a", 1, None)).await.expect("create");
    modify(
        &*store,
        &id("a"),
        &Change::StatusMessage("m".into()),
        at(2),
        RETENTION,
    )
    .await
    .expect("modify");
    for _ in 0..2 {
        let announced = tokio::time::timeout(Duration::from_secs(5), feed.recv())
            .await
            .expect("a change is announced within 5 s")
            .expect("the feed is open");
        assert_eq!(announced, id("a"));
    }
}

/// Many concurrent changes to one record: none is lost.
pub async fn concurrent_updates_are_not_lost(store: SharedStore) {
    store.create(record("a", 1, None)).await.expect("create");
    let mut writers = Vec::new();
    for n in 0..40u64 {
        let store = Arc::clone(&store);
        writers.push(tokio::spawn(async move {
            let change = Change::RequestInput {
                key: format!("k{n}"),
                request: json!({"method": "roots/list"}),
            };
            modify(&*store, &id("a"), &change, at(n), RETENTION)
                .await
                .expect("modify")
        }));
    }
    for writer in writers {
        assert!(matches!(writer.await.expect("join"), Modified::Applied(_)));
    }
    let read = store.get(&id("a")).await.expect("get").expect("record");
    assert_eq!(read.version(), 40, "every change bumped the version once");
    assert_eq!(read.input_requests().len(), 40, "no change was lost");
}

/// Cancel against complete: exactly one wins and the loser changes nothing.
pub async fn cancel_races_complete(store: SharedStore) {
    for round in 0..20 {
        let name = format!("r{round}");
        store.create(record(&name, 1, None)).await.expect("create");
        let (a, b) = (Arc::clone(&store), Arc::clone(&store));
        let (ida, idb) = (id(&name), id(&name));
        let cancel =
            tokio::spawn(async move { modify(&*a, &ida, &Change::Cancel, at(2), RETENTION).await });
        let complete = tokio::spawn(async move {
            let change = Change::Complete(json!({"content": []}));
            modify(&*b, &idb, &change, at(2), RETENTION).await
        });
        let results = [
            cancel.await.expect("join").expect("modify"),
            complete.await.expect("join").expect("modify"),
        ];
        let applied = results
            .iter()
            .filter(|r| matches!(r, Modified::Applied(_)))
            .count();
        assert_eq!(applied, 1, "exactly one terminal transition wins");
        let read = store.get(&id(&name)).await.expect("get").expect("record");
        assert!(matches!(
            read.status(),
            TaskStatus::Cancelled | TaskStatus::Completed
        ));
        assert_eq!(read.version(), 1);
    }
}

/// A record's runner, resumable call and checkpoint survive the store and
/// its swaps.
pub async fn runners_round_trip(store: SharedStore) {
    let runner = RunnerId::new("runner-a");
    let call = json!({"name": "build", "arguments": {"target": "x"}});
    let created = record("a", 1, Some(10_000)).with_runner(runner.clone(), Some(call.clone()));
    store.create(created.clone()).await.expect("create");
    let read = store.get(&id("a")).await.expect("get").expect("record");
    assert_eq!(read, created);
    assert_eq!(
        (read.runner(), read.resumable_call()),
        (Some(&runner), Some(&call))
    );
    let state = json!({"done": 3, "cursor": "ü-🦀"});
    let kept = modify_as(
        &*store,
        &id("a"),
        &Change::Checkpoint {
            state: state.clone(),
            message: Some("step 4".into()),
        },
        &runner,
        at(2),
        RETENTION,
    )
    .await
    .expect("modify");
    assert!(matches!(kept, Modified::Applied(_)), "{kept:?}");
    let next = RunnerId::new("runner-b");
    let resumed = modify_as(
        &*store,
        &id("a"),
        &Change::Resume(next.clone()),
        &runner,
        at(2),
        RETENTION,
    )
    .await
    .expect("modify");
    let Modified::Applied(resumed) = resumed else {
        panic!("a resumable task is resumed by its runner's name: {resumed:?}")
    };
    assert_eq!((resumed.runner(), resumed.resumed()), (Some(&next), 1));
    assert_eq!(resumed.checkpoint(), Some(&state), "the checkpoint is kept");
    assert_eq!(
        store.get(&id("a")).await.expect("get").as_ref(),
        Some(&resumed)
    );
    let stale = modify_as(
        &*store,
        &id("a"),
        &Change::StatusMessage("old runner".into()),
        &runner,
        at(3),
        RETENTION,
    )
    .await
    .expect("modify");
    assert!(
        matches!(stale, Modified::Refused(_, TransitionError::NotRunner)),
        "the old runner is fenced off: {stale:?}"
    );
}

/// Each owner's records in the byte order of their ids, a page at a time:
/// `after` exclusive and a position (any id will do), `limit` honoured,
/// other owners' records never listed.
pub async fn list_owned_pages(store: SharedStore) {
    // 25 records of owner-a and 10 of owner-b, their ids interleaved, and
    // created out of order; one owner's name is the start of another's.
    for n in (0..25).map(|n| (n * 7) % 25) {
        store
            .create(owned(&format!("{n:02}a"), "owner-a"))
            .await
            .expect("create");
        if n < 10 {
            store
                .create(owned(&format!("{n:02}b"), "owner-b"))
                .await
                .expect("create");
        }
    }
    store
        .create(owned("03c", "owner-ab"))
        .await
        .expect("create");
    let ids = |owner: char, range: std::ops::Range<usize>| -> Vec<String> {
        range.map(|n| format!("{n:02}{owner}")).collect()
    };
    assert_eq!(
        listed(&store, "owner-a", None, 0).await,
        Vec::<String>::new()
    );
    assert_eq!(
        listed(&store, "nobody", None, 10).await,
        Vec::<String>::new()
    );

    // Pages of 10 over 25: 10, 10, 5, then none; nothing twice.
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = listed(&store, "owner-a", after.as_deref(), 10).await;
        if page.is_empty() {
            break;
        }
        after = page.last().cloned();
        pages.push(page);
    }
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [10, 10, 5],
        "pages of 10 over 25 records"
    );
    assert_eq!(
        pages.concat(),
        ids('a', 0..25),
        "every record once, in id order"
    );
    assert_eq!(listed(&store, "owner-b", None, 100).await, ids('b', 0..10));
    assert_eq!(listed(&store, "owner-ab", None, 100).await, ["03c"]);

    // `after` is a position: an id that is not stored, or another owner's.
    assert_eq!(
        listed(&store, "owner-a", Some("12"), 2).await,
        ["12a", "13a"]
    );
    assert_eq!(
        listed(&store, "owner-a", Some("12b"), 2).await,
        ["13a", "14a"]
    );
    assert_eq!(
        listed(&store, "owner-a", Some("12a"), 2).await,
        ["13a", "14a"]
    );
    assert_eq!(
        listed(&store, "owner-a", Some("24a"), 10).await,
        Vec::<String>::new()
    );
    assert_eq!(
        listed(&store, "owner-a", Some("~"), 10).await,
        Vec::<String>::new()
    );
    assert_eq!(listed(&store, "owner-a", Some(""), 3).await, ids('a', 0..3));

    // The records are the stored ones, whole.
    let first = store
        .list_owned(&Principal::new("owner-b"), None, 1)
        .await
        .expect("list_owned");
    assert_eq!(first, [owned("00b", "owner-b")]);

    // Byte order, not a collation: "Ab" < "B" < "a" < "ä".
    for name in ["ä", "a", "B", "Ab"] {
        store.create(owned(name, "owner-d")).await.expect("create");
    }
    assert_eq!(
        listed(&store, "owner-d", None, 10).await,
        ["Ab", "B", "a", "ä"]
    );
    assert_eq!(listed(&store, "owner-d", Some("B"), 10).await, ["a", "ä"]);
}

/// Listing follows creates, changes and deletes: finished records are
/// listed as long as they are kept, deleted ones never.
pub async fn list_owned_follows_changes(store: SharedStore) {
    for name in ["a1", "a2", "a3", "a4"] {
        store.create(owned(name, "owner-a")).await.expect("create");
    }
    store.create(owned("b1", "owner-b")).await.expect("create");
    modify(
        &*store,
        &id("a2"),
        &Change::Complete(json!({"content": []})),
        at(2),
        RETENTION,
    )
    .await
    .expect("modify");
    modify(
        &*store,
        &id("a3"),
        &Change::StatusMessage("m".into()),
        at(2),
        RETENTION,
    )
    .await
    .expect("modify");
    let all = store
        .list_owned(&Principal::new("owner-a"), None, 10)
        .await
        .expect("list_owned");
    let mut expected = Vec::new();
    for name in ["a1", "a2", "a3", "a4"] {
        expected.push(store.get(&id(name)).await.expect("get").expect("record"));
    }
    assert_eq!(
        all, expected,
        "each record as `get` reads it, finished ones too"
    );
    assert_eq!(all[1].status(), &TaskStatus::Completed);

    store.delete(&id("a2")).await.expect("delete");
    store.delete(&id("a4")).await.expect("delete");
    store.delete(&id("b1")).await.expect("delete");
    assert_eq!(listed(&store, "owner-a", None, 10).await, ["a1", "a3"]);
    assert_eq!(listed(&store, "owner-a", Some("a1"), 10).await, ["a3"]);
    assert_eq!(
        listed(&store, "owner-b", None, 10).await,
        Vec::<String>::new()
    );
    store.delete(&id("a1")).await.expect("delete");
    store.delete(&id("a3")).await.expect("delete");
    assert_eq!(
        listed(&store, "owner-a", None, 10).await,
        Vec::<String>::new()
    );
    // An owner whose records were all deleted may have new ones.
    store.create(owned("a5", "owner-a")).await.expect("create");
    assert_eq!(listed(&store, "owner-a", None, 10).await, ["a5"]);
}

fn replicas_of(store: &SharedStore) -> &dyn super::Replicas {
    store
        .replicas()
        .expect("run_replicas is for stores with Replicas (TaskStore::replicas)")
}

/// A lease that ran out is claimed (never renewed after), its unfinished
/// tasks are listed once taken, and a lease renewed in time is not.
pub async fn leases_run_out_and_are_claimed(store: SharedStore) {
    let replicas = replicas_of(&store);
    let (short, long) = (RunnerId::new("short"), RunnerId::new("long"));
    replicas
        .acquire(&short, Duration::from_millis(300))
        .await
        .expect("acquire");
    replicas
        .acquire(&long, Duration::from_secs(30))
        .await
        .expect("acquire");
    let of = |name: &str, runner: &RunnerId| {
        record(name, 1, Some(600_000)).with_runner(runner.clone(), None)
    };
    for task in [of("s1", &short), of("s2", &short), of("l1", &long)] {
        store.create(task).await.expect("create");
    }
    // A finished task of the short runner is no orphan.
    store.create(of("s3", &short)).await.expect("create");
    modify(
        &*store,
        &id("s3"),
        &Change::Complete(json!({})),
        at(2),
        RETENTION,
    )
    .await
    .expect("modify");
    assert!(
        replicas.orphans(10).await.expect("orphans").is_empty(),
        "no lease ran out yet"
    );
    assert!(
        replicas
            .renew(&short, Duration::from_millis(300))
            .await
            .expect("renew")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        replicas
            .renew(&long, Duration::from_secs(30))
            .await
            .expect("renew"),
        "a lease renewed in time stays"
    );
    let mut orphans = replicas.orphans(10).await.expect("orphans");
    orphans.sort_by(|a, b| a.id.expose().cmp(b.id.expose()));
    assert_eq!(
        orphans,
        [
            Orphan::new(id("s1"), short.clone()),
            Orphan::new(id("s2"), short.clone())
        ],
        "the unfinished tasks of the lease that ran out, and only those"
    );
    assert!(
        !replicas
            .renew(&short, Duration::from_secs(30))
            .await
            .expect("renew"),
        "a claimed lease cannot be renewed"
    );
    assert_eq!(
        replicas.orphans(1).await.expect("orphans").len(),
        1,
        "at most `limit`"
    );
    for name in ["s1", "s2"] {
        let ended = modify_as(
            &*store,
            &id(name),
            &Change::RunnerStopped,
            &short,
            at(3),
            RETENTION,
        )
        .await
        .expect("modify");
        let Modified::Applied(ended) = ended else {
            panic!("the takeover applies: {ended:?}")
        };
        assert_eq!(ended.status(), &TaskStatus::Failed);
        assert_eq!(ended.status_message(), Some(STOPPED_MESSAGE));
    }
    assert!(
        replicas.orphans(10).await.expect("orphans").is_empty(),
        "taken over, a task is no orphan any more"
    );
    // A deleted task of a claimed runner is no orphan either.
    let late = RunnerId::new("late");
    replicas
        .acquire(&late, Duration::from_millis(100))
        .await
        .expect("acquire");
    store.create(of("gone", &late)).await.expect("create");
    store.delete(&id("gone")).await.expect("delete");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(replicas.orphans(10).await.expect("orphans").is_empty());
}

/// Several processes take over the same orphans at once: each task is
/// taken over exactly once.
pub async fn takeovers_race(store: SharedStore) {
    let replicas = replicas_of(&store);
    let dead = RunnerId::new("dead");
    replicas
        .acquire(&dead, Duration::from_millis(100))
        .await
        .expect("acquire");
    for n in 0..10 {
        let task =
            record(&format!("t{n}"), 1, None).with_runner(dead.clone(), Some(json!({"name": "x"})));
        store.create(task).await.expect("create");
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut takers = Vec::new();
    for taker in 0..4 {
        let store = Arc::clone(&store);
        takers.push(tokio::spawn(async move {
            let replicas = replicas_of(&store);
            let orphans = replicas.orphans(100).await.expect("orphans");
            let mut won = 0;
            for orphan in orphans {
                let change = Change::Resume(RunnerId::new(format!("taker-{taker}")));
                let taken = modify_as(
                    &*store,
                    &orphan.id,
                    &change,
                    &orphan.runner,
                    at(2),
                    RETENTION,
                )
                .await
                .expect("modify");
                if matches!(taken, Modified::Applied(_)) {
                    won += 1;
                }
            }
            won
        }));
    }
    let mut won = 0;
    for taker in takers {
        won += taker.await.expect("join");
    }
    assert_eq!(won, 10, "each orphan was taken over exactly once");
    for n in 0..10 {
        let read = store
            .get(&id(&format!("t{n}")))
            .await
            .expect("get")
            .expect("record");
        assert_eq!(read.resumed(), 1, "resumed once");
        assert_ne!(read.runner(), Some(&dead));
    }
    assert!(replicas.orphans(100).await.expect("orphans").is_empty());
}
