//! The committer: one thread that owns the connection and runs every
//! statement, writes batched by group commit.
//!
//! Operations queue on a channel. The thread takes the first one waiting and
//! every one queued behind it (up to [`MAX_BATCH`]), runs them in order in
//! one `BEGIN IMMEDIATE` transaction with cached prepared statements,
//! commits, and only then answers each caller, updates the cache and
//! announces the changes: a caller hears `Ok` only for a committed write,
//! and the cache never holds a state the file does not. While one batch
//! commits, the next one queues, so under load many writes share a commit
//! and alone a write waits for nobody.
//!
//! Each operation sees the ones before it in its batch (an overlay over the
//! cache, then the file). A create of an existing id, a stale swap or a
//! corrupt row is that operation's answer and the batch goes on; a failure
//! of the transaction itself (a full disk, an I/O error) rolls the batch
//! back and runs each of its operations again alone, so each caller gets
//! its own operation's outcome.
//!
//! Reads of records the cache does not hold run here too, in order with
//! the writes, so a record read from the file can never overwrite a newer
//! one in the cache.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

use mcp_tasks::TaskId;
use mcp_tasks::store::{Keyed, PackedRecord, StoreError, Swap, TaskRecord};
use rusqlite::Connection;
use tokio::sync::{broadcast, oneshot};

use crate::cache::Cache;
use crate::schema::{self, Row};

/// The most operations one transaction takes.
const MAX_BATCH: usize = 512;

/// What the committer shares with the store.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cache: Mutex<Cache>,
    pub(crate) feed: broadcast::Sender<TaskId>,
}

