//! The schema's versions and who may use it, on a real PostgreSQL: the
//! first store migrates (once, however many start at once), a schema newer
//! than the binary is refused, `Migrations::Check` and `PostgresStore::migrate`
//! (what `mcp-tasks admin migrate` calls), a role with only the grants the
//! deployment guide lists runs a store on a migrated schema, and expired
//! tasks are swept by one replica at a time.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::store::{Principal, SharedStore, TaskRecord, TaskStore, contract};
use mcp_tasks::{TaskId, Ttl, UnixMillis};
use mcp_tasks_postgres::testing::PostgresServer;
use mcp_tasks_postgres::{Migrations, PostgresOptions, PostgresStore};

async fn connect(url: &str, options: PostgresOptions) -> Result<PostgresStore, String> {
    PostgresStore::connect_with(url, options)
        .await
        .map_err(|error| error.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_starting_at_once_migrate_once_and_a_newer_schema_is_refused() {
    let server = PostgresServer::start();
    let url = server.url();
    let starting: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                connect(&url, PostgresOptions::default().with_schema("fresh")).await
            })
        })
        .collect();
    for store in starting {
        store.await.expect("join").expect("every store starts");
    }
    assert_eq!(
        server.psql("SELECT count(*) || ' ' || max(version) FROM fresh.migrations"),
        "3 3",
        "each migration applied once"
    );
    // A newer binary migrated: this one refuses to run on it.
    server.psql("INSERT INTO fresh.migrations (version) VALUES (99)");
    let refused = connect(&url, PostgresOptions::default().with_schema("fresh"))
        .await
        .expect_err("a newer schema is refused");
    assert!(
        refused.contains("version 99") && refused.contains("newer"),
        "{refused}"
    );
    let refused = PostgresStore::migrate(&url, "fresh")
        .await
        .expect_err("and not migrated down");
    assert!(refused.to_string().contains("newer"), "{refused}");
}

/// A schema an older binary made (version 1: no batches of writes that
/// take or free seats) is brought to version 3 (version 2's batches, then
/// their set-based bodies) by the next store to start, and its tasks and
/// seats work on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_at_version_1_is_migrated_to_3_and_takes_seated_creations() {
    let server = PostgresServer::start();
    let url = server.url();
    let options = PostgresOptions::default().with_schema("older");
    let first = connect(&url, options.clone()).await.expect("connect");
    let kept = TaskRecord::new(
        TaskId::new("kept"),
        Principal::new("owner-a"),
        UnixMillis::now(),
        Ttl::from_millis(600_000),
        None,
    );
    first.create(kept).await.expect("create");
    drop(first);
    // What version 1 was: without the functions of versions 2 and 3.
    server.psql(
        "DELETE FROM older.migrations WHERE version >= 2; \
         DROP FUNCTION older.create_seated_batch, older.swap_freeing_batch, \
           older.move_seats_batch, older.seated_batch",
    );
    let checking = options.clone().with_migrations(Migrations::Check);
    let refused = connect(&url, checking)
        .await
        .expect_err("version 1 is behind");
    assert!(refused.contains("version 1"), "{refused}");
    let store: SharedStore = Arc::new(connect(&url, options).await.expect("migrates"));
    assert_eq!(
        server.psql("SELECT count(*) || ' ' || max(version) FROM older.migrations"),
        "3 3"
    );
    assert!(
        store
            .get(&TaskId::new("kept"))
            .await
            .expect("get")
            .is_some(),
        "the tasks of version 1 are kept"
    );
    contract::creations_take_seats(Arc::clone(&store)).await;
    contract::swaps_free_seats(store).await;
}

