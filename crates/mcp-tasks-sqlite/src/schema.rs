//! The file's layout and every SQL statement the store runs.
//!
//! One table, `tasks`: the whole [`TaskRecord`] as JSON in `record`, plus
//! the columns the store queries by (`id`, `version`, `expires_at_ms`,
//! `owner`) and one for people reading the file (`status`). The columns are
//! written with the JSON in the same statement; a row whose JSON disagrees
//! with its `id`, `version` or (when listed by owner) `owner` is reported
//! as corrupt. Indexes besides the primary key: `tasks_by_expiry` for
//! the sweeper, `tasks_by_owner` for `tasks/list`, `tasks_by_idem_slot` for
//! idempotent creation, and `tasks_unfinished` (the live tasks alone) so
//! that opening a file of a million finished tasks reads none of them.
//!
//! `PRAGMA user_version` holds the schema version, so a later build can
//! migrate a file and an older build refuses a newer file. A second table,
//! `meta`, holds the store's own settings by name: the key of the task
//! hashes that name tasks in logs, metrics and traces. A new file is
//! made at version 1 and brought up to date by the same [`UPGRADES`] as an
//! old one, so both end with the same schema.

use std::path::Path;
use std::time::Duration;

use mcp_tasks::store::{Change, HashKey, StoreError, StoreErrorKind, TaskRecord};
use mcp_tasks::{TaskId, UnixMillis};
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

/// The schema this build writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = 5;

/// How long a statement waits for a lock held by another connection.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Version 1 of the schema.
const SCHEMA_V1: &str = "
CREATE TABLE tasks (
    id            TEXT    NOT NULL PRIMARY KEY,
    owner         TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    expires_at_ms INTEGER,
    record        TEXT    NOT NULL
) STRICT;
CREATE INDEX tasks_by_expiry ON tasks (expires_at_ms, id) WHERE expires_at_ms IS NOT NULL;
";

/// Version 1 to 2: each owner's records in id order, for listing them
/// (`TaskStore::list_owned`).
const UPGRADE_TO_V2: &str = "
CREATE INDEX tasks_by_owner ON tasks (owner, id);
";

