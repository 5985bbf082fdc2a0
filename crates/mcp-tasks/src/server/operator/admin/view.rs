//! What the admin API shows of a task ([`TaskView`]) and how it picks tasks
//! ([`Filter`]): the vocabulary the library facade, its HTTP routes and the
//! `mcp-tasks admin` command share.
//!
//! A task is shown by its keyed hash ([`TaskHasher`]); its id only when
//! asked (`show_ids`), its result or error only when asked
//! (`show_results`). Its caller is shown as a *principal label*
//! ([`principal_label`]), never as the raw principal the store keeps.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::server::engine::wire::timestamp;
use crate::store::{Principal, TaskRecord};
use crate::task::{TaskStatus, UnixMillis};
use crate::telemetry::task_hash::TaskHasher;

/// The label of a caller whose principal is not a token file's label:
/// an unlabelled token (`token-sha256:...`).
pub const UNLABELLED_TOKEN: &str = "(unlabelled token)";
/// The label of an HTTP caller that sent no `Authorization` header to a
/// server without a tokens file (`http:anonymous`).
pub const ANONYMOUS: &str = "(anonymous)";
/// The label of an HTTP caller that sent an `Authorization` header to a
/// server without a tokens file (its principal is a hash of the header).
pub const UNAUTHENTICATED: &str = "(unauthenticated)";
/// The label of the caller of a stdio server (the process at the other end).
pub const PROCESS: &str = "(process)";
/// The label of any other principal (one an extractor of your own made).
pub const OTHER: &str = "(other)";

/// How an operator sees the caller that owns a task: the label of its
/// token in the tokens file, or, for a principal that is not a label, one
/// of the fixed names in parentheses (a label cannot hold a parenthesis,
/// so they cannot be confused with one). The raw principal (a hash of a
/// token or of an `Authorization` header) is never shown.
pub fn principal_label(principal: &Principal) -> &str {
    let raw = principal.as_str();
    let is_label = !raw.is_empty()
        && raw.chars().count() <= crate::server::auth::MAX_LABEL_CHARS
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._@+".contains(c));
    if raw == "process" {
        PROCESS
    } else if is_label {
        raw
    } else if raw == "http:anonymous" {
        ANONYMOUS
    } else if raw.starts_with("token-sha256:") {
        UNLABELLED_TOKEN
    } else if raw.starts_with("authorization:") {
        UNAUTHENTICATED
    } else {
        OTHER
    }
}

/// The status a [`Filter`] names for every task not ended yet.
const UNFINISHED: &str = "unfinished";

/// Who an admin action was by, as its audit line names them: the label of
/// the operator's token, or `admin` for a token without one.
#[cfg(feature = "operator")]
pub(crate) fn operator_label(principal: &Principal) -> String {
    match principal_label(principal) {
        label if label.starts_with('(') => "admin".to_owned(),
        label => label.to_owned(),
    }
}

/// Which tasks a listing shows; every field unset shows every task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct Filter {
    /// Only tasks in this status (`working`, `input_required`,
    /// `completed`, `failed`, `cancelled`), or `unfinished` (`working` or
    /// `input_required`).
    pub status: Option<String>,
    /// Only tasks of this tool.
    pub tool: Option<String>,
    /// Only tasks of callers with this label ([`principal_label`]).
    pub principal: Option<String>,
    /// Only tasks created at least this many milliseconds ago.
    pub older_than_ms: Option<u64>,
    /// Only tasks created less than this many milliseconds ago.
    pub newer_than_ms: Option<u64>,
}

impl Filter {
    /// Only tasks in `status`.
    pub fn with_status(mut self, status: impl Into<String>) -> Self {
        self.status = Some(status.into());
        self
    }

    /// Only tasks of the tool `tool`.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Only tasks of callers labelled `label`.
    pub fn with_principal(mut self, label: impl Into<String>) -> Self {
        self.principal = Some(label.into());
        self
    }

    /// Only tasks created at least `age` ago.
    pub fn with_older_than(mut self, age: Duration) -> Self {
        self.older_than_ms = Some(millis(age));
        self
    }

