//! The wire shapes of 2025-11-25 tasks, from stored records: the bare
//! `Task` (`ttl`, `pollInterval`, and `failed` for a tool result with
//! `isError: true`), the nested `CreateTaskResult`, the payload of
//! `tasks/result`, and the capability and tool marks of `initialize` and
//! `tools/list`.

use rmcp::ErrorData;
use rmcp::model::Task;
use serde_json::{Map, Value, json};

use crate::server::engine::policy::TaskPolicy;
use crate::server::engine::wire::{error_from_json, timestamp};
use crate::store::PackedRecord;
use crate::task::{TaskStatus, saturating_millis};

/// The `_meta` key tying a message to its task.
pub(crate) use crate::task::RELATED_TASK;

/// The longest status message made from a tool's error text.
const MAX_MADE_MESSAGE: usize = 256;

/// What a server that serves tasks declares on an initialize-era session.
pub(crate) fn capabilities() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// `execution.taskSupport` of a policy.
pub(crate) fn task_support(policy: TaskPolicy) -> &'static str {
    match policy {
        TaskPolicy::Required => "required",
        TaskPolicy::Forbidden => "forbidden",
        _ => "optional",
    }
}

/// True when a stored tool result says `isError: true`.
fn is_error_result(record: &PackedRecord) -> bool {
    // Kept as text, the common case: look before parsing.
    if let Some(text) = record.result_text()
        && !text.contains("\"isError\"")
    {
        return false;
    }
    record
        .result_value()
        .is_some_and(|result| result.get("isError") == Some(&Value::Bool(true)))
}

/// The status this era shows: a tool result with `isError: true` is
/// `failed` here (the extension calls it `completed`).
fn status(record: &PackedRecord) -> &'static str {
    match record.status() {
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed if is_error_result(record) => "failed",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        _ => "working",
    }
}

/// The status message of a failed task when the tool set none: what went
/// wrong, as that era asks (`tasks/get` SHOULD say it for a failed task).
fn failure_message(record: &PackedRecord) -> Option<String> {
    let text = match record.status() {
        TaskStatus::Failed => record.error_value().and_then(|error| {
            error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        }),
        _ => record.result_value().and_then(|result| {
            result
                .get("content")?
                .as_array()?
                .iter()
                .find_map(|block| block.get("text").and_then(Value::as_str).map(str::to_owned))
        }),
    };
    Some(match text {
        Some(text) if text.len() > MAX_MADE_MESSAGE => {
            let mut end = MAX_MADE_MESSAGE;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &text[..end])
        }
        Some(text) => text,
        None => "the tool reported an error".to_owned(),
    })
}

/// The bare `Task` of this era (`tasks/get`, `tasks/cancel`, `tasks/list`,
/// `notifications/tasks/status`).
pub(crate) fn task(record: &PackedRecord) -> Map<String, Value> {
    let status = status(record);
    let mut task = Map::new();
    task.insert("taskId".into(), json!(record.id()));
    task.insert("status".into(), json!(status));
    let message = match record.status_message() {
        Some(message) => Some(message.to_owned()),
        None if status == "failed" => failure_message(record),
        None => None,
    };
    if let Some(message) = message {
        task.insert("statusMessage".into(), json!(message));
    }
    task.insert("createdAt".into(), json!(timestamp(record.created_at())));
    task.insert(
        "lastUpdatedAt".into(),
        json!(timestamp(record.updated_at())),
    );
    task.insert("ttl".into(), json!(record.ttl().as_millis()));
    if let Some(interval) = record.poll_interval() {
        task.insert("pollInterval".into(), json!(saturating_millis(interval)));
    }
    task
}

/// The `CreateTaskResult` of this era, from the extension's: the same
/// fields nested under `task`, with `ttl` and `pollInterval`.
pub(crate) fn created(created: &Task) -> Value {
    let mut task = Map::new();
    task.insert("taskId".into(), json!(created.task_id));
    task.insert("status".into(), json!(created.status));
    if let Some(message) = &created.status_message {
        task.insert("statusMessage".into(), json!(message));
    }
    task.insert("createdAt".into(), json!(created.created_at));
    task.insert("lastUpdatedAt".into(), json!(created.last_updated_at));
    task.insert("ttl".into(), json!(created.ttl_ms));
    if let Some(interval) = created.poll_interval_ms {
        task.insert("pollInterval".into(), json!(interval));
    }
    json!({"task": task})
}

