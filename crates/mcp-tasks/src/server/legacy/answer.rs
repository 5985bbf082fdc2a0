//! Answers the rerouted requests of this era's tasks (see the [module
//! docs](super)): `tools/call` with `params.task`, `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel`.

use std::collections::{BTreeMap, HashSet};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use super::wire;
use super::{PREFIX, is_initialize_era, notify};
use crate::server::engine::era::Augmented;
use crate::server::engine::tasks::asking::ask;
use crate::server::engine::tasks::follower::Follower;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::task_not_found;
use crate::store::{Change, Modified, PackedRecord, Principal};
use crate::task::{TaskId, TaskStatus};

/// How many tasks one `tasks/list` page holds.
pub(crate) const LIST_PAGE: usize = 50;

/// The method a rerouted `tools/call` (one that asked for a task) reaches
/// rmcp's custom-request hook under.
pub(crate) const CALL: &str = "mcp-tasks/2025-11-25/tools/call";

/// Answers a rerouted task request (`request.method` under [`PREFIX`]) but
/// a `tools/call`, which needs the server ([`call_tool`]).
pub(crate) async fn answer(
    runtime: &TaskRuntime,
    request: CustomRequest,
    context: RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    let method = request.method.strip_prefix(PREFIX).unwrap_or_default();
    let unknown = || ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method.clone(), None);
    // Only the transports' renaming on initialize-era sessions leads here.
    if !is_initialize_era(&context) {
        return Err(unknown());
    }
    if request.method == CALL {
        return Err(ErrorData::internal_error(
            "this server cannot make tasks for 2025-11-25 clients: its on_custom_request \
             must hand the request to TaskRuntime::serve_custom_request with the server",
            None,
        ));
    }
    if !matches!(
        method,
        "tasks/list" | "tasks/get" | "tasks/cancel" | "tasks/result"
    ) {
        // `tasks/update` is the extension's: this era has no such method.
        return Err(unknown());
    }
    let principal = runtime.principal_of(&context.extensions);
    let params = request.params.unwrap_or(Value::Null);
    if method == "tasks/list" {
        return list(runtime, &principal, &params).await;
    }
    let id = match params.get("taskId") {
        Some(Value::String(id)) => TaskId::new(id.clone()),
        _ => return Err(ErrorData::invalid_params("taskId must be a string", None)),
    };
    match method {
        "tasks/get" => {
            let record = runtime.current(&id, &principal).await?;
            Ok(CustomResult::new(Value::Object(wire::task(&record))))
        }
        "tasks/cancel" => cancel(runtime, &id, &principal).await,
        _ => result(runtime, &id, &principal, &context).await,
    }
}

/// A rerouted `tools/call` that asked for a task ([`CALL`]): the server's
/// own `call_tool`, with the mark that makes the runtime create one.
pub(crate) async fn call_tool<S: ServerHandler>(
    runtime: &TaskRuntime,
    server: &S,
    params: Option<Value>,
    mut context: RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    if !is_initialize_era(&context) {
        return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, CALL, None));
    }
    let Some(Value::Object(mut params)) = params else {
        return Err(ErrorData::invalid_params("tools/call needs params", None));
    };
    let ttl = match params.remove("task") {
        Some(Value::Object(task)) => match task.get("ttl") {
            None | Some(Value::Null) => None,
            Some(ttl) => Some(ttl.as_u64().ok_or_else(|| {
                ErrorData::invalid_params("task.ttl must be a non-negative integer", None)
            })?),
        },
        _ => None,
    };
    let mut call: CallToolRequestParams = serde_json::from_value(Value::Object(params))
        .map_err(|error| ErrorData::invalid_params(format!("tools/call: {error}"), None))?;
    // As rmcp does for the requests it reads: `_meta` moves into the context.
    if let Some(meta) = call.meta.take() {
        context.meta.extend(meta);
    }
    context.extensions.insert(Augmented { ttl });
    let principal = runtime.principal_of(&context.extensions);
    let peer = context.peer.clone();
    match server.call_tool(call, context).await? {
        CallToolResponse::Task(created) => {
            let id = TaskId::new(created.task.task_id.clone());
            // The record, not the handle: a task stored already finished
            // with `isError: true` is `failed` in this era.
            let (answer, version) = match runtime.current(&id, &principal).await {
                Ok(record) => (json!({"task": wire::task(&record)}), record.version()),
                Err(_) => (wire::created(&created.task), 0),
            };
            notify::follow(runtime, peer, id, principal, version);
            Ok(CustomResult::new(answer))
        }
        // The server ran it without the runtime: its result as it is.
        CallToolResponse::Complete(result) => serde_json::to_value(result)
            .map(CustomResult::new)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None)),
        _ => Err(ErrorData::internal_error(
            "the tool asked for input in a way 2025-11-25 clients cannot answer",
            None,
        )),
    }
}