    /// Only tasks created less than `age` ago.
    pub fn with_newer_than(mut self, age: Duration) -> Self {
        self.newer_than_ms = Some(millis(age));
        self
    }

    /// A status the filter names that no task can have, as an error message.
    pub(crate) fn check(&self) -> Result<(), String> {
        match self.status.as_deref().map(TaskStatus::from_wire) {
            Some(TaskStatus::Unknown(name)) if name != UNFINISHED => Err(format!(
                "unknown status {name:?}: use working, input_required, completed, failed, cancelled \
                 or unfinished"
            )),
            _ => Ok(()),
        }
    }

    /// Whether `record` passes, at `now`.
    pub fn matches(&self, record: &TaskRecord, now: UnixMillis) -> bool {
        let age = millis(now.saturating_since(record.created_at()));
        self.status.as_deref().is_none_or(|status| {
            record.status().as_str() == status
                || (status == UNFINISHED && !record.status().is_terminal())
        }) && self
            .tool
            .as_deref()
            .is_none_or(|tool| record.tool() == Some(tool))
            && self
                .principal
                .as_deref()
                .is_none_or(|label| principal_label(record.owner()) == label)
            && self.older_than_ms.is_none_or(|min| age >= min)
            && self.newer_than_ms.is_none_or(|max| age < max)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What to show of a task beyond its summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct Show {
    /// The task id (a bearer token: whoever reads it may use the task).
    pub ids: bool,
    /// The task's result or error.
    pub results: bool,
}

impl Show {
    /// Show the task id.
    pub fn with_ids(mut self, ids: bool) -> Self {
        self.ids = ids;
        self
    }

    /// Show the result or error.
    pub fn with_results(mut self, results: bool) -> Self {
        self.results = results;
        self
    }
}

/// One task as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskView {
    /// The task's keyed hash (`th_...`).
    pub task: String,
    /// The task id, only when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its status.
    pub status: String,
    /// Its status message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// The tool it runs, when the record says (records of older builds do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Its caller's label ([`principal_label`]).
    pub principal: String,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// How long ago it was created, in seconds.
    pub age_secs: u64,
    /// When it expires, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Whether a cancel was asked for and the tool has not ended yet.
    pub cancel_requested: bool,
    /// How many input requests wait for an answer.
    pub input_requests: usize,
    /// Its result, only when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Its error, only when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<serde_json::Value>,
}

impl TaskView {
    /// `record` as shown at `now`, its id hashed by `hasher`.
    pub fn of(record: &TaskRecord, hasher: &TaskHasher, show: Show, now: UnixMillis) -> Self {
        Self {
            task: hasher.hash(record.id()),
            id: show.ids.then(|| record.id().expose().to_owned()),
            status: record.status().as_str().to_owned(),
            status_message: record.status_message().map(str::to_owned),
            tool: record.tool().map(str::to_owned),
            principal: principal_label(record.owner()).to_owned(),
            created_at: timestamp(record.created_at()),
            updated_at: timestamp(record.updated_at()),
            age_secs: now.saturating_since(record.created_at()).as_secs(),
            expires_at: record.expires_at().map(timestamp),
            cancel_requested: record.cancel_requested(),
            input_requests: record.input_requests().len(),
            result: show.results.then(|| record.result().cloned()).flatten(),
            error: show.results.then(|| record.error().cloned()).flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_never_show_a_raw_principal() {
        for (raw, shown) in [
            ("alice", "alice"),
            ("ci-runner.1@x+y", "ci-runner.1@x+y"),
            ("process", PROCESS),
            ("http:anonymous", ANONYMOUS),
            ("token-sha256:00ff", UNLABELLED_TOKEN),
            ("authorization:abcd", UNAUTHENTICATED),
            ("tenant:42", OTHER),
            ("", OTHER),
        ] {
            assert_eq!(principal_label(&Principal::new(raw)), shown, "{raw}");
        }
    }

    #[test]
    fn a_filter_refuses_an_unknown_status() {
        assert!(Filter::default().with_status("done").check().is_err());
        assert!(Filter::default().with_status("working").check().is_ok());
        assert!(Filter::default().with_status("unfinished").check().is_ok());
    }
}
