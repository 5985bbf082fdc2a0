//! The contract every [`TaskStore`](super::TaskStore) backend must pass.
//!
//! A backend's tests call [`run_all`] with a function that makes a fresh,
//! empty store; each check panics with a message naming what broke.
//!
//! ```ignore
//! mcp_tasks::store::contract::run_all(|| async { Arc::new(MyStore::open_temp()) as SharedStore }).await;
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Change, Modified, Principal, SharedStore, Swap, TaskRecord, modify};
use crate::task::{TaskId, TaskStatus, Ttl, UnixMillis};

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
