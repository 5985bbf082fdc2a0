//! How a task reads to a model: a handle, a status, an outcome, each a
//! plain `CallToolResult` whose text says in a sentence or two what is
//! going on and which tool to call next, and whose `structuredContent`
//! carries the same for a program.

use std::fmt::Write as _;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Map, Value, json};

use super::{TASKS_ANSWER, TASKS_WAIT};
use crate::server::engine::wire::error_from_json;
use crate::store::PackedRecord;
use crate::task::{HANDLE_META, TaskStatus};

/// An answer to a form, as `tasks_answer` takes it.
pub(crate) const FORM_ANSWER: &str = r#"{"action": "accept", "content": {...its fields}}"#;

/// How long a `tasks_wait` waits by default, and what a handle suggests.
pub(crate) const DEFAULT_WAIT_SECS: u64 = 25;

/// The longest a `tasks_wait` waits: under the 60 s after which the
/// TypeScript SDK gives a request up by default.
pub(crate) const MAX_WAIT_SECS: u64 = 50;

/// What the task's record says of it, for a program: its id, status, tool,
/// status message and (when it waits for them) its questions.
fn facts(record: &PackedRecord) -> Map<String, Value> {
    let mut facts = Map::new();
    facts.insert("taskId".into(), record.id().into());
    facts.insert("status".into(), record.status().as_str().into());
    if let Some(tool) = record.tool() {
        facts.insert("tool".into(), tool.into());
    }
    if let Some(message) = record.status_message() {
        facts.insert("statusMessage".into(), message.into());
    }
    if *record.status() == TaskStatus::InputRequired {
        let requests: Map<String, Value> = record
            .input_requests()
            .iter()
            .map(|(key, request)| (key.clone(), request.clone()))
            .collect();
        facts.insert("inputRequests".into(), Value::Object(requests));
    }
    facts
}

fn result(text: String, facts: Map<String, Value>, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    let mut result = match is_error {
        true => CallToolResult::error(content),
        false => CallToolResult::success(content),
    };
    result.structured_content = Some(Value::Object(facts));
    result
}

/// A task that has not ended: as the handle of the call that started it
/// (`first`), or as `tasks_wait` and `tasks_status` answer it.
pub(crate) fn unfinished(record: &PackedRecord, first: bool) -> CallToolResult {
    let id = record.id();
    let tool = record.tool().unwrap_or("the tool");
    let mut text = match first {
        true => format!("{tool} is still running, as task {id}; the work goes on."),
        false => format!("Task {id} ({tool}) has not finished yet."),
    };
    if let Some(message) = record.status_message() {
        let _ = write!(text, " Its status: {message}.");
    }
    let mut facts = facts(record);
    if *record.status() == TaskStatus::InputRequired {
        text.push_str(" It needs input before it can go on:");
        questions(&mut text, record);
        let answers: Map<String, Value> = record
            .input_requests()
            .keys()
            .map(|key| (key.clone(), Value::from("ANSWER")))
            .collect();
        let arguments = json!({"taskId": id, "answers": answers});
        let _ = write!(
            text,
            "\nCall {TASKS_ANSWER} with {arguments} (for a form, ANSWER is {FORM_ANSWER}), then \
             {TASKS_WAIT}."
        );
        facts.insert("next".into(), TASKS_ANSWER.into());
    } else {
        let arguments = json!({"taskId": id});
        let _ = write!(
            text,
            " Call {TASKS_WAIT} with {arguments} to get its outcome (each call waits up to \
             {DEFAULT_WAIT_SECS} s)."
        );
        facts.insert("next".into(), TASKS_WAIT.into());
    }
    facts.insert("suggestedWaitSeconds".into(), DEFAULT_WAIT_SECS.into());
    let mut shown = result(text, facts, false);
    if first {
        let meta = Map::from_iter([(HANDLE_META.to_owned(), json!({"taskId": id}))]);
        shown.meta = Some(MetaObject::from(meta));
    }
    shown
}

/// Each outstanding question of the task, a line each: its key, its
/// message and the schema its answer follows.
fn questions(text: &mut String, record: &PackedRecord) {
    for (key, request) in record.input_requests() {
        let params = request.get("params").unwrap_or(&Value::Null);
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("input");
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or(method);
        let _ = write!(text, "\n- {key}: {message}");
        if let Some(schema) = params.get("requestedSchema") {
            let _ = write!(text, " (answer's content schema: {schema})");
        }
    }
}