/// A schema the previous binary made (version 2: the seat batches one task
/// at a time, no `seated_batch`) is brought to version 3 by the next store
/// to start: the function the seat batches now call exists and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_at_version_2_is_migrated_to_3_and_has_the_seat_writes_in_one_transaction() {
    let server = PostgresServer::start();
    let url = server.url();
    let options = PostgresOptions::default().with_schema("two");
    drop(connect(&url, options.clone()).await.expect("connect"));
    // What version 2 left: without version 3's function (its other two
    // functions are version 2's under other bodies, same signatures).
    server.psql("DELETE FROM two.migrations WHERE version = 3; DROP FUNCTION two.seated_batch");
    let checking = options.clone().with_migrations(Migrations::Check);
    let refused = connect(&url, checking)
        .await
        .expect_err("version 2 is behind");
    assert!(refused.contains("version 2"), "{refused}");
    let store: SharedStore = Arc::new(connect(&url, options).await.expect("migrates"));
    assert_eq!(
        server.psql("SELECT count(*) || ' ' || max(version) FROM two.migrations"),
        "3 3"
    );
    let empty = vec!["'{}'"; 21].join(", ");
    assert_eq!(
        server.psql(&format!("SELECT two.seated_batch({empty})")),
        "{}",
        "the seat writes' function of version 3 exists and answers"
    );
    contract::creations_take_seats(Arc::clone(&store)).await;
    contract::swaps_free_seats(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_only_checks_names_admin_migrate_and_migrate_brings_the_schema_up() {
    let server = PostgresServer::start();
    let url = server.url();
    let checking = PostgresOptions::default()
        .with_schema("checked")
        .with_migrations(Migrations::Check);
    let refused = connect(&url, checking.clone())
        .await
        .expect_err("a schema behind is refused");
    assert!(
        refused.contains("version 0") && refused.contains("mcp-tasks admin migrate"),
        "{refused}"
    );
    let migrated = PostgresStore::migrate(&url, "checked")
        .await
        .expect("migrate");
    assert_eq!((migrated.from, migrated.to), (0, 3));
    let again = PostgresStore::migrate(&url, "checked")
        .await
        .expect("migrate");
    assert_eq!(
        (again.from, again.to),
        (3, 3),
        "nothing to do the second time"
    );
    connect(&url, checking)
        .await
        .expect("a current schema is used");
}

/// The grants docs/deployment.md gives the role a server runs as, on a
/// schema an operator migrated: enough for every operation of a replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_with_the_documented_grants_runs_a_store_on_a_migrated_schema() {
    let server = PostgresServer::start();
    server.psql("CREATE ROLE app LOGIN");
    let app_url = format!("postgres://app@127.0.0.1:{}/postgres", server.port());
    let made = std::sync::atomic::AtomicUsize::new(0);
    // Each check of the contract on a schema of its own, migrated by the
    // owner and granted to `app`, which runs the store.
    contract::run_replicas(|| {
        let schema = format!(
            "granted_{}",
            made.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (server, app_url) = (&server, app_url.clone());
        async move {
            PostgresStore::migrate(&server.url(), &schema)
                .await
                .expect("migrate as the owner");
            server.psql(&grants(&schema, "app"));
            Arc::new(
                PostgresStore::connect_with(
                    &app_url,
                    PostgresOptions::default().with_schema(schema),
                )
                .await
                .expect("the role connects without DDL"),
            ) as SharedStore
        }
    })
    .await;
    // And a role without them is told why, at start: it cannot even read
    // the schema's version, so it would have to make the schema.
    server.psql("CREATE ROLE stranger LOGIN");
    let url = format!("postgres://stranger@127.0.0.1:{}/postgres", server.port());
    let refused = connect(&url, PostgresOptions::default().with_schema("granted_0"))
        .await
        .expect_err("no grant, no store");
    assert!(refused.contains("permission denied"), "{refused}");
}

/// The grants of docs/deployment.md for `role` on `schema`.
fn grants(schema: &str, role: &str) -> String {
    format!(
        "GRANT USAGE ON SCHEMA {schema} TO {role}; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}; \
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {role}"
    )
}

fn record(id: &str, ttl: Ttl) -> TaskRecord {
    TaskRecord::new(
        TaskId::new(id),
        Principal::new("owner"),
        UnixMillis::now(),
        ttl,
        None,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_tasks_are_swept_by_one_replica_at_a_time() {
    let server = PostgresServer::start();
    let options = || PostgresOptions::default().with_schema("swept");
    let a = connect(&server.url(), options()).await.expect("a");
    let b = connect(&server.url(), options()).await.expect("b");
    for n in 0..3 {
        a.create(record(
            &format!("task-{n}"),
            Ttl::Limited(Duration::from_millis(1)),
        ))
        .await
        .expect("create");
    }
    let later = UnixMillis::new(UnixMillis::now().as_millis() + 60_000);
    assert_eq!(a.expired(later, 10).await.expect("expired").len(), 3);
    assert!(
        b.expired(later, 10).await.expect("expired").is_empty(),
        "A holds the sweeper's turn"
    );
    assert_eq!(
        a.expired(later, 10).await.expect("expired").len(),
        3,
        "and keeps it with each sweep"
    );
    // Once the turn lapses (a replica that stopped sweeping), B takes it.
    server.psql("UPDATE swept.sweeper SET until = 0");
    assert_eq!(b.expired(later, 10).await.expect("expired").len(), 3);
    assert!(a.expired(later, 10).await.expect("expired").is_empty());
}
