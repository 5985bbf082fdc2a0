//! Writes sent in batches (creations without a key or seats, and
//! compare-and-sets that free no seat, both kinds in one statement when
//! they wait together), from two stores on one schema at once: every write
//! answered as if alone, none lost or done twice, none failed (two stores'
//! batches of the same tasks wait for each other's rows, never in a
//! deadlock, which PostgreSQL would answer with an error).

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use mcp_tasks::store::{
    Change, Principal, Replicas, RunnerId, SeatId, SeatPool, Seating, SharedStore, Swap, TaskRecord,
};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{PostgresOptions, PostgresStore};

const TASKS: usize = 48;
/// Other tasks in the table.
const FILLERS: usize = 4_000;
/// Compare-and-sets each store tries on each task.
const ROUNDS: usize = 6;

async fn connect(server: &PostgresServer) -> SharedStore {
    let options = PostgresOptions::default().with_schema("batches");
    Arc::new(
        PostgresStore::connect_with(&server.url(), options)
            .await
            .expect("connect to the test's PostgreSQL"),
    )
}

/// How many times PostgreSQL ran the statements that `filter` picks out
/// (`pg_stat_statements`).
fn calls(server: &PostgresServer, filter: &str) -> usize {
    server
        .psql(&format!(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE {filter}"
        ))
        .trim()
        .parse()
        .expect("a count")
}

fn record(n: usize) -> TaskRecord {
    named(format!("task-{n:04}"))
}

fn named(id: String) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new("owner-a"),
        UnixMillis::now(),
        Ttl::from_millis(600_000),
        Some(Duration::from_millis(100)),
    )
}

/// Sets task `n`'s message until one compare-and-set of it swapped:
/// how many conflicts it met first.
async fn set_message(store: &SharedStore, n: usize, message: String) -> usize {
    let id = TaskId::new(format!("task-{n:04}"));
    let change = Change::StatusMessage(message);
    let mut conflicts = 0;
    let mut current = store.get(&id).await.expect("get").expect("the task exists");
    loop {
        let transition = current
            .apply(&change, UnixMillis::now(), Duration::from_secs(60))
            .expect("a working task takes a message");
        let expected = transition.expected_version();
        match store
            .compare_and_swap(transition)
            .await
            .expect("a compare-and-set is answered, never failed")
        {
            Swap::Swapped => return conflicts,
            Swap::Conflict(now) => {
                assert!(
                    now.version() > expected,
                    "a conflict answers a newer record"
                );
                conflicts += 1;
                current = *now;
            }
            other => panic!("task {n}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_batch_writes_of_the_same_tasks_and_each_is_answered_as_if_alone() {
    // Its statements counted, to see that creations and compare-and-sets
    // went in one statement.
    let server = PostgresServer::start_with(&["-c", "shared_preload_libraries=pg_stat_statements"]);
    server.psql("CREATE EXTENSION pg_stat_statements");
    let (a, b) = (connect(&server).await, connect(&server).await);
    // A table of some size, so that PostgreSQL finds a batch's rows by the
    // index as in production, not by scanning a few pages.
    for chunk in (TASKS..TASKS + FILLERS).collect::<Vec<_>>().chunks(256) {
        let made = chunk.iter().map(|&n| {
            let a = Arc::clone(&a);
            async move { a.create(record(n)).await }
        });
        for made in join_all(made).await {
            made.expect("a filler task is created");
        }
    }

    // Creations from both stores at once, each task once, and each id a
    // second time: one of the two is created, the other told it exists.
    let creations = (0..TASKS).flat_map(|n| {
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        [
            tokio::spawn(async move { a.create(record(n)).await.is_ok() }),
            tokio::spawn(async move { b.create(record(n)).await.is_ok() }),
        ]
    });
    let created = join_all(creations).await;
    for n in 0..TASKS {
        let both = [&created[2 * n], &created[2 * n + 1]];
        let made = both.iter().filter(|made| *made.as_ref().unwrap()).count();
        assert_eq!(made, 1, "task {n} created exactly once");
    }

    // Both stores change every task at once, in opposite orders: batches of
    // both hold the same rows at once. Before each change, both create one
    // more task (the same id on both): creations and changes go in the same
    // statements.
    let writers = [(Arc::clone(&a), false), (Arc::clone(&b), true)]
        .into_iter()
        .flat_map(|(store, backwards)| {
            (0..TASKS).map(move |k| {
                let n = if backwards { TASKS - 1 - k } else { k };
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let mut created = Vec::new();
                    for round in 0..ROUNDS {
                        let late = named(format!("late-{n:04}-{round}"));
                        created.push(store.create(late).await.is_ok());
                        set_message(&store, n, format!("{backwards}-{round}")).await;
                    }
                    (n, created)
                })
            })
        });
    let mut late = vec![[0; ROUNDS]; TASKS];
    for writer in join_all(writers).await {
        let (n, created) = writer.expect("a writer finished");
        for (round, made) in created.into_iter().enumerate() {
            late[n][round] += usize::from(made);
        }
    }
    for (n, rounds) in late.iter().enumerate() {
        for (round, made) in rounds.iter().enumerate() {
            assert_eq!(*made, 1, "late task {n}-{round} created exactly once");
            let id = TaskId::new(format!("late-{n:04}-{round}"));
            assert!(
                a.get(&id).await.expect("get").is_some(),
                "late task {n}-{round}"
            );
        }
    }
    let mixed = calls(&server, "query LIKE '%INSERT INTO%UNION ALL%pg_notify%'");
    assert!(
        mixed > 0,
        "creations and compare-and-sets that waited together went in one statement"
    );

    // Every swap happened once: each task's version counts them, on both
    // stores (through their caches) and on a third store reading afresh.
    let fresh = connect(&server).await;
    for n in 0..TASKS {
        let id = TaskId::new(format!("task-{n:04}"));
        let created_at = record(n).version();
        for store in [&a, &b, &fresh] {
            let mut read = store.get(&id).await.expect("get").expect("exists");
            // A cache catches up with the other store's last write.
            for _ in 0..100 {
                if read.version() == created_at + 2 * ROUNDS as u64 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                read = store.get(&id).await.expect("get").expect("exists");
            }
            assert_eq!(
                read.version(),
                created_at + 2 * ROUNDS as u64,
                "task {n}: {} swaps",
                2 * ROUNDS
            );
            let message = read.status_message().expect("a message was set");
            assert!(
                message.ends_with(&format!("-{}", ROUNDS - 1)),
                "the last write of one store: {message}"
            );
        }
    }
}

/// Two stores create the same ids at once, in opposite orders, so their
/// batches hold the same ids in opposite orders: each id is created once
/// and the other creation told it exists; none fails (a batch inserts in
/// the ids' order, so the two wait for each other without a deadlock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_creating_the_same_ids_in_opposite_orders_never_deadlock() {
    const IDS: usize = 64;
    const ROUNDS: usize = 20;
    let server = PostgresServer::start();
    let (a, b) = (connect(&server).await, connect(&server).await);
    for round in 0..ROUNDS {
        let creations = [(Arc::clone(&a), false), (Arc::clone(&b), true)]
            .into_iter()
            .flat_map(|(store, backwards)| {
                (0..IDS).map(move |k| {
                    let n = if backwards { IDS - 1 - k } else { k };
                    let store = Arc::clone(&store);
                    tokio::spawn(async move {
                        let made = store.create(named(format!("twin-{round}-{n:03}"))).await;
                        (n, made.map_err(|error| error.to_string()))
                    })
                })
            });
        let mut made = [0; IDS];
        for creation in join_all(creations).await {
            let (n, answer) = creation.expect("a creation finished");
            match answer {
                Ok(()) => made[n] += 1,
                Err(error) => assert!(
                    error.contains("exists"),
                    "round {round}, id {n}: told it exists, not {error}"
                ),
            }
        }
        assert_eq!(made, [1; IDS], "round {round}: each id created once");
    }
}

