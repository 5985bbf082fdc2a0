//! How the client reads a task a server reported: [`TaskState`] (from a
//! `CreateTaskResult`, a `tasks/get` result or a notification) and the
//! [`TaskOutcome`] of a finished one.
//!
//! Everything here is read leniently from whatever JSON a peer sends: a
//! missing or malformed optional field is recorded as absent, and only a task
//! without an id or a status is refused (with a clear [`Error`]).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use super::error::{Error, ProtocolViolation};
use super::input::Unanswered;
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
    /// The protocol the task was made in.
    era: Era,
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
    /// Reads a task from a `CreateTaskResult`, a `tasks/get` result or a
    /// `notifications/tasks` payload. A legacy `{"task": {...}}` wrapper is
    /// unwrapped. Fails only when the value is not an object or lacks a
    /// string `taskId` or `status`.
    pub fn from_json(value: Value) -> Result<Self, Error> {
        let fields = match value.get("task") {
            Some(inner @ Value::Object(_)) if value.get("taskId").is_none() => inner.clone(),
            _ => value.clone(),
        };
        let Value::Object(fields) = fields else {
            return Err(Error::protocol(
                ProtocolViolation::MalformedTask("a task must be a JSON object".into()),
                Some(value),
            ));
        };
        let id = match fields.get("taskId") {
            Some(Value::String(id)) if !id.is_empty() => TaskId::new(id.clone()),
            _ => {
                return Err(Error::protocol(
                    ProtocolViolation::MalformedTask("`taskId` is missing or not a string".into()),
                    Some(value),
                ));
            }
        };
        let status = match fields.get("status") {
            Some(Value::String(status)) => TaskStatus::from_wire(status),
            _ => {
                return Err(Error::protocol(
                    ProtocolViolation::MalformedTask("`status` is missing or not a string".into()),
                    Some(value),
                ));
            }
        };
        let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_owned);
        let ttl = match fields.get("ttlMs").or_else(|| fields.get("ttl")) {
            Some(Value::Null) => Some(Ttl::Unlimited),
            Some(other) => lenient_millis(other).map(Ttl::Limited),
            None => None,
        };
        let poll_interval = fields
            .get("pollIntervalMs")
            .or_else(|| fields.get("pollInterval"))
            .and_then(lenient_millis);
        let input_requests = match fields.get("inputRequests") {
            Some(Value::Object(requests)) => requests
                .iter()
                .map(|(key, request)| (key.clone(), request.clone()))
                .collect(),
            _ => BTreeMap::new(),
        };
        let result = match fields.get("result") {
            Some(Value::Object(result)) => Some(result.clone()),
            _ => None,
        };
        let error = match fields.get("error") {
            Some(error @ Value::Object(_)) => Some(RpcError::from_json(error)),
            _ => None,
        };
        Ok(Self {
            id,
            status,
            status_message: text("statusMessage"),
            created_at: text("createdAt").map(Timestamp::new),
            last_updated_at: text("lastUpdatedAt").map(Timestamp::new),
            ttl,
            poll_interval,
            input_requests,
            result,
            error,
            raw: value,
            era: Era::Extension,
        })
    }

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

    /// Maps a terminal state to its outcome: the `CallToolResult` of a
    /// completed task, the JSON-RPC error of a failed one, or the cancelled
    /// state.
    ///
    /// A non-terminal state, or a terminal one without its payload (as in a
    /// `CreateTaskResult`), is an [`Error`] telling the caller to call
    /// `tasks/get` first. A `result` that is not a `CallToolResult` is a
    /// protocol error.
    ///
    /// In the 2025-11-25 era a tool result with `isError: true` means the
    /// task failed: its outcome is [`TaskOutcome::Failed`] with an error of
    /// code -32603 whose message is the result's first text and whose `data`
    /// is the result itself.
    pub fn outcome(&self) -> Result<TaskOutcome, Error> {
        match self.status {
            TaskStatus::Completed => {
                let Some(result) = &self.result else {
                    return Err(Error::NotReady {
                        status: self.status.clone(),
                        missing: "result",
                    });
                };
                let parsed = parse_call_tool_result(&Value::Object(result.clone()))?;
                if self.era == Era::Legacy && parsed.is_error == Some(true) {
                    return Ok(self.tool_failure(&parsed, result));
                }
                Ok(TaskOutcome::Completed(parsed))
            }
            TaskStatus::Failed if self.error.is_none() && self.era == Era::Legacy => {
                let Some(result) = &self.result else {
                    return Err(Error::NotReady {
                        status: self.status.clone(),
                        missing: "error",
                    });
                };
                let parsed = parse_call_tool_result(&Value::Object(result.clone()))?;
                Ok(self.tool_failure(&parsed, result))
            }
            TaskStatus::Failed => {
                let Some(error) = &self.error else {
                    return Err(Error::NotReady {
                        status: self.status.clone(),
                        missing: "error",
                    });
                };
                Ok(TaskOutcome::Failed(Box::new(TaskFailure {
                    error: error.clone(),
                    state: self.clone(),
                })))
            }
            TaskStatus::Cancelled => Ok(TaskOutcome::Cancelled(self.clone())),
            _ => Err(Error::NotReady {
                status: self.status.clone(),
                missing: "a terminal status",
            }),
        }
    }

    /// The outcome of a 2025-11-25 task whose tool result (`raw`, read as
    /// `parsed`) failed: -32603, the result's first text (else the status
    /// message), the result as `data`.
    fn tool_failure(&self, parsed: &CallToolResult, raw: &JsonObject) -> TaskOutcome {
        let text = parsed
            .content
            .iter()
            .find_map(|content| content.as_text().map(|text| text.text.clone()));
        let error = RpcError {
            code: -32603,
            message: text
                .or_else(|| self.status_message.clone())
                .unwrap_or_else(|| "the tool reported an error".to_owned()),
            data: Some(Value::Object(raw.clone())),
        };
        TaskOutcome::Failed(Box::new(TaskFailure {
            error,
            state: self.clone(),
        }))
    }
}

