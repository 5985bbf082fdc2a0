//! The five task tools: their definitions, as a model reads them, and
//! their answers, each for the calling principal only.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode, JsonObject, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value, json};

use super::follow::{Followed, Wait};
use super::shown::{self, DEFAULT_WAIT_SECS, FORM_ANSWER, MAX_WAIT_SECS};
use super::{TASKS_ANSWER, TASKS_CANCEL, TASKS_LIST, TASKS_STATUS, TASKS_WAIT};
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::task_not_found;
use crate::store::{PackedRecord, Principal};
use crate::task::TaskId;

/// An answer that refuses a form.
const DECLINE: &str = r#"{"action": "decline"}"#;

/// How many tasks `tasks_list` shows at most.
const LISTED: usize = 50;

/// How many pages of a caller's records (of 100) `tasks_list` reads at
/// most: a caller with thousands of finished tasks kept costs it no more.
const PAGES: usize = 10;

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("a schema is an object"),
    }
}

fn task_id_property() -> Value {
    json!({
        "type": "string",
        "description": "The taskId from the answer of the tool call that started the task."
    })
}

/// The task tools, as `tools/list` shows them.
pub(super) fn definitions() -> Vec<Tool> {
    let id_only = || {
        schema(json!({
            "type": "object",
            "properties": {"taskId": task_id_property()},
            "required": ["taskId"]
        }))
    };
    vec![
        Tool::new(
            TASKS_WAIT,
            format!(
                "Waits for a task that an earlier tool call started (its answer said the work goes on \
                 as a task and gave a taskId) and returns that tool's own result once it is done. \
                 Waits at most timeoutSeconds (default {DEFAULT_WAIT_SECS}); if the task is still \
                 running then, it says so: call {TASKS_WAIT} again with the same taskId. If the task \
                 needs input, it returns the questions: answer them with {TASKS_ANSWER}."
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "taskId": task_id_property(),
                    "timeoutSeconds": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_WAIT_SECS,
                        "default": DEFAULT_WAIT_SECS,
                        "description": "How long to wait for the task to finish, in seconds."
                    }
                },
                "required": ["taskId"]
            })),
        ),
        Tool::new(
            TASKS_STATUS,
            format!(
                "Reads the status of a task that an earlier tool call started, without waiting: \
                 working, input_required (with its questions), completed, failed or cancelled. Use \
                 {TASKS_WAIT} to get a finished task's result."
            ),
            id_only(),
        ),
        Tool::new(
            TASKS_CANCEL,
            "Cancels a task that an earlier tool call started and that is still running: its tool \
             stops and the task will have no result.",
            id_only(),
        ),
        Tool::new(
            TASKS_ANSWER,
            format!(
                "Answers the questions of a task whose status is input_required. answers maps each \
                 question's key (as {TASKS_WAIT} or {TASKS_STATUS} listed them) to its answer: for a \
                 question with a form, {FORM_ANSWER}, or {DECLINE} to refuse. Then call {TASKS_WAIT}."
            ),
            schema(json!({
                "type": "object",
                "properties": {
                    "taskId": task_id_property(),
                    "answers": {
                        "type": "object",
                        "description": "Each question's key mapped to its answer.",
                        "additionalProperties": {"type": "object"}
                    }
                },
                "required": ["taskId", "answers"]
            })),
        ),
        Tool::new(
            TASKS_LIST,
            "Lists your tasks that are still running or waiting for input, each with its taskId, \
             tool and status.",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

/// The arguments of a task tool: its `taskId` (when it takes one), read
/// strictly enough for a clear error.
struct Arguments<'a> {
    tool: &'a str,
    arguments: Option<&'a JsonObject>,
}

impl Arguments<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.arguments.and_then(|arguments| arguments.get(name))
    }

    fn task_id(&self) -> Result<TaskId, ErrorData> {
        match self.get("taskId") {
            Some(Value::String(id)) if !id.is_empty() => Ok(TaskId::new(id.clone())),
            _ => Err(ErrorData::invalid_params(
                format!(
                    "{}: taskId (a string, the id the tool call's answer gave) is required",
                    self.tool
                ),
                None,
            )),
        }
    }

    fn timeout(&self) -> Result<Duration, ErrorData> {
        match self.get("timeoutSeconds") {
            None | Some(Value::Null) => Ok(Duration::from_secs(DEFAULT_WAIT_SECS)),
            Some(value) => match value.as_f64() {
                Some(secs) if secs >= 0.0 => {
                    Ok(Duration::from_secs_f64(secs.min(MAX_WAIT_SECS as f64)))
                }
                _ => Err(ErrorData::invalid_params(
                    format!(
                        "{TASKS_WAIT}: timeoutSeconds must be a number of seconds from 0 to {MAX_WAIT_SECS}"
                    ),
                    None,
                )),
            },
        }
    }

    /// `answers`, each as `tasks/update` takes it: an answer without an
    /// `action` is the content of an accepted form.
    fn answers(&self) -> Result<Map<String, Value>, ErrorData> {
        let Some(Value::Object(answers)) = self.get("answers") else {
            return Err(ErrorData::invalid_params(
                format!(
                    "{TASKS_ANSWER}: answers (an object: each question's key to its answer) is required"
                ),
                None,
            ));
        };
        Ok(answers
            .iter()
            .map(|(key, answer)| {
                let answer = match answer {
                    Value::Object(fields) if fields.contains_key("action") => answer.clone(),
                    content => json!({"action": "accept", "content": content}),
                };
                (key.clone(), answer)
            })
            .collect())
    }
}

