//! A task record as a row of `SCHEMA.tasks`: its columns and parameters
//! on the way in, its checked decoding on the way out.

use mcp_tasks::TaskId;
use mcp_tasks::store::{StoreError, TaskRecord};
use tokio_postgres::types::ToSql;

pub(crate) fn corrupt(message: &str) -> StoreError {
    StoreError::msg(format!("corrupt task in PostgreSQL: {message}"))
}

/// A record's columns.
pub(crate) struct Columns {
    pub(crate) id: String,
    pub(crate) owner: String,
    pub(crate) version: i64,
    pub(crate) record: String,
    /// Its runner while it is unfinished (the takeover's index).
    pub(crate) runner: Option<String>,
    pub(crate) expires_at: Option<i64>,
    pub(crate) keyed: Option<String>,
}

impl Columns {
    pub(crate) fn of(record: &TaskRecord) -> Result<Self, StoreError> {
        Ok(Self {
            id: record.id().expose().to_owned(),
            owner: record.owner().as_str().to_owned(),
            version: version_param(record.version()),
            record: serde_json::to_string(record)
                .map_err(|error| StoreError::new("cannot encode a task", error))?,
            runner: record
                .runner()
                .filter(|_| !record.status().is_terminal())
                .map(|runner| runner.as_str().to_owned()),
            expires_at: record
                .expires_at()
                .map(|at| i64::try_from(at.as_millis()).unwrap_or(i64::MAX)),
            keyed: record.idempotency_slot().map(str::to_owned),
        })
    }

    /// The parameters every creation's statement starts with: id, owner,
    /// version, record, runner, expires_at, keyed.
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.id,
            &self.owner,
            &self.version,
            &self.record,
            &self.runner,
            &self.expires_at,
            &self.keyed,
        ]
    }
}

/// A version as PostgreSQL's `bigint`.
pub(crate) fn version_param(version: u64) -> i64 {
    i64::try_from(version).unwrap_or(i64::MAX)
}

pub(crate) fn column(error: tokio_postgres::Error) -> StoreError {
    StoreError::new(
        "corrupt task in PostgreSQL: a column of an unexpected type",
        error,
    )
}

/// A stored record: its JSON and the version beside it must agree with
/// each other and with the id it was read under.
pub(crate) fn decode(id: &TaskId, version: i64, json: &str) -> Result<TaskRecord, StoreError> {
    let record: TaskRecord = serde_json::from_str(json)
        .map_err(|error| StoreError::new("corrupt task in PostgreSQL: not a task record", error))?;
    if record.id() != id || u64::try_from(version).ok() != Some(record.version()) {
        return Err(corrupt("the record disagrees with its id or version"));
    }
    Ok(record)
}
