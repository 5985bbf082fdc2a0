//! [`SqliteJournal`]: a client's task journal in one SQLite file, which
//! several processes may share (feature `journal`).

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use mcp_tasks::client::journal::{Journal, JournalError, PendingCall, ServerRef, TaskRef};
use mcp_tasks::{IdempotencyKey, TaskId, TaskStatus, Ttl, UnixMillis, private_files};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// A [`Journal`] in a SQLite file (WAL, a 5 s busy timeout): every write is
/// one transaction, so processes that share the file never see half an
/// entry, and a change is on disk before the call returns. The file is
/// created with mode 0600 in a directory created 0700 (it holds task ids,
/// which are bearer tokens).
///
/// ```
/// use std::sync::Arc;
///
/// use mcp_tasks::client::journal::Journal;
/// use mcp_tasks_sqlite::SqliteJournal;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let journal = Arc::new(SqliteJournal::open(dir.path().join("journal.sqlite3"))?);
/// assert!(journal.list().await?.is_empty());
/// // client.with_journal(journal, ServerRef::Url(url)) records its tasks.
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteJournal {
    connection: Arc<Mutex<Connection>>,
}

fn failed(what: &str) -> impl FnOnce(rusqlite::Error) -> JournalError + '_ {
    move |error| JournalError::with_source(format!("cannot {what}"), error)
}

impl SqliteJournal {
    /// Opens the journal at `path`, creating it (and its directory) if needed.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, JournalError> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty())
            && !dir.exists()
        {
            private_files::create_private_dir(dir).map_err(|error| {
                JournalError::with_source("cannot create the journal's directory", error)
            })?;
        }
        // 0600 before SQLite opens it; SQLite gives its WAL and
        // shared-memory files the same mode. An existing file wider than
        // that is warned about.
        private_files::create_private_file(path)
            .map_err(|error| JournalError::with_source("cannot create the journal file", error))?;
        let connection = Connection::open(path).map_err(failed("open the journal file"))?;
        connection
            .busy_timeout(crate::schema::BUSY_TIMEOUT)
            .map_err(failed("set the journal's busy timeout"))?;
        crate::wal::switch_to_wal(&connection, crate::schema::BUSY_TIMEOUT)
            .map_err(failed("put the journal in WAL mode"))?;
        // IMMEDIATE takes the write lock first, so a second process creating
        // the table at the same moment waits for it instead of being refused.
        connection
            .execute_batch(
                "BEGIN IMMEDIATE;
                CREATE TABLE IF NOT EXISTS journal (
                    server TEXT NOT NULL,
                    task_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    entry TEXT NOT NULL,
                    PRIMARY KEY (server, task_id)
                );
                CREATE TABLE IF NOT EXISTS calls (
                    server TEXT NOT NULL,
                    key TEXT NOT NULL,
                    sent_at INTEGER NOT NULL,
                    entry TEXT NOT NULL,
                    PRIMARY KEY (server, key)
                );
                COMMIT;",
            )
            .map_err(failed("create the journal's table"))?;
        Ok(Self {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// Runs `work` on the connection on tokio's blocking pool.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, JournalError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, JournalError>> {
        let connection = self.connection.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut connection = connection
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                work(&mut connection)
            })
            .await
            .map_err(|error| JournalError::with_source("the journal's worker stopped", error))?
        })
    }
}

impl SqliteJournal {
    /// Changes the entry of task `id` of `server` with `change`, in one
    /// transaction (nothing when there is no such entry).
    fn edit(
        &self,
        server: &ServerRef,
        id: &TaskId,
        change: impl FnOnce(&mut TaskRef) + Send + 'static,
    ) -> BoxFuture<'static, Result<(), JournalError>> {
        let (server, id) = (server.clone(), id.clone());
        self.run(move |connection| {
            let key = server_key(&server)?;
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(failed("start a journal update"))?;
            let entry: Option<String> = transaction
                .query_row(
                    "SELECT entry FROM journal WHERE server = ?1 AND task_id = ?2",
                    params![key, id.expose()],
                    |row| row.get(0),
                )
                .optional()
                .map_err(failed("read a journal entry"))?;
            let Some(entry) = entry else {
                return Ok(());
            };
            let mut entry = read_entry(&entry)?;
            change(&mut entry);
            transaction
                .execute(
                    "UPDATE journal SET entry = ?3 WHERE server = ?1 AND task_id = ?2",
                    params![key, id.expose(), write_entry(&entry)?],
                )
                .map_err(failed("update a journal entry"))?;
            transaction
                .commit()
                .map_err(failed("commit a journal update"))
        })
    }
}

fn server_key(server: &ServerRef) -> Result<String, JournalError> {
    serde_json::to_string(server)
        .map_err(|error| JournalError::with_source("cannot write a server reference", error))
}

fn read_entry(text: &str) -> Result<TaskRef, JournalError> {
    serde_json::from_str(text)
        .map_err(|error| JournalError::with_source("a journal entry is not readable", error))
}

fn write_entry(entry: &TaskRef) -> Result<String, JournalError> {
    serde_json::to_string(entry)
        .map_err(|error| JournalError::with_source("cannot write a journal entry", error))
}

