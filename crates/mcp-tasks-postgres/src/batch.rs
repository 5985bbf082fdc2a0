//! Writes sent together: the plain creations and compare-and-sets that
//! arrive while others are on their way go to PostgreSQL as one statement,
//! one transaction and one commit (both kinds in the same statement: a
//! [`Plain`] write), and so do the seated creations and the compare-and-sets
//! that free seats (a [`Seated`] write); seat moves go in statements of
//! their own.
//!
//! Each durable commit costs PostgreSQL a transaction's work and a wait for
//! the disk, whatever it holds; at 16 creations in flight, one transaction
//! each, PostgreSQL's CPU was the limit (BENCHMARKS.md). A [`Batcher`] sends
//! a write at once when fewer than its number of statements are in flight
//! ([`STATEMENTS`]), and otherwise adds it to the next statement: alone, a
//! write waits for nothing; under load, the writes that queued behind a
//! statement go in the next one (the way group commit works in a database,
//! one level up).
//!
//! Two statements in flight at once never hold the same task (a write
//! whose task is in flight waits for the next statement), and a statement
//! locks its tasks' rows in the ids' order, so batches of several replicas
//! never deadlock one another. A write the statement did not do (its task
//! changed, exists, or its lease was claimed) is answered `false`, and the
//! caller runs it alone with the statement that tells why. A batch with
//! compare-and-sets announces its changes (`NOTIFY`) in its own
//! transaction: with one plain batch in flight, the database-wide lock a
//! notifying commit holds makes none of the store's other plain writes
//! wait.
//!
//! Not a crate: the batching crates found queue by time (a write waits for
//! a window to fill), where this sends at once whenever a statement is
//! free, and none keeps writes of one key out of concurrent batches.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::Pool;
use futures::future::BoxFuture;
use mcp_tasks::store::{StoreError, StoreErrorKind};
use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;

use crate::row::{Columns, column};

/// A write in a batch: its task's id keeps it out of concurrent ones.
pub(crate) trait Batched: Send + 'static {
    fn key(&self) -> &str;
}

/// Runs one batch: one answer per write, in order.
type Run<I, A> =
    Box<dyn Fn(Vec<I>) -> BoxFuture<'static, Result<Vec<A>, StoreError>> + Send + Sync>;

type Waiting<I, A> = (I, oneshot::Sender<Result<A, StoreError>>);

/// Sends writes of one kind to PostgreSQL, as many as wait at once in one
/// statement, with at most `statements` statements in flight.
pub(crate) struct Batcher<I, A = bool> {
    state: Mutex<State<I, A>>,
    statements: usize,
    most: usize,
    run: Run<I, A>,
}

impl<I, A> std::fmt::Debug for Batcher<I, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("statements", &self.statements)
            .field("most", &self.most)
            .finish_non_exhaustive()
    }
}

struct State<I, A> {
    queue: VecDeque<Waiting<I, A>>,
    /// The keys of the writes in flight.
    busy: HashSet<String>,
    /// Statements in flight (each a task that sends until the queue has
    /// nothing it may send).
    flushing: usize,
}

