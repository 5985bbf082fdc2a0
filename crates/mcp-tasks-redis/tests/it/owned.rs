//! The owner index in Redis: ids whose record Redis dropped by itself are
//! skipped and cleaned up, an owner's set lives as long as its records, and
//! a record of an older build (no owner index) is listed once it changes,
//! and one this build created is not entered in the indexes again at
//! each change.

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, SharedStore, TaskRecord, modify};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_redis::testing::RedisServer;
use redis::aio::MultiplexedConnection;

use crate::support::{calls, store};

fn task(id: &str, ttl: Ttl) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new("owner-a"),
        UnixMillis::now(),
        ttl,
        None,
    )
}

async fn admin(redis: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(redis.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

async fn listed(store: &SharedStore, after: Option<&str>, limit: usize) -> Vec<String> {
    let after = after.map(TaskId::new);
    store
        .list_owned(&Principal::new("owner-a"), after.as_ref(), limit)
        .await
        .expect("list_owned")
        .iter()
        .map(|record| record.id().expose().to_owned())
        .collect()
}

async fn members(admin: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(admin)
        .await
        .expect("ZRANGE")
}

async fn pttl(admin: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(admin)
        .await
        .expect("PTTL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_whose_record_redis_dropped_are_skipped_and_removed() {
    let redis = RedisServer::start();
    let store = store(&redis.url(), "dangling:").await;
    let mut admin = admin(&redis).await;
    for name in ["t1", "t2", "t3", "t4", "t5"] {
        store
            .create(task(name, Ttl::from_millis(60_000)))
            .await
            .expect("create");
    }
    // As Redis's own expiry does, behind every store's back.
    let _: i64 = redis::cmd("DEL")
        .arg("dangling:task:t1")
        .arg("dangling:task:t2")
        .arg("dangling:task:t4")
        .query_async(&mut admin)
        .await
        .expect("DEL");
    assert_eq!(
        listed(&store, None, 2).await,
        ["t3", "t5"],
        "a page is filled past the gone records"
    );
    assert_eq!(
        members(&mut admin, "dangling:owner:owner-a").await,
        ["t3", "t5"],
        "the gone ids were removed from the index"
    );
    assert_eq!(listed(&store, Some("t3"), 10).await, ["t5"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_set_lives_as_long_as_its_records_and_goes_with_them() {
    let redis = RedisServer::start();
    let store = store(&redis.url(), "keep:").await;
    let mut admin = admin(&redis).await;
    let key = "keep:owner:owner-a";
    store
        .create(task("short", Ttl::from_millis(1_000)))
        .await
        .expect("create");
    store
        .create(task("long", Ttl::from_millis(600_000)))
        .await
        .expect("create");
    let (set, long) = (
        pttl(&mut admin, key).await,
        pttl(&mut admin, "keep:task:long").await,
    );
    assert!(
        set >= long && long > 0,
        "the set {set} ms, the record {long} ms"
    );
    // A longer TTL for the record lengthens the set's.
    modify(
        &*store,
        &TaskId::new("short"),
        &Change::ExtendTtl(Duration::from_secs(7_200)),
        UnixMillis::now(),
        Duration::from_secs(60),
    )
    .await
    .expect("modify");
    let (set, short) = (
        pttl(&mut admin, key).await,
        pttl(&mut admin, "keep:task:short").await,
    );
    assert!(
        set >= short && short > 0,
        "the set {set} ms, the record {short} ms"
    );
    // A record without expiry: neither does the set.
    store
        .create(task("forever", Ttl::Unlimited))
        .await
        .expect("create");
    assert_eq!(pttl(&mut admin, key).await, -1);
    for name in ["short", "long", "forever"] {
        store.delete(&TaskId::new(name)).await.expect("delete");
    }
    assert_eq!(pttl(&mut admin, key).await, -2, "no records, no set");
}

async fn change(store: &SharedStore, id: &str) {
    modify(
        &**store,
        &TaskId::new(id),
        &Change::StatusMessage("changed".into()),
        UnixMillis::now(),
        Duration::from_secs(60),
    )
    .await
    .expect("modify");
}

async fn listed_by_all(store: &SharedStore) -> Vec<String> {
    store
        .list_all(None, 10)
        .await
        .expect("list_all")
        .iter()
        .map(|record| record.id().expose().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_an_older_build_is_listed_once_it_changes() {
    let redis = RedisServer::start();
    let store = store(&redis.url(), "old:").await;
    let mut admin = admin(&redis).await;
    let old = task("old", Ttl::Unlimited);
    // As the build before the owner index wrote it: no `w`, no owner set,
    // not in `all`, no `i`.
    let _: i64 = redis::cmd("HSET")
        .arg("old:task:old")
        .arg("v")
        .arg(0)
        .arg("r")
        .arg(serde_json::to_string(&old).expect("json"))
        .query_async(&mut admin)
        .await
        .expect("HSET");
    assert_eq!(listed(&store, None, 10).await, Vec::<String>::new());
    assert_eq!(listed_by_all(&store).await, Vec::<String>::new());
    // Its first change enters it in both indexes (no expiry: no `ZADD` to
    // the expiry index), and marks it; the next enters it in neither again.
    let before = calls(&redis, "zadd");
    change(&store, "old").await;
    assert_eq!(calls(&redis, "zadd") - before, 2, "the owner's set and all");
    assert_eq!(listed(&store, None, 10).await, ["old"]);
    assert_eq!(listed_by_all(&store).await, ["old"]);
    let before = calls(&redis, "zadd");
    change(&store, "old").await;
    assert_eq!(calls(&redis, "zadd") - before, 0, "listed already");
    assert_eq!(listed(&store, None, 10).await, ["old"]);
    store.delete(&TaskId::new("old")).await.expect("delete");
    assert_eq!(listed(&store, None, 10).await, Vec::<String>::new());
    assert_eq!(listed_by_all(&store).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_this_build_created_is_not_indexed_again_at_each_change() {
    let redis = RedisServer::start();
    let store = store(&redis.url(), "new:").await;
    let mut admin = admin(&redis).await;
    store
        .create(task("new", Ttl::Unlimited))
        .await
        .expect("create");
    let before = calls(&redis, "zadd");
    change(&store, "new").await;
    change(&store, "new").await;
    assert_eq!(calls(&redis, "zadd") - before, 0);
    assert_eq!(listed(&store, None, 10).await, ["new"]);
    assert_eq!(listed_by_all(&store).await, ["new"]);
    // Should its owner's set be gone all the same, a change enters it again.
    let _: i64 = redis::cmd("DEL")
        .arg("new:owner:owner-a")
        .query_async(&mut admin)
        .await
        .expect("DEL");
    assert_eq!(listed(&store, None, 10).await, Vec::<String>::new());
    change(&store, "new").await;
    assert_eq!(listed(&store, None, 10).await, ["new"]);
}
