//! Switching a file to WAL while other processes may be opening it too.
//!
//! A `call` creates the journal while an `ls` opens it; two replicas' admin
//! commands open one store. SQLite answers `SQLITE_BUSY` at once, without
//! waiting in its busy handler, when a connection holding a read lock asks
//! for a write lock that another reader also wants (its rule against
//! deadlock), and switching a file to WAL, or reading the mode while the
//! last connection checkpoints and removes the WAL, is such a moment. So the
//! switch is retried, with short growing pauses, for as long as the
//! connection's busy timeout would have waited; a file already in WAL is
//! left alone.

use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

/// Puts the file in WAL mode, retrying a busy or locked answer for
/// `patience`. Returns the mode the file is in (SQLite keeps some files,
/// such as `:memory:`, in another mode).
pub(crate) fn switch_to_wal(conn: &Connection, patience: Duration) -> rusqlite::Result<String> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match try_switch(conn) {
            Err(err) if is_busy(&err) && started.elapsed() < patience => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

fn try_switch(conn: &Connection) -> rusqlite::Result<String> {
    let mode: String = conn.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
    if mode.eq_ignore_ascii_case("wal") {
        return Ok(mode);
    }
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}
