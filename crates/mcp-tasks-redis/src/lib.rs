#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admin;
mod feed;
mod scripts;
mod seats;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::store::{
    BoxFuture, CacheTicket, FairTurn, FeedCache, HashKey, Keyed, Orphan, PackedRecord, Principal,
    RateBucket, RateTake, Replicas, RunnerId, SeatId, SeatPool, Seating, StoreError,
    StoreErrorKind, Swap, TaskRecord, TaskStore, Transition, idempotency_slot,
};
use mcp_tasks::{IdempotencyKey, TaskId, UnixMillis};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;

/// The key prefix when the options set none.
pub const DEFAULT_KEY_PREFIX: &str = "mcp-tasks:";

/// How many ids the change feed buffers for a slow receiver.
const FEED_CAPACITY: usize = 4096;

/// How [`RedisStore::connect_with`] connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// Put before every key and the channel (default [`DEFAULT_KEY_PREFIX`]),
    /// so several deployments can share one Redis: stores with different
    /// prefixes see nothing of each other.
    pub key_prefix: String,
    /// The longest any one operation takes, connecting included (default
    /// 2 s): past it the operation fails with a [`StoreError`] of kind
    /// [`StoreErrorKind::Unavailable`], and the server answers its request
    /// with a JSON-RPC error instead of hanging.
    pub timeout: Duration,
    /// How long after its `expiresAt` Redis itself drops a record no
    /// server's sweeper dealt with (default 1 h): a backstop for memory when
    /// no server runs. The sweepers act at `expiresAt` as with any store.
    pub expiry_grace: Duration,
    /// How many records this replica's read cache keeps at most (default
    /// 100,000; 0: no cache, every read is a round trip). The cache is
    /// kept coherent by the change feed: see the crate docs.
    pub cache_records: usize,
    /// How many bytes of records the read cache keeps at most (default
    /// 64 MiB).
    pub cache_bytes: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            timeout: Duration::from_secs(2),
            expiry_grace: Duration::from_secs(3600),
            cache_records: 100_000,
            cache_bytes: 64 << 20,
        }
    }
}

impl RedisOptions {
    /// The key prefix.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// The longest one operation takes.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long after its `expiresAt` Redis drops a record by itself.
    pub fn with_expiry_grace(mut self, grace: Duration) -> Self {
        self.expiry_grace = grace;
        self
    }

    /// The bounds of the read cache: at most `records` records and `bytes`
    /// bytes of them (`records` 0: no cache).
    pub fn with_cache(mut self, records: usize, bytes: usize) -> Self {
        self.cache_records = records;
        self.cache_bytes = bytes;
        self
    }
}

/// A [`TaskStore`] in Redis that several server processes share. See the
/// [crate docs](crate).
///
/// Its operations must be awaited inside a tokio runtime; dropping the
/// store ends its change-feed subscription.
#[derive(Debug)]
pub struct RedisStore {
    connection: ConnectionManager,
    keys: Keys,
    options: RedisOptions,
    feed: broadcast::Sender<TaskId>,
    gaps: watch::Receiver<u64>,
    freed: watch::Receiver<u64>,
    listener: AbortHandle,
    /// Records this replica wrote or read, dropped by the feed.
    cache: Arc<FeedCache>,
    /// The task hash key, once read.
    hash_key: tokio::sync::OnceCell<HashKey>,
}

/// The keys of one prefix.
#[derive(Debug, Clone)]
struct Keys {
    prefix: String,
    expiry: String,
    runners: String,
    claimed: String,
    channel: String,
}

impl Keys {
    fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            expiry: format!("{prefix}expiry"),
            runners: format!("{prefix}runners"),
            claimed: format!("{prefix}claimed"),
            channel: format!("{prefix}changes"),
        }
    }

    fn task(&self, id: &TaskId) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.prefix.len() + 5 + id.expose().len());
        key.extend_from_slice(self.prefix.as_bytes());
        key.extend_from_slice(b"task:");
        key.extend_from_slice(id.expose().as_bytes());
        key
    }

    /// The set of the ids of `owner`'s records.
    fn owned(&self, owner: &Principal) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.prefix.len() + 6 + owner.as_str().len());
        key.extend_from_slice(self.prefix.as_bytes());
        key.extend_from_slice(b"owner:");
        key.extend_from_slice(owner.as_str().as_bytes());
        key
    }
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// A Redis failure as a [`StoreError`]: a connection that failed or timed
/// out is [`StoreErrorKind::Unavailable`], Redis out of memory is
/// [`StoreErrorKind::Full`].
pub(crate) fn failure(message: &str, error: redis::RedisError) -> StoreError {
    let kind = if error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || matches!(
            error.code(),
            Some("LOADING" | "READONLY" | "MASTERDOWN" | "TRYAGAIN")
        ) {
        StoreErrorKind::Unavailable
    } else if error.code() == Some("OOM") {
        StoreErrorKind::Full
    } else {
        StoreErrorKind::Other
    };
    StoreError::new(message, error).with_kind(kind)
}

