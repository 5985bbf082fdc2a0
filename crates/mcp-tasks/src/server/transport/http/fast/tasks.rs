//! The `tasks/get`, `tasks/update` and `tasks/cancel` fast path: which
//! requests it takes, and their answers from the runtime.
//!
//! Polls are most of a task server's traffic, and rmcp's Streamable HTTP
//! service spends most of a small request's time in its own dispatch: the
//! front middleware answers a well-formed `tasks/*` request with
//! [`respond`], from the runtime directly, as one plain JSON body. A
//! `tasks/get` or `tasks/cancel` is read from its bytes by
//! [`quick`](super::quick); a `tasks/update` by [`accept_update`] from the
//! `serde_json::Value` the guard parsed. See the [folder's docs](super) for
//! what must match rmcp.
//!
//! One deliberate leniency: a `tasks/*` request *without* `Mcp-Name` is
//! answered (the extension says clients MUST send it; fastmcp-tasks' client
//! does not, and the header only mirrors the body's `taskId`). A request whose
//! `Mcp-Name` differs from the body is refused by rmcp with -32020.

use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::ErrorData;
use rmcp::model::{GetTaskResult, InputResponses};
use serde_json::{Value, json};

use super::body::{ack_answer, get_task_answer};
use super::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use crate::server::TaskRuntime;
use crate::server::engine::wire::detailed_task;
use crate::server::transport::http::{reply, reply::json_body};
use crate::task::{TASKS_EXTENSION, TaskId};
use crate::telemetry::instrument;
use crate::telemetry::server_spans;

/// The `tasks/*` method a request's `Mcp-Method` header names, if any.
pub(crate) fn tasks_method(headers: &HeaderMap) -> Option<&'static str> {
    match headers.get(&MCP_METHOD).map(HeaderValue::as_bytes) {
        Some(b"tasks/get") => Some("tasks/get"),
        Some(b"tasks/update") => Some("tasks/update"),
        Some(b"tasks/cancel") => Some("tasks/cancel"),
        _ => None,
    }
}

/// Answers an accepted `tasks/*` request from the runtime.
pub(crate) async fn respond(runtime: &TaskRuntime, parts: Parts, call: Call) -> Response {
    let span = server_spans::request_span_w3c(
        call.method.name(),
        &call.id,
        call.trace.parent.as_deref(),
        call.trace.state.as_deref(),
        server_spans::TCP,
        Some("2026-07-28"),
    );
    let (response, error) = instrument(answer(runtime, parts, call), span.clone()).await;
    span.end_with(error.as_ref());
    response
}

/// The answer to an accepted `tasks/*` request, with its JSON-RPC error if
/// it is one (for its span).
async fn answer(runtime: &TaskRuntime, parts: Parts, call: Call) -> (Response, Option<ErrorData>) {
    let principal = runtime.principal_of_parts(parts);
    let id = TaskId::new(call.task_id);
    let outcome: Result<Option<Vec<u8>>, ErrorData> = match call.method {
        Method::Get => match runtime.current(&id, &principal).await {
            Ok(record) => match get_task_answer(&call.id, &record) {
                Some(body) => Ok(Some(body)),
                // What the writer leaves to serde (input requests, odd records).
                None => detailed_task(&record)
                    .and_then(|task| {
                        serde_json::to_value(GetTaskResult::new(task)).map_err(internal)
                    })
                    .map(|result| {
                        Some(
                            json!({"jsonrpc": "2.0", "id": call.id, "result": result})
                                .to_string()
                                .into_bytes(),
                        )
                    }),
            },
            Err(error) => Err(error),
        },
        Method::Update(responses) => runtime
            .update_task_as(&id, responses, &principal)
            .await
            .map(|()| ack_answer(&call.id)),
        Method::Cancel => runtime
            .cancel_task_as(&id, &principal)
            .await
            .map(|()| ack_answer(&call.id)),
    };
    match outcome {
        Ok(Some(body)) => (json_body(StatusCode::OK, body), None),
        Ok(None) => {
            let error = internal_message("cannot write the answer");
            (reply::error(StatusCode::OK, &call.id, &error), Some(error))
        }
        Err(error) => (reply::error(StatusCode::OK, &call.id, &error), Some(error)),
    }
}

fn internal_message(what: &str) -> ErrorData {
    ErrorData::internal_error(what.to_owned(), None)
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "used as a `map_err` function"
)]
fn internal(error: serde_json::Error) -> ErrorData {
    ErrorData::internal_error(format!("cannot encode the task: {error}"), None)
}

#[cfg_attr(any(test, feature = "__fuzzing"), derive(PartialEq, Debug))]
pub(crate) enum Method {
    Get,
    Update(InputResponses),
    Cancel,
}

impl Method {
    /// The JSON-RPC method.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Method::Get => "tasks/get",
            Method::Update(_) => "tasks/update",
            Method::Cancel => "tasks/cancel",
        }
    }
}

/// An accepted `tasks/*` request.
#[cfg_attr(any(test, feature = "__fuzzing"), derive(PartialEq, Debug))]
pub(crate) struct Call {
    pub(super) id: Value,
    task_id: String,
    method: Method,
    trace: Trace,
}