/// `tasks/cancel`: the task is `cancelled` before the answer (its tool is
/// stopped by the runtime as for any cancel), and the answer is the task;
/// -32602 for a task that already ended.
async fn cancel(
    runtime: &TaskRuntime,
    id: &TaskId,
    principal: &Principal,
) -> Result<CustomResult, ErrorData> {
    let record = runtime.current(id, principal).await?;
    let ended = |record: &PackedRecord| {
        ErrorData::invalid_params(
            format!(
                "Cannot cancel task in terminal status: {}",
                Value::Object(wire::task(record))["status"]
                    .as_str()
                    .unwrap_or_default()
            ),
            None,
        )
    };
    if record.status().is_terminal() {
        return Err(ended(&record));
    }
    let cancelled = match runtime.apply(id, &Change::Cancel).await? {
        Modified::Applied(next) => next,
        Modified::Refused(now, _) if *now.status() == TaskStatus::Cancelled => now,
        Modified::Refused(now, _) => return Err(ended(&PackedRecord::pack(now))),
        Modified::Missing => return Err(task_not_found()),
    };
    Ok(CustomResult::new(Value::Object(wire::task(
        &PackedRecord::pack(cancelled),
    ))))
}

/// `tasks/list`: the caller's own tasks, a page at a time.
async fn list(
    runtime: &TaskRuntime,
    principal: &Principal,
    params: &Value,
) -> Result<CustomResult, ErrorData> {
    let after = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(read_cursor(cursor)?),
        Some(_) => return Err(ErrorData::invalid_params("cursor must be a string", None)),
    };
    let mut records = runtime
        .list_tasks_as(principal, after.as_ref(), LIST_PAGE + 1)
        .await?;
    let more = records.len() > LIST_PAGE;
    records.truncate(LIST_PAGE);
    let next = more
        .then(|| records.last().map(|record| cursor(record.id())))
        .flatten();
    let tasks = records
        .iter()
        .map(|record| Value::Object(wire::task(record)))
        .collect();
    let mut answer = Map::new();
    answer.insert("tasks".into(), Value::Array(tasks));
    if let Some(next) = next {
        answer.insert("nextCursor".into(), Value::String(next));
    }
    Ok(CustomResult::new(Value::Object(answer)))
}

/// The cursor after the task `id`. Opaque to clients: they hand it back.
fn cursor(id: &str) -> String {
    format!("after-{id}")
}

/// The task id a [`cursor`] names; -32602 for anything else.
fn read_cursor(cursor: &str) -> Result<TaskId, ErrorData> {
    cursor
        .strip_prefix("after-")
        .filter(|id| {
            (1..=64).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        .map(|id| TaskId::new(id.to_owned()))
        .ok_or_else(|| ErrorData::invalid_params("Invalid cursor", None))
}

/// `tasks/result`: blocks until the task ends and answers its payload;
/// meanwhile every outstanding input request goes to the client on this
/// request's stream, tagged with the task, and each answer answers the
/// task as `tasks/update` would.
async fn result(
    runtime: &TaskRuntime,
    id: &TaskId,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    let mut follower = Follower::new(runtime, id.clone(), principal.clone());
    let mut asking = FuturesUnordered::new();
    // Asked on this stream (answered or not): a client that fails to answer
    // is not asked the same again here; a later `tasks/result` asks again.
    let mut asked = HashSet::new();
    loop {
        tokio::select! {
            next = follower.next() => {
                // `None` only once the runtime is gone.
                let record = next.unwrap_or_else(|| Err(task_not_found()))?;
                if record.status().is_terminal() {
                    return wire::payload(&record).map(CustomResult::new);
                }
                for (key, request) in record.input_requests() {
                    if asked.insert(key.clone()) {
                        // Polled inside this handler, so rmcp sends each request on
                        // the stream of this `tasks/result` (over HTTP, its SSE answer).
                        asking.push(ask(&context.peer, id, key.clone(), request.clone()));
                    }
                }
            }
            Some((key, answer)) = asking.next(), if !asking.is_empty() => {
                match answer {
                    Ok(answer) => {
                        let answers = BTreeMap::from([(key, answer)]);
                        match runtime.update_task_as(id, answers, principal).await {
                            Ok(()) => {}
                            // Gone meanwhile: the next read says so.
                            Err(error) if error.code == ErrorCode::INVALID_PARAMS => {}
                            Err(error) => return Err(error),
                        }
                    }
                    Err(error) => {
                        tracing::debug!(%error, "the client did not answer a task's input request");
                    }
                }
                follower.reread();
            }
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("tasks/result was cancelled", None));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_read_back_and_anything_else_is_refused() {
        let id = TaskId::new("0193a1b2c3d4e5f60123456789abcdef0123456789ab".to_owned());
        assert_eq!(read_cursor(&cursor(id.expose())).unwrap(), id);
        for bad in [
            "",
            "after-",
            "garbage",
            "after-XYZ",
            "after-0123 ",
            "before-0123",
        ] {
            let error = read_cursor(bad).unwrap_err();
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{bad:?}");
        }
    }
}