fn corrupt(message: &str) -> StoreError {
    StoreError::msg(format!("corrupt task in Redis: {message}"))
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://[user:password@]HOST[:PORT][/DB]`,
    /// or `rediss://` for TLS) with the default options.
    ///
    /// # Errors
    ///
    /// The URL does not parse, or Redis cannot be reached or subscribed to
    /// within the timeout.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// [`RedisStore::connect`] with options.
    ///
    /// # Errors
    ///
    /// As [`RedisStore::connect`].
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        // redis-rs leaves Nagle's algorithm on (`TCP_NODELAY` off) unless
        // told: a script sent while an earlier one's bytes wait for their
        // ACK would wait too, so every request here goes out at once.
        let nodelay = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let client = redis::IntoConnectionInfo::into_connection_info(url)
            .map(|info| info.set_tcp_settings(nodelay))
            .and_then(redis::Client::open)
            .map_err(|error| failure("the Redis URL does not parse", error))?;
        let keys = Keys::new(&options.key_prefix);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.timeout))
            .set_response_timeout(Some(options.timeout))
            // A request while Redis is away fails after one attempt to
            // reconnect; the next request tries again.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(200));
        let connecting = ConnectionManager::new_with_config(client.clone(), config);
        let connection = match tokio::time::timeout(options.timeout, connecting).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(error)) => return Err(failure("cannot connect to Redis", error)),
            Err(_) => {
                return Err(StoreError::msg(format!(
                    "Redis did not answer within {:?}",
                    options.timeout
                ))
                .with_kind(StoreErrorKind::Unavailable));
            }
        };
        // Subscribed before this returns: no change after it is missed.
        let pubsub = feed::subscribe(&client, &keys.channel, options.timeout).await?;
        let (sender, _) = broadcast::channel(FEED_CAPACITY);
        let (gaps_sender, gaps) = watch::channel(0);
        let (freed_sender, freed) = watch::channel(0);
        let cache = Arc::new(FeedCache::new(options.cache_records, options.cache_bytes));
        let listener = tokio::spawn(feed::forward(
            client,
            keys.channel.clone(),
            pubsub,
            feed::Senders {
                changes: sender.clone(),
                gaps: gaps_sender,
                freed: freed_sender,
                cache: Arc::clone(&cache),
            },
            options.timeout,
        ))
        .abort_handle();
        Ok(Self {
            connection,
            keys,
            options,
            feed: sender,
            gaps,
            freed,
            listener,
            cache,
            hash_key: tokio::sync::OnceCell::new(),
        })
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.keys.prefix
    }

    /// Runs one operation within the timeout.
    async fn bounded<T>(
        &self,
        what: &'static str,
        operation: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.options.timeout, operation).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(failure(what, error)),
            Err(_) => Err(StoreError::msg(format!(
                "{what}: Redis did not answer within {:?}",
                self.options.timeout
            ))
            .with_kind(StoreErrorKind::Unavailable)),
        }
    }

    /// [`TaskStore::compare_and_swap`], and with `free`, the seat given up
    /// in those pools by the same script when it swaps.
    async fn swap(
        &self,
        transition: Transition,
        free: Option<(&SeatId, &[SeatPool])>,
    ) -> Result<Swap, StoreError> {
        let record = transition.record();
        let json = encode(record)?;
        let (expires_at, keep, runner, finished) = self.index_args(record);
        let id = record.id().clone();
        let mut connection = self.connection.clone();
        let ticket = self.cache.ticket(id.expose());
        let mut invocation = scripts::SWAP.key(self.keys.task(&id));
        invocation
            .key(&self.keys.expiry)
            .key(self.keys.owned(record.owner()))
            .arg(id.expose())
            .arg(transition.expected_version())
            .arg(json)
            .arg(record.version())
            .arg(expires_at)
            .arg(keep)
            .arg(runner)
            .arg(finished)
            .arg(&self.keys.prefix)
            .arg(record.owner().as_str());
        if let Some((seat, pools)) = free {
            self.freeing(&mut invocation, seat, pools);
        }
        let answer: Vec<redis::Value> = self
            .bounded(
                "Redis could not change the task",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        let text = |value: &redis::Value| -> Option<String> {
            redis::from_redis_value_ref::<String>(value).ok()
        };
        match answer.as_slice() {
            [code] if redis::from_redis_value_ref::<i64>(code).ok() == Some(2) => {
                let record = PackedRecord::pack(transition.into_record());
                self.cache.wrote(ticket, &Arc::new(record));
                Ok(Swap::Swapped)
            }
            [code] if redis::from_redis_value_ref::<i64>(code).ok() == Some(0) => {
                self.cache.read(ticket, None);
                Ok(Swap::Missing)
            }
            [_, version, json] => match (text(version), text(json)) {
                (Some(version), Some(json)) => {
                    // The script read the record it conflicts with.
                    let current = decode(&id, &version, &json)?;
                    let packed = Arc::new(PackedRecord::pack(current.clone()));
                    self.cache.read(ticket, Some(&packed));
                    Ok(Swap::Conflict(Box::new(current)))
                }
                _ => Err(corrupt("a record without its version, or the reverse")),
            },
            _ => Err(StoreError::msg(
                "Redis answered a compare-and-set with something unexpected",
            )),
        }
    }

    /// `script` ([`scripts::CREATE`] or one that starts as it does) with the
    /// keys and arguments that create `record`.
    fn creation(
        &self,
        script: &'static redis::Script,
        record: &TaskRecord,
    ) -> Result<redis::ScriptInvocation<'static>, StoreError> {
        let json = encode(record)?;
        let (expires_at, keep, runner, finished) = self.index_args(record);
        let mut invocation = script.key(self.keys.task(record.id()));
        invocation
            .key(&self.keys.expiry)
            .key(self.keys.owned(record.owner()))
            .arg(record.id().expose())
            .arg(json)
            .arg(record.version())
            .arg(expires_at)
            .arg(keep)
            .arg(runner)
            .arg(finished)
            .arg(&self.keys.prefix)
            .arg(record.owner().as_str())
            .arg(record.idempotency_slot().unwrap_or_default());
        Ok(invocation)
    }

    /// The arguments every write passes about a record's indexes:
    /// expires_at, how long Redis keeps it, its runner, whether it is finished.
    fn index_args(&self, record: &TaskRecord) -> (String, String, String, &'static str) {
        let (expires_at, keep) = match record.expires_at() {
            Some(at) => {
                let keep = at
                    .saturating_since(record.updated_at())
                    .saturating_add(self.options.expiry_grace);
                (
                    // Scores are doubles: exact to 2^53 ms, far past any date.
                    at.as_millis().min(1 << 53).to_string(),
                    millis(keep).max(1).to_string(),
                )
            }
            None => (String::new(), String::new()),
        };
        let runner = record
            .runner()
            .map(|runner| runner.as_str().to_owned())
            .unwrap_or_default();
        let finished = if record.status().is_terminal() {
            "1"
        } else {
            "0"
        };
        (expires_at, keep, runner, finished)
    }
}