impl<I: Batched, A: Send + 'static> Batcher<I, A> {
    /// A batcher of at most `statements` statements in flight, each of at
    /// most `most` writes, sent by `run`.
    pub(crate) fn new(statements: usize, most: usize, run: Run<I, A>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                busy: HashSet::new(),
                flushing: 0,
            }),
            statements: statements.max(1),
            most: most.max(1),
            run,
        })
    }

    /// Writes `item` with whatever waits beside it: the statement's answer
    /// for it (whether it did it, or a code saying what it did).
    pub(crate) async fn write(self: &Arc<Self>, item: I) -> Result<A, StoreError> {
        let (sender, answer) = oneshot::channel();
        let start = {
            let mut state = self.lock();
            state.queue.push_back((item, sender));
            let start = state.flushing < self.statements;
            if start {
                state.flushing += 1;
            }
            start
        };
        if start {
            tokio::spawn(Arc::clone(self).flush());
        }
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::msg("the PostgreSQL store's writer stopped")
                .with_kind(StoreErrorKind::Unavailable))
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<I, A>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends batches until none may be sent (the queue is empty, or what is
    /// in it waits for a write of its task in flight, whose flusher sends it
    /// next).
    async fn flush(self: Arc<Self>) {
        loop {
            let batch = {
                let mut state = self.lock();
                let batch = take(&mut state, self.most);
                if batch.is_empty() {
                    state.flushing -= 1;
                    return;
                }
                batch
            };
            let (items, senders): (Vec<I>, Vec<_>) = batch.into_iter().unzip();
            let keys: Vec<String> = items.iter().map(|item| item.key().to_owned()).collect();
            let answers = (self.run)(items).await;
            {
                let mut state = self.lock();
                for key in &keys {
                    state.busy.remove(key);
                }
            }
            match answers {
                Ok(answers) if answers.len() == senders.len() => {
                    for (sender, answer) in senders.into_iter().zip(answers) {
                        // A writer that went away is no error.
                        drop(sender.send(Ok(answer)));
                    }
                }
                Ok(_) => answer_all(
                    senders,
                    &StoreError::msg("PostgreSQL answered a batch of writes with a wrong count"),
                ),
                Err(error) => answer_all(senders, &error),
            }
        }
    }
}

/// The next batch: up to `most` waiting writes whose tasks are not in
/// flight, in the order they came (marked in flight).
fn take<I: Batched, A>(state: &mut State<I, A>, most: usize) -> Vec<Waiting<I, A>> {
    let mut batch = Vec::new();
    let mut at = 0;
    while at < state.queue.len() && batch.len() < most {
        if state.busy.insert(state.queue[at].0.key().to_owned()) {
            batch.extend(state.queue.remove(at));
        } else {
            at += 1;
        }
    }
    batch
}

fn answer_all<A>(senders: Vec<oneshot::Sender<Result<A, StoreError>>>, error: &StoreError) {
    for sender in senders {
        let each = StoreError::msg(error.message()).with_kind(error.kind());
        drop(sender.send(Err(each)));
    }
}

/// The most writes one statement carries.
const MOST: usize = 64;

/// Statements of one kind in flight at once. One: the writes that queue
/// while it is on its way go together in the next. Measured with 16
/// creations in flight (`serve`, 100 ms tools, PostgreSQL on the same two
/// cores): one statement at a time 4,200 to 6,900 creations/s, two 3,500
/// to 5,200, four 3,300 to 4,500, eight 2,600; more statements meant
/// smaller batches, so more transactions for the same writes. With the
/// creations and compare-and-sets in the same statements, the same again:
/// one in flight 4,750 and 5,130, two 3,140 and 3,620.
const STATEMENTS: usize = 1;

/// A creation in a batch: its row, and the runner whose lease it needs
/// (none for [`TaskStore::create`](mcp_tasks::store::TaskStore::create)).
pub(crate) struct Creation {
    pub(crate) row: Columns,
    pub(crate) lease: Option<String>,
}

impl Batched for Creation {
    fn key(&self) -> &str {
        &self.row.id
    }
}

/// A creation that takes seats, in a batch: its row, the runner whose
/// lease it needs, its seat, and the pools (with their limits) it takes it
/// in.
pub(crate) struct SeatedCreation {
    pub(crate) row: Columns,
    pub(crate) lease: String,
    pub(crate) seat: String,
    pub(crate) pools: Vec<String>,
    pub(crate) limits: Vec<i64>,
}

impl Batched for SeatedCreation {
    fn key(&self) -> &str {
        &self.row.id
    }
}

