//! From stored records to the extension's wire shapes (rmcp's `Task` and
//! `DetailedTask`), from tool outcomes to stored JSON, and the JSON-RPC
//! errors the runtime answers with.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ClientCapabilities, DetailedTask, InputRequests, JsonObject, Task, TaskPayload,
};
use serde_json::{Value, json};

use crate::store::{StoreError, StoreErrorKind, TaskRecord};
use crate::task::{TaskId, TaskStatus, UnixMillis};

/// A fresh task id: 128 bits from the system's CSPRNG, as hex.
pub(crate) fn new_task_id() -> Result<TaskId, ErrorData> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| ErrorData::internal_error(format!("no randomness: {error}"), None))?;
    Ok(TaskId::new(
        bytes
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>(),
    ))
}

/// RFC 3339 in UTC with milliseconds, as the extension's timestamps are sent.
pub(crate) fn timestamp(at: UnixMillis) -> String {
    i64::try_from(at.as_millis())
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned())
}

/// The task fields of a record (`CreateTaskResult`, and the base of `tasks/get`).
pub(crate) fn wire_task(record: &TaskRecord) -> Task {
    let status = match record.status() {
        TaskStatus::InputRequired => rmcp::model::TaskStatus::InputRequired,
        TaskStatus::Completed => rmcp::model::TaskStatus::Completed,
        TaskStatus::Failed => rmcp::model::TaskStatus::Failed,
        TaskStatus::Cancelled => rmcp::model::TaskStatus::Cancelled,
        _ => rmcp::model::TaskStatus::Working,
    };
    let mut task = Task::new(
        record.id().expose(),
        status,
        timestamp(record.created_at()),
        timestamp(record.updated_at()),
    );
    task.ttl_ms = record.ttl().as_millis();
    task.poll_interval_ms = record.poll_interval().map(crate::task::saturating_millis);
    task.status_message = record.status_message().map(str::to_owned);
    task
}

/// The `DetailedTask` of a record: what `tasks/get` answers.
pub(crate) fn detailed_task(record: &TaskRecord) -> Result<DetailedTask, ErrorData> {
    let object = |value: Option<&Value>, what: &str| match value {
        Some(Value::Object(object)) => Ok(object.clone()),
        _ => Err(ErrorData::internal_error(
            format!("the stored task has no {what}"),
            None,
        )),
    };
    let payload = match record.status() {
        TaskStatus::InputRequired => {
            let mut requests = InputRequests::new();
            for (key, request) in record.input_requests() {
                let request = serde_json::from_value(request.clone()).map_err(|error| {
                    ErrorData::internal_error(format!("stored input request: {error}"), None)
                })?;
                requests.insert(key.clone(), request);
            }
            TaskPayload::InputRequired {
                input_requests: requests,
            }
        }
        TaskStatus::Completed => TaskPayload::Completed {
            result: object(record.result(), "result")?,
        },
        TaskStatus::Failed => TaskPayload::Failed {
            error: object(record.error(), "error")?,
        },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    Ok(DetailedTask::new(wire_task(record), payload))
}

/// A tool result as a completed task keeps it (with `resultType: complete`).
pub(crate) fn result_json(result: &CallToolResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or_else(|_| json!({"content": []}));
    if let Value::Object(fields) = &mut value {
        fields.insert("resultType".into(), json!("complete"));
    }
    value
}

/// A JSON-RPC error as a failed task keeps it.
pub(crate) fn error_json(error: &ErrorData) -> Value {
    let mut fields = JsonObject::new();
    fields.insert("code".into(), json!(error.code.0));
    fields.insert("message".into(), json!(error.message));
    if let Some(data) = &error.data {
        fields.insert("data".into(), data.clone());
    }
    Value::Object(fields)
}

/// -32021 naming the Tasks extension.
pub(crate) fn tasks_required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// The one -32602 for unknown, expired and foreign task ids alike.
pub(crate) fn task_not_found() -> ErrorData {
    ErrorData::invalid_params("Failed to retrieve task: Task not found", None)
}

pub(crate) fn tool_panicked() -> ErrorData {
    ErrorData::internal_error("internal error: the tool panicked", None)
}

/// A store failure, logged here (without ids) and answered as -32603 with
/// what the caller can do about it.
#[expect(
    clippy::needless_pass_by_value,
    reason = "used as a `map_err` function"
)]
pub(crate) fn store_failure(error: StoreError) -> ErrorData {
    tracing::error!(%error, "task store failure");
    let message = match error.kind() {
        StoreErrorKind::Full => {
            "internal error: the task store is full; no task can be created or changed until \
             the server has room again"
        }
        StoreErrorKind::Unavailable => {
            "internal error: the task store cannot be reached; try again shortly"
        }
        _ => "internal error: the task store failed",
    };
    ErrorData::internal_error(message, None)
}