impl RedisStore {
    /// A record this store's creation stored (Redis answered): kept in the
    /// cache, and announced on this store's own change feed. A creation is
    /// not published to the other replicas (see `scripts::CREATE_RECORD`),
    /// but this process's feed still tells of it, as every store's does.
    fn created(&self, ticket: Option<CacheTicket<'_>>, record: TaskRecord) {
        let id = record.id().clone();
        self.cache
            .created(ticket, &Arc::new(PackedRecord::pack(record)));
        // No receiver is not an error.
        drop(self.feed.send(id));
    }

    /// The record: from the cache, or else one `HMGET` (whose answer the
    /// cache keeps if no write of the task was announced meanwhile).
    async fn read(&self, id: &TaskId) -> Result<Option<Arc<PackedRecord>>, StoreError> {
        if let Some(cached) = self.cache.get(id.expose(), UnixMillis::now()) {
            return Ok(Some(cached));
        }
        let ticket = self.cache.ticket(id.expose());
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("HMGET");
        command.arg(self.keys.task(id)).arg("v").arg("r");
        let (version, json): (Option<String>, Option<String>) = self
            .bounded(
                "Redis could not read the task",
                command.query_async(&mut connection),
            )
            .await?;
        let found = match (version, json) {
            (Some(version), Some(json)) => {
                Some(Arc::new(PackedRecord::pack(decode(id, &version, &json)?)))
            }
            (None, None) => None,
            _ => return Err(corrupt("a record without its version, or the reverse")),
        };
        self.cache.read(ticket, found.as_ref());
        Ok(found)
    }
}

