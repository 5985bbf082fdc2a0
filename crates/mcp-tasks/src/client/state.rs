//! The client's picture of a task a server reported: [`TaskState`] (from a
//! `CreateTaskResult`, a `tasks/get` result or a notification), the
//! [`TaskOutcome`] of a finished one, and the [`Era`] it was made in.
//!
//! These are the types; how they are read from what a peer sent, and how
//! an outcome becomes a `Result` of the client's [`Error`](super::Error),
//! is `read.rs`, one floor up: the error holds states, so the functions
//! that make errors from states live above both.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use super::unanswered::Unanswered;
use crate::task::{RpcError, TaskId, TaskStatus, Timestamp, Ttl};

/// Which protocol a task was made in: the Tasks extension of MCP 2026-07-28,
/// or the experimental tasks of the 2025-11-25 revision (on a connection
/// opened with `initialize`). [`TasksClient`](super::TasksClient) drives
/// both through the same calls; the era only changes the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Era {
    /// The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663).
    Extension,
    /// The 2025-11-25 experimental tasks (`params.task`, `tasks/result`).
    Legacy,
}

impl Era {
    /// A short name: `extension` or `legacy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Extension => "extension",
            Self::Legacy => "legacy",
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of a task as a server last reported it (`CreateTaskResult`,
/// `tasks/get` or `notifications/tasks`, or their 2025-11-25 forms).
///
/// `Debug` leaves out the raw JSON, which holds the task id.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskState {
    /// The task id.
    pub id: TaskId,
    /// The status.
    pub status: TaskStatus,
    /// A message for people about the current state, if any.
    pub status_message: Option<String>,
    /// When the task was created, if the server said.
    pub created_at: Option<Timestamp>,
    /// When the task last changed, if the server said.
    pub last_updated_at: Option<Timestamp>,
    /// The TTL, if the server sent a readable one (`ttlMs`, or legacy `ttl`).
    pub ttl: Option<Ttl>,
    /// The suggested poll interval (`pollIntervalMs`, or legacy
    /// `pollInterval`), read leniently: a negative value reads as zero, a
    /// float is rounded, a huge value saturates. Clamping happens in the wait.
    pub poll_interval: Option<Duration>,
    /// Outstanding input requests by key (`input_required`), as sent.
    pub input_requests: BTreeMap<String, Value>,
    /// The result of the original request (`completed`).
    pub result: Option<JsonObject>,
    /// The JSON-RPC error of the original request (`failed`).
    pub error: Option<RpcError>,
    /// The whole JSON object the state was read from.
    pub raw: Value,
    /// The protocol the task was made in (set by `read.rs`).
    pub(super) era: Era,
}

impl fmt::Debug for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskState")
            .field("id", &self.id)
            .field("status", &self.status)
            .field("status_message", &self.status_message)
            .field("created_at", &self.created_at)
            .field("last_updated_at", &self.last_updated_at)
            .field("ttl", &self.ttl)
            .field("poll_interval", &self.poll_interval)
            .field("input_requests", &self.input_requests)
            .field("result", &self.result)
            .field("error", &self.error)
            .field("era", &self.era)
            .finish_non_exhaustive()
    }
}

impl TaskState {
    /// The protocol the task was made in: [`Era::Extension`] unless the
    /// state came from a 2025-11-25 server.
    pub fn era(&self) -> Era {
        self.era
    }

    /// The same state, as made in `era`.
    pub(crate) fn in_era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// True when the state is terminal and carries what [`TaskState::outcome`]
    /// needs (`result` for completed, `error` for failed; in the 2025-11-25
    /// era a failed task may carry the tool result that failed instead).
    pub fn has_outcome(&self) -> bool {
        match self.status {
            TaskStatus::Completed => self.result.is_some(),
            TaskStatus::Failed => {
                self.error.is_some() || (self.era == Era::Legacy && self.result.is_some())
            }
            TaskStatus::Cancelled => true,
            _ => false,
        }
    }
}

/// A task that ended `failed`: the JSON-RPC error of the original request,
/// and the state it was read from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskFailure {
    /// The error the original request produced.
    pub error: RpcError,
    /// The failed task.
    pub state: TaskState,
}

impl fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the task failed: {}", self.error)
    }
}

impl std::error::Error for TaskFailure {}

/// How a wait for a task ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TaskOutcome {
    /// The tool returned this result; it may have `isError: true`.
    Completed(CallToolResult),
    /// The task ended with a JSON-RPC error.
    Failed(Box<TaskFailure>),
    /// The task was cancelled.
    Cancelled(TaskState),
    /// The task needs input that the wait was told not to give, or had no
    /// handler for.
    InputRequired {
        /// The task, `input_required`, with its input requests.
        state: TaskState,
        /// Why the wait did not answer (which handler is missing, for which key).
        unanswered: Unanswered,
    },
    /// Before any task existed, the `tools/call` itself asked for input (an
    /// MRTR round) that the wait was told not to give, or had no handler for.
    CallInputRequired {
        /// The server's answer, with its input requests.
        request: rmcp::model::InputRequiredResult,
        /// Why the wait did not answer (which handler is missing, for which key).
        unanswered: Unanswered,
    },
}

impl TaskOutcome {
    /// The status name of this outcome (`completed`, `failed`, `cancelled`, `input_required`).
    pub fn status(&self) -> TaskStatus {
        match self {
            Self::Completed(_) => TaskStatus::Completed,
            Self::Failed(_) => TaskStatus::Failed,
            Self::Cancelled(_) => TaskStatus::Cancelled,
            Self::InputRequired { .. } | Self::CallInputRequired { .. } => {
                TaskStatus::InputRequired
            }
        }
    }

    /// Why the wait left input unanswered, for the input-required outcomes.
    pub fn unanswered(&self) -> Option<&Unanswered> {
        match self {
            Self::InputRequired { unanswered, .. } | Self::CallInputRequired { unanswered, .. } => {
                Some(unanswered)
            }
            _ => None,
        }
    }

    /// The text of a completed task's result: its text contents, joined
    /// by newlines (empty when it has none). `None` for every other outcome.
    pub fn text(&self) -> Option<String> {
        match self {
            Self::Completed(result) => Some(result_text(result)),
            _ => None,
        }
    }
}

/// The text contents of a tool result, joined by newlines: what a person
/// would read of it (images, audio and resources are left out).
pub fn result_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|content| content.as_text())
        .map(|text| text.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