/// A seat move in a batch: the runner (empty to free only), the seat, the
/// pools it is taken in (with their limits) and those it is freed in.
pub(crate) struct Move {
    pub(crate) runner: String,
    pub(crate) seat: String,
    pub(crate) take: Vec<String>,
    pub(crate) limits: Vec<i64>,
    pub(crate) free: Vec<String>,
}

impl Batched for Move {
    fn key(&self) -> &str {
        &self.seat
    }
}

/// A compare-and-set in a batch: the new row, and the version it replaces.
pub(crate) struct Change {
    pub(crate) row: Columns,
    pub(crate) expected: i64,
}

impl Batched for Change {
    fn key(&self) -> &str {
        &self.row.id
    }
}

/// A compare-and-set that frees a seat, in a batch: the change, the seat,
/// and the pools it gives it up in.
pub(crate) struct Freeing {
    pub(crate) change: Change,
    pub(crate) seat: String,
    pub(crate) pools: Vec<String>,
}

impl Batched for Freeing {
    fn key(&self) -> &str {
        &self.change.row.id
    }
}

/// Where batches go: a pool, the statement, and how long one may take.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) pool: Pool,
    pub(crate) sql: Arc<str>,
    pub(crate) timeout: Duration,
    pub(crate) what: &'static str,
}

