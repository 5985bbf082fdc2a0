//! A fast path for `tasks/get`, `tasks/update` and `tasks/cancel` over
//! Streamable HTTP.
//!
//! rmcp's Streamable HTTP service spends most of a small request's time in
//! its own dispatch. Polls are most of a task server's traffic, so
//! [`fast_tasks`] answers well-formed `tasks/*` requests from the runtime
//! directly, as one plain JSON body, and hands every other request (and
//! every `tasks/*` request it does not fully accept: a header that does not
//! match the body, a missing capability) to the rmcp service behind it,
//! which validates and answers as usual. In the serving recipe it serves
//! every request the guard admitted (its `Host`, `Origin` and token checked
//! for all routes alike, see [`access`](super::access) and
//! [`front`](super::front)); as a layer of one's own, without the guard,
//! only loopback requests without `Origin`. `tasks/get` and `tasks/cancel`
//! bodies are read straight from their bytes where they can be
//! ([`quick`](super::quick)). Delete this module the day rmcp's own path is
//! as fast.
//!
//! One deliberate leniency: a `tasks/*` request *without* `Mcp-Name` is
//! answered (the extension says clients MUST send it; fastmcp-tasks' client
//! does not, and the header only mirrors the body's `taskId`). A request whose
//! `Mcp-Name` differs from the body is refused by rmcp with -32020.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::ErrorData;
use rmcp::model::{Extensions, GetTaskResult, InputResponses};
use serde_json::{Value, json};

use super::access::admitted;
use super::body::{ack_answer, get_task_answer};
use super::guard::refuse;
use crate::TASKS_EXTENSION;
use crate::server::TaskRuntime;
use crate::server::wire::detailed_task;
use crate::task::TaskId;

/// The largest `tasks/*` body answered on the fast path.
pub(super) const MAX_BODY: usize = 4 << 20;

/// Wraps an axum router that serves rmcp's `StreamableHttpService`: well-formed
/// `tasks/*` POSTs are answered from `runtime`, everything else goes to `router`.
/// [`StreamableHttpServer`](super::StreamableHttpServer) does this for you.
///
/// ```ignore
/// let router = axum::Router::new().nest_service("/mcp", rmcp_service);
/// let router = mcp_tasks::server::http::fast_tasks(router, runtime);
/// ```
pub fn fast_tasks(router: axum::Router, runtime: TaskRuntime) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(runtime, answer_tasks))
}

async fn answer_tasks(
    State(runtime): State<TaskRuntime>,
    request: Request,
    next: Next,
) -> Response {
    let Some(method) = tasks_method(request.headers()) else {
        return next.run(request).await;
    };
    if request.method() != http::Method::POST || !admitted(&request) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            "Invalid Request: the request body is too large",
            &Value::Null,
        );
    };
    let accepted = super::quick::accept(method, &parts.headers, &bytes).or_else(|| {
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|message| accept(method, &parts.headers, &message))
    });
    match accepted {
        Some(call) => respond(&runtime, parts, call).await,
        // Not for the fast path: rmcp validates and answers.
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// The `tasks/*` method a request's `Mcp-Method` header names, if any.
pub(super) fn tasks_method(headers: &HeaderMap) -> Option<&'static str> {
    match headers.get("mcp-method").map(HeaderValue::as_bytes) {
        Some(b"tasks/get") => Some("tasks/get"),
        Some(b"tasks/update") => Some("tasks/update"),
        Some(b"tasks/cancel") => Some("tasks/cancel"),
        _ => None,
    }
}

/// Answers an accepted `tasks/*` request from the runtime.
pub(super) async fn respond(runtime: &TaskRuntime, parts: Parts, call: Call) -> Response {
    let mut extensions = Extensions::new();
    extensions.insert(parts);
    let principal = runtime.principal_of(&extensions);
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
        Ok(Some(body)) => json_body(StatusCode::OK, body),
        Ok(None) => plain(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": call.id,
                "error": internal_message("cannot write the answer")}),
        ),
        Err(error) => plain(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": call.id, "error": error}),
        ),
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

pub(super) fn plain(status: StatusCode, body: &Value) -> Response {
    json_body(status, body.to_string().into_bytes())
}

/// A JSON answer with `status`.
pub(super) fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// No `Origin` and a loopback `Host`: what the fast path serves without the
/// guard in front (which checks both for every route).
pub(super) fn local_and_headless(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::ORIGIN) {
        return false;
    }
    let Some(Ok(host)) = headers.get(header::HOST).map(HeaderValue::to_str) else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

#[cfg_attr(any(test, feature = "fuzzing"), derive(PartialEq, Debug))]
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
#[cfg_attr(any(test, feature = "fuzzing"), derive(PartialEq, Debug))]
pub(crate) struct Call {
    pub(super) id: Value,
    task_id: String,
    method: Method,
}

impl Call {
    pub(super) fn new(id: Value, task_id: String, method: Method) -> Self {
        Self {
            id,
            task_id,
            method,
        }
    }
}

/// Whether the headers fit a 2026-07-28 `tasks/*` body of `version` naming
/// `task_id`: `MCP-Protocol-Version` is `2026-07-28` like the body's, and
/// `Mcp-Name`, if it is there, names the task.
pub(super) fn headers_fit(headers: &HeaderMap, version: &str, task_id: &str) -> bool {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    // A missing Mcp-Name is tolerated (fastmcp-tasks' client, among others,
    // does not send it on tasks/*; the body's taskId is what counts, and the
    // caller binding still applies). A present one must match: otherwise
    // rmcp answers -32020.
    version == "2026-07-28"
        && header("mcp-protocol-version") == Some(version)
        && header("mcp-name").is_none_or(|name| name == task_id)
}

/// The request, if it is exactly what the fast path answers: a JSON-RPC
/// request for `method` whose headers match its body, with 2026-07-28
/// `_meta` that declares the Tasks extension.
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
    Some(Call::new(id, task_id.to_owned(), method))
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

    #[test]
    fn browsers_and_foreign_hosts_go_through_rmcp() {
        assert!(local_and_headless(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(local_and_headless(&headers(&[("host", "localhost")])));
        assert!(local_and_headless(&headers(&[("host", "[::1]:1")])));
        assert!(!local_and_headless(&headers(&[("host", "example.com")])));
        assert!(!local_and_headless(&headers(&[(
            "host",
            "127.0.0.1.evil:80"
        )])));
        assert!(!local_and_headless(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://localhost:3000")
        ])));
        assert!(!local_and_headless(&HeaderMap::new()));
    }
}
