#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without TLS the connector is `NoTls`, which is `Copy`; with it, a clone.
#![cfg_attr(not(feature = "tls"), allow(clippy::clone_on_copy))]

mod batch;
mod config;
mod connection;
mod feed;
mod replicas;
mod row;
mod schema;
mod sql;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use mcp_tasks::store::{
    CacheTicket, FeedCache, HashKey, Keyed, PackedRecord, Principal, Replicas, StoreError,
    StoreErrorKind, Swap, TaskRecord, TaskStore, Transition, idempotency_slot,
};
use mcp_tasks::{IdempotencyKey, TaskId, UnixMillis};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;
use tokio_postgres::Row;

pub use config::{is_postgres_url, redacted};
use row::{Columns, column, corrupt, decode, version_param};
pub use schema::Migrated;
use sql::Sql;

use connection::{Params, failure, query_pool};
use connection::{make_pool, pool_failure};

/// The schema when the options name none.
pub const DEFAULT_SCHEMA: &str = "mcp_tasks";

/// How many ids the change feed buffers for a slow receiver.
const FEED_CAPACITY: usize = 4096;

/// How long a cached record is answered before it is read again: a bound
/// on what a lost announcement (its writer died between its commit and its
/// announcement) leaves stale.
const CACHE_MAX_AGE: Duration = Duration::from_secs(5);

/// How many connections the lease's renewals have of their own.
const LEASE_CONNECTIONS: usize = 2;

/// How long one store holds the sweeper's turn once it took it.
const SWEEP_TURN: Duration = Duration::from_secs(30);

/// What a store does with a schema behind this binary's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Migrations {
    /// Applies the missing migrations (the default): the role needs the
    /// grants to create objects in the schema the first time.
    #[default]
    Apply,
    /// Refuses to run, naming `mcp-tasks admin migrate`: for a role without
    /// DDL grants, on a schema an operator migrates.
    Check,
}

/// How [`PostgresStore::connect_with`] connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The schema every table lives in (default [`DEFAULT_SCHEMA`]), so
    /// several deployments can share a database: stores with different
    /// schemas see nothing of each other. Lower-case letters, digits and
    /// `_`, at most 48, not starting with a digit.
    pub schema: String,
    /// How many connections the pool holds at most (default 16); a
    /// replica also holds four more: two for its lease's renewals, one
    /// that announces its writes on the change feed, one that listens.
    pub pool_size: usize,
    /// The longest any one operation takes, waiting for a connection
    /// included (default 2 s): past it the operation fails with a
    /// [`StoreError`] of kind [`StoreErrorKind::Unavailable`], and the
    /// server answers its request with a JSON-RPC error instead of hanging.
    pub timeout: Duration,
    /// How many records this replica's read cache keeps at most (default
    /// 100,000; 0: no cache, every read is a round trip). Kept coherent by
    /// the change feed, as the Redis store's is.
    pub cache_records: usize,
    /// How many bytes of records the read cache keeps at most (default
    /// 64 MiB).
    pub cache_bytes: usize,
    /// What to do with a schema behind this binary's (default: apply the
    /// missing migrations).
    pub migrations: Migrations,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: DEFAULT_SCHEMA.to_owned(),
            pool_size: 16,
            timeout: Duration::from_secs(2),
            cache_records: 100_000,
            cache_bytes: 64 << 20,
            migrations: Migrations::Apply,
        }
    }
}

impl PostgresOptions {
    /// The schema.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The pool's size (at least 1).
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// The longest one operation takes.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The bounds of the read cache: at most `records` records and `bytes`
    /// bytes of them (`records` 0: no cache).
    pub fn with_cache(mut self, records: usize, bytes: usize) -> Self {
        self.cache_records = records;
        self.cache_bytes = bytes;
        self
    }

    /// What to do with a schema behind this binary's.
    pub fn with_migrations(mut self, migrations: Migrations) -> Self {
        self.migrations = migrations;
        self
    }
}

