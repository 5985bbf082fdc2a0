//! The checks of what an operator needs from a store: the task hash key
//! and, for the admin command, every caller's tasks.

use std::future::Future;

use crate::store::SharedStore;

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
