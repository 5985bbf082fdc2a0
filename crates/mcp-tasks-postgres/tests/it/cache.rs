//! The read cache of a replica against a real PostgreSQL: a read of a
//! record this replica knows costs no round trip (a row changed behind the
//! replicas' backs, with no notification, is not seen), a write on another
//! replica is seen once it returned and this replica's feed has its id, a
//! lost `LISTEN` connection empties the cache, an expired record is never
//! answered from it, a finished task is never answered as still running
//! once the feed has its completion, and a creation is announced to its own
//! replica only.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::store::{Change, Principal, Replicas, Swap, TaskRecord, TaskStore, Transition};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};
use tokio::sync::broadcast;

async fn replica(server: &PostgresServer, schema: &str) -> PostgresStore {
    PostgresStore::connect_with(
        &server.url(),
        PostgresOptions::default().with_schema(schema),
    )
    .await
    .expect("connect to the test's PostgreSQL")
}

fn record(id: &str, ttl: Ttl) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new("cache"),
        UnixMillis::now(),
        ttl,
        None,
    )
}

fn change(record: &TaskRecord, change: &Change) -> Transition {
    record
        .apply(change, UnixMillis::now(), Duration::from_secs(600))
        .expect("a transition")
}

/// Waits until `feed` carries `id`.
async fn announced(feed: &mut broadcast::Receiver<TaskId>, id: &TaskId) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match feed.recv().await {
                Ok(seen) if &seen == id => return,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the feed closed"),
            }
        }
    })
    .await
    .expect("the id reached the feed within 5 s");
}

/// Writes the record's status message in PostgreSQL behind every
/// replica's back (no notification): what a lost feed message leaves.
fn rewrite_silently(server: &PostgresServer, schema: &str, id: &str, message: &str) {
    let changed = server.psql(&format!(
        "UPDATE {schema}.tasks SET record = jsonb_set(record::jsonb, '{{status_message}}', \
         to_jsonb('{message}'::text))::text WHERE id = '{id}' RETURNING 1"
    ));
    assert_eq!(changed, "1", "the row was rewritten");
}

async fn message(store: &PostgresStore, id: &TaskId) -> Option<String> {
    let found = store.get(id).await.expect("get").expect("the record");
    found.status_message().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_another_replica_is_seen_once_the_feed_has_it_and_known_reads_are_free() {
    let server = PostgresServer::start();
    let (a, b) = (replica(&server, "c1").await, replica(&server, "c1").await);
    let created = record("c1-task", Ttl::Unlimited);
    let id = created.id().clone();
    let mut feed = a.changes();
    a.create(created.clone()).await.expect("create");
    // Its own announcement first, so that the one awaited below is B's.
    announced(&mut feed, &id).await;

    // B reads it once from PostgreSQL, then from its cache; A never reads it.
    let on_b = b.get(&id).await.expect("get").expect("found");
    rewrite_silently(&server, "c1", "c1-task", "behind their backs");
    for _ in 0..10 {
        assert_eq!(
            a.get(&id).await.expect("get").as_ref(),
            Some(&created),
            "A's own write is read without a round trip"
        );
    }
    assert_eq!(message(&b, &id).await, None, "B's read is kept");

    let swap = change(&on_b, &Change::StatusMessage("by B".into()));
    let written = swap.record().clone();
    assert!(matches!(
        b.compare_and_swap(swap).await.expect("swap"),
        Swap::Swapped
    ));
    announced(&mut feed, &id).await;
    assert_eq!(a.get(&id).await.expect("get").as_ref(), Some(&written));
    // B's own write is in B's cache.
    rewrite_silently(&server, "c1", "c1-task", "behind their backs again");
    assert_eq!(b.get(&id).await.expect("get").as_ref(), Some(&written));

    // A deletion is announced too: no replica answers the record after it.
    let mut feed = a.changes();
    b.delete(&id).await.expect("delete");
    announced(&mut feed, &id).await;
    assert_eq!(a.get(&id).await.expect("get"), None);
    assert_eq!(b.get(&id).await.expect("get"), None);
}

/// A creation notifies nothing to the other replicas (none can know the
/// id yet): only its own store's feed tells of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_is_announced_on_its_own_replica_only() {
    let server = PostgresServer::start();
    let (a, b) = (replica(&server, "c5").await, replica(&server, "c5").await);
    let created = record("c5-task", Ttl::Unlimited);
    let id = created.id().clone();
    let (mut on_a, mut on_b) = (a.changes(), b.changes());
    a.create(created.clone()).await.expect("create");
    assert_eq!(on_a.try_recv().ok().as_ref(), Some(&id), "A tells of it");
    // B's feed hears nothing of it (a notification would be there by now,
    // as the change below shows).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(on_b.try_recv().is_err(), "nothing notified to B");
    // B knows it from PostgreSQL, and then a change reaches both.
    let on_b_read = b.get(&id).await.expect("get").expect("found");
    let swap = change(&on_b_read, &Change::StatusMessage("by B".into()));
    assert!(matches!(
        b.compare_and_swap(swap).await.expect("swap"),
        Swap::Swapped
    ));
    announced(&mut on_a, &id).await;
    announced(&mut on_b, &id).await;
    assert_eq!(
        message(&a, &id).await.as_deref(),
        Some("by B"),
        "A's cached creation was dropped by B's change"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_gap_empties_the_cache() {
    let server = PostgresServer::start();
    let a = replica(&server, "c2").await;
    let created = record("c2-task", Ttl::Unlimited);
    let id = created.id().clone();
    a.create(created).await.expect("create");
    assert_eq!(message(&a, &id).await, None);

    // A message lost: the cache answers what it had (nothing said otherwise)...
    rewrite_silently(&server, "c2", "c2-task", "behind its back");
    assert_eq!(message(&a, &id).await, None);
    // ...until the LISTEN connection is lost and made again: then it
    // forgets all.
    let mut gaps = a.feed_gaps();
    gaps.borrow_and_update();
    let ended = server.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'",
    );
    assert_eq!(ended, "1", "the feed's connection was ended");
    tokio::time::timeout(Duration::from_secs(10), gaps.changed())
        .await
        .expect("the feed listened again within 10 s")
        .expect("the store is alive");
    assert_eq!(message(&a, &id).await.as_deref(), Some("behind its back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_record_is_never_answered_from_the_cache() {
    let server = PostgresServer::start();
    let a = replica(&server, "c3").await;
    let created = record("c3-task", Ttl::Limited(Duration::from_millis(300)));
    let id = created.id().clone();
    a.create(created).await.expect("create");
    rewrite_silently(&server, "c3", "c3-task", "in PostgreSQL");
    assert_eq!(message(&a, &id).await, None, "cached while it lives");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        message(&a, &id).await.as_deref(),
        Some("in PostgreSQL"),
        "past its expiresAt the record is read from PostgreSQL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_task_is_never_answered_as_running_once_the_feed_has_it() {
    let server = PostgresServer::start();
    let (a, b) = (replica(&server, "c4").await, replica(&server, "c4").await);
    mcp_tasks::store::contract::a_finished_task_is_never_answered_as_running(
        Arc::new(a),
        Arc::new(b),
    )
    .await;
}
