//! Section 5, what seat pools cost a task's life on Redis: a creation and its
//! completion, without seats, with `create_seated` and the end's
//! `free_seats` sent beside the completion (what the runtime is meant to do), and with
//! a separate take before the creation and a free after the completion
//! (one round trip more at each end, for comparison).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcp_tasks::store::{Change, Principal, RunnerId, SeatId, SeatPool, SharedStore, modify};
use mcp_tasks::{TaskId, UnixMillis};
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_redis::{RedisOptions, RedisStore};
use serde_json::json;

use super::{IN_FLIGHT, Scale, rates, record};

const VARIANTS: [&str; 3] = [
    "no seats",
    "create_seated, free beside the end",
    "take, create, end, free in turn",
];

/// One task's life in `variant` on `store`.
async fn life(variant: usize, store: &SharedStore, runner: &RunnerId, n: u64) {
    let Some(replicas) = store.replicas() else {
        return;
    };
    let id = TaskId::new(format!("seated-{n}"));
    let seat = SeatId::new(format!("seat-{n}"));
    let pools = [
        (SeatPool::caller(&Principal::new("process")), 1 << 40),
        (SeatPool::running(), 1 << 40),
    ];
    let names = [pools[0].0.clone(), pools[1].0.clone()];
    let made = record(id.expose().to_owned()).with_runner(runner.clone(), None);
    let done = Change::Complete(json!({}));
    let complete = || {
        modify(
            &**store,
            &id,
            &done,
            UnixMillis::now(),
            Duration::from_secs(60),
        )
    };
    match variant {
        0 => {
            let _ = store.create(made).await;
            let _ = complete().await;
        }
        1 => {
            let _ = replicas.create_seated(made, &seat, runner, &pools).await;
            let _ = tokio::join!(complete(), replicas.free_seats(&seat, &names));
        }
        _ => {
            let _ = replicas.take_seats(&seat, runner, &pools).await;
            let _ = store.create(made).await;
            let _ = complete().await;
            let _ = replicas.free_seats(&seat, &names).await;
        }
    }
}

pub(crate) async fn seats(
    scale: &Scale,
    redis: &RedisServer,
    everysec: &RedisServer,
) -> anyhow::Result<()> {
    let mut subjects = Vec::new();
    for (name, server) in [
        ("Redis, appendfsync always", redis),
        ("Redis, appendfsync everysec", everysec),
    ] {
        let options = RedisOptions::default().with_key_prefix("seats:");
        let store: SharedStore = Arc::new(RedisStore::connect_with(&server.url(), options).await?);
        let runner = RunnerId::new("bench");
        if let Some(replicas) = store.replicas() {
            replicas.acquire(&runner, Duration::from_secs(3600)).await?;
        }
        subjects.push((name, store, runner));
    }
    let made = Arc::new(AtomicU64::new(0));
    let measured = rates(scale, subjects.len() * VARIANTS.len(), |subject| {
        let (_, store, runner) = subjects[subject / VARIANTS.len()].clone();
        let variant = subject % VARIANTS.len();
        let made = made.clone();
        Arc::new(move |_| {
            let (store, runner, made) = (store.clone(), runner.clone(), made.clone());
            async move {
                let n = made.fetch_add(1, Ordering::Relaxed);
                life(variant, &store, &runner, n).await;
            }
        })
    })
    .await;
    println!(
        "\n== 5. seats: a task's life (create, complete) on Redis, {IN_FLIGHT} in flight, seats in a caller's pool and running"
    );
    print!("{:<30}", "store");
    for variant in VARIANTS {
        print!("{variant:>38}");
    }
    println!();
    for (row, (name, _, _)) in subjects.iter().enumerate() {
        print!("{name:<30}");
        let base = measured[row * VARIANTS.len()];
        for variant in 0..VARIANTS.len() {
            let rate = measured[row * VARIANTS.len() + variant];
            print!("{:>28.0}/s {:>6.1}%", rate, 100.0 * rate / base);
        }
        println!();
    }
    Ok(())
}