/// A [`TaskStore`] in PostgreSQL that several server processes share. See
/// the [crate docs](crate).
///
/// Its operations must be awaited inside a tokio runtime; dropping the
/// store ends its change feed's connection.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    /// Two connections of their own for the lease's renewals, so that they
    /// never wait behind the tasks' writes for one of the pool's.
    lease_pool: Pool,
    sql: Sql,
    options: PostgresOptions,
    feed: broadcast::Sender<TaskId>,
    gaps: watch::Receiver<u64>,
    freed: watch::Receiver<u64>,
    listener: AbortHandle,
    /// Records this replica wrote or read, dropped by the feed.
    cache: Arc<FeedCache>,
    /// The task hash key, once read.
    hash_key: tokio::sync::OnceCell<HashKey>,
    /// This store's name as the sweeper (random).
    sweeper: String,
    /// Announces this store's writes on the change feed once they committed.
    announcer: feed::Announcer,
    announcing: AbortHandle,
    /// Creations without a key or seats and compare-and-sets that free no
    /// seat, several (of both kinds) in one statement.
    plain: Arc<batch::Batcher<batch::Plain>>,
    /// Seat moves, several in one statement.
    moves: Arc<batch::Batcher<batch::Move, i32>>,
    /// Creations that take seats (without a key or a fair turn) and
    /// compare-and-sets that free seats, several (of both kinds) in one
    /// statement.
    seated: Arc<batch::Batcher<batch::Seated, i32>>,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
        self.announcing.abort();
    }
}

fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let valid = !schema.is_empty()
        && schema.len() <= 48
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(StoreError::msg(format!(
            "{schema:?} is not a schema name mcp-tasks uses: lower-case letters, digits and _, \
             at most 48, not starting with a digit"
        )))
    }
}