impl Journal for SqliteJournal {
    fn record(&self, task: &TaskRef) -> BoxFuture<'_, Result<(), JournalError>> {
        let task = task.clone();
        self.run(move |connection| {
            connection
                .execute(
                    "INSERT OR REPLACE INTO journal (server, task_id, created_at, entry)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![
                        server_key(&task.server)?,
                        task.task_id.expose(),
                        i64::try_from(task.created_at.as_millis()).unwrap_or(i64::MAX),
                        write_entry(&task)?
                    ],
                )
                .map_err(failed("record a task"))?;
            Ok(())
        })
    }

    fn update(
        &self,
        server: &ServerRef,
        id: &TaskId,
        status: &TaskStatus,
        ttl: Option<Ttl>,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        let status = status.clone();
        self.edit(server, id, move |entry| {
            entry.status = status;
            entry.seen_at = entry.seen_at.max(at);
            if ttl.is_some() {
                entry.ttl = ttl;
            }
            entry.gone_at = None;
        })
    }

    fn mark_gone(
        &self,
        server: &ServerRef,
        id: &TaskId,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        self.edit(server, id, move |entry| entry.gone_at = Some(at))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<TaskRef>, JournalError>> {
        self.run(|connection| {
            let mut statement = connection
                .prepare("SELECT entry FROM journal ORDER BY created_at DESC, rowid DESC")
                .map_err(failed("list the journal"))?;
            let rows = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(failed("list the journal"))?;
            let mut entries = Vec::new();
            for row in rows {
                entries.push(read_entry(&row.map_err(failed("list the journal"))?)?);
            }
            Ok(entries)
        })
    }

    fn remove(&self, server: &ServerRef, id: &TaskId) -> BoxFuture<'_, Result<(), JournalError>> {
        let (server, id) = (server.clone(), id.clone());
        self.run(move |connection| {
            connection
                .execute(
                    "DELETE FROM journal WHERE server = ?1 AND task_id = ?2",
                    params![server_key(&server)?, id.expose()],
                )
                .map_err(failed("remove a journal entry"))?;
            Ok(())
        })
    }

    fn prune(&self, now: UnixMillis) -> BoxFuture<'_, Result<usize, JournalError>> {
        self.run(move |connection| {
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(failed("start pruning the journal"))?;
            let stale: Vec<(String, String)> = {
                let mut statement = transaction
                    .prepare("SELECT server, task_id, entry FROM journal")
                    .map_err(failed("read the journal"))?;
                let rows = statement
                    .query_map([], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, String>(1)?,
                            row.get::<_, String>(2)?,
                        ))
                    })
                    .map_err(failed("read the journal"))?;
                let mut stale = Vec::new();
                for row in rows {
                    let (server, id, entry) = row.map_err(failed("read the journal"))?;
                    // An entry that cannot be read is of no use to anyone.
                    if read_entry(&entry).map_or(true, |entry| entry.is_stale(now)) {
                        stale.push((server, id));
                    }
                }
                stale
            };
            for (server, id) in &stale {
                transaction
                    .execute(
                        "DELETE FROM journal WHERE server = ?1 AND task_id = ?2",
                        params![server, id],
                    )
                    .map_err(failed("prune the journal"))?;
            }
            let calls: Vec<(String, String, String)> = {
                let mut statement = transaction
                    .prepare("SELECT server, key, entry FROM calls")
                    .map_err(failed("read the journal's calls"))?;
                let rows = statement
                    .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                    .map_err(failed("read the journal's calls"))?;
                rows.collect::<Result<_, _>>()
                    .map_err(failed("read the journal's calls"))?
            };
            for (server, key, entry) in calls {
                let stale = serde_json::from_str::<PendingCall>(&entry)
                    .map_or(true, |call| call.is_stale(now));
                if stale {
                    transaction
                        .execute(
                            "DELETE FROM calls WHERE server = ?1 AND key = ?2",
                            params![server, key],
                        )
                        .map_err(failed("prune the journal's calls"))?;
                }
            }
            transaction
                .commit()
                .map_err(failed("commit pruning the journal"))?;
            Ok(stale.len())
        })
    }

    fn record_call(&self, call: &PendingCall) -> BoxFuture<'_, Result<(), JournalError>> {
        let call = call.clone();
        self.run(move |connection| {
            let entry = serde_json::to_string(&call)
                .map_err(|error| JournalError::with_source("cannot write a pending call", error))?;
            connection
                .execute(
                    "INSERT OR REPLACE INTO calls (server, key, sent_at, entry)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![
                        server_key(&call.server)?,
                        call.key.as_str(),
                        i64::try_from(call.sent_at.as_millis()).unwrap_or(i64::MAX),
                        entry
                    ],
                )
                .map_err(failed("record a call"))?;
            Ok(())
        })
    }

    fn remove_call(
        &self,
        server: &ServerRef,
        key: &IdempotencyKey,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        let (server, key) = (server.clone(), key.clone());
        self.run(move |connection| {
            connection
                .execute(
                    "DELETE FROM calls WHERE server = ?1 AND key = ?2",
                    params![server_key(&server)?, key.as_str()],
                )
                .map_err(failed("remove a pending call"))?;
            Ok(())
        })
    }

    fn pending_calls(&self) -> BoxFuture<'_, Result<Vec<PendingCall>, JournalError>> {
        self.run(|connection| {
            let mut statement = connection
                .prepare("SELECT entry FROM calls ORDER BY sent_at DESC, rowid DESC")
                .map_err(failed("list the pending calls"))?;
            let rows = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(failed("list the pending calls"))?;
            let mut calls = Vec::new();
            for row in rows {
                let entry = row.map_err(failed("list the pending calls"))?;
                calls.push(serde_json::from_str(&entry).map_err(|error| {
                    JournalError::with_source("a pending call is not readable", error)
                })?);
            }
            Ok(calls)
        })
    }
}