impl Shared {
    pub(crate) fn cache(&self) -> MutexGuard<'_, Cache> {
        // The cache is changed by whole statements that cannot panic
        // halfway through in a way that breaks it.
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One operation for the committer.
#[derive(Debug)]
pub(crate) enum Op {
    Create {
        row: Row,
        packed: Arc<PackedRecord>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// A create unless a record holds the row's idempotency slot.
    CreateKeyed {
        row: Row,
        packed: Arc<PackedRecord>,
        reply: oneshot::Sender<Result<Keyed, StoreError>>,
    },
    /// The record holding an idempotency slot.
    FindKeyed {
        slot: String,
        reply: oneshot::Sender<Result<Option<Arc<PackedRecord>>, StoreError>>,
    },
    Swap {
        row: Row,
        packed: Arc<PackedRecord>,
        /// `None`: a version no stored record has.
        expected: Option<u64>,
        reply: oneshot::Sender<Result<Swap, StoreError>>,
    },
    Delete {
        id: String,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Read {
        id: String,
        reply: oneshot::Sender<Result<Option<Arc<PackedRecord>>, StoreError>>,
    },
    Expired {
        now_ms: i64,
        limit: i64,
        reply: oneshot::Sender<Result<Vec<TaskId>, StoreError>>,
    },
    /// An owner's records; every record when `owner` is `None`.
    ListOwned {
        owner: Option<String>,
        after: Option<String>,
        limit: i64,
        reply: oneshot::Sender<Result<Vec<TaskRecord>, StoreError>>,
    },
}

/// An operation's outcome, held until its batch commits.
enum Outcome {
    Unit(Result<(), StoreError>),
    Keyed(Result<Keyed, StoreError>),
    Swap(Result<Swap, StoreError>),
    Read(Result<Option<Arc<PackedRecord>>, StoreError>),
    Expired(Result<Vec<TaskId>, StoreError>),
    ListOwned(Result<Vec<TaskRecord>, StoreError>),
}

/// What a batch changes once committed: `None` for a deleted record.
type Overlay = HashMap<String, Option<Arc<PackedRecord>>>;

/// Runs the committer until every sender is gone.
pub(crate) fn run(conn: &Connection, shared: &Shared, queue: &mpsc::Receiver<Op>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        run_batch(conn, shared, batch);
    }
}

fn run_batch(conn: &Connection, shared: &Shared, mut batch: Vec<Op>) {
    match attempt(conn, shared, &batch) {
        Ok((outcomes, overlay)) => finish(shared, batch, outcomes, overlay),
        Err(error) if batch.len() == 1 => {
            if let Some(op) = batch.pop() {
                fail(op, error);
            }
        }
        // Each alone, for each its own outcome.
        Err(_) => {
            for op in batch {
                run_batch(conn, shared, vec![op]);
            }
        }
    }
}

/// Runs `batch` in one transaction; `Err` when the transaction failed
/// (rolled back: nothing of it is in the file).
fn attempt(
    conn: &Connection,
    shared: &Shared,
    batch: &[Op],
) -> Result<(Vec<Outcome>, Overlay), StoreError> {
    let writes = batch.iter().any(|op| {
        matches!(
            op,
            Op::Create { .. } | Op::CreateKeyed { .. } | Op::Swap { .. } | Op::Delete { .. }
        )
    });
    if writes {
        conn.prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut begin| begin.execute([]))
            .map_err(|err| schema::failure("SQLite could not begin a transaction", err))?;
    }
    let mut overlay = Overlay::new();
    let mut outcomes = Vec::with_capacity(batch.len());
    let ran = batch.iter().try_for_each(|op| {
        outcomes.push(one(conn, shared, &mut overlay, op)?);
        Ok(())
    });
    if writes {
        let end = match ran {
            Ok(()) => "COMMIT",
            Err(_) => "ROLLBACK",
        };
        let ended = conn
            .prepare_cached(end)
            .and_then(|mut statement| statement.execute([]));
        if let Err(err) = ended {
            // A failed COMMIT may leave the transaction open.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            ran?;
            return Err(schema::failure("SQLite could not commit", err));
        }
    }
    ran.map(|()| (outcomes, overlay))
}

/// The current state of `id`: this batch's, the cache's, then the file's.
fn current(
    conn: &Connection,
    shared: &Shared,
    overlay: &mut Overlay,
    id: &str,
) -> Result<Option<Arc<PackedRecord>>, StoreError> {
    if let Some(state) = overlay.get(id) {
        return Ok(state.clone());
    }
    if let Some(cached) = shared.cache().get(id) {
        return Ok(Some(cached));
    }
    let read = schema::read(conn, id)?.map(|record| Arc::new(PackedRecord::pack(record)));
    if let Some(record) = &read {
        overlay.insert(id.to_owned(), Some(Arc::clone(record)));
    }
    Ok(read)
}

/// Runs one operation; `Err` only for a failure that ends the transaction.
fn one(
    conn: &Connection,
    shared: &Shared,
    overlay: &mut Overlay,
    op: &Op,
) -> Result<Outcome, StoreError> {
    Ok(match op {
        Op::Create { row, packed, .. } => {
            if schema::insert(conn, row)? {
                overlay.insert(row.id.clone(), Some(Arc::clone(packed)));
                Outcome::Unit(Ok(()))
            } else {
                Outcome::Unit(Err(StoreError::msg("a task with this id exists")))
            }
        }
        Op::CreateKeyed { row, packed, .. } => {
            // The committer is the file's only writer and this runs in its
            // transaction: nothing comes between the look-up and the insert.
            if let Some(slot) = &row.idem_slot
                && let Some(id) = schema::holding(conn, slot)?
            {
                return Ok(Outcome::Keyed(match current(conn, shared, overlay, &id) {
                    Ok(Some(found)) => Ok(Keyed::Existing(Box::new(found.unpack()))),
                    Ok(None) => Err(StoreError::msg(
                        "the idempotency index names a task that is not stored",
                    )),
                    Err(error) => Err(error),
                }));
            }
            if schema::insert(conn, row)? {
                overlay.insert(row.id.clone(), Some(Arc::clone(packed)));
                Outcome::Keyed(Ok(Keyed::Created))
            } else {
                Outcome::Keyed(Err(StoreError::msg("a task with this id exists")))
            }
        }
        Op::FindKeyed { slot, .. } => Outcome::Read(match schema::holding(conn, slot) {
            Ok(Some(id)) => current(conn, shared, overlay, &id),
            Ok(None) => Ok(None),
            Err(error) => Err(error),
        }),
        Op::Swap {
            row,
            packed,
            expected,
            ..
        } => {
            let found = match current(conn, shared, overlay, &row.id) {
                Ok(found) => found,
                Err(error) => return Ok(Outcome::Swap(Err(error))),
            };
            let Some(found) = found else {
                return Ok(Outcome::Swap(Ok(Swap::Missing)));
            };
            if Some(found.version()) != *expected {
                return Ok(Outcome::Swap(Ok(Swap::Conflict(Box::new(found.unpack())))));
            }
            let stored = i64::try_from(found.version()).unwrap_or(i64::MAX);
            if schema::update(conn, stored, row)? {
                overlay.insert(row.id.clone(), Some(Arc::clone(packed)));
                Outcome::Swap(Ok(Swap::Swapped))
            } else {
                // The file disagrees with the cache (written behind this
                // process's back): the file wins.
                overlay.remove(&row.id);
                shared.cache().remove(&row.id);
                Outcome::Swap(match schema::read(conn, &row.id) {
                    Ok(Some(record)) => Ok(Swap::Conflict(Box::new(record))),
                    Ok(None) => Ok(Swap::Missing),
                    Err(error) => Err(error),
                })
            }
        }
        Op::Delete { id, .. } => {
            conn.prepare_cached("DELETE FROM tasks WHERE id = ?1")
                .and_then(|mut delete| delete.execute([id]))
                .map_err(|err| schema::failure("SQLite could not delete the task", err))?;
            overlay.insert(id.clone(), None);
            Outcome::Unit(Ok(()))
        }
        Op::Read { id, .. } => Outcome::Read(current(conn, shared, overlay, id)),
        Op::Expired { now_ms, limit, .. } => {
            Outcome::Expired(schema::expired(conn, *now_ms, *limit))
        }
        Op::ListOwned {
            owner,
            after,
            limit,
            ..
        } => Outcome::ListOwned(match owner {
            Some(owner) => schema::list_owned(conn, owner, after.as_deref(), *limit),
            None => schema::list_all(conn, after.as_deref(), *limit),
        }),
    })
}

/// After the commit: the cache, the feed, then the callers.
fn finish(shared: &Shared, batch: Vec<Op>, outcomes: Vec<Outcome>, overlay: Overlay) {
    {
        let mut cache = shared.cache();
        for (id, state) in overlay {
            match state {
                Some(record) => cache.put(record),
                None => cache.remove(&id),
            }
        }
    }
    for (op, outcome) in batch.into_iter().zip(outcomes) {
        // A caller that stopped waiting is not an error: its write is
        // committed all the same.
        match (op, outcome) {
            (Op::Create { row, reply, .. }, Outcome::Unit(result)) => {
                if result.is_ok() {
                    let _ = shared.feed.send(TaskId::new(row.id));
                }
                let _ = reply.send(result);
            }
            (Op::CreateKeyed { row, reply, .. }, Outcome::Keyed(result)) => {
                if matches!(result, Ok(Keyed::Created)) {
                    let _ = shared.feed.send(TaskId::new(row.id));
                }
                let _ = reply.send(result);
            }
            (Op::FindKeyed { reply, .. }, Outcome::Read(result)) => {
                let _ = reply.send(result);
            }
            (Op::Swap { row, reply, .. }, Outcome::Swap(result)) => {
                if matches!(result, Ok(Swap::Swapped)) {
                    let _ = shared.feed.send(TaskId::new(row.id));
                }
                let _ = reply.send(result);
            }
            (Op::Delete { reply, .. }, Outcome::Unit(result)) => {
                let _ = reply.send(result);
            }
            (Op::Read { reply, .. }, Outcome::Read(result)) => {
                let _ = reply.send(result);
            }
            (Op::Expired { reply, .. }, Outcome::Expired(result)) => {
                let _ = reply.send(result);
            }
            (Op::ListOwned { reply, .. }, Outcome::ListOwned(result)) => {
                let _ = reply.send(result);
            }
            // `one` answers each operation with its own kind of outcome.
            (op, _) => fail(
                op,
                StoreError::msg("the SQLite committer mixed up its answers"),
            ),
        }
    }
}

/// Answers `op` with `error`.
fn fail(op: Op, error: StoreError) {
    match op {
        Op::Create { reply, .. } | Op::Delete { reply, .. } => {
            let _ = reply.send(Err(error));
        }
        Op::Swap { reply, .. } => {
            let _ = reply.send(Err(error));
        }
        Op::CreateKeyed { reply, .. } => {
            let _ = reply.send(Err(error));
        }
        Op::Read { reply, .. } | Op::FindKeyed { reply, .. } => {
            let _ = reply.send(Err(error));
        }
        Op::Expired { reply, .. } => {
            let _ = reply.send(Err(error));
        }
        Op::ListOwned { reply, .. } => {
            let _ = reply.send(Err(error));
        }
    }
}