impl PostgresStore {
    /// Connects to the PostgreSQL at `url` (`postgres://` or
    /// `postgresql://`, as libpq reads them, or a `key=value` string) with
    /// the default options, and brings its schema to this binary's version.
    ///
    /// # Errors
    ///
    /// The URL does not parse, PostgreSQL cannot be reached or listened to
    /// within the timeout, or its schema is newer than this binary's.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// [`PostgresStore::connect`] with options.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`]; a schema behind this binary's with
    /// [`Migrations::Check`].
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        check_schema_name(&options.schema)?;
        let mut target = config::parse(url, &config::ProcessEnv)?;
        if target.config.get_connect_timeout().is_none() {
            target.config.connect_timeout(options.timeout);
        }
        let tls = tls::connector(&target)?;
        let pool = make_pool(&target.config, &tls, options.pool_size, options.timeout)?;
        let lease_pool = make_pool(&target.config, &tls, LEASE_CONNECTIONS, options.timeout)?;
        let sql = Sql::new(&options.schema);
        prepare_schema(&pool, &sql, &options).await?;
        let (sender, _) = broadcast::channel(FEED_CAPACITY);
        let (gaps_sender, gaps) = watch::channel(0);
        let (freed_sender, freed) = watch::channel(0);
        let cache = Arc::new(
            FeedCache::new(options.cache_records, options.cache_bytes).with_max_age(CACHE_MAX_AGE),
        );
        let senders = Arc::new(feed::Senders {
            changes: sender.clone(),
            gaps: gaps_sender,
            freed: freed_sender,
            cache: Arc::clone(&cache),
        });
        // Listening before this returns: no change after it is missed.
        let listening = feed::listen(
            &target.config,
            &tls,
            &sql.channel,
            options.timeout,
            &senders,
        )
        .await?;
        let (announcer, announcing) = feed::announcer(
            make_pool(&target.config, &tls, 1, options.timeout)?,
            sql.announce.clone(),
            options.timeout,
        );
        let listener = tokio::spawn(feed::forward(
            target.config,
            tls,
            sql.channel.clone(),
            listening,
            senders,
            options.timeout,
        ))
        .abort_handle();
        let target = |sql: &str, what| batch::Target {
            pool: pool.clone(),
            sql: Arc::from(sql),
            timeout: options.timeout,
            what,
        };
        let plain = batch::plain(batch::PlainTargets {
            creations: target(&sql.create_batch, "PostgreSQL could not create the task"),
            changes: target(&sql.swap_batch, "PostgreSQL could not change the task"),
            both: target(
                &sql.write_batch,
                "PostgreSQL could not create or change the tasks",
            ),
        });
        let seated = batch::seated(batch::SeatedTargets {
            creations: target(
                &sql.create_seated_batch,
                "PostgreSQL could not take seats and create the task",
            ),
            freeings: target(
                &sql.swap_freeing_batch,
                "PostgreSQL could not change the task",
            ),
            both: target(
                &sql.seated_batch,
                "PostgreSQL could not take or free seats with the tasks",
            ),
        });
        let moves = batch::moves(target(
            &sql.move_seats_batch,
            "PostgreSQL could not take or free seats",
        ));
        Ok(Self {
            plain,
            moves,
            seated,
            pool,
            lease_pool,
            sql,
            options,
            feed: sender,
            gaps,
            freed,
            listener,
            cache,
            hash_key: tokio::sync::OnceCell::new(),
            sweeper: replicas::random_name()?,
            announcer,
            announcing,
        })
    }

    /// Brings the schema at `url` to this binary's version (what
    /// `mcp-tasks admin migrate` does), without starting a store.
    ///
    /// # Errors
    ///
    /// PostgreSQL cannot be reached, the role may not create the objects,
    /// or the schema is newer than this binary's.
    pub async fn migrate(url: &str, schema: &str) -> Result<Migrated, StoreError> {
        check_schema_name(schema)?;
        let target = config::parse(url, &config::ProcessEnv)?;
        let tls = tls::connector(&target)?;
        // Connecting, its handshake included, gives up as a store's does: a
        // server that accepts and answers nothing must not hang the command.
        let within = target
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(PostgresOptions::default().timeout);
        let connecting = tokio::time::timeout(within, target.config.connect(tls)).await;
        let (mut client, connection) = connecting
            .map_err(|_| {
                StoreError::msg(format!(
                    "cannot connect to PostgreSQL: it did not answer within {within:?}"
                ))
                .with_kind(StoreErrorKind::Unavailable)
            })?
            .map_err(|error| failure("cannot connect to PostgreSQL", error))?;
        let driver = tokio::spawn(connection);
        let migrated = schema::migrate(&mut client, schema, &Sql::new(schema).channel).await;
        drop(client);
        let _ = driver.await;
        migrated
    }

    /// The schema.
    pub fn schema(&self) -> &str {
        &self.sql.schema
    }

    /// Runs the statement `sql` with `params` on a connection of the pool
    /// (prepared once per connection), within the timeout.
    pub(crate) async fn query(
        &self,
        what: &'static str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        self.query_on(&self.pool, what, sql, params).await
    }

    /// [`PostgresStore::query`] on a connection of the lease's own.
    pub(crate) async fn query_lease(
        &self,
        what: &'static str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        self.query_on(&self.lease_pool, what, sql, params).await
    }

    async fn query_on(
        &self,
        pool: &Pool,
        what: &'static str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        query_pool(pool, self.options.timeout, what, sql, params).await
    }

    /// A record this store's creation stored: kept in the cache, and
    /// announced on this store's own change feed (a creation is not
    /// notified to the other replicas: none can hold or wait for a task
    /// before its id exists).
    pub(crate) fn created(&self, ticket: Option<CacheTicket<'_>>, record: TaskRecord) {
        let id = record.id().clone();
        self.cache
            .created(ticket, &Arc::new(PackedRecord::pack(record)));
        // No receiver is not an error.
        drop(self.feed.send(id));
    }

    /// The record: from the cache, or else one `SELECT` (whose answer the
    /// cache keeps if no write of the task was announced meanwhile).
    async fn read(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        if let Some(cached) = self.cache.get(id.expose(), UnixMillis::now()) {
            return Ok(Some(cached));
        }
        let ticket = self.cache.ticket(id.expose());
        let rows = self
            .query(
                "PostgreSQL could not read the task",
                &self.sql.get,
                &[&id.expose()],
            )
            .await?;
        let found = match rows.first() {
            Some(row) => Some(Arc::new(PackedRecord::pack(decode(
                id,
                row.try_get(0).map_err(column)?,
                row.try_get(1).map_err(column)?,
            )?))),
            None => None,
        };
        self.cache.read(ticket, found.as_ref());
        Ok(found)
    }

    /// [`TaskStore::compare_and_swap`], and with `free`, the seat given up
    /// in those pools in the same transaction when it swaps.
    pub(crate) async fn swap(
        &self,
        transition: Transition,
        free: Option<(&str, Vec<String>)>,
    ) -> Result<Swap, StoreError> {
        let record = transition.record();
        let id = record.id().clone();
        let expected = version_param(transition.expected_version());
        let (seat, pools) = match free {
            Some((seat, pools)) => (Some(seat), pools),
            None => (None, Vec::new()),
        };
        let ticket = self.cache.ticket(id.expose());
        // In a batch, announced in its transaction; what it did not swap is
        // run alone, which tells a conflict from a missing task.
        let change = batch::Change {
            row: Columns::of(record)?,
            expected,
        };
        let done = match seat {
            Some(seat) if !pools.is_empty() => {
                let seat = seat.to_owned();
                let pools = pools.clone();
                let freeing = batch::Freeing {
                    change,
                    seat,
                    pools,
                };
                self.seated.write(batch::Seated::Free(freeing)).await? == 1
            }
            _ => self.plain.write(batch::Plain::Change(change)).await?,
        };
        if done {
            return Ok(self.swapped(ticket, transition, &[]).await);
        }
        let row = Columns::of(record)?;
        let rows = self
            .query(
                "PostgreSQL could not change the task",
                &self.sql.swap,
                &[
                    &id.expose(),
                    &expected,
                    &row.owner,
                    &row.version,
                    &row.record,
                    &row.runner,
                    &row.expires_at,
                    &seat,
                    &pools,
                ],
            )
            .await?;
        let Some(answer) = rows.first() else {
            return Err(StoreError::msg(
                "PostgreSQL answered a compare-and-set with nothing",
            ));
        };
        match answer.try_get::<_, i32>(0).map_err(column)? {
            2 => {
                let announce: &[&str] = if pools.is_empty() {
                    &[id.expose()]
                } else {
                    &[id.expose(), feed::SEATS_FREED]
                };
                Ok(self.swapped(ticket, transition, announce).await)
            }
            1 => {
                let current = decode(
                    &id,
                    answer.try_get(1).map_err(column)?,
                    answer.try_get(2).map_err(column)?,
                )?;
                let packed = Arc::new(PackedRecord::pack(current.clone()));
                self.cache.read(ticket, Some(&packed));
                Ok(Swap::Conflict(Box::new(current)))
            }
            _ => {
                self.cache.read(ticket, None);
                Ok(Swap::Missing)
            }
        }
    }

    /// A swap that was done: `announce` announced (the task's id, and
    /// [`feed::SEATS_FREED`] when it freed seats; nothing when its
    /// statement did), and the record kept in the cache.
    async fn swapped(
        &self,
        ticket: Option<CacheTicket<'_>>,
        transition: Transition,
        announce: &[&str],
    ) -> Swap {
        if !announce.is_empty() {
            self.announcer.announce(announce).await;
        }
        let record = PackedRecord::pack(transition.into_record());
        self.cache.wrote(ticket, &Arc::new(record));
        Swap::Swapped
    }

    /// Up to `limit` records from the rows `(id, version, record)`, checked.
    fn records(rows: &[Row], owner: Option<&Principal>) -> Result<Vec<TaskRecord>, StoreError> {
        rows.iter()
            .map(|row| {
                let id: &str = row.try_get(0).map_err(column)?;
                let record = decode(
                    &TaskId::new(id),
                    row.try_get(1).map_err(column)?,
                    row.try_get(2).map_err(column)?,
                )?;
                if owner.is_some_and(|owner| record.owner() != owner) {
                    return Err(corrupt("the record disagrees with its owner"));
                }
                Ok(record)
            })
            .collect()
    }
}