impl Target {
    /// Runs the statement with `params`: which of `ids` its rows named.
    async fn done(
        &self,
        ids: &[&str],
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<bool>, StoreError> {
        let rows =
            crate::connection::query_pool(&self.pool, self.timeout, self.what, &self.sql, params)
                .await?;
        let done = rows
            .iter()
            .map(|row| row.try_get::<_, &str>(0))
            .collect::<Result<HashSet<&str>, _>>()
            .map_err(column)?;
        Ok(ids.iter().map(|id| done.contains(id)).collect())
    }

    /// Runs the statement with `params`: the codes of its one row's array.
    async fn codes(&self, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<i32>, StoreError> {
        let rows =
            crate::connection::query_pool(&self.pool, self.timeout, self.what, &self.sql, params)
                .await?;
        rows.first()
            .ok_or_else(|| StoreError::msg("PostgreSQL answered a batch of writes with nothing"))?
            .try_get(0)
            .map_err(column)
    }
}

/// A write that takes no seat, in a batch: a creation without a key, or a
/// compare-and-set that frees no seat.
pub(crate) enum Plain {
    Create(Creation),
    Change(Change),
}

impl Batched for Plain {
    fn key(&self) -> &str {
        match self {
            Self::Create(creation) => creation.key(),
            Self::Change(change) => change.key(),
        }
    }
}

/// Where plain writes go: the statement for creations alone
/// (`Sql::create_batch`), compare-and-sets alone (`Sql::swap_batch`), and
/// both (`Sql::write_batch`).
pub(crate) struct PlainTargets {
    pub(crate) creations: Target,
    pub(crate) changes: Target,
    pub(crate) both: Target,
}

/// Plain writes: the creations and compare-and-sets that wait together go
/// in one statement, so in one transaction and one commit (a transaction
/// costs PostgreSQL about as much as eight rows: BENCHMARKS.md).
pub(crate) fn plain(targets: PlainTargets) -> Arc<Batcher<Plain>> {
    batcher(Arc::new(targets), |targets, items: Vec<Plain>| {
        Box::pin(async move { write_plain(&targets, &items).await })
    })
}

async fn write_plain(targets: &PlainTargets, items: &[Plain]) -> Result<Vec<bool>, StoreError> {
    let (mut created, mut changed) = (Vec::new(), Vec::new());
    for item in items {
        match item {
            Plain::Create(creation) => created.push(creation),
            Plain::Change(change) => changed.push(change),
        }
    }
    let rows: Vec<&Columns> = created.iter().map(|item| &item.row).collect();
    let (ids, owners, versions, records, runners, expiries) = columns(&rows);
    let leases: Vec<Option<&str>> = created.iter().map(|item| item.lease.as_deref()).collect();
    let creations: [&(dyn ToSql + Sync); 7] = [
        &ids, &owners, &versions, &records, &runners, &expiries, &leases,
    ];
    let rows: Vec<&Columns> = changed.iter().map(|item| &item.row).collect();
    let (ids, owners, versions, records, runners, expiries) = columns(&rows);
    let expected: Vec<i64> = changed.iter().map(|item| item.expected).collect();
    let changes: [&(dyn ToSql + Sync); 7] = [
        &ids, &expected, &owners, &versions, &records, &runners, &expiries,
    ];
    let keys: Vec<&str> = items.iter().map(Batched::key).collect();
    if changed.is_empty() {
        targets.creations.done(&keys, &creations).await
    } else if created.is_empty() {
        targets.changes.done(&keys, &changes).await
    } else {
        let both: Vec<&(dyn ToSql + Sync)> = creations.into_iter().chain(changes).collect();
        targets.both.done(&keys, &both).await
    }
}

/// Seat moves (`Sql::move_seats_batch`): each answered with its code (as
/// `move_seats`'s).
pub(crate) fn moves(target: Target) -> Arc<Batcher<Move, i32>> {
    batcher(target, |target, items: Vec<Move>| {
        Box::pin(async move {
            let runners: Vec<&str> = items.iter().map(|item| item.runner.as_str()).collect();
            let seats: Vec<&str> = items.iter().map(|item| item.seat.as_str()).collect();
            let (take_item, take) = by_item(items.iter().map(|item| &item.take));
            let limits = limits(items.iter().map(|item| &item.limits));
            let (free_item, free) = by_item(items.iter().map(|item| &item.free));
            target
                .codes(&[
                    &runners, &seats, &take_item, &take, &limits, &free_item, &free,
                ])
                .await
        })
    })
}

/// A write that takes or frees seats, in a batch: a seated creation
/// without a key or a fair turn, or a compare-and-set that frees seats.
pub(crate) enum Seated {
    Create(SeatedCreation),
    Free(Freeing),
}

impl Batched for Seated {
    fn key(&self) -> &str {
        match self {
            Self::Create(creation) => creation.key(),
            Self::Free(freeing) => freeing.key(),
        }
    }
}

/// Where seated writes go: the statement for creations alone
/// (`Sql::create_seated_batch`), compare-and-sets alone
/// (`Sql::swap_freeing_batch`), and both (`Sql::seated_batch`).
pub(crate) struct SeatedTargets {
    pub(crate) creations: Target,
    pub(crate) freeings: Target,
    pub(crate) both: Target,
}

/// Seated writes: each creation answered with its code (as
/// `create_seated`'s), each compare-and-set with 1 when it swapped and 0
/// when not. The two kinds that wait together go in one statement: each
/// holds the pools they share until its commit, so apart they would commit
/// one after the other.
pub(crate) fn seated(targets: SeatedTargets) -> Arc<Batcher<Seated, i32>> {
    batcher(Arc::new(targets), |targets, items: Vec<Seated>| {
        Box::pin(async move { write_seated(&targets, &items).await })
    })
}

async fn write_seated(targets: &SeatedTargets, items: &[Seated]) -> Result<Vec<i32>, StoreError> {
    let (mut created, mut freed) = (Vec::new(), Vec::new());
    for item in items {
        match item {
            Seated::Create(creation) => created.push(creation),
            Seated::Free(freeing) => freed.push(freeing),
        }
    }
    // The creations' parameters.
    let rows: Vec<&Columns> = created.iter().map(|item| &item.row).collect();
    let (ids, owners, versions, records, runners, expiries) = columns(&rows);
    let leases: Vec<&str> = created.iter().map(|item| item.lease.as_str()).collect();
    let seats: Vec<&str> = created.iter().map(|item| item.seat.as_str()).collect();
    let (item, pools) = by_item(created.iter().map(|item| &item.pools));
    let limits = limits(created.iter().map(|item| &item.limits));
    let creations: [&(dyn ToSql + Sync); 11] = [
        &ids, &owners, &versions, &records, &runners, &expiries, &leases, &seats, &item, &pools,
        &limits,
    ];
    // The compare-and-sets'.
    let rows: Vec<&Columns> = freed.iter().map(|item| &item.change.row).collect();
    let (swap_ids, owners, versions, records, runners, expiries) = columns(&rows);
    let expected: Vec<i64> = freed.iter().map(|item| item.change.expected).collect();
    let seats: Vec<&str> = freed.iter().map(|item| item.seat.as_str()).collect();
    let (item, pools) = by_item(freed.iter().map(|item| &item.pools));
    let freeings: [&(dyn ToSql + Sync); 10] = [
        &swap_ids, &expected, &owners, &versions, &records, &runners, &expiries, &seats, &item,
        &pools,
    ];
    let (creation_codes, swap_codes) = if freed.is_empty() {
        (targets.creations.codes(&creations).await?, Vec::new())
    } else if created.is_empty() {
        let done = targets.freeings.done(&swap_ids, &freeings).await?;
        (Vec::new(), done.into_iter().map(i32::from).collect())
    } else {
        let both: Vec<&(dyn ToSql + Sync)> = creations.into_iter().chain(freeings).collect();
        let mut codes = targets.both.codes(&both).await?;
        if codes.len() != created.len() + freed.len() {
            return Err(StoreError::msg(
                "PostgreSQL answered a batch of seated writes with a wrong count",
            ));
        }
        let swaps = codes.split_off(created.len());
        (codes, swaps)
    };
    // Back in the items' order.
    let (mut creation_codes, mut swap_codes) = (creation_codes.into_iter(), swap_codes.into_iter());
    items
        .iter()
        .map(|item| match item {
            Seated::Create(_) => creation_codes.next(),
            Seated::Free(_) => swap_codes.next(),
        })
        .collect::<Option<Vec<i32>>>()
        .ok_or_else(|| {
            StoreError::msg("PostgreSQL answered a batch of seated writes with a wrong count")
        })
}

/// Sends one batch to a target (a [`Target`], or the [`PlainTargets`]).
type RunOn<T, I, A> = fn(T, Vec<I>) -> BoxFuture<'static, Result<Vec<A>, StoreError>>;

/// A batcher of [`STATEMENTS`] statements in flight, each sent by `run` to
/// `target`.
fn batcher<T, I, A>(target: T, run: RunOn<T, I, A>) -> Arc<Batcher<I, A>>
where
    T: Clone + Send + Sync + 'static,
    I: Batched,
    A: Send + 'static,
{
    Batcher::new(
        STATEMENTS,
        MOST,
        Box::new(move |items| run(target.clone(), items)),
    )
}

/// The writes' pools as the batch functions take them: one array of every
/// pool, and beside it the 1-based index of the write each belongs to.
fn by_item<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> (Vec<i32>, Vec<&'a str>) {
    let mut item = Vec::new();
    let mut pools = Vec::new();
    for (n, list) in (1..).zip(lists) {
        for pool in list {
            item.push(n);
            pools.push(pool.as_str());
        }
    }
    (item, pools)
}

/// The writes' limits, one array in the order of their pools (each write
/// has a limit for each pool it takes a seat in).
fn limits<'a>(lists: impl Iterator<Item = &'a Vec<i64>>) -> Vec<i64> {
    lists.flatten().copied().collect()
}

type ColumnArrays<'a> = (
    Vec<&'a str>,
    Vec<&'a str>,
    Vec<i64>,
    Vec<&'a str>,
    Vec<Option<&'a str>>,
    Vec<Option<i64>>,
);

