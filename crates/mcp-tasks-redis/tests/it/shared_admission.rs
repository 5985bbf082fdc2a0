//! Creation rates and fair turns kept in Redis for all replicas: the
//! contract's checks (`mcp_tasks::store::contract::run_shared_admission`)
//! on two stores (two replicas, each with its own connections and runner)
//! on one `redis-server`, what they leave in Redis, and two runtimes that
//! share one creation rate per caller.

use std::num::NonZeroU32;
use std::time::Duration;

use mcp_tasks::server::{CreationRate, TaskRuntime};
use mcp_tasks::store::contract;
use mcp_tasks::{CallOptions, CallResponse};
use mcp_tasks_redis::testing::RedisServer;
use serde_json::json;

use crate::support::{Tools, cli, client, store};

/// Every key under `prefix`.
fn keys(redis: &RedisServer, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = cli(redis, &["keys", &format!("{prefix}*")])
        .lines()
        .map(str::to_owned)
        .filter(|key| !key.is_empty())
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_bucket_is_shared_by_two_replicas_and_keyed_by_a_hash_that_expires() {
    let redis = RedisServer::start();
    let url = redis.url();
    contract::rates_are_shared(|| store(&url, "rate:")).await;
    // One key, named by a hash, that expires when the bucket is full again.
    let held = keys(&redis, "rate:rate:");
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(!held[0].contains("secret-label"), "{held:?}");
    let ttl: u64 = cli(&redis, &["pttl", &held[0]]).parse().expect("a PTTL");
    assert!(ttl > 0 && ttl <= 6_000, "{ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_weighted_3_to_1_queued_on_two_replicas_get_turns_3_to_1() {
    let redis = RedisServer::start();
    let url = redis.url();
    contract::fair_turns_follow_the_weights(|| store(&url, "fair:")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_held_back_for_a_less_served_caller_goes_to_others_after_the_patience() {
    let redis = RedisServer::start();
    let url = redis.url();
    contract::held_seats_are_given_after_the_patience(|| store(&url, "held:")).await;
    let left: Vec<String> = keys(&redis, "held:")
        .into_iter()
        .filter(|key| key.starts_with("held:fair:") || key.starts_with("held:seats:"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A replica whose runtime limits each caller to `rate`.
async fn rated_replica(url: &str, prefix: &str, name: &'static str, rate: CreationRate) -> Tools {
    let runtime = TaskRuntime::builder(store(url, prefix).await)
        .with_poll_interval(Duration::from_millis(20))
        .with_rate_per_caller(Some(rate))
        .build();
    Tools::new(runtime, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runtimes_on_one_redis_share_one_creation_rate_per_caller() {
    let redis = RedisServer::start();
    let url = redis.url();
    // 5 a minute in bursts of 5: one creation every 12 s past the burst.
    let five = NonZeroU32::new(5).unwrap();
    let rate = CreationRate::per_minute(five).with_burst(five);
    let a = client(rated_replica(&url, "rated:", "a", rate).await).await;
    let b = client(rated_replica(&url, "rated:", "b", rate).await).await;
    let mut created = 0;
    let mut hints = Vec::new();
    for n in 0..10 {
        let client = if n % 2 == 0 { &a } else { &b };
        let arguments = json!({"ms": 10}).as_object().cloned();
        match client
            .call_tool("sleep", arguments, CallOptions::default())
            .await
        {
            Ok(CallResponse::Task(_)) => created += 1,
            Ok(other) => panic!("not a task: {other:?}"),
            Err(error) => {
                let data = error.rpc_error().and_then(|e| e.data.clone());
                let data = data.unwrap_or_else(|| panic!("a refusal with data: {error}"));
                assert_eq!(data["reason"], "rateLimited", "{data}");
                assert_eq!(data["ratePerCaller"], "5/min", "{data}");
                hints.push(data["retryAfterMs"].as_u64().expect("a hint"));
            }
        }
    }
    assert_eq!(
        created, 5,
        "per process each would let 5 through, 10 in all"
    );
    assert_eq!(hints.len(), 5);
    // The store's hint: the first creation past the burst is due 12 s
    // after the burst began.
    assert!(
        hints.iter().all(|ms| (1..=12_000).contains(ms)),
        "{hints:?}"
    );
}