/// The record of a script's `{id, version, record}`.
fn keyed_record(found: &[redis::Value]) -> Result<TaskRecord, StoreError> {
    let text = |value: &redis::Value| redis::from_redis_value_ref::<String>(value).ok();
    match found {
        [id, version, json] => match (text(id), text(version), text(json)) {
            (Some(id), Some(version), Some(json)) => decode(&TaskId::new(id), &version, &json),
            _ => Err(corrupt("a record without its version, or the reverse")),
        },
        _ => Err(StoreError::msg(
            "Redis answered an idempotency look-up with something unexpected",
        )),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn encode(record: &TaskRecord) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|error| StoreError::new("cannot encode a task", error))
}

/// A stored record: its JSON and the version beside it must agree with
/// each other and with the id it was read under.
fn decode(id: &TaskId, version: &str, json: &str) -> Result<TaskRecord, StoreError> {
    let record: TaskRecord = serde_json::from_str(json)
        .map_err(|error| StoreError::new("corrupt task in Redis: not a task record", error))?;
    if record.id() != id || version.parse::<u64>().ok() != Some(record.version()) {
        return Err(corrupt("the record disagrees with its key or version"));
    }
    Ok(record)
}

impl TaskStore for RedisStore {
    async fn create(&self, record: TaskRecord) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let invocation = self.creation(&scripts::CREATE, &record)?;
        let ticket = self.cache.ticket(record.id().expose());
        let created: i64 = self
            .bounded(
                "Redis could not create the task",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        if created == 0 {
            return Err(StoreError::msg("a task with this id exists"));
        }
        self.created(ticket, record);
        Ok(())
    }

    async fn create_keyed(&self, record: TaskRecord) -> Result<Keyed, StoreError> {
        let mut connection = self.connection.clone();
        let invocation = self.creation(&scripts::CREATE_KEYED, &record)?;
        let ticket = self.cache.ticket(record.id().expose());
        let answer: Vec<redis::Value> = self
            .bounded(
                "Redis could not create the task",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        let code = answer
            .first()
            .and_then(|code| redis::from_redis_value_ref::<i64>(code).ok());
        match (code, answer.get(1..)) {
            (Some(0), _) => {
                self.created(ticket, record);
                Ok(Keyed::Created)
            }
            (Some(1), Some(found)) => Ok(Keyed::Existing(Box::new(keyed_record(found)?))),
            (Some(2), _) => Err(StoreError::msg("a task with this id exists")),
            _ => Err(StoreError::msg(
                "Redis answered a keyed creation with something unexpected",
            )),
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
        let mut connection = self.connection.clone();
        let mut invocation = scripts::FIND_KEYED.prepare_invoke();
        invocation
            .arg(&self.keys.prefix)
            .arg(idempotency_slot(owner, key));
        let found: Vec<redis::Value> = self
            .bounded(
                "Redis could not read the idempotency index",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        if found.is_empty() {
            return Ok(None);
        }
        let record = keyed_record(&found)?;
        if record.owner() != owner {
            return Err(corrupt("the record disagrees with its idempotency slot"));
        }
        Ok(Some(record))
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
        let mut connection = self.connection.clone();
        let mut invocation = scripts::DELETE.key(self.keys.task(id));
        invocation
            .key(&self.keys.expiry)
            .arg(id.expose())
            .arg(&self.keys.prefix);
        let _: i64 = self
            .bounded(
                "Redis could not delete the task",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        self.cache.forget(id.expose());
        Ok(())
    }

    async fn expired(&self, now: UnixMillis, limit: usize) -> Result<Vec<TaskId>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut connection = self.connection.clone();
        let mut invocation = scripts::EXPIRED.key(&self.keys.expiry);
        invocation
            .arg(now.as_millis().min(1 << 53))
            .arg(limit)
            .arg(&self.keys.prefix);
        let ids: Vec<String> = self
            .bounded(
                "Redis could not list expired tasks",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        Ok(ids.into_iter().map(TaskId::new).collect())
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
        // A ZRANGEBYLEX bound: from the first, or past `after`.
        let from = after.map_or_else(|| "-".to_owned(), |id| format!("({}", id.expose()));
        let mut connection = self.connection.clone();
        let mut invocation = scripts::LIST_OWNED.key(self.keys.owned(owner));
        invocation
            .arg(from)
            .arg(limit)
            .arg(&self.keys.prefix)
            .arg(owner.as_str());
        let flat: Vec<Option<String>> = self
            .bounded(
                "Redis could not list the tasks of an owner",
                invocation.invoke_async(&mut connection),
            )
            .await?;
        flat.chunks_exact(3)
            .map(|found| match found {
                [Some(id), Some(version), Some(json)] => {
                    let record = decode(&TaskId::new(id.as_str()), version, json)?;
                    if record.owner() != owner {
                        return Err(corrupt("the record disagrees with its owner"));
                    }
                    Ok(record)
                }
                _ => Err(corrupt("a record without its version, or the reverse")),
            })
            .collect()
    }

    fn changes(&self) -> broadcast::Receiver<TaskId> {
        self.feed.subscribe()
    }

    async fn list_all(
        &self,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        self.list_every(after, limit).await
    }

    async fn hash_key(&self) -> Result<HashKey, StoreError> {
        self.hash_key
            .get_or_try_init(|| self.read_hash_key())
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

impl Replicas for RedisStore {
    fn acquire<'a>(
        &'a self,
        runner: &'a RunnerId,
        hold: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let mut invocation = scripts::ACQUIRE.key(&self.keys.runners);
            invocation.arg(runner.as_str()).arg(millis(hold));
            let _: i64 = self
                .bounded(
                    "Redis could not take the lease",
                    invocation.invoke_async(&mut connection),
                )
                .await?;
            Ok(())
        })
    }

    fn renew<'a>(
        &'a self,
        runner: &'a RunnerId,
        hold: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut connection = self.connection.clone();
            let mut invocation = scripts::RENEW.key(&self.keys.runners);
            invocation.arg(runner.as_str()).arg(millis(hold));
            let renewed: i64 = self
                .bounded(
                    "Redis could not renew the lease",
                    invocation.invoke_async(&mut connection),
                )
                .await?;
            Ok(renewed == 1)
        })
    }

