//! The store's connections to PostgreSQL: the pools (each connection
//! planning its statements once), one statement run on a pooled connection
//! within the store's timeout, and PostgreSQL's failures as [`StoreError`]s
//! of the kind a caller acts on (unavailable, full, other).

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use mcp_tasks::store::{StoreError, StoreErrorKind};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::tls;

/// Parameters of a query.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A PostgreSQL failure as a [`StoreError`]: a connection that failed, was
/// closed or refused (the server shutting down, starting, or out of
/// connections; a read-only standby) is [`StoreErrorKind::Unavailable`], a
/// full disk or memory is [`StoreErrorKind::Full`].
pub(crate) fn failure(message: &str, error: tokio_postgres::Error) -> StoreError {
    let kind = match error.code().map(tokio_postgres::error::SqlState::code) {
        Some(code)
            if code.starts_with("08")
                || code.starts_with("57P")
                || matches!(code, "53300" | "25006" | "40001" | "40P01") =>
        {
            StoreErrorKind::Unavailable
        }
        Some("53100" | "53200") => StoreErrorKind::Full,
        Some(_) => StoreErrorKind::Other,
        None => StoreErrorKind::Unavailable,
    };
    // The server's words, never its detail (which may quote a key's value,
    // a task id among them).
    let reason = match error.as_db_error() {
        Some(db) => format!("{message}: {} ({})", db.message(), db.code().code()),
        None if error.is_closed() => format!("{message}: the connection is closed"),
        None => format!("{message}: {error}"),
    };
    StoreError::new(reason, error).with_kind(kind)
}

/// Runs one operation within `timeout`.
pub(crate) async fn within<T>(
    timeout: Duration,
    what: &'static str,
    operation: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, operation).await {
        Ok(answer) => answer,
        Err(_) => Err(StoreError::msg(format!(
            "{what}: PostgreSQL did not answer within {timeout:?}"
        ))
        .with_kind(StoreErrorKind::Unavailable)),
    }
}

/// Runs the statement `sql` with `params` on a connection of `pool`
/// (prepared once per connection), within `timeout`.
pub(crate) async fn query_pool(
    pool: &Pool,
    timeout: Duration,
    what: &'static str,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, StoreError> {
    within(timeout, what, async {
        let client = pool
            .get()
            .await
            .map_err(|error| pool_failure(what, error))?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(|error| failure(what, error))?;
        client
            .query(&statement, params)
            .await
            .map_err(|error| failure(what, error))
    })
    .await
}

pub(crate) fn pool_failure(message: &str, error: PoolError) -> StoreError {
    match error {
        PoolError::Backend(error) => failure(message, error),
        other => StoreError::new(format!("{message}: {other}"), other)
            .with_kind(StoreErrorKind::Unavailable),
    }
}

/// `config` whose sessions plan each prepared statement once
/// (`plan_cache_mode = force_generic_plan`, after the URL's own `options`).
///
/// Every statement of the store looks rows up by key (or walks an index in
/// order), so its generic plan is the plan; left to choose, PostgreSQL
/// planned the statements and the functions' queries again at every call,
/// a sixth of its CPU under a load of creations (BENCHMARKS.md).
fn generic_plans(config: &tokio_postgres::Config) -> tokio_postgres::Config {
    const GENERIC: &str = "-c plan_cache_mode=force_generic_plan";
    let mut config = config.clone();
    let options = match config.get_options() {
        Some(theirs) => format!("{theirs} {GENERIC}"),
        None => GENERIC.to_owned(),
    };
    config.options(&options);
    config
}

/// A pool of at most `size` connections to `config`, each operation
/// waiting for one at most `timeout`; a connection is checked (only) for
/// being closed when it is reused.
pub(crate) fn make_pool(
    config: &tokio_postgres::Config,
    tls: &tls::Tls,
    size: usize,
    timeout: Duration,
) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        generic_plans(config),
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .recycle_timeout(Some(timeout))
        .build()
        .map_err(|error| StoreError::new("cannot make the PostgreSQL pool", error))
}
