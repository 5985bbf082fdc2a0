//! The audit line every admin action writes: who did it, what (the action
//! and its arguments, tasks named by their hash), when, to which tasks,
//! and how it ended, as one JSON object on one line.
//!
//! On a server, the admin routes emit it as a `tracing` event at INFO with
//! the target [`AUDIT_TARGET`], so it lands wherever the server's log goes
//! (the default filter shows it). `mcp-tasks admin --store` writes the
//! same line on stderr and, with `--audit-log FILE`, appends it there.

use serde::Serialize;
use serde_json::Value;

use crate::server::engine::wire::timestamp;
use crate::task::UnixMillis;

/// The `tracing` target of audit events.
pub const AUDIT_TARGET: &str = "mcp_tasks::audit";

/// One admin action, for the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AuditEntry {
    /// When (RFC 3339, UTC).
    pub at: String,
    /// Who: the admin token's label on a server (`admin` for a token
    /// without one, `loopback` where no token is asked), or `local:USER`
    /// for `mcp-tasks admin --store` run by the OS user `USER`.
    pub who: String,
    /// What: `ls`, `show`, `cancel` or `purge`.
    pub action: String,
    /// Its arguments (filters, options); a task only by its hash.
    pub args: Value,
    /// The hashes of the tasks it touched or showed.
    pub tasks: Vec<String>,
    /// `ok`, or the error's message.
    pub outcome: String,
}

impl AuditEntry {
    /// The entry of `action` by `who` at `at`, with `args`; no task yet,
    /// outcome `ok`.
    pub fn new(who: impl Into<String>, action: &str, args: Value, at: UnixMillis) -> Self {
        Self {
            at: timestamp(at),
            who: who.into(),
            action: action.to_owned(),
            args,
            tasks: Vec::new(),
            outcome: "ok".to_owned(),
        }
    }

    /// With the hashes of the tasks the action touched.
    #[must_use]
    pub fn with_tasks(mut self, tasks: Vec<String>) -> Self {
        self.tasks = tasks;
        self
    }

    /// With the outcome: `ok` or the error's message.
    #[must_use]
    pub fn with_outcome<T, E: std::fmt::Display>(mut self, outcome: &Result<T, E>) -> Self {
        if let Err(error) = outcome {
            self.outcome = error.to_string();
        }
        self
    }

    /// The entry as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Emits the line as an INFO event at [`AUDIT_TARGET`].
    pub fn emit(&self) {
        tracing::info!(target: AUDIT_TARGET, "{}", self.to_line());
    }
}