/// The rows' columns as arrays: ids, owners, versions, records, runners,
/// expiries.
fn columns<'a>(rows: &[&'a Columns]) -> ColumnArrays<'a> {
    (
        rows.iter().map(|row| row.id.as_str()).collect(),
        rows.iter().map(|row| row.owner.as_str()).collect(),
        rows.iter().map(|row| row.version).collect(),
        rows.iter().map(|row| row.record.as_str()).collect(),
        rows.iter().map(|row| row.runner.as_deref()).collect(),
        rows.iter().map(|row| row.expires_at).collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    struct Write(&'static str);

    impl Batched for Write {
        fn key(&self) -> &str {
            self.0
        }
    }

    /// The keys of each batch sent, in order.
    type Sent = Arc<Mutex<Vec<Vec<&'static str>>>>;

    /// A batcher whose statements take 10 ms and record what they held.
    fn recording(statements: usize, most: usize) -> (Arc<Batcher<Write>>, Sent) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&sent);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let batcher = Batcher::new(
            statements,
            most,
            Box::new(move |items: Vec<Write>| {
                let seen = Arc::clone(&seen);
                let in_flight = Arc::clone(&in_flight);
                Box::pin(async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(now <= statements, "{now} statements in flight");
                    seen.lock()
                        .unwrap()
                        .push(items.iter().map(|item| item.0).collect());
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    if items.iter().any(|item| item.0 == "fails") {
                        return Err(
                            StoreError::msg("PostgreSQL refused").with_kind(StoreErrorKind::Full)
                        );
                    }
                    Ok(items.iter().map(|item| item.0 != "no").collect())
                }) as BoxFuture<'static, _>
            }),
        );
        (batcher, sent)
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_alone_goes_at_once_and_those_behind_it_together() {
        let (batcher, sent) = recording(1, 64);
        let first = tokio::spawn({
            let batcher = Arc::clone(&batcher);
            async move { batcher.write(Write("a")).await }
        });
        tokio::task::yield_now().await;
        let rest: Vec<_> = ["b", "c", "no"]
            .into_iter()
            .map(|key| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move { batcher.write(Write(key)).await })
            })
            .collect();
        assert!(first.await.unwrap().unwrap());
        let mut answers = Vec::new();
        for write in rest {
            answers.push(write.await.unwrap().unwrap());
        }
        assert_eq!(answers, [true, true, false]);
        assert_eq!(*sent.lock().unwrap(), [vec!["a"], vec!["b", "c", "no"]]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_is_never_in_two_statements_at_once() {
        let (batcher, sent) = recording(4, 64);
        let writes: Vec<_> = ["a", "a", "b", "a"]
            .into_iter()
            .map(|key| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move { batcher.write(Write(key)).await })
            })
            .collect();
        for write in writes {
            assert!(write.await.unwrap().unwrap());
        }
        let sent = sent.lock().unwrap().clone();
        assert_eq!(sent.iter().map(Vec::len).sum::<usize>(), 4);
        assert!(
            sent.iter()
                .all(|batch| batch.iter().filter(|key| **key == "a").count() <= 1),
            "{sent:?}"
        );
        assert_eq!(sent.iter().filter(|batch| batch.contains(&"a")).count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn batches_hold_at_most_their_size_and_a_failure_answers_each() {
        let (batcher, sent) = recording(1, 2);
        let writes: Vec<_> = ["a", "b", "c", "fails", "e"]
            .into_iter()
            .map(|key| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move { batcher.write(Write(key)).await })
            })
            .collect();
        let mut failed = Vec::new();
        for write in writes {
            if let Err(error) = write.await.unwrap() {
                assert_eq!(error.kind(), StoreErrorKind::Full);
                assert!(error.to_string().contains("PostgreSQL refused"), "{error}");
                failed.push(());
            }
        }
        let sent = sent.lock().unwrap().clone();
        assert!(sent.iter().all(|batch| batch.len() <= 2), "{sent:?}");
        let with_failure = sent.iter().find(|batch| batch.contains(&"fails")).unwrap();
        assert_eq!(failed.len(), with_failure.len());
    }
}
