//! The owner index in Redis: an owner's set lives as long as its records.

use std::time::Duration;

use mcp_tasks::store::{Change, Principal, TaskRecord, modify};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_redis::testing::RedisServer;
use redis::aio::MultiplexedConnection;

use crate::support::store;

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

async fn pttl(admin: &mut MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(admin)
        .await
        .expect("PTTL")
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
