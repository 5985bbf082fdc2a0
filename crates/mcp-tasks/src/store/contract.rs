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

use super::{Change, Modified, SharedStore, Swap, TaskRecord, modify};
use crate::task::TaskStatus;

const RETENTION: u64 = 60_000;

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

fn record(id: &str, now: u64, ttl: Option<u64>) -> TaskRecord {
    TaskRecord::new(id, "owner-a", now, ttl, Some(100))
}

/// Create is atomic and strongly consistent; a duplicate id is refused.
pub async fn create_and_get(store: SharedStore) {
    assert_eq!(
        store.get("a").await.expect("get"),
        None,
        "an empty store has no record"
    );
    store.create(record("a", 1, None)).await.expect("create");
    let read = store
        .get("a")
        .await
        .expect("get")
        .expect("a created record is found at once");
    assert_eq!(read, record("a", 1, None));
    assert!(
        store.create(record("a", 2, None)).await.is_err(),
        "a duplicate id is refused"
    );
    store.delete("a").await.expect("delete");
    assert_eq!(
        store.get("a").await.expect("get"),
        None,
        "a deleted record is gone"
    );
    store
        .delete("a")
        .await
        .expect("deleting a missing record is not an error");
}

/// Compare-and-set swaps only on the expected version.
pub async fn compare_and_swap(store: SharedStore) {
    store.create(record("a", 1, None)).await.expect("create");
    let v0 = store.get("a").await.expect("get").expect("record");
    let v1 = v0
        .apply(&Change::StatusMessage("one".into()), 2, RETENTION)
        .expect("apply");
    assert_eq!(
        store.compare_and_swap(0, v1.clone()).await.expect("cas"),
        Swap::Swapped
    );
    let stale = v0
        .apply(&Change::StatusMessage("lost".into()), 3, RETENTION)
        .expect("apply");
    match store.compare_and_swap(0, stale).await.expect("cas") {
        Swap::Conflict(current) => {
            assert_eq!(*current, v1, "a conflict returns the current record")
        }
        other => panic!("a stale version must conflict, got {other:?}"),
    }
    let missing = record("nope", 1, None);
    assert_eq!(
        store.compare_and_swap(0, missing).await.expect("cas"),
        Swap::Missing
    );
}

/// Every field survives the store.
pub async fn fields_round_trip(store: SharedStore) {
    let mut full = record("a", 1_000, Some(5_000));
    full.status_message = Some("héllo ✓".into());
    full.status = TaskStatus::InputRequired;
    full.input_requests
        .insert("k".into(), json!({"method": "roots/list"}));
    full.issued_keys.insert("k".into());
    full.issued_keys.insert("old".into());
    full.input_responses.insert(
        "old".into(),
        json!({"action": "accept", "content": {"n": 1.5}}),
    );
    full.cancel_requested = true;
    store.create(full.clone()).await.expect("create");
    assert_eq!(store.get("a").await.expect("get"), Some(full.clone()));
    let complete = Change::Complete(json!({"content": [], "isError": true}));
    let done = full.apply(&complete, 2_000, RETENTION).expect("complete");
    store
        .compare_and_swap(full.version, done.clone())
        .await
        .expect("cas");
    assert_eq!(store.get("a").await.expect("get"), Some(done));
}

/// Through the store, a finished task refuses every change.
pub async fn terminal_states_stay(store: SharedStore) {
    store.create(record("a", 1, None)).await.expect("create");
    let fail = Change::Fail(json!({"code": -1, "message": "x"}));
    let failed = modify(&*store, "a", &fail, 2, RETENTION)
        .await
        .expect("modify");
    assert!(matches!(failed, Modified::Applied(_)));
    for change in [Change::Cancel, Change::Complete(json!({})), Change::Expire] {
        let outcome = modify(&*store, "a", &change, 3, RETENTION)
            .await
            .expect("modify");
        assert!(
            matches!(outcome, Modified::Refused(..)),
            "{change:?} changed a failed task"
        );
    }
    let read = store.get("a").await.expect("get").expect("record");
    assert_eq!(read.status, TaskStatus::Failed);
    assert!(matches!(
        modify(&*store, "zz", &Change::Cancel, 1, 1)
            .await
            .expect("modify"),
        Modified::Missing
    ));
}

/// The expiry index finds due records in order, follows changes and deletes.
pub async fn expiry_index(store: SharedStore) {
    store
        .create(record("late", 0, Some(300)))
        .await
        .expect("create");
    store
        .create(record("early", 0, Some(100)))
        .await
        .expect("create");
    store
        .create(record("mid", 0, Some(200)))
        .await
        .expect("create");
    store
        .create(record("never", 0, None))
        .await
        .expect("create");
    assert_eq!(
        store.expired(99, 10).await.expect("expired"),
        Vec::<String>::new()
    );
    assert_eq!(
        store.expired(250, 10).await.expect("expired"),
        ["early", "mid"]
    );
    assert_eq!(
        store.expired(1_000, 2).await.expect("expired"),
        ["early", "mid"],
        "limit, oldest first"
    );
    // A heartbeat moves "early" later; finishing "mid" moves it to now + retention.
    modify(
        &*store,
        "early",
        &Change::ExtendTtl { by_ms: 1_000 },
        50,
        RETENTION,
    )
    .await
    .expect("modify");
    modify(&*store, "mid", &Change::Cancel, 60, 10)
        .await
        .expect("modify");
    assert_eq!(store.expired(250, 10).await.expect("expired"), ["mid"]);
    store.delete("mid").await.expect("delete");
    assert_eq!(
        store.expired(2_000, 10).await.expect("expired"),
        ["late", "early"]
    );
}

/// Creates and changes are announced on the change feed.
pub async fn change_feed(store: SharedStore) {
    let mut feed = store.changes();
    store.create(record("a", 1, None)).await.expect("create");
    modify(
        &*store,
        "a",
        &Change::StatusMessage("m".into()),
        2,
        RETENTION,
    )
    .await
    .expect("modify");
    for _ in 0..2 {
        let id = tokio::time::timeout(Duration::from_secs(5), feed.recv())
            .await
            .expect("a change is announced within 5 s")
            .expect("the feed is open");
        assert_eq!(id, "a");
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
            modify(&*store, "a", &change, n, RETENTION)
                .await
                .expect("modify")
        }));
    }
    for writer in writers {
        assert!(matches!(writer.await.expect("join"), Modified::Applied(_)));
    }
    let read = store.get("a").await.expect("get").expect("record");
    assert_eq!(read.version, 40, "every change bumped the version once");
    assert_eq!(read.input_requests.len(), 40, "no change was lost");
}

/// Cancel against complete: exactly one wins and the loser changes nothing.
pub async fn cancel_races_complete(store: SharedStore) {
    for round in 0..20 {
        let id = format!("r{round}");
        store.create(record(&id, 1, None)).await.expect("create");
        let (a, b) = (Arc::clone(&store), Arc::clone(&store));
        let (ida, idb) = (id.clone(), id.clone());
        let cancel =
            tokio::spawn(async move { modify(&*a, &ida, &Change::Cancel, 2, RETENTION).await });
        let complete = tokio::spawn(async move {
            modify(
                &*b,
                &idb,
                &Change::Complete(json!({"content": []})),
                2,
                RETENTION,
            )
            .await
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
        let read = store.get(&id).await.expect("get").expect("record");
        assert!(matches!(
            read.status,
            TaskStatus::Cancelled | TaskStatus::Completed
        ));
        assert_eq!(read.version, 1);
    }
}