/// Version 2 to 3: the store's own settings by name; the first is the key
/// of the task hashes (`TaskStore::hash_key`).
const UPGRADE_TO_V3: &str = "
CREATE TABLE meta (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
";

/// Version 3 to 4: idempotent creation (`TaskStore::create_keyed`): the
/// slot of a record's idempotency key (a hash of its owner and key, never
/// the key), unique among the records that have one. The index entry is
/// the row's, so it goes with the row.
const UPGRADE_TO_V4: &str = "
ALTER TABLE tasks ADD COLUMN idem_slot TEXT;
CREATE UNIQUE INDEX tasks_by_idem_slot ON tasks (idem_slot) WHERE idem_slot IS NOT NULL;
";

/// Version 4 to 5: the unfinished tasks alone, for opening
/// ([`abandon_unfinished`]): without it, opening read every row of the
/// table, which took seconds with a million finished tasks retained. The
/// index holds only the live tasks (its condition is [`UNFINISHED_SQL`]'s,
/// word for word, so SQLite knows it answers that query); upgrading an
/// older file builds it once, in one pass over the table.
const UPGRADE_TO_V5: &str = UNFINISHED_INDEX;

/// The condition of `tasks_unfinished`, which [`UNFINISHED_INDEX`] and
/// [`UNFINISHED_SQL`] both spell out (a literal, for `concat!`).
macro_rules! unfinished {
    () => {
        "status <> 'completed' AND status <> 'failed' AND status <> 'cancelled'"
    };
}

/// `tasks_unfinished` as this build makes it.
///
/// Its condition names the finished statuses with `<>` three times. The
/// builds before it wrote `status NOT IN ('completed', 'failed',
/// 'cancelled')`, which SQLite evaluates at every `INSERT` and twice at
/// every `UPDATE` of a row by building a temporary B-tree of the three
/// names (an `OpenEphemeral`, opened and closed each time: in callgrind, a
/// task created finished took 148k instructions with it and 125k without,
/// one created and then completed 248k and 180k). Opening a file made
/// by those builds replaces their index with this one
/// ([`replace_old_unfinished_index`]); the schema version stays 5, since
/// both conditions select the same rows, so an older build still opens the
/// file (it then reads the unfinished tasks without the index, as before
/// version 5).
const UNFINISHED_INDEX: &str = concat!(
    "CREATE INDEX tasks_unfinished ON tasks (id)\nWHERE ",
    unfinished!()
);

/// `UPGRADES[n - 1]` takes a file from version `n` to `n + 1`; each runs in
/// the transaction that then sets `user_version`.
const UPGRADES: [&str; 4] = [UPGRADE_TO_V2, UPGRADE_TO_V3, UPGRADE_TO_V4, UPGRADE_TO_V5];

/// The unfinished records, read from `tasks_unfinished` (its condition,
/// literally: a bound parameter would not let SQLite use the partial index).
pub(crate) const UNFINISHED_SQL: &str = concat!(
    "\nSELECT id, version, record FROM tasks\nWHERE ",
    unfinished!()
);

/// Inserts a new record ([`insert`]).
const INSERT_SQL: &str = "
INSERT INTO tasks (id, owner, status, version, expires_at_ms, record, idem_slot)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// Replaces a record of the expected version ([`update`]).
const UPDATE_SQL: &str = "
UPDATE tasks
SET status = ?2, version = ?3, expires_at_ms = ?4, record = ?5
WHERE id = ?1 AND version = ?6";

/// The name of the task hash key in `meta`.
const HASH_KEY_NAME: &str = "task_hash_key";

/// An owner's records in id order, from the first: `tasks_by_owner`, then
/// each row.
pub(crate) const LIST_OWNED_SQL: &str = "
SELECT id, version, record FROM tasks
WHERE owner = ?1
ORDER BY id
LIMIT ?2";

/// An owner's records in id order, after an id.
pub(crate) const LIST_OWNED_AFTER_SQL: &str = "
SELECT id, version, record FROM tasks
WHERE owner = ?1 AND id > ?2
ORDER BY id
LIMIT ?3";

/// Every owner's records in id order, from the first (the primary key).
pub(crate) const LIST_ALL_SQL: &str = "
SELECT id, version, record FROM tasks
ORDER BY id
LIMIT ?1";

/// Every owner's records in id order, after an id.
pub(crate) const LIST_ALL_AFTER_SQL: &str = "
SELECT id, version, record FROM tasks
WHERE id > ?1
ORDER BY id
LIMIT ?2";

/// The ids of due records, oldest first: read from `tasks_by_expiry` alone.
pub(crate) const EXPIRED_SQL: &str = "
SELECT id FROM tasks
WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ?1
ORDER BY expires_at_ms, id
LIMIT ?2";

/// A store error for a SQLite failure; a full disk (or a size limit
/// reached) is [`StoreErrorKind::Full`].
pub(crate) fn failure(message: &str, err: rusqlite::Error) -> StoreError {
    let full = err.sqlite_error_code() == Some(ErrorCode::DiskFull);
    let error = StoreError::new(message, err);
    if full {
        error.with_kind(StoreErrorKind::Full)
    } else {
        error
    }
}

/// Opens the file, sets the pragmas (a size limit in bytes, if any; when
/// commits reach the disk) and brings the schema up to date.
pub(crate) fn open(
    path: &Path,
    max_size_bytes: Option<u64>,
    sync: crate::SqliteSync,
) -> Result<Connection, StoreError> {
    let mut conn = Connection::open(path)
        .map_err(|err| StoreError::new("SQLite could not open the store file", err))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|err| StoreError::new("SQLite could not set the busy timeout", err))?;
    let mode = crate::wal::switch_to_wal(&conn, BUSY_TIMEOUT)
        .map_err(|err| StoreError::new("SQLite could not switch the store file to WAL", err))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::msg(format!(
            "SQLite kept the store file in journal mode {mode:?} instead of WAL"
        )));
    }
    // With WAL, NORMAL syncs at checkpoints only: a commit survives a crash
    // of the process, and at worst the last commits are lost with power.
    // FULL syncs the WAL at every commit.
    conn.pragma_update(None, "synchronous", sync.pragma())
        .map_err(|err| StoreError::new("SQLite could not set its synchronous pragma", err))?;
    // The checkpointer thread copies the WAL back beside the writes; this
    // connection's own checkpoint starts the WAL over (see `checkpoint`).
    conn.pragma_update(None, "wal_autocheckpoint", crate::checkpoint::WRITER_PAGES)
        .map_err(|err| StoreError::new("SQLite could not set wal_autocheckpoint", err))?;
    if let Some(bytes) = max_size_bytes {
        let page_size: i64 = conn
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .map_err(|err| StoreError::new("SQLite could not read its page size", err))?;
        let page_size = u64::try_from(page_size).unwrap_or(4096).max(1);
        let pages = i64::try_from((bytes / page_size).max(1)).unwrap_or(i64::MAX);
        conn.pragma_update(None, "max_page_count", pages)
            .map_err(|err| StoreError::new("SQLite could not set a size limit", err))?;
    }
    migrate(&mut conn)?;
    Ok(conn)
}