/// Answers a call of a task tool for the caller of `context`.
pub(super) async fn call(
    runtime: &TaskRuntime,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let principal = runtime.principal_of(&context.extensions);
    let arguments = Arguments {
        tool: &request.name,
        arguments: request.arguments.as_ref(),
    };
    if request.name == TASKS_LIST {
        return list(runtime, &principal).await;
    }
    let id = arguments.task_id()?;
    let answered = match request.name.as_ref() {
        TASKS_WAIT => wait(runtime, &id, &principal, context, arguments.timeout()?).await,
        TASKS_STATUS => runtime
            .current(&id, &principal)
            .await
            .map(|record| shown::status(&record)),
        TASKS_CANCEL => match runtime.cancel_task_as(&id, &principal).await {
            Ok(()) => cancelled(runtime, &id, &principal, context).await,
            Err(error) => Err(error),
        },
        TASKS_ANSWER => {
            let answers = arguments.answers()?;
            match runtime
                .update_task_as(&id, answers.into_iter().collect(), &principal)
                .await
            {
                Ok(()) => acted(runtime, &id, &principal, "Answered.").await,
                Err(error) => Err(error),
            }
        }
        _ => {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
    };
    match answered {
        // Unknown, expired and deleted, or another caller's: all alike.
        Err(error)
            if error.code == ErrorCode::INVALID_PARAMS
                && error.message == task_not_found().message =>
        {
            Ok(shown::unknown(id.expose()))
        }
        answered => answered,
    }
}

async fn acted(
    runtime: &TaskRuntime,
    id: &TaskId,
    principal: &Principal,
    done: &str,
) -> Result<CallToolResult, ErrorData> {
    let record = runtime.current(id, principal).await?;
    Ok(shown::acted(&record, done))
}

/// How long `tasks_cancel` waits for the tool to stop, so that it can
/// say the task is cancelled.
const STOPPING: Duration = Duration::from_secs(2);

/// `tasks_cancel`, once the cancel is recorded: the task once it ended, or
/// as it is after [`STOPPING`].
async fn cancelled(
    runtime: &TaskRuntime,
    id: &TaskId,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let wait = Wait::within(runtime, id, principal, context, STOPPING);
    let record = match wait.follow().await? {
        Followed::Ended(record) | Followed::Pending(record) => record,
        Followed::Abandoned => runtime.current(id, principal).await?,
    };
    Ok(shown::cancelled(&record))
}

/// `tasks_wait`: the tool's outcome once the task ends within `timeout`;
/// at once when it waits for input the caller answers with a tool; the
/// task as it is otherwise.
async fn wait(
    runtime: &TaskRuntime,
    id: &TaskId,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
    timeout: Duration,
) -> Result<CallToolResult, ErrorData> {
    let record = runtime.current(id, principal).await?;
    if record.status().is_terminal() {
        return shown::ended(&record);
    }
    let wait = Wait::within(runtime, id, principal, context, timeout);
    match wait.follow().await? {
        Followed::Ended(record) => shown::ended(&record),
        Followed::Pending(record) => Ok(shown::unfinished(&record, false)),
        Followed::Abandoned => Err(ErrorData::internal_error(
            format!("{TASKS_WAIT} was cancelled"),
            None,
        )),
    }
}

/// `tasks_list`: the caller's unfinished tasks, the first [`LISTED`] of
/// its first [`PAGES`] pages of records (a synchronous call's record, kept
/// for its idempotency key, is no task of its).
async fn list(runtime: &TaskRuntime, principal: &Principal) -> Result<CallToolResult, ErrorData> {
    let mut unfinished: Vec<Arc<PackedRecord>> = Vec::new();
    let mut after: Option<TaskId> = None;
    for _ in 0..PAGES {
        let page = runtime
            .list_tasks_as(principal, after.as_ref(), 100)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(TaskId::new(last.id().to_owned()));
        let last_page = page.len() < 100;
        unfinished.extend(
            page.into_iter()
                .filter(|record| !record.status().is_terminal() && !record.ran_synchronously()),
        );
        if last_page || unfinished.len() >= LISTED {
            break;
        }
    }
    unfinished.truncate(LISTED);
    Ok(shown::listed(&unfinished))
}