/// A task that has ended, as `tasks_wait` answers it: the tool's own
/// result when it completed; an error result saying why otherwise.
pub(crate) fn ended(record: &PackedRecord) -> Result<CallToolResult, ErrorData> {
    let id = record.id();
    match record.status() {
        TaskStatus::Completed => {
            // As the tool returned it (`resultType` too: rmcp leaves it out
            // for a caller of an older protocol, as for any result).
            let value = record.result_value().unwrap_or(Value::Null);
            serde_json::from_value(value)
                .map_err(|_| ErrorData::internal_error("the stored task has no result", None))
        }
        TaskStatus::Failed => {
            let error = record.error_value().unwrap_or(Value::Null);
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            let mut facts = facts(record);
            facts.insert("error".into(), error.clone());
            Ok(result(format!("Task {id} failed: {message}"), facts, true))
        }
        status => {
            let text = match status {
                TaskStatus::Cancelled => format!("Task {id} was cancelled; it has no result."),
                _ => format!("Task {id} ended ({}).", status.as_str()),
            };
            Ok(result(text, facts(record), true))
        }
    }
}

/// A task that has ended, as the window answers the call that started it:
/// as the synchronous call would have, its result or its error.
pub(crate) fn ended_as_call(record: &PackedRecord) -> Result<CallToolResult, ErrorData> {
    match record.status() {
        TaskStatus::Completed => ended(record),
        TaskStatus::Cancelled => Err(ErrorData::internal_error("the call was cancelled", None)),
        _ => {
            let error = record.error_value().unwrap_or(Value::Null);
            Err(error_from_json(&error, "the tool failed"))
        }
    }
}

/// `tasks_status`: any task of the caller, ended or not.
pub(crate) fn status(record: &PackedRecord) -> CallToolResult {
    if !record.status().is_terminal() {
        return unfinished(record, false);
    }
    let id = record.id();
    let status = record.status().as_str();
    let text = match record.status() {
        TaskStatus::Completed => {
            format!("Task {id} has completed: call {TASKS_WAIT} for its result.")
        }
        _ => format!("Task {id} has ended: {status}."),
    };
    result(text, facts(record), false)
}

/// `tasks_cancel`, once the cancel is recorded: the task as it is.
pub(crate) fn cancelled(record: &PackedRecord) -> CallToolResult {
    let id = record.id();
    let text = match record.status() {
        TaskStatus::Cancelled => format!("Task {id} is cancelled."),
        status if status.is_terminal() => {
            format!(
                "Task {id} had already ended ({}); nothing was cancelled.",
                status.as_str()
            )
        }
        _ => format!("Cancel requested: task {id} is stopping."),
    };
    result(text, facts(record), false)
}

/// `tasks_answer`: what was done, and the task now.
pub(crate) fn acted(record: &PackedRecord, done: &str) -> CallToolResult {
    let id = record.id();
    let status = record.status().as_str();
    let text = format!("{done} Task {id} is now {status}; call {TASKS_WAIT} for its outcome.");
    result(text, facts(record), false)
}

/// An id that names no task of the caller's: unknown, expired and
/// deleted, or another caller's, all alike.
pub(crate) fn unknown(id: &str) -> CallToolResult {
    let text = format!(
        "There is no task {id} of yours (it may have expired). {} lists your unfinished tasks.",
        super::TASKS_LIST
    );
    let facts = Map::from_iter([("taskId".to_owned(), Value::from(id))]);
    result(text, facts, true)
}

/// `tasks_list`: the caller's unfinished tasks.
pub(crate) fn listed(records: &[std::sync::Arc<PackedRecord>]) -> CallToolResult {
    let tasks: Vec<Value> = records
        .iter()
        .map(|record| {
            let mut task = Map::new();
            task.insert("taskId".into(), record.id().into());
            task.insert("status".into(), record.status().as_str().into());
            if let Some(tool) = record.tool() {
                task.insert("tool".into(), tool.into());
            }
            Value::Object(task)
        })
        .collect();
    let mut text = match tasks.len() {
        0 => "You have no unfinished tasks.".to_owned(),
        n => format!("You have {n} unfinished task(s):"),
    };
    for record in records {
        let tool = record.tool().unwrap_or("?");
        let _ = write!(
            text,
            "\n- {} ({tool}): {}",
            record.id(),
            record.status().as_str()
        );
    }
    let facts = Map::from_iter([("tasks".to_owned(), Value::Array(tasks))]);
    result(text, facts, false)
}