    fn orphans(&self, limit: usize) -> BoxFuture<'_, Result<Vec<Orphan>, StoreError>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let mut connection = self.connection.clone();
            let mut invocation = scripts::ORPHANS.key(&self.keys.runners);
            invocation
                .key(&self.keys.claimed)
                .arg(limit)
                .arg(&self.keys.prefix);
            let flat: Vec<String> = self
                .bounded(
                    "Redis could not list the tasks of stopped servers",
                    invocation.invoke_async(&mut connection),
                )
                .await?;
            Ok(flat
                .chunks_exact(2)
                .map(|pair| {
                    Orphan::new(TaskId::new(pair[0].clone()), RunnerId::new(pair[1].clone()))
                })
                .collect())
        })
    }

    fn feed_gaps(&self) -> watch::Receiver<u64> {
        self.gaps.clone()
    }

    fn move_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(self.move_seats_in_redis(seat, Some(runner), take, free, None))
    }

    fn supports_rate(&self) -> bool {
        true
    }

    fn take_rate<'a>(
        &'a self,
        bucket: &'a RateBucket,
        interval: Duration,
        burst: u32,
    ) -> BoxFuture<'a, Result<RateTake, StoreError>> {
        Box::pin(self.take_rate_in_redis(bucket, interval, burst))
    }

    fn supports_fair_share(&self) -> bool {
        true
    }

    fn create_seated_fairly<'a>(
        &'a self,
        record: TaskRecord,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        fair: &'a FairTurn,
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(async move {
            self.create_seated_in_redis(record, seat, runner, take, Some(fair))
                .await
        })
    }

    fn move_seats_fairly<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        free: &'a [SeatPool],
        fair: &'a FairTurn,
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(self.move_seats_in_redis(seat, Some(runner), take, free, Some(fair)))
    }

    fn create_seated<'a>(
        &'a self,
        record: TaskRecord,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        Box::pin(async move {
            self.create_seated_in_redis(record, seat, runner, take, None)
                .await
        })
    }

    fn frees_with_swap(&self) -> bool {
        true
    }

    fn compare_and_swap_freeing<'a>(
        &'a self,
        transition: Transition,
        seat: &'a SeatId,
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Swap, StoreError>> {
        Box::pin(self.swap(transition, Some((seat, free))))
    }

    fn free_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        pools: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let _ = self
                .move_seats_in_redis(seat, None, &[], pools, None)
                .await?;
            Ok(())
        })
    }

    fn seats_taken<'a>(&'a self, pool: &'a SeatPool) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(self.seats_in_redis(pool))
    }

    fn seats_freed(&self) -> watch::Receiver<u64> {
        self.freed.clone()
    }
}