/// Applies or checks the migrations, as the options say.
async fn prepare_schema(
    pool: &Pool,
    sql: &Sql,
    options: &PostgresOptions,
) -> Result<(), StoreError> {
    let what = "cannot connect to PostgreSQL";
    let prepare = async {
        let mut client = pool
            .get()
            .await
            .map_err(|error| pool_failure(what, error))?;
        let found = schema::version(&client, &sql.schema).await?;
        schema::check_not_newer(&sql.schema, found)?;
        if found == schema::VERSION {
            return Ok(());
        }
        if options.migrations == Migrations::Check {
            return Err(StoreError::msg(format!(
                "the PostgreSQL schema {:?} is at version {found}, behind this binary's {}: \
                 run `mcp-tasks admin migrate --store URL` (or let the server apply it)",
                sql.schema,
                schema::VERSION
            )));
        }
        let client: &mut tokio_postgres::Client = &mut client;
        schema::migrate(client, &sql.schema, &sql.channel)
            .await
            .map(drop)
    };
    // Migrating may take longer than one operation.
    match tokio::time::timeout(options.timeout.max(Duration::from_secs(30)), prepare).await {
        Ok(answer) => answer,
        Err(_) => Err(
            StoreError::msg("PostgreSQL did not answer while preparing the schema")
                .with_kind(StoreErrorKind::Unavailable),
        ),
    }
}