/// Creates the schema in a new file or upgrades an older one, in one
/// transaction; refuses a file from a newer build.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let failed = |err| failure("SQLite could not set up the schema", err);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed)?;
    let found: i64 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(failed)?;
    let from = match found {
        0 => {
            // A plain CREATE TABLE: a file holding some other `tasks` table
            // is refused rather than adopted.
            tx.execute_batch(SCHEMA_V1).map_err(failed)?;
            1
        }
        SCHEMA_VERSION => {
            replace_old_unfinished_index(&tx).map_err(failed)?;
            return tx.commit().map_err(failed);
        }
        older @ 1..SCHEMA_VERSION => older,
        newer => {
            return Err(StoreError::msg(format!(
                "the store file has schema version {newer}; this build knows versions up to {SCHEMA_VERSION}"
            )));
        }
    };
    for upgrade in UPGRADES.iter().skip(usize::try_from(from - 1).unwrap_or(0)) {
        tx.execute_batch(upgrade).map_err(failed)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(failed)?;
    tx.commit().map_err(failed)
}

/// Replaces a `tasks_unfinished` of another definition (the `NOT IN` one
/// of earlier builds: see [`UNFINISHED_INDEX`]) with this build's, in one
/// pass over the table, once per file.
fn replace_old_unfinished_index(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let found: Option<String> = tx
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'tasks_unfinished'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    if found.as_deref() == Some(UNFINISHED_INDEX) {
        return Ok(());
    }
    tx.execute_batch("DROP INDEX IF EXISTS tasks_unfinished")?;
    tx.execute_batch(UNFINISHED_INDEX)
}

/// The key of the task hashes, made (at random) the first time a file is
/// opened and read from it every later time.
pub(crate) fn hash_key(conn: &Connection) -> Result<HashKey, StoreError> {
    let failed = |err| failure("SQLite could not read the task hash key", err);
    conn.execute(
        "INSERT OR IGNORE INTO meta (name, value) VALUES (?1, ?2)",
        params![HASH_KEY_NAME, HashKey::random()?.to_hex()],
    )
    .map_err(failed)?;
    let hex: String = conn
        .query_row(
            "SELECT value FROM meta WHERE name = ?1",
            params![HASH_KEY_NAME],
            |row| row.get(0),
        )
        .map_err(failed)?;
    HashKey::from_hex(&hex)
}

/// What opening found of the tasks the last process left unfinished.
#[derive(Debug, Default)]
pub(crate) struct LeftUnfinished {
    /// How many were failed ("server restarted before the task finished").
    pub(crate) abandoned: usize,
    /// The resumable ones, kept unfinished for a runtime to run again.
    pub(crate) resumable: Vec<TaskId>,
}

