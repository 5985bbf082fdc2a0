//! Reading what a server sent about a task, and what a finished task
//! comes to: a task read leniently from JSON ([`TaskState::from_json`]), a
//! finished state read as its outcome ([`TaskState::outcome`]) and its tool
//! result, an outcome read as a `Result` ([`TaskOutcome::into_result`]), and
//! the answers of `tasks/get`, `tasks/update` and `tasks/cancel`.
//!
//! Everything here is read leniently from whatever JSON a peer sends: a
//! missing or malformed optional field is recorded as absent, and only a task
//! without an id or a status is refused (with a clear [`Error`]).
//!
//! It lives one floor above `state.rs` (the types) and `error.rs` (the
//! error, which holds states): these functions make errors from states.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{CallToolResult, JsonObject, ServerResult};
use serde_json::Value;

use super::error::{Error, ProtocolViolation};
use super::state::{Era, TaskFailure, TaskOutcome, TaskState, result_text};
use crate::task::{OUTCOME_META, RpcError, TaskId, TaskStatus, Timestamp, Ttl};

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
        // A finished task's outcome in a `CreateTaskResult` of a server of
        // this crate, for a call that declared `CREATED_OUTCOME_EXTENSION`:
        // read as `tasks/get`'s, for the status it goes with.
        let carried = |key: &str, with: TaskStatus| {
            (status == with)
                .then(|| fields.get("_meta")?.get(OUTCOME_META)?.get(key))
                .flatten()
        };
        let result = match fields
            .get("result")
            .or_else(|| carried("result", TaskStatus::Completed))
        {
            Some(Value::Object(result)) => Some(result.clone()),
            _ => None,
        };
        let error = match fields
            .get("error")
            .or_else(|| carried("error", TaskStatus::Failed))
        {
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

impl TaskOutcome {
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

/// Reads a `tasks/get` result: a task with `resultType` `complete` (or none).
pub(crate) fn read_task_result(result: ServerResult) -> Result<TaskState, Error> {
    let value = to_value(result);
    match result_type(&value) {
        None | Some("complete") => {}
        Some("task") => {
            return Err(Error::protocol(
                ProtocolViolation::UnexpectedTask,
                Some(value),
            ));
        }
        Some(unknown) => {
            return Err(Error::protocol(
                ProtocolViolation::UnknownResultType(unknown.to_owned()),
                Some(value),
            ));
        }
    }
    if value.get("taskId").is_none() || value.get("status").is_none() {
        return Err(Error::protocol(
            ProtocolViolation::UnexpectedResult("tasks/get did not answer with a task".into()),
            Some(value),
        ));
    }
    TaskState::from_json(value)
}

/// Reads the ack of `tasks/update` or `tasks/cancel`: any result but a task
/// or an unknown `resultType`.
pub(crate) fn read_ack(method: &'static str, result: ServerResult) -> Result<(), Error> {
    let value = to_value(result);
    match result_type(&value) {
        None | Some("complete") => Ok(()),
        Some("task") => Err(Error::protocol(
            ProtocolViolation::UnexpectedTask,
            Some(value),
        )),
        Some(unknown) => Err(Error::protocol(
            ProtocolViolation::UnknownResultType(format!("{unknown} (in answer to {method})")),
            Some(value),
        )),
    }
}

/// The JSON of a result: as sent when rmcp kept it raw, else as rmcp
/// re-serializes its typed form.
pub(crate) fn to_value(result: ServerResult) -> Value {
    match result {
        ServerResult::CustomResult(raw) => raw.0,
        // rmcp's result types serialize infallibly to JSON objects.
        typed => serde_json::to_value(&typed).unwrap_or(Value::Null),
    }
}

/// The `resultType` of a result's JSON, if it has one.
pub(crate) fn result_type(value: &Value) -> Option<&str> {
    match value.get("resultType") {
        Some(Value::String(kind)) => Some(kind),
        Some(_) => Some("<not a string>"),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::CustomResult;
    use serde_json::json;

    use super::*;

    fn custom(value: Value) -> ServerResult {
        ServerResult::CustomResult(CustomResult::new(value))
    }

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
    fn a_created_tasks_outcome_in_meta_is_read_for_its_status() {
        let result =
            json!({"content": [{"type": "text", "text": "done"}], "resultType": "complete"});
        let error = json!({"code": -32602, "message": "bad"});
        let carrying = |status: &str, outcome: Value| {
            TaskState::from_json(task(json!({
                "resultType": "task", "status": status,
                "_meta": {OUTCOME_META: outcome},
            })))
            .unwrap()
        };
        let completed = carrying("completed", json!({"result": result}));
        assert!(completed.has_outcome());
        let TaskOutcome::Completed(read) = completed.outcome().unwrap() else {
            panic!("completed");
        };
        assert_eq!(result_text(&read), "done");
        let failed = carrying("failed", json!({"error": error}));
        let TaskOutcome::Failed(failure) = failed.outcome().unwrap() else {
            panic!("failed");
        };
        assert_eq!(
            (failure.error.code, failure.error.message.as_str()),
            (-32602, "bad")
        );
        // Only the payload of the status it goes with; anything else is not
        // an outcome, and the task is read as without it.
        for (status, outcome) in [
            ("working", json!({"result": result})),
            ("input_required", json!({"result": result})),
            ("completed", json!({"error": error})),
            ("failed", json!({"result": result})),
            ("completed", json!({"result": "not an object"})),
            ("completed", json!("not an object")),
        ] {
            let state = carrying(status, outcome.clone());
            assert!(!state.has_outcome(), "{status}: {outcome}");
            assert_eq!((state.result.as_ref(), state.error.as_ref()), (None, None));
        }
        // A payload of its own (as in `tasks/get`) wins over `_meta`'s.
        let own = TaskState::from_json(task(json!({
            "status": "completed",
            "result": {"content": [{"type": "text", "text": "own"}]},
            "_meta": {OUTCOME_META: {"result": result}},
        })))
        .unwrap();
        let TaskOutcome::Completed(read) = own.outcome().unwrap() else {
            panic!("completed");
        };
        assert_eq!(result_text(&read), "own");
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

    #[test]
    fn task_results_refuse_other_shapes() {
        let not_a_task = json!({"resultType": "complete", "content": []});
        let error = read_task_result(custom(not_a_task.clone())).unwrap_err();
        assert!(error.is_protocol());
        assert_eq!(error.payload(), Some(&not_a_task));
        let created = json!({"resultType": "task", "taskId": "a", "status": "working"});
        assert!(matches!(
            read_task_result(custom(created)).unwrap_err(),
            Error::Protocol {
                violation: ProtocolViolation::UnexpectedTask,
                ..
            }
        ));
    }
}