impl TaskStore for PostgresStore {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        let row = Columns::of(&record)?;
        let ticket = self.cache.ticket(record.id().expose());
        let created = if row.keyed.is_none() {
            // In a batch: only an existing id keeps it from being created.
            let creation = batch::Creation { row, lease: None };
            self.plain.write(batch::Plain::Create(creation)).await?
        } else {
            let created = self
                .query(
                    "PostgreSQL could not create the task",
                    &self.sql.create,
                    &row.params(),
                )
                .await?;
            !created.is_empty()
        };
        if !created {
            return Err(StoreError::msg("a task with this id exists"));
        }
        self.created(ticket, record);
        Ok(())
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        let row = Columns::of(&record)?;
        let ticket = self.cache.ticket(record.id().expose());
        let rows = self
            .query(
                "PostgreSQL could not create the task",
                &self.sql.create_keyed,
                &row.params(),
            )
            .await?;
        let Some(answer) = rows.first() else {
            return Err(StoreError::msg(
                "PostgreSQL answered a keyed creation with nothing",
            ));
        };
        match answer.try_get::<_, i32>(0).map_err(column)? {
            0 => {
                self.created(ticket, record);
                Ok(Keyed::Created)
            }
            1 => {
                let id: &str = answer.try_get(1).map_err(column)?;
                Ok(Keyed::Existing(Box::new(decode(
                    &TaskId::new(id),
                    answer.try_get(2).map_err(column)?,
                    answer.try_get(3).map_err(column)?,
                )?)))
            }
            _ => Err(StoreError::msg("a task with this id exists")),
        }
    }

    fn keeps_keys(&self) -> bool {
        true
    }

    async fn find_keyed(
        &self,
        owner: &Principal,
        key: &IdempotencyKey,
    ) -> Result<Option<TaskRecord>, StoreError> {
        let slot = idempotency_slot(owner, key);
        let rows = self
            .query(
                "PostgreSQL could not read the idempotency index",
                &self.sql.find_keyed,
                &[&slot],
            )
            .await?;
        Ok(Self::records(&rows, Some(owner))?.into_iter().next())
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.read(id).await?.map(|record| record.unpack()))
    }

    async fn get_packed(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        self.read(id).await
    }

    async fn compare_and_swap(&self, transition: Transition) -> Result<Swap, StoreError> {
        self.swap(transition, None).await
    }

    async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        let deleted = self
            .query(
                "PostgreSQL could not delete the task",
                &self.sql.delete,
                &[&id.expose()],
            )
            .await?;
        self.cache.forget(id.expose());
        if !deleted.is_empty() {
            self.announcer.announce(&[id.expose()]).await;
        }
        Ok(())
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let turn = i64::try_from(SWEEP_TURN.as_millis()).unwrap_or(i64::MAX);
        let now = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "PostgreSQL could not list expired tasks",
                &self.sql.expired,
                &[&self.sweeper, &turn, &now, &limit],
            )
            .await?;
        rows.iter()
            .map(|row| Ok(TaskId::new(row.try_get::<_, &str>(0).map_err(column)?)))
            .collect()
    }

    async fn list_owned(
        &self,
        owner: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let after = after.map_or("", TaskId::expose);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "PostgreSQL could not list the tasks of an owner",
                &self.sql.list_owned,
                &[&owner.as_str(), &after, &limit],
            )
            .await?;
        Self::records(&rows, Some(owner))
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.feed.subscribe()
    }

    async fn list_all(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let after = after.map_or("", TaskId::expose);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "PostgreSQL could not list the tasks",
                &self.sql.list_all,
                &[&after, &limit],
            )
            .await?;
        Self::records(&rows, None)
    }

    async fn hash_key(&self) -> Result<HashKey, StoreError> {
        self.hash_key
            .get_or_try_init(|| async {
                let made = HashKey::random()?.to_hex();
                let rows = self
                    .query(
                        "PostgreSQL could not read the task hash key",
                        &self.sql.hash_key,
                        &[&made],
                    )
                    .await?;
                let hex: &str = rows
                    .first()
                    .ok_or_else(|| StoreError::msg("the task hash key vanished from PostgreSQL"))?
                    .try_get(0)
                    .map_err(column)?;
                HashKey::from_hex(hex)
            })
            .await
            .cloned()
    }

    fn replicas(&self) -> Option<&dyn Replicas> {
        Some(self)
    }

    fn outlives_process(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_checked() {
        assert!(check_schema_name("mcp_tasks").is_ok());
        assert!(check_schema_name("team_2").is_ok());
        for bad in ["", "2team", "Team", "a-b", "a\"b", &"x".repeat(49)] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
    }
}