/// The W3C trace context of a request's `_meta`, as strings (the string
/// values of `traceparent` and `tracestate`; another shape is none).
/// Both readers read it whatever the features, so that they stay alike;
/// only the spans of feature `otel` use it.
#[derive(Default)]
#[cfg_attr(any(test, feature = "__fuzzing"), derive(PartialEq, Debug))]
pub(crate) struct Trace {
    pub(super) parent: Option<String>,
    pub(super) state: Option<String>,
}

impl Trace {
    /// Read from a `_meta` object.
    fn of(meta: &Value) -> Self {
        let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_owned);
        Self {
            parent: text("traceparent"),
            state: text("tracestate"),
        }
    }
}

impl Call {
    pub(super) fn new(id: Value, task_id: String, method: Method) -> Self {
        Self {
            id,
            task_id,
            method,
            trace: Trace::default(),
        }
    }

    pub(super) fn with_trace(mut self, trace: Trace) -> Self {
        self.trace = trace;
        self
    }
}

/// Whether the headers fit a 2026-07-28 `tasks/*` body of `version` naming
/// `task_id`: `MCP-Protocol-Version` is `2026-07-28` like the body's, and
/// `Mcp-Name`, if it is there, names the task.
pub(super) fn headers_fit(headers: &HeaderMap, version: &str, task_id: &str) -> bool {
    let header = |name: &HeaderName| headers.get(name).and_then(|value| value.to_str().ok());
    // A missing Mcp-Name is tolerated (fastmcp-tasks' client, among others,
    // does not send it on tasks/*; the body's taskId is what counts, and the
    // caller binding still applies). A present one must match: otherwise
    // rmcp answers -32020.
    version == "2026-07-28"
        && header(&MCP_PROTOCOL_VERSION) == Some(version)
        && header(&MCP_NAME).is_none_or(|name| name == task_id)
}

/// A `tasks/update` that the fast path answers, read from the guard's
/// `Value` (see [`accept`]).
pub(crate) fn accept_update(headers: &HeaderMap, message: &Value) -> Option<Call> {
    accept("tasks/update", headers, message)
}

/// The request, if it is exactly what the fast path answers: a JSON-RPC
/// request for `method` whose headers match its body, with 2026-07-28
/// `_meta` that declares the Tasks extension.
///
/// The server reads only `tasks/update` so ([`accept_update`]); for
/// `tasks/get` and `tasks/cancel` this is the reference that their one
/// reader, [`quick`](super::quick), is held to by its tests and the fuzz
/// target `server_reads_request`: the same call for every body.
pub(crate) fn accept(method: &str, headers: &HeaderMap, message: &Value) -> Option<Call> {
    let Value::Object(message) = message else {
        return None;
    };
    if message.get("jsonrpc")? != "2.0" || message.get("method")? != method {
        return None;
    }
    let id = match message.get("id")? {
        id @ (Value::String(_) | Value::Number(_)) => id.clone(),
        _ => return None,
    };
    let Value::Object(params) = message.get("params")? else {
        return None;
    };
    let meta = params.get("_meta")?;
    let version = meta
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()?;
    meta.get("io.modelcontextprotocol/clientCapabilities")?
        .get("extensions")?
        .get(TASKS_EXTENSION)?;
    let task_id = params.get("taskId")?.as_str()?;
    if !headers_fit(headers, version, task_id) {
        return None;
    }
    let method = match method {
        "tasks/get" => Method::Get,
        "tasks/cancel" => Method::Cancel,
        _ => match params.get("inputResponses")? {
            Value::Object(responses) => Method::Update(
                responses
                    .iter()
                    .map(|(key, response)| (key.clone(), response.clone()))
                    .collect(),
            ),
            _ => return None,
        },
    };
    Some(Call::new(id, task_id.to_owned(), method).with_trace(Trace::of(meta)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn get(id: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": id,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}}})
    }

    #[test]
    fn only_exact_requests_take_the_fast_path() {
        let good = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-name", "t1")]);
        assert!(accept("tasks/get", &good, &get("t1")).is_some());
        // A name that does not match the body, a missing version header,
        // a missing capability: rmcp answers those (-32020, -32021).
        assert!(accept("tasks/get", &good, &get("t2")).is_none());
        let no_name = headers(&[("mcp-protocol-version", "2026-07-28")]);
        assert!(
            accept("tasks/get", &no_name, &get("t1")).is_some(),
            "a missing Mcp-Name is tolerated"
        );
        let no_version = headers(&[("mcp-name", "t1")]);
        assert!(accept("tasks/get", &no_version, &get("t1")).is_none());
        let mut undeclared = get("t1");
        undeclared["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
        assert!(accept("tasks/get", &good, &undeclared).is_none());
        assert!(
            accept("tasks/cancel", &good, &get("t1")).is_none(),
            "method mismatch"
        );
        let mut update = get("t1");
        update["method"] = json!("tasks/update");
        assert!(
            accept("tasks/update", &good, &update).is_none(),
            "no inputResponses"
        );
        update["params"]["inputResponses"] = json!({"k": {"action": "decline"}});
        assert!(accept("tasks/update", &good, &update).is_some());
    }
}
