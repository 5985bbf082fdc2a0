//! The 2025-11-25 requests of a `TasksClient`: `tools/call` with
//! `params.task`, `tools/list` for each tool's `execution.taskSupport`,
//! `tasks/get`, `tasks/result` and `tasks/cancel`, and how their answers
//! become the same types as the extension's.

use std::collections::HashMap;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{ClientRequest, CustomRequest, InputResponses, JsonObject, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use super::{ServerTasks, ToolTasks};
use crate::client::error::{Error, ProtocolViolation};
use crate::client::read::{parse_call_tool_result, to_value};
use crate::client::state::{Era, TaskState};
use crate::client::{CallOptions, CallResponse, TasksClient};
use crate::task::{TaskId, TaskStatus, saturating_millis};

impl<H: ClientHandler> TasksClient<H> {
    /// True when this connection's tasks are 2025-11-25's: it was opened
    /// with `initialize` (2025-11-25 or older) and the server does not
    /// advertise the Tasks extension. A server that advertises the extension
    /// in its `initialize` answer takes the extension's requests, declared per
    /// request, on that connection too (rmcp's `TaskManager` and
    /// [`TaskRuntime`](crate::server::TaskRuntime) servers do).
    pub(crate) fn initialize_era(&self) -> bool {
        self.peer()
            .peer_info()
            .is_some_and(|info| info.protocol_version.has_initialize())
            && !self.server_supports()
    }

    /// What the 2025-11-25 server declared in `capabilities.tasks`:
    /// `Some(None)` when it declared nothing, `None` when it cannot be told
    /// (the connection was built without a [`Tap`](super::Tap)).
    pub(crate) fn legacy_server_tasks(&self) -> Option<Option<ServerTasks>> {
        self.legacy.as_ref()?.server_tasks()
    }

    /// Sends one request and returns its result as the server sent it (when
    /// the tap kept it) or as rmcp re-serializes what it read.
    pub(crate) async fn send_legacy(
        &self,
        method: &'static str,
        params: Value,
        meta: &JsonObject,
        timeout: Option<Duration>,
    ) -> Result<Value, Error> {
        let span = crate::telemetry::client_spans::start_raw(method, &params);
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let mut options = PeerRequestOptions::no_options();
        // The request's trace context; the caller's entries win.
        let meta = crate::telemetry::client_spans::with_trace(&span, meta);
        if !meta.is_empty() {
            options = options.with_meta(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
                meta.into_owned(),
            )));
        }
        options.timeout = timeout;
        let unusable = self.watch_lines(method);
        let handle = self
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|error| Error::from_service(method, error));
        if let Err(error) = &handle {
            span.end_error(error);
        }
        let handle = handle?;
        span.sent(&handle.id);
        let id = handle.id.clone();
        let typed = self.answer(method, handle, unusable).await;
        span.end_answer(&typed);
        let typed = typed?;
        match self.legacy.as_ref().and_then(|link| link.take_answer(&id)) {
            Some(raw) => Ok(raw),
            None => Ok(typed_value(typed)),
        }
    }

    /// `tools/call` in the 2025-11-25 era: task-augmented when the server and
    /// the tool allow it (and `options.declare_tasks`), plainly otherwise.
    pub(crate) async fn call_tool_legacy(
        &self,
        name: String,
        arguments: Option<JsonObject>,
        options: &CallOptions,
    ) -> Result<CallResponse, Error> {
        let augment = options.declare_tasks && self.runs_as_task(&name, options.timeout).await?;
        let mut params = json!({ "name": name });
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        if augment {
            params["task"] = match options.task_ttl {
                Some(ttl) => json!({ "ttl": saturating_millis(ttl) }),
                None => json!({}),
            };
        }
        // Input for the task may come before its wait starts: it is held.
        let _in_flight = augment
            .then(|| self.legacy.as_ref().map(|link| link.task_call()))
            .flatten();
        let value = self
            .send_legacy("tools/call", params, &options.meta, options.timeout)
            .await?;
        match value.get("task") {
            Some(Value::Object(_)) => {
                let state = TaskState::from_json(value)?.in_era(Era::Legacy);
                if let Some(link) = &self.legacy {
                    link.task_created(&state.id);
                }
                Ok(CallResponse::Task(state))
            }
            _ => parse_call_tool_result(&value).map(CallResponse::Complete),
        }
    }

    /// Whether `tools/call` of `name` is to be task-augmented: the server
    /// declared `tasks.requests.tools.call` and the tool's `taskSupport` is
    /// `optional` or `required`.
    async fn runs_as_task(&self, name: &str, timeout: Option<Duration>) -> Result<bool, Error> {
        let Some(link) = &self.legacy else {
            return Ok(false);
        };
        let Some(Some(server)) = link.server_tasks() else {
            return Ok(false);
        };
        if !server.tools_call {
            return Ok(false);
        }
        if let Some(tool) = link.cached_tool(name) {
            return Ok(tool.augments());
        }
        // A tool missing from the listing is listed once more: a server
        // may add tools as it handles `notifications/initialized`, which over
        // HTTP can cross the first `tools/list` (server-everything does).
        for _ in 0..2 {
            let generation = link.tools_generation();
            let Some(tools) = self.list_tool_tasks(timeout).await? else {
                return Ok(false);
            };
            let tool = tools.get(name).copied();
            link.store_tools(generation, tools);
            if let Some(tool) = tool {
                return Ok(tool.augments());
            }
        }
        Ok(false)
    }

    /// Every tool's `execution.taskSupport`, following `nextCursor`; `None`
    /// when the tap did not keep a page (rmcp's typed tools have no `execution`).
    async fn list_tool_tasks(
        &self,
        timeout: Option<Duration>,
    ) -> Result<Option<HashMap<String, ToolTasks>>, Error> {
        let Some(link) = &self.legacy else {
            return Ok(None);
        };
        let mut tools = HashMap::new();
        let mut cursor: Option<String> = None;
        // A server that keeps handing out cursors is stopped after this many pages.
        for _ in 0..1000 {
            let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor.take());
            let request =
                ClientRequest::ListToolsRequest(rmcp::model::ListToolsRequest::with_param(params));
            let mut options = PeerRequestOptions::no_options();
            options.timeout = timeout;
            let handle = self
                .peer()
                .send_request_with_option(request, options)
                .await
                .map_err(|error| Error::from_service("tools/list", error))?;
            let id = handle.id.clone();
            handle
                .await_response()
                .await
                .map_err(|error| Error::from_service("tools/list", error))?;
            let Some(page) = link.take_answer(&id) else {
                return Ok(None);
            };
            for tool in page
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = tool.get("name").and_then(Value::as_str) {
                    tools.insert(name.to_owned(), ToolTasks::from_tool(tool));
                }
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(Some(tools))
    }

    /// `tasks/get` in the 2025-11-25 era: a bare task, no payload.
    pub(crate) async fn get_legacy(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<TaskState, Error> {
        let value = self
            .send_legacy(
                "tasks/get",
                json!({"taskId": id.expose()}),
                &JsonObject::new(),
                timeout,
            )
            .await?;
        read_task("tasks/get", value)
    }

    /// `tasks/cancel` in the 2025-11-25 era. The server answers with the
    /// task (cancelled) or, for a task that already ended, -32602; then the
    /// ended task is read with `tasks/get` and returned, so that cancelling a
    /// finished task succeeds and changes nothing, as in the extension.
    pub(crate) async fn cancel_legacy(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<TaskState, Error> {
        let answer = self
            .send_legacy(
                "tasks/cancel",
                json!({"taskId": id.expose()}),
                &JsonObject::new(),
                timeout,
            )
            .await;
        match answer {
            Ok(value) => read_task("tasks/cancel", value),
            Err(error) if error.is_unknown_task() => match self.get_legacy(id, timeout).await {
                Ok(state) if state.status.is_terminal() => Ok(state),
                _ => Err(error),
            },
            Err(error) => Err(error),
        }
    }

    /// `tasks/result`: blocks until the task ends, then answers with the
    /// original request's result, or its JSON-RPC error.
    pub(crate) async fn result_legacy(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<JsonObject, Error> {
        let value = self
            .send_legacy(
                "tasks/result",
                json!({"taskId": id.expose()}),
                &JsonObject::new(),
                timeout,
            )
            .await?;
        match value {
            Value::Object(result) => Ok(result),
            other => Err(Error::protocol(
                ProtocolViolation::MalformedResult(
                    "tasks/result did not answer with an object".into(),
                ),
                Some(other),
            )),
        }
    }

    /// `update` in the 2025-11-25 era: answers input requests of `id` that a
    /// wait left unanswered, by key; other keys are ignored, as servers
    /// ignore keys that are not outstanding.
    pub(crate) fn update_legacy(
        &self,
        id: &TaskId,
        mut responses: InputResponses,
    ) -> Result<(), Error> {
        let Some(link) = &self.legacy else {
            return Err(Error::Usage(
                "a 2025-11-25 server asks for input with its own requests; build the client on \
                 client::legacy::Handler to answer them outside a wait",
            ));
        };
        let keys: Vec<&str> = responses.keys().map(String::as_str).collect();
        for pending in link.take_parked(id, &keys) {
            if let Some(response) = responses.remove(&pending.key) {
                // The server may have given up on the request; nothing to tell it then.
                let _ = pending.respond.send(Ok(response));
            }
        }
        Ok(())
    }
}

/// Reads a bare 2025-11-25 task (from `tasks/get` or `tasks/cancel`).
fn read_task(method: &str, value: Value) -> Result<TaskState, Error> {
    if value.get("taskId").is_none() || value.get("status").is_none() {
        return Err(Error::protocol(
            ProtocolViolation::UnexpectedResult(format!("{method} did not answer with a task")),
            Some(value),
        ));
    }
    Ok(TaskState::from_json(value)?.in_era(Era::Legacy))
}

/// The JSON of a result rmcp read into its types, without what those types
/// invent for a 2025-11-25 answer: a `resultType`, and the `ttlMs: null` of a
/// task whose `ttl` rmcp does not read (absent is unknown; `null` would say
/// unlimited).
fn typed_value(result: ServerResult) -> Value {
    let task = matches!(result, ServerResult::GetTaskResult(_));
    let mut value = to_value(result);
    if let Value::Object(fields) = &mut value {
        fields.remove("resultType");
        if task && fields.get("ttlMs") == Some(&Value::Null) {
            fields.remove("ttlMs");
        }
    }
    value
}

/// The status a 2025-11-25 payload gives a task whose last state read was
/// not terminal yet (the server answered `tasks/result` first).
pub(super) fn ended_by_payload(state: &mut TaskState) {
    if !state.status.is_terminal() {
        state.status = TaskStatus::Completed;
    }
}