/// Reads a `CallToolResult` from a completed task's `result` (a missing
/// `resultType` or `content` is accepted).
pub(crate) fn parse_call_tool_result(value: &Value) -> Result<CallToolResult, Error> {
    let mut object = value.clone();
    if let Value::Object(fields) = &mut object {
        // An empty result object is a result with no content.
        if !fields.contains_key("content")
            && !fields.contains_key("structuredContent")
            && !fields.contains_key("isError")
        {
            fields.insert("content".into(), Value::Array(Vec::new()));
        }
    }
    serde_json::from_value(object).map_err(|error| {
        Error::protocol(
            ProtocolViolation::MalformedResult(format!("not a CallToolResult: {error}")),
            Some(value.clone()),
        )
    })
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

    /// [`TaskOutcome::into_result`], then its text (see [`TaskOutcome::text`]).
    pub fn into_text(self) -> Result<String, Error> {
        self.into_result().map(|result| result_text(&result))
    }

    /// The tool result, or an error for every other outcome: a failed task
    /// becomes [`Error::TaskFailed`], a cancelled one [`Error::TaskCancelled`],
    /// and unanswered input [`Error::InputRequired`].
    pub fn into_result(self) -> Result<CallToolResult, Error> {
        match self {
            Self::Completed(result) => Ok(result),
            Self::Failed(failure) => Err(Error::TaskFailed(failure)),
            Self::Cancelled(state) => Err(Error::TaskCancelled(Box::new(state))),
            Self::InputRequired { state, unanswered } => Err(Error::InputRequired {
                state: Box::new(state),
                unanswered,
            }),
            Self::CallInputRequired { unanswered, .. } => {
                Err(Error::CallInputRequired { unanswered })
            }
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

/// Reads a millisecond count leniently: a negative value is zero, a float is
/// rounded, anything past `u64` saturates; non-numbers are absent.
pub(crate) fn lenient_millis(value: &Value) -> Option<Duration> {
    let Value::Number(number) = value else {
        return None;
    };
    let millis = if let Some(n) = number.as_u64() {
        n
    } else if number.as_i64().is_some() {
        0
    } else {
        let float = number.as_f64()?;
        if float.is_nan() || float <= 0.0 {
            0
        } else if float >= u64::MAX as f64 {
            u64::MAX
        } else {
            float.round() as u64
        }
    };
    Some(Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task(extra: Value) -> Value {
        let mut base = json!({
            "taskId": "t-1", "status": "working",
            "createdAt": "2026-07-28T10:30:00Z", "lastUpdatedAt": "2026-07-28T10:30:01Z",
            "ttlMs": 60000, "pollIntervalMs": 5000
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut base, extra) {
            base.extend(extra);
        }
        base
    }

    #[test]
    fn task_id_is_never_printed() {
        let id = TaskId::new("secret-123");
        assert!(!format!("{id:?}").contains("secret"));
        assert!(!format!("{id}").contains("secret"));
        let state = TaskState::from_json(json!({"taskId": "secret-123", "status": "working"}))
            .expect("valid task");
        assert!(!format!("{:?}", state.id).contains("secret"));
        assert!(
            !format!("{state:?}").contains("secret"),
            "Debug of a state hides the raw JSON"
        );
        assert_eq!(state.id.expose(), "secret-123");
    }

    #[test]
    fn reads_every_field() {
        let state = TaskState::from_json(task(json!({"statusMessage": "busy"}))).unwrap();
        assert_eq!(state.status, TaskStatus::Working);
        assert_eq!(state.status_message.as_deref(), Some("busy"));
        assert_eq!(state.created_at.unwrap().as_str(), "2026-07-28T10:30:00Z");
        assert_eq!(
            state.last_updated_at.unwrap().as_str(),
            "2026-07-28T10:30:01Z"
        );
        assert_eq!(state.ttl, Some(Ttl::Limited(Duration::from_secs(60))));
        assert_eq!(state.poll_interval, Some(Duration::from_secs(5)));
    }

    #[test]
    fn ttl_null_is_unlimited_and_legacy_keys_are_read() {
        let state =
            TaskState::from_json(json!({"taskId": "a", "status": "working", "ttlMs": null}))
                .unwrap();
        assert_eq!(state.ttl, Some(Ttl::Unlimited));
        let legacy = TaskState::from_json(json!({
            "task": {"taskId": "a", "status": "working", "ttl": 1000, "pollInterval": 250}
        }))
        .unwrap();
        assert_eq!(legacy.ttl, Some(Ttl::Limited(Duration::from_secs(1))));
        assert_eq!(legacy.poll_interval, Some(Duration::from_millis(250)));
    }

    #[test]
    fn hostile_poll_intervals_read_leniently() {
        let read = |v: Value| {
            TaskState::from_json(task(json!({ "pollIntervalMs": v })))
                .unwrap()
                .poll_interval
        };
        assert_eq!(read(json!(0)), Some(Duration::ZERO));
        assert_eq!(read(json!(-5)), Some(Duration::ZERO));
        assert_eq!(read(json!(5000.0)), Some(Duration::from_secs(5)));
        assert_eq!(
            read(json!(1e12)),
            Some(Duration::from_millis(1_000_000_000_000))
        );
        assert_eq!(read(json!(1e300)), Some(Duration::from_millis(u64::MAX)));
        assert_eq!(read(json!("fast")), None);
    }

    #[test]
    fn unknown_status_is_kept() {
        let state = TaskState::from_json(task(json!({"status": "paused"}))).unwrap();
        assert_eq!(state.status, TaskStatus::Unknown("paused".into()));
        assert!(!state.status.is_terminal());
    }

    #[test]
    fn malformed_tasks_are_errors_not_panics() {
        for bad in [
            json!(null),
            json!([1, 2]),
            json!({"status": "working"}),
            json!({"taskId": 7, "status": "working"}),
            json!({"taskId": "a"}),
            json!({"taskId": "a", "status": 3}),
        ] {
            let error = TaskState::from_json(bad).unwrap_err();
            assert!(error.is_protocol(), "{error}");
        }
    }

    #[test]
    fn a_legacy_tool_result_with_is_error_is_a_failure() {
        let failing = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        let completed =
            TaskState::from_json(task(json!({"status": "completed", "result": failing}))).unwrap();
        assert!(
            matches!(completed.outcome().unwrap(), TaskOutcome::Completed(_)),
            "the extension's rule"
        );
        let legacy = completed.clone().in_era(Era::Legacy);
        let TaskOutcome::Failed(failure) = legacy.outcome().unwrap() else {
            panic!("the 2025-11-25 rule: failed");
        };
        assert_eq!(
            (failure.error.code, failure.error.message.as_str()),
            (-32603, "boom")
        );
        assert_eq!(failure.error.data.as_ref().unwrap()["isError"], true);
        // Failed with only the tool result (no JSON-RPC error) is ready too.
        let mut failed = legacy.clone();
        failed.status = TaskStatus::Failed;
        failed.status_message = Some("it broke".into());
        failed.result =
            Some(serde_json::from_value(json!({"content": [], "isError": true})).unwrap());
        assert!(failed.has_outcome());
        let TaskOutcome::Failed(failure) = failed.outcome().unwrap() else {
            panic!("expected failed");
        };
        assert_eq!(failure.error.message, "it broke");
        failed.result = None;
        assert!(!failed.has_outcome());
        assert!(matches!(
            failed.outcome().unwrap_err(),
            Error::NotReady { .. }
        ));
        assert_eq!(legacy.era(), Era::Legacy);
        assert_eq!(completed.era(), Era::Extension);
    }

    #[test]
    fn outcomes() {
        let completed = TaskState::from_json(task(json!({
            "status": "completed",
            "result": {"content": [{"type": "text", "text": "hi"}], "isError": true}
        })))
        .unwrap();
        let TaskOutcome::Completed(result) = completed.outcome().unwrap() else {
            panic!("expected completed");
        };
        assert_eq!(result.is_error, Some(true));

        let failed = TaskState::from_json(task(json!({
            "status": "failed", "error": {"code": -32603, "message": "boom", "data": {"x": 1}}
        })))
        .unwrap();
        let TaskOutcome::Failed(failure) = failed.outcome().unwrap() else {
            panic!("expected failed");
        };
        assert_eq!(failure.error.code, -32603);
        assert_eq!(failure.error.data, Some(json!({"x": 1})));
        assert_eq!(failure.state.status, TaskStatus::Failed);

        let cancelled = TaskState::from_json(task(json!({"status": "cancelled"}))).unwrap();
        assert!(matches!(
            cancelled.outcome().unwrap(),
            TaskOutcome::Cancelled(_)
        ));

        for not_ready in [
            task(json!({})),
            task(json!({"status": "completed"})),
            task(json!({"status": "failed"})),
            task(json!({"status": "input_required"})),
        ] {
            let error = TaskState::from_json(not_ready)
                .unwrap()
                .outcome()
                .unwrap_err();
            assert!(matches!(error, Error::NotReady { .. }), "{error}");
            assert!(error.to_string().contains("tasks/get"), "{error}");
        }
        let bad_result = TaskState::from_json(task(
            json!({"status": "completed", "result": {"content": 5}}),
        ))
        .unwrap();
        assert!(bad_result.outcome().unwrap_err().is_protocol());
    }
}
