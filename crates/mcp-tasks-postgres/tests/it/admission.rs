//! Creation rates and fair turns kept in PostgreSQL for all replicas: the
//! contract's checks on two stores (two replicas, each with its own pool,
//! feed and runner) on one schema of a real PostgreSQL, and what they leave
//! in its tables.

use std::sync::Arc;

use mcp_tasks::store::{SharedStore, contract};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};

async fn store(url: String, schema: &'static str) -> SharedStore {
    Arc::new(
        PostgresStore::connect_with(&url, PostgresOptions::default().with_schema(schema))
            .await
            .expect("connect to the test's PostgreSQL"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_bucket_is_shared_by_two_replicas_and_named_by_a_hash() {
    let server = PostgresServer::start();
    contract::rates_are_shared(|| store(server.url(), "rate")).await;
    let buckets = server.psql("SELECT bucket FROM rate.rate_buckets");
    assert_eq!(buckets.lines().count(), 1, "{buckets}");
    assert_eq!(
        buckets.len(),
        mcp_tasks::store::STORED_NAME_LEN,
        "{buckets}"
    );
    assert!(!buckets.contains("secret-label"), "{buckets}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_weighted_3_to_1_queued_on_two_replicas_get_turns_3_to_1() {
    let server = PostgresServer::start();
    contract::fair_turns_follow_the_weights(|| store(server.url(), "fair")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_held_back_for_a_less_served_caller_goes_to_others_after_the_patience() {
    let server = PostgresServer::start();
    contract::held_seats_are_given_after_the_patience(|| store(server.url(), "held")).await;
    let left = server.psql(
        "SELECT (SELECT count(*) FROM held.fair_callers) + (SELECT count(*) FROM held.fair_state) \
         + (SELECT count(*) FROM held.seats) + (SELECT count(*) FROM held.pools)",
    );
    assert_eq!(
        left, "0",
        "the turns and seats are forgotten once nobody waits"
    );
}
