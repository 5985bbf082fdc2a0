//! The contract of a read cache kept coherent by a store's change feed
//! (see [`FeedCache`](crate::store::FeedCache)), for stores shared by
//! several processes that keep one: two handles of one store race a read
//! against another's completion, and the reader never answers the task as
//! running once its own feed told of the completion.

use std::time::Duration;

use serde_json::json;

use crate::store::{Change, Principal, SharedStore, Swap, TaskRecord};
use crate::task::{TaskId, Ttl, UnixMillis};

/// Waits until `feed` carries `id` (at most 5 s).
async fn announced(feed: &mut tokio::sync::broadcast::Receiver<TaskId>, id: &TaskId) {
    use tokio::sync::broadcast::error::RecvError;
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match feed.recv().await {
                Ok(seen) if &seen == id => return,
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => panic!("the feed closed"),
            }
        }
    })
    .await
    .expect("the id reached the feed within 5 s");
}

/// 40 rounds: `a` creates a task and reads it over and over while `b`
/// completes it; once `a`'s feed has the completion, `a` answers it
/// finished every time (its cache never keeps the older answer).
pub async fn a_finished_task_is_never_answered_as_running(a: SharedStore, b: SharedStore) {
    for n in 0..40 {
        let created = TaskRecord::new(
            TaskId::new(format!("finished-race-{n}")),
            Principal::new("cache"),
            UnixMillis::now(),
            Ttl::Unlimited,
            None,
        );
        let id = created.id().clone();
        let mut feed = a.changes();
        a.create(created.clone()).await.expect("create");
        announced(&mut feed, &id).await;
        b.get(&id).await.expect("get");
        // Reads on A race B's completion, on another connection.
        let racing = async {
            for _ in 0..20 {
                a.get(&id).await.expect("get");
                tokio::task::yield_now().await;
            }
        };
        let completing = async {
            let swap = created
                .apply(
                    &Change::Complete(json!({"content": []})),
                    UnixMillis::now(),
                    Duration::from_secs(600),
                )
                .expect("a transition");
            assert!(matches!(
                b.compare_and_swap(swap).await.expect("swap"),
                Swap::Swapped
            ));
        };
        tokio::join!(racing, completing);
        announced(&mut feed, &id).await;
        for _ in 0..5 {
            let seen = a.get(&id).await.expect("get").expect("found");
            assert!(
                seen.status().is_terminal(),
                "round {n}: {:?}",
                seen.status()
            );
        }
    }
}
