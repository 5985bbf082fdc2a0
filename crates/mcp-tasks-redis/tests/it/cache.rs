//! The read cache of a replica against a real `redis-server`: a read of a
//! record this replica knows costs no round trip (counted in `INFO
//! commandstats`), a write on another replica is seen once it returned and
//! this replica's feed has its id, a feed gap empties the cache, an expired
//! record is never answered from it, a finished task is never answered
//! as still running once the feed has its completion, and a creation is
//! announced to its own replica only.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::store::{Change, Principal, Replicas, Swap, TaskRecord, TaskStore, Transition};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_redis::{RedisOptions, RedisStore};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::support::{calls, cli};

async fn replica(redis: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::connect_with(
        &redis.url(),
        RedisOptions::default().with_key_prefix(prefix),
    )
    .await
    .expect("connect to the test's redis-server")
}

/// How many `HMGET`s Redis ran so far (the store's reads).
fn reads(redis: &RedisServer) -> u64 {
    calls(redis, "hmget")
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

/// Writes the record's status message in Redis behind every replica's back
/// (no announcement): what a lost feed message leaves.
fn rewrite_silently(redis: &RedisServer, prefix: &str, id: &str, message: &str) {
    let key = format!("{prefix}task:{id}");
    let json = cli(redis, &["hget", &key, "r"]);
    let mut stored: Value = serde_json::from_str(&json).expect("the stored record is JSON");
    stored["status_message"] = json!(message);
    cli(redis, &["hset", &key, "r", &stored.to_string()]);
}

async fn message(store: &RedisStore, id: &TaskId) -> Option<String> {
    let found = store.get(id).await.expect("get").expect("the record");
    found.status_message().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_another_replica_is_seen_once_the_feed_has_it_and_known_reads_are_free() {
    let redis = RedisServer::start();
    let (a, b) = (replica(&redis, "c1:").await, replica(&redis, "c1:").await);
    let created = record("c1-task", Ttl::Unlimited);
    let id = created.id().clone();
    let mut feed = a.changes();
    a.create(created.clone()).await.expect("create");
    // Its own announcement first, so that the one awaited below is B's.
    announced(&mut feed, &id).await;

    let before = reads(&redis);
    for _ in 0..10 {
        assert_eq!(a.get(&id).await.expect("get").as_ref(), Some(&created));
    }
    assert_eq!(
        reads(&redis),
        before,
        "A's own write is read without a round trip"
    );
    // B reads once from Redis, then from its cache.
    let on_b = b.get(&id).await.expect("get").expect("found");
    b.get(&id).await.expect("get");
    assert_eq!(reads(&redis), before + 1);

    let swap = change(&on_b, &Change::StatusMessage("by B".into()));
    let written = swap.record().clone();
    assert!(matches!(
        b.compare_and_swap(swap).await.expect("swap"),
        Swap::Swapped
    ));
    announced(&mut feed, &id).await;
    assert_eq!(a.get(&id).await.expect("get").as_ref(), Some(&written));
    // B's own write is in B's cache.
    let before = reads(&redis);
    assert_eq!(b.get(&id).await.expect("get").as_ref(), Some(&written));
    assert_eq!(reads(&redis), before);

    // A deletion is announced too: no replica answers the record after it.
    let mut feed = a.changes();
    b.delete(&id).await.expect("delete");
    announced(&mut feed, &id).await;
    assert_eq!(a.get(&id).await.expect("get"), None);
    assert_eq!(b.get(&id).await.expect("get"), None);
}

/// A creation publishes nothing to the other replicas (none can know the
/// id yet): only its own store's feed tells of it. Every creation script
/// (plain, keyed, with seats) shares the record's writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_is_announced_on_its_own_replica_only() {
    let redis = RedisServer::start();
    let (a, b) = (replica(&redis, "c5:").await, replica(&redis, "c5:").await);
    let created = record("c5-task", Ttl::Unlimited);
    let id = created.id().clone();
    let (mut on_a, mut on_b) = (a.changes(), b.changes());
    let published = calls(&redis, "publish");
    a.create(created.clone()).await.expect("create");
    assert_eq!(calls(&redis, "publish"), published, "nothing published");
    assert_eq!(on_a.try_recv().ok().as_ref(), Some(&id), "A tells of it");
    // B knows it from Redis, and then a change reaches both.
    let on_b_read = b.get(&id).await.expect("get").expect("found");
    let swap = change(&on_b_read, &Change::StatusMessage("by B".into()));
    assert!(matches!(
        b.compare_and_swap(swap).await.expect("swap"),
        Swap::Swapped
    ));
    assert_eq!(calls(&redis, "publish"), published + 1);
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
    let redis = RedisServer::start();
    let a = replica(&redis, "c2:").await;
    let created = record("c2-task", Ttl::Unlimited);
    let id = created.id().clone();
    a.create(created).await.expect("create");
    assert_eq!(message(&a, &id).await, None);

    // A message lost: the cache answers what it had (nothing said otherwise)...
    rewrite_silently(&redis, "c2:", "c2-task", "behind its back");
    assert_eq!(message(&a, &id).await, None);
    // ...until the subscription is lost and made again: then it forgets all.
    let mut gaps = a.feed_gaps();
    gaps.borrow_and_update();
    cli(&redis, &["client", "kill", "type", "pubsub"]);
    tokio::time::timeout(Duration::from_secs(10), gaps.changed())
        .await
        .expect("the feed subscribed again within 10 s")
        .expect("the store is alive");
    assert_eq!(message(&a, &id).await.as_deref(), Some("behind its back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_record_is_never_answered_from_the_cache() {
    let redis = RedisServer::start();
    let a = replica(&redis, "c3:").await;
    let created = record("c3-task", Ttl::Limited(Duration::from_millis(300)));
    let id = created.id().clone();
    a.create(created).await.expect("create");
    rewrite_silently(&redis, "c3:", "c3-task", "in Redis");
    assert_eq!(message(&a, &id).await, None, "cached while it lives");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before = reads(&redis);
    assert_eq!(
        message(&a, &id).await.as_deref(),
        Some("in Redis"),
        "past its expiresAt the record is read from Redis"
    );
    assert_eq!(reads(&redis), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_task_is_never_answered_as_running_once_the_feed_has_it() {
    let redis = RedisServer::start();
    let (a, b) = (replica(&redis, "c4:").await, replica(&redis, "c4:").await);
    mcp_tasks::store::contract::a_finished_task_is_never_answered_as_running(
        Arc::new(a),
        Arc::new(b),
    )
    .await;
}
