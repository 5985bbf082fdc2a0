//! The checks of what an operator needs from a store: the task hash key
//! and, for the admin command, every caller's tasks.

use std::future::Future;
use std::time::Duration;

use crate::store::{Change, Principal, SharedStore, TaskRecord, modify};
use crate::task::{TaskId, Ttl, UnixMillis};

fn owned(name: &str, owner: &str) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(name),
        Principal::new(owner),
        UnixMillis::new(1),
        Ttl::from_millis(600_000),
        Some(Duration::from_millis(100)),
    )
}

async fn all(store: &SharedStore, after: Option<&str>, limit: usize) -> Vec<String> {
    let after = after.map(TaskId::new);
    let records = store
        .list_all(after.as_ref(), limit)
        .await
        .expect("list_all");
    assert!(records.len() <= limit, "at most `limit` records");
    records
        .into_iter()
        .map(|record| record.id().expose().to_owned())
        .collect()
}

/// Every owner's records in the byte order of their ids, a page at a
/// time (`after` a position), changed and finished ones too, deleted ones
/// never; the records whole.
pub async fn list_all_pages(store: SharedStore) {
    for n in (0..12).map(|n| (n * 5) % 12) {
        let owner = if n % 3 == 0 { "owner-b" } else { "owner-a" };
        store
            .create(owned(&format!("{n:02}"), owner))
            .await
            .expect("create");
    }
    let ids = |range: std::ops::Range<usize>| -> Vec<String> {
        range.map(|n| format!("{n:02}")).collect()
    };
    assert_eq!(all(&store, None, 0).await, Vec::<String>::new());
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = all(&store, after.as_deref(), 5).await;
        if page.is_empty() {
            break;
        }
        after = page.last().cloned();
        pages.push(page);
    }
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [5, 5, 2],
        "pages of 5 over 12 records"
    );
    assert_eq!(
        pages.concat(),
        ids(0..12),
        "every owner's records, in id order"
    );
    assert_eq!(
        all(&store, Some("04x"), 2).await,
        ["05", "06"],
        "a position"
    );
    assert_eq!(all(&store, Some("~"), 10).await, Vec::<String>::new());

    let first = store.list_all(None, 1).await.expect("list_all");
    assert_eq!(first, [owned("00", "owner-b")], "the stored record, whole");

    // A finished record stays listed; a deleted one is gone.
    let done = Change::Complete(serde_json::json!({"content": []}));
    let finished = modify(
        &*store,
        &TaskId::new("03"),
        &done,
        UnixMillis::new(2),
        Duration::from_secs(60),
    )
    .await
    .expect("modify");
    assert!(matches!(finished, crate::store::Modified::Applied(_)));
    store.delete(&TaskId::new("04")).await.expect("delete");
    let listed = all(&store, None, 100).await;
    assert!(
        listed.contains(&"03".to_owned()),
        "a finished record is listed"
    );
    assert!(
        !listed.contains(&"04".to_owned()),
        "a deleted record is not"
    );
    assert_eq!(listed.len(), 11);
}

/// The task hash key is the same at every call.
pub async fn hash_key_is_stable(store: SharedStore) {
    let first = store.hash_key().await.expect("hash_key");
    let second = store.hash_key().await.expect("hash_key again");
    assert_eq!(first, second, "the hash key changed between two calls");
}

/// Two handles of one store (the second made by `reopen` after the first
/// is dropped, as a restarted server or `mcp-tasks admin` opens it) read
/// the same task hash key, so they name every task by the same hash.
pub async fn hash_key_is_shared<F, Fut>(first: SharedStore, reopen: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = SharedStore>,
{
    let key = first.hash_key().await.expect("hash_key");
    drop(first);
    let second = reopen().await;
    assert_eq!(
        second
            .hash_key()
            .await
            .expect("hash_key of the second handle"),
        key,
        "two handles of one store read different hash keys"
    );
}