/// Fails every unfinished record that cannot run again through
/// [`Change::Abandon`], in one transaction; the resumable ones (they keep
/// their call) are left for a runtime to resume, and listed.
pub(crate) fn abandon_unfinished(
    conn: &mut Connection,
    now: UnixMillis,
    retention: Duration,
) -> Result<LeftUnfinished, StoreError> {
    let failed = |err| failure("SQLite could not fail the unfinished tasks", err);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed)?;
    let unfinished: Vec<(String, i64, String)> = {
        let mut select = tx.prepare(UNFINISHED_SQL).map_err(failed)?;
        select
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .and_then(Iterator::collect)
            .map_err(failed)?
    };
    let mut left = LeftUnfinished::default();
    for (id, version, json) in unfinished {
        let record = decode(&id, version, &json)?;
        if record.resumable_call().is_some() && !record.status().is_terminal() {
            left.resumable.push(record.id().clone());
            continue;
        }
        // Refused only if the JSON says the task is finished after all:
        // then there is nothing to fail.
        let Ok(next) = record.apply(&Change::Abandon, now, retention) else {
            continue;
        };
        if update(&tx, version, &Row::encode(next.record())?)? {
            left.abandoned += 1;
        }
    }
    tx.commit().map_err(failed)?;
    Ok(left)
}

/// A record as it is written: the queried columns and the JSON.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) id: String,
    owner: String,
    status: String,
    version: i64,
    expires_at_ms: Option<i64>,
    record: String,
    /// The slot of the record's idempotency key, if it has one.
    pub(crate) idem_slot: Option<String>,
}

impl Row {
    /// The row for `record`.
    pub(crate) fn encode(record: &TaskRecord) -> Result<Self, StoreError> {
        let version = i64::try_from(record.version()).map_err(|err| {
            StoreError::new("the task's version does not fit a SQLite integer", err)
        })?;
        let json = serde_json::to_string(record)
            .map_err(|err| StoreError::new("the task could not be encoded as JSON", err))?;
        Ok(Self {
            id: record.id().expose().to_owned(),
            owner: record.owner().as_str().to_owned(),
            status: record.status().as_str().to_owned(),
            version,
            expires_at_ms: record.expires_at().map(clamp),
            record: json,
            idem_slot: record.idempotency_slot().map(str::to_owned),
        })
    }
}

/// A time for the expiry column: past `i64::MAX` ms (292 million years)
/// every time is the same. Order is kept, so the index still answers
/// `expires_at_ms <= now` exactly for any time before then.
pub(crate) fn clamp(at: UnixMillis) -> i64 {
    i64::try_from(at.as_millis()).unwrap_or(i64::MAX)
}

/// Reads a row's JSON back into a record, checking it against its columns.
fn decode(id: &str, version: i64, json: &str) -> Result<TaskRecord, StoreError> {
    let record: TaskRecord = serde_json::from_str(json).map_err(|err| {
        StoreError::new(
            "a stored task is corrupt: its JSON is not a task record",
            err,
        )
    })?;
    // Never print the ids: they are bearer tokens.
    if record.id().expose() != id || i64::try_from(record.version()).ok() != Some(version) {
        return Err(StoreError::msg(
            "a stored task is corrupt: its JSON disagrees with its row's id or version",
        ));
    }
    Ok(record)
}

/// Inserts a new record; false (and nothing written) if the id exists.
pub(crate) fn insert(conn: &Connection, row: &Row) -> Result<bool, StoreError> {
    let inserted = conn.prepare_cached(INSERT_SQL).and_then(|mut insert| {
        insert.execute(params![
            row.id,
            row.owner,
            row.status,
            row.version,
            row.expires_at_ms,
            row.record,
            row.idem_slot
        ])
    });
    match inserted {
        Ok(_) => Ok(true),
        Err(err) if err.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => Ok(false),
        Err(err) => Err(failure("SQLite could not insert the task", err)),
    }
}