fn replicas(store: &SharedStore) -> &dyn Replicas {
    store.replicas().expect("the PostgreSQL store is shared")
}

/// Seated creations from two stores at once, `n` of them from `first`
/// (task and seat `seated-N`, half through each store), in `pools`: each
/// one's answer.
async fn create_seated(
    stores: &[SharedStore; 2],
    runners: &[RunnerId; 2],
    first: usize,
    n: usize,
    pools: &[(SeatPool, u64)],
) -> Vec<Seating> {
    let creations = (first..first + n).map(|k| {
        let store = Arc::clone(&stores[k % 2]);
        let runner = runners[k % 2].clone();
        let pools = pools.to_vec();
        tokio::spawn(async move {
            let made = named(format!("seated-{k:04}")).with_runner(runner.clone(), None);
            let seat = SeatId::new(format!("seated-{k:04}"));
            replicas(&store)
                .create_seated(made, &seat, &runner, &pools)
                .await
                .expect("a seated creation is answered, never failed")
        })
    });
    join_all(creations)
        .await
        .into_iter()
        .map(|answer| answer.expect("a creation finished"))
        .collect()
}

/// Seated creations and freeing compare-and-sets sent at once from two
/// stores go to PostgreSQL in batches (`create_seated_batch`,
/// `swap_freeing_batch`): a batch that fits its pools is written at once,
/// one that does not is decided task by task, and either way each pool
/// holds exactly the seats of the tasks created, and none once they ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seated_batches_from_two_stores_keep_every_pool_exact() {
    const ROOMY: usize = 60;
    const MORE: usize = 40;
    const LIMIT: u64 = 70;
    const LATE: usize = 30;
    let server = PostgresServer::start_with(&["-c", "shared_preload_libraries=pg_stat_statements"]);
    server.psql("CREATE EXTENSION pg_stat_statements");
    let stores = [connect(&server).await, connect(&server).await];
    let runners = [RunnerId::new("seated-a"), RunnerId::new("seated-b")];
    for (store, runner) in stores.iter().zip(&runners) {
        replicas(store)
            .acquire(runner, Duration::from_secs(600))
            .await
            .expect("acquire");
    }
    let caller = SeatPool::caller(&Principal::new("owner-a"));
    let running = SeatPool::running();
    let taken = |pool: SeatPool| {
        let store = Arc::clone(&stores[0]);
        async move {
            replicas(&store)
                .seats_taken(&pool)
                .await
                .expect("seats_taken")
        }
    };

    // Room for all: every creation seated, and counted once in each pool.
    let roomy = [(caller.clone(), 10_000), (running.clone(), 10_000)];
    let answers = create_seated(&stores, &runners, 0, ROOMY, &roomy).await;
    assert!(
        answers.iter().all(|answer| *answer == Seating::Seated),
        "{answers:?}"
    );
    assert_eq!(taken(caller.clone()).await, ROOMY as u64);
    assert_eq!(taken(running.clone()).await, ROOMY as u64);

    // Room for 10 more in `running` (the second pool): exactly 10 seated,
    // the others told it is full and not created.
    let tight = [(caller.clone(), 10_000), (running.clone(), LIMIT)];
    let answers = create_seated(&stores, &runners, ROOMY, MORE, &tight).await;
    let seated = answers.iter().filter(|a| **a == Seating::Seated).count();
    assert_eq!(seated as u64, LIMIT - ROOMY as u64, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|a| matches!(a, Seating::Seated | Seating::Full(1))),
        "{answers:?}"
    );
    for (k, answer) in (ROOMY..ROOMY + MORE).zip(&answers) {
        let found = stores[0]
            .get(&TaskId::new(format!("seated-{k:04}")))
            .await
            .expect("get");
        assert_eq!(found.is_some(), *answer == Seating::Seated, "task {k}");
    }
    assert_eq!(taken(caller.clone()).await, LIMIT);
    assert_eq!(taken(running.clone()).await, LIMIT);

    // Every created task ends at once through both stores, freeing its
    // seat in both pools, while as many new ones are created (in roomy
    // pools): creations and compare-and-sets in the same statements, and
    // only the new tasks' seats left.
    // The ends' transitions are made first, so that the ends and the new
    // creations are all sent at once (and wait behind each store's first
    // statement together).
    let free = [caller.clone(), running.clone()];
    let mut prepared = Vec::new();
    for k in 0..ROOMY + MORE {
        let store = Arc::clone(&stores[k % 2]);
        let id = TaskId::new(format!("seated-{k:04}"));
        let Some(current) = store.get(&id).await.expect("get") else {
            continue;
        };
        let transition = current
            .apply(
                &Change::StatusMessage("ended".into()),
                UnixMillis::now(),
                Duration::from_secs(60),
            )
            .expect("apply");
        prepared.push((store, transition, SeatId::new(format!("seated-{k:04}"))));
    }
    let late = tokio::spawn({
        let stores = stores.clone();
        let runners = runners.clone();
        let roomy = roomy.clone();
        async move { create_seated(&stores, &runners, 1_000, LATE, &roomy).await }
    });
    let ends = prepared.into_iter().map(|(store, transition, seat)| {
        let free = free.clone();
        tokio::spawn(async move {
            replicas(&store)
                .compare_and_swap_freeing(transition, &seat, &free)
                .await
                .expect("a freeing swap is answered")
        })
    });
    let swaps: Vec<Swap> = join_all(ends)
        .await
        .into_iter()
        .map(|swap| swap.expect("an end finished"))
        .collect();
    assert_eq!(swaps.len() as u64, LIMIT);
    assert!(swaps.iter().all(|swap| *swap == Swap::Swapped), "{swaps:?}");
    let late = late.await.expect("the late creations finished");
    assert!(
        late.iter().all(|answer| *answer == Seating::Seated),
        "{late:?}"
    );
    assert_eq!(taken(caller).await, LATE as u64);
    assert_eq!(taken(running).await, LATE as u64);
    assert_eq!(
        server.psql("SELECT count(*) FROM batches.seats").trim(),
        (2 * LATE).to_string(),
        "the late tasks' seats, no other"
    );
    let mixed = calls(
        &server,
        "query LIKE 'SELECT %seated_batch%' AND query NOT LIKE '%create_seated_batch%'",
    );
    assert!(
        mixed > 0,
        "creations and freeings that waited together went in one statement"
    );
    // The creations went in batches of several (the set-based path is
    // taken by a batch that fits: its counts above are exact).
    let statements = calls(&server, "query LIKE 'SELECT %create_seated_batch%'");
    assert!(
        statements > 0 && statements < ROOMY + MORE,
        "{} seated creations in {statements} statements",
        ROOMY + MORE
    );
}