/// What `tasks/result` answers for a finished task: the tool's result with
/// the related-task `_meta`, or its JSON-RPC error exactly.
pub(crate) fn payload(record: &PackedRecord) -> Result<Value, ErrorData> {
    match record.status() {
        TaskStatus::Completed => {
            let mut result = match record.result_value() {
                Some(Value::Object(result)) => result,
                _ => {
                    return Err(ErrorData::internal_error(
                        "the stored task has no result",
                        None,
                    ));
                }
            };
            // Stored as the extension keeps it; this era's results have none.
            result.remove("resultType");
            let meta = result
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(RELATED_TASK.into(), json!({"taskId": record.id()}));
            }
            Ok(Value::Object(result))
        }
        TaskStatus::Failed => {
            let error = record.error_value().unwrap_or(Value::Null);
            Err(error_from_json(&error, "the task failed"))
        }
        _ => Err(ErrorData::internal_error("the task was cancelled", None)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{Change, Principal, TaskRecord};
    use crate::task::{TaskId, Ttl, UnixMillis};

    fn record(change: Option<Change>) -> PackedRecord {
        let record = TaskRecord::new(
            TaskId::new("0123456789ab0123456789abcdef0123456789abcdef"),
            Principal::new("p"),
            UnixMillis::new(1_000),
            Ttl::Limited(Duration::from_secs(60)),
            Some(Duration::from_millis(500)),
        );
        let record = match change {
            Some(change) => record
                .apply(&change, UnixMillis::new(2_000), Duration::from_secs(60))
                .unwrap()
                .into_record(),
            None => record,
        };
        PackedRecord::pack(record)
    }

    #[test]
    fn a_working_task_has_ttl_and_poll_interval_in_milliseconds() {
        let task = Value::Object(task(&record(None)));
        assert_eq!(task["status"], "working");
        assert_eq!(task["ttl"], 60_000);
        assert_eq!(task["pollInterval"], 500);
        assert_eq!(task["createdAt"], "1970-01-01T00:00:01.000Z");
        assert!(task.get("ttlMs").is_none() && task.get("resultType").is_none());
    }

    #[test]
    fn an_error_result_is_failed_here_with_its_text_as_message() {
        let result = json!({"resultType": "complete", "isError": true,
            "content": [{"type": "text", "text": "disk full"}]});
        let record = record(Some(Change::Complete(result)));
        let task = Value::Object(task(&record));
        assert_eq!(task["status"], "failed");
        assert_eq!(task["statusMessage"], "disk full");
        // tasks/result still returns the result itself.
        let payload = payload(&record).unwrap();
        assert_eq!(payload["isError"], true);
        assert!(payload.get("resultType").is_none());
        assert_eq!(
            payload["_meta"][RELATED_TASK]["taskId"],
            "0123456789ab0123456789abcdef0123456789abcdef"
        );
    }

    #[test]
    fn a_plain_result_is_completed() {
        let result = json!({"resultType": "complete", "content": [], "_meta": {"k": 1}});
        let record = record(Some(Change::Complete(result)));
        assert_eq!(Value::Object(task(&record))["status"], "completed");
        let payload = payload(&record).unwrap();
        assert_eq!(payload["_meta"]["k"], 1, "the tool's own _meta is kept");
    }

    #[test]
    fn a_failed_task_answers_its_error_exactly() {
        let error = json!({"code": -32099, "message": "nope", "data": {"why": 1}});
        let record = record(Some(Change::Fail(error)));
        assert_eq!(Value::Object(task(&record))["statusMessage"], "nope");
        let error = payload(&record).unwrap_err();
        assert_eq!(error.code.0, -32099);
        assert_eq!(error.message, "nope");
        assert_eq!(error.data, Some(json!({"why": 1})));
    }
}