/// The id of the record holding idempotency slot `slot`, if any (from
/// `tasks_by_idem_slot`).
pub(crate) fn holding(conn: &Connection, slot: &str) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT id FROM tasks WHERE idem_slot = ?1")
        .and_then(|mut select| select.query_row([slot], |row| row.get(0)).optional())
        .map_err(|err| failure("SQLite could not read the idempotency index", err))
}

/// The record with this id, if there is one.
pub(crate) fn read(conn: &Connection, id: &str) -> Result<Option<TaskRecord>, StoreError> {
    let found: Option<(i64, String)> = conn
        .prepare_cached("SELECT version, record FROM tasks WHERE id = ?1")
        .and_then(|mut select| {
            select
                .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(|err| failure("SQLite could not read the task", err))?;
    found
        .map(|(version, json)| decode(id, version, &json))
        .transpose()
}

/// Replaces the record whose stored version is `expected`; false if none is.
///
/// The owner is not written: a record's owner never changes (the transition
/// function keeps it), and leaving the column out of `SET` keeps SQLite from
/// rewriting `tasks_by_owner` on every change.
pub(crate) fn update(conn: &Connection, expected: i64, row: &Row) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached(UPDATE_SQL)
        .and_then(|mut update| {
            update.execute(params![
                row.id,
                row.status,
                row.version,
                row.expires_at_ms,
                row.record,
                expected
            ])
        })
        .map_err(|err| failure("SQLite could not update the task", err))?;
    Ok(changed == 1)
}

/// The ids of records due at `now_ms`, soonest first, at most `limit`.
pub(crate) fn expired(
    conn: &Connection,
    now_ms: i64,
    limit: i64,
) -> Result<Vec<TaskId>, StoreError> {
    conn.prepare_cached(EXPIRED_SQL)
        .and_then(|mut select| {
            select
                .query_map(params![now_ms, limit], |row| {
                    row.get::<_, String>(0).map(TaskId::new)
                })
                .and_then(Iterator::collect)
        })
        .map_err(|err| failure("SQLite could not read the expiry index", err))
}

/// Up to `limit` records of any owner whose ids sort after `after`, in id
/// order (for the admin command).
pub(crate) fn list_all(
    conn: &Connection,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<TaskRecord>, StoreError> {
    let failed = |err| failure("SQLite could not list the tasks", err);
    let row = |row: &rusqlite::Row<'_>| -> rusqlite::Result<(String, i64, String)> {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    };
    let rows: Vec<(String, i64, String)> = match after {
        None => conn.prepare_cached(LIST_ALL_SQL).and_then(|mut select| {
            select
                .query_map(params![limit], row)
                .and_then(Iterator::collect)
        }),
        Some(after) => conn
            .prepare_cached(LIST_ALL_AFTER_SQL)
            .and_then(|mut select| {
                select
                    .query_map(params![after, limit], row)
                    .and_then(Iterator::collect)
            }),
    }
    .map_err(failed)?;
    rows.iter()
        .map(|(id, version, json)| decode(id, *version, json))
        .collect()
}

/// Up to `limit` records of `owner` whose ids sort after `after`, in id
/// order; a row whose `owner` column disagrees with its JSON is corrupt.
pub(crate) fn list_owned(
    conn: &Connection,
    owner: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<TaskRecord>, StoreError> {
    let failed = |err| failure("SQLite could not list the tasks of an owner", err);
    let row = |row: &rusqlite::Row<'_>| -> rusqlite::Result<(String, i64, String)> {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    };
    let rows: Vec<(String, i64, String)> = match after {
        None => conn.prepare_cached(LIST_OWNED_SQL).and_then(|mut select| {
            select
                .query_map(params![owner, limit], row)
                .and_then(Iterator::collect)
        }),
        Some(after) => conn
            .prepare_cached(LIST_OWNED_AFTER_SQL)
            .and_then(|mut select| {
                select
                    .query_map(params![owner, after, limit], row)
                    .and_then(Iterator::collect)
            }),
    }
    .map_err(failed)?;
    rows.iter()
        .map(|(id, version, json)| {
            let record = decode(id, *version, json)?;
            if record.owner().as_str() != owner {
                return Err(StoreError::msg(
                    "a stored task is corrupt: its JSON disagrees with its row's owner",
                ));
            }
            Ok(record)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use mcp_tasks::TaskStatus;

    use super::*;

    #[test]
    fn the_sync_setting_reaches_the_connection() {
        let dir = tempfile::tempdir().expect("temp dir");
        for (sync, pragma) in [(crate::SqliteSync::Normal, 1), (crate::SqliteSync::Full, 2)] {
            let conn = open(&dir.path().join("sync.sqlite3"), None, sync).expect("open");
            let set: i64 = conn
                .pragma_query_value(None, "synchronous", |row| row.get(0))
                .expect("read the pragma");
            assert_eq!(set, pragma, "{sync:?}");
        }
    }

    #[test]
    fn the_expiry_query_reads_the_index_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = open(
            &dir.path().join("plan.sqlite3"),
            None,
            crate::SqliteSync::Normal,
        )
        .expect("open");
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {EXPIRED_SQL}"))
            .expect("explain");
        let steps: Vec<String> = plan
            .query_map(params![0, 10], |row| row.get(3))
            .and_then(Iterator::collect)
            .expect("plan");
        let plan = steps.join("\n");
        assert!(
            plan.contains("USING COVERING INDEX tasks_by_expiry"),
            "{plan}"
        );
        assert!(
            !plan.contains("TEMP B-TREE"),
            "no sort after the index: {plan}"
        );
    }

    #[test]
    fn listing_by_owner_reads_the_owner_index_in_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = open(
            &dir.path().join("plan.sqlite3"),
            None,
            crate::SqliteSync::Normal,
        )
        .expect("open");
        for (sql, params) in [
            (LIST_OWNED_SQL, params!["o", 10]),
            (LIST_OWNED_AFTER_SQL, params!["o", "id", 10]),
        ] {
            let mut plan = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("explain");
            let steps: Vec<String> = plan
                .query_map(params, |row| row.get(3))
                .and_then(Iterator::collect)
                .expect("plan");
            let plan = steps.join("\n");
            assert!(
                plan.contains("USING INDEX tasks_by_owner (owner=?"),
                "{plan}"
            );
            assert!(
                !plan.contains("TEMP B-TREE"),
                "no sort after the index: {plan}"
            );
        }
    }

    #[test]
    fn opening_reads_the_unfinished_tasks_from_their_index_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = open(
            &dir.path().join("plan.sqlite3"),
            None,
            crate::SqliteSync::Normal,
        )
        .expect("open");
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {UNFINISHED_SQL}"))
            .expect("explain");
        let steps: Vec<String> = plan
            .query_map([], |row| row.get(3))
            .and_then(Iterator::collect)
            .expect("plan");
        let plan = steps.join("\n");
        assert!(plan.contains("USING INDEX tasks_unfinished"), "{plan}");
        // The literals are the statuses' names, finished ones all.
        for status in [
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            assert!(status.is_terminal());
            assert!(UNFINISHED_SQL.contains(&format!("<> '{}'", status.as_str())));
            assert!(UNFINISHED_INDEX.contains(&format!("<> '{}'", status.as_str())));
        }
        for status in [TaskStatus::Working, TaskStatus::InputRequired] {
            assert!(!UNFINISHED_SQL.contains(&format!("'{}'", status.as_str())));
        }
    }

    /// The opcodes of `sql`, as `EXPLAIN` lists them (its parameters
    /// left unbound: `EXPLAIN` runs nothing).
    fn opcodes(conn: &Connection, sql: &str) -> Vec<String> {
        let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).expect("explain");
        let mut rows = explain.raw_query();
        let mut ops = Vec::new();
        while let Some(row) = rows.next().expect("a step") {
            ops.push(row.get(1).expect("an opcode"));
        }
        ops
    }

    #[test]
    fn writes_build_no_temporary_table() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = open(
            &dir.path().join("ops.sqlite3"),
            None,
            crate::SqliteSync::Normal,
        )
        .expect("open");
        for sql in [INSERT_SQL, UPDATE_SQL] {
            let ops = opcodes(&conn, sql);
            assert!(ops.iter().any(|op| op == "IdxInsert"), "{ops:?}");
            assert!(
                !ops.iter().any(|op| op == "OpenEphemeral"),
                "{sql}: {ops:?}"
            );
        }
    }

    #[test]
    fn the_not_in_index_of_earlier_builds_is_replaced_on_opening() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("v5.sqlite3");
        {
            // A version 5 file as the builds before this one left it, with a
            // working and a completed task.
            let raw = Connection::open(&path).expect("raw connection");
            raw.execute_batch(SCHEMA_V1).expect("version 1");
            for upgrade in &UPGRADES[..3] {
                raw.execute_batch(upgrade).expect("upgrade");
            }
            raw.execute_batch(
                "CREATE INDEX tasks_unfinished ON tasks (id)
                 WHERE status NOT IN ('completed', 'failed', 'cancelled');
                 INSERT INTO tasks (id, owner, status, version, record)
                 VALUES ('w', 'o', 'working', 1, '{}'), ('c', 'o', 'completed', 2, '{}');",
            )
            .expect("the old index");
            raw.pragma_update(None, "user_version", 5)
                .expect("user_version");
            assert!(
                opcodes(&raw, "INSERT INTO tasks (id, owner, status, version, record) VALUES (?1, ?2, ?3, ?4, ?5)")
                    .iter()
                    .any(|op| op == "OpenEphemeral"),
                "the old index builds a temporary table"
            );
        }
        let conn = open(&path, None, crate::SqliteSync::Normal).expect("open");
        let (version, sql): (i64, String) = (
            conn.pragma_query_value(None, "user_version", |row| row.get(0))
                .expect("user_version"),
            conn.query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'tasks_unfinished'",
                [],
                |row| row.get(0),
            )
            .expect("the index"),
        );
        assert_eq!((version, sql.as_str()), (5, UNFINISHED_INDEX));
        let unfinished: Vec<String> = conn
            .prepare(UNFINISHED_SQL)
            .and_then(|mut select| select.query_map([], |row| row.get(0))?.collect())
            .expect("the unfinished");
        assert_eq!(unfinished, ["w"]);
        let indexed: Vec<String> = conn
            .prepare(concat!(
                "SELECT id FROM tasks INDEXED BY tasks_unfinished WHERE ",
                unfinished!()
            ))
            .and_then(|mut select| select.query_map([], |row| row.get(0))?.collect())
            .expect("read through the index");
        assert_eq!(indexed, ["w"]);
    }

    #[test]
    fn a_version_1_file_is_upgraded_with_the_owner_index() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("v1.sqlite3");
        {
            let raw = Connection::open(&path).expect("raw connection");
            raw.execute_batch(SCHEMA_V1).expect("version 1");
            raw.pragma_update(None, "user_version", 1)
                .expect("user_version");
        }
        let conn = open(&path, None, crate::SqliteSync::Normal).expect("open");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .expect("user_version");
        assert_eq!(version, SCHEMA_VERSION);
        let found: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'tasks_by_owner'",
                [],
                |row| row.get(0),
            )
            .expect("sqlite_master");
        assert_eq!(found, 1, "the upgrade made tasks_by_owner");
    }

    #[test]
    fn opening_twice_keeps_the_schema() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("twice.sqlite3");
        drop(open(&path, None, crate::SqliteSync::Normal).expect("create"));
        let conn = open(&path, None, crate::SqliteSync::Normal).expect("reopen");
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .expect("user_version");
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn huge_times_keep_their_order() {
        assert_eq!(clamp(UnixMillis::new(5)), 5);
        assert_eq!(clamp(UnixMillis::new(u64::MAX)), i64::MAX);
        assert!(clamp(UnixMillis::new(u64::MAX)) >= clamp(UnixMillis::new(i64::MAX as u64)));
    }
}
