//! Task listens over Streamable HTTP, in front of rmcp's service (see
//! [`listen`](crate::server::listen) for what rmcp 3.11 lacks).
//!
//! [`listen_tasks`] answers a POST of `subscriptions/listen` that names
//! `taskIds` with an SSE response of its own: the acknowledgement, then
//! `notifications/tasks`, then, when the server ends the stream, the listen
//! result. It sends `X-Accel-Buffering: no` (so proxies pass events on at
//! once) and a comment line every 15 s while nothing happens. Closing the
//! response ends the subscription, and everything it held goes with it.
//!
//! A stream past the runtime's listen budget (server-wide or per caller,
//! see [`listen`](crate::server::listen)) gets HTTP 503 with
//! `Retry-After` and the JSON-RPC error of the refusal, at once.
//!
//! As on the `tasks/*` fast path, a request that is not exactly a
//! well-formed 2026-07-28 task listen, admitted by the guard (or, without
//! it, from a loopback, non-browser client), goes to rmcp, which validates
//! it; rmcp does not know `taskIds`, so such a client is acknowledged no
//! task and polls. A well-formed task listen
//! that does not declare the Tasks extension gets -32021 here.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::ErrorData;
use rmcp::model::Extensions;
use serde_json::{Value, json};

use super::access::admitted;
use super::fast::plain;
use crate::TASKS_EXTENSION;
use crate::server::TaskRuntime;
use crate::server::admission::refusal::retry_after_secs;
use crate::server::listen::{
    ACKNOWLEDGED, LISTEN, Subscription, TASK_NOTIFICATION, requested_task_ids,
};
use crate::server::wire::tasks_required;

/// The largest listen body read.
const MAX_BODY: usize = 1 << 20;
/// How often an idle stream sends a comment line.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Wraps an axum router that serves rmcp's `StreamableHttpService`: POSTs
/// of `subscriptions/listen` naming `taskIds` are served from `runtime`,
/// everything else goes to `router`.
/// [`StreamableHttpServer`](super::StreamableHttpServer) does this for you.
pub fn listen_tasks(router: axum::Router, runtime: TaskRuntime) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(runtime, answer_listen))
}

async fn answer_listen(
    State(runtime): State<TaskRuntime>,
    request: Request,
    next: Next,
) -> Response {
    let is_listen = request
        .headers()
        .get("mcp-method")
        .is_some_and(|method| method == LISTEN);
    if !is_listen
        || request.method() != http::Method::POST
        || !admitted(&request)
        || !accepts_event_stream(request.headers())
    {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            &json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "request body too large"}}),
        );
    };
    let accepted = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|message| accept(&parts.headers, &message));
    let Some(listen) = accepted else {
        // Not for us: rmcp validates and answers.
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    answer(&runtime, parts, listen).await
}

/// Serves an accepted listen request: its acknowledgement, then its
/// stream of task notifications.
pub(super) async fn answer(runtime: &TaskRuntime, parts: Parts, listen: Listen) -> Response {
    let requested = match listen.requested {
        Ok(requested) => requested,
        Err(error) => return refuse(StatusCode::OK, &listen.id, &error),
    };
    if !listen.declared {
        return refuse(StatusCode::BAD_REQUEST, &listen.id, &tasks_required());
    }
    let mut extensions = Extensions::new();
    extensions.insert(parts);
    let caller = runtime.caller_of(&extensions);
    let (acknowledgement, subscription) =
        match Subscription::open(runtime, &caller, listen.id.clone(), requested).await {
            Ok(opened) => opened,
            Err(refused) => return busy(&listen.id, &refused.error, refused.retry_after),
        };
    let events = futures::stream::unfold(
        (Some(acknowledgement), Some(subscription)),
        |(acknowledgement, mut subscription)| async move {
            if let Some(params) = acknowledgement {
                let event = event(&notification(ACKNOWLEDGED, params));
                return Some((event, (None, subscription)));
            }
            let open = subscription.as_mut()?;
            let message = match open.next().await {
                Some(params) => notification(TASK_NOTIFICATION, params),
                None => {
                    let id = open.id().clone();
                    let result = open.result();
                    subscription = None;
                    json!({"jsonrpc": "2.0", "id": id, "result": result})
                }
            };
            Some((event(&message), (None, subscription)))
        },
    );
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn event(message: &Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(message.to_string()))
}

fn notification(method: &str, params: Value) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    message["params"] = params;
    message
}

/// A refusal for load: 503 with `Retry-After` and the JSON-RPC error, set
/// here rather than through the request's mark, so that the public
/// [`listen_tasks`] layer answers it the same way.
pub(super) fn busy(id: &Value, error: &ErrorData, retry_after: Duration) -> Response {
    let mut response = refuse(StatusCode::SERVICE_UNAVAILABLE, id, error);
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_secs(retry_after)),
    );
    response
}

fn refuse(status: StatusCode, id: &Value, error: &ErrorData) -> Response {
    plain(status, &json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

pub(super) fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/event-stream"))
}

/// A task listen this layer serves.
pub(super) struct Listen {
    id: Value,
    requested: Result<Vec<String>, ErrorData>,
    declared: bool,
}

/// The request, if it is a well-formed 2026-07-28 listen naming `taskIds`
/// whose version header matches its body.
pub(super) fn accept(headers: &HeaderMap, message: &Value) -> Option<Listen> {
    if message.get("jsonrpc")? != "2.0" || message.get("method")? != LISTEN {
        return None;
    }
    let id = match message.get("id")? {
        id @ (Value::String(_) | Value::Number(_)) => id.clone(),
        _ => return None,
    };
    let params = message.get("params")?;
    let meta = params.get("_meta")?;
    let version = meta
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()?;
    let header_version = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok());
    if version != "2026-07-28" || header_version != Some(version) {
        return None;
    }
    let capabilities = meta.get("io.modelcontextprotocol/clientCapabilities")?;
    let requested = requested_task_ids(params)?;
    let declared = capabilities
        .get("extensions")
        .and_then(|extensions| extensions.get(TASKS_EXTENSION))
        .is_some();
    Some(Listen {
        id,
        requested,
        declared,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(extensions: Value, notifications: Value) -> Value {
        let mut request = json!({"jsonrpc": "2.0", "id": "l-1", "method": "subscriptions/listen",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let mut capabilities = json!({});
        capabilities["extensions"] = extensions;
        request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
        request["params"]["notifications"] = notifications;
        request
    }

    #[test]
    fn only_well_formed_task_listens_are_served_here() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        let declared = json!({TASKS_EXTENSION: {}});
        let ok = accept(
            &headers,
            &listen(declared.clone(), json!({"taskIds": ["a"]})),
        )
        .unwrap();
        assert_eq!(ok.id, "l-1");
        assert_eq!(ok.requested.unwrap(), vec!["a".to_owned()]);
        assert!(ok.declared);
        let undeclared = accept(&headers, &listen(json!({}), json!({"taskIds": ["a"]}))).unwrap();
        assert!(!undeclared.declared, "answered here with -32021");
        let malformed =
            accept(&headers, &listen(declared.clone(), json!({"taskIds": "a"}))).unwrap();
        assert!(malformed.requested.is_err(), "answered here with -32602");
        assert!(
            accept(
                &headers,
                &listen(declared.clone(), json!({"toolsListChanged": true}))
            )
            .is_none(),
            "no taskIds: rmcp serves it"
        );
        assert!(
            accept(&HeaderMap::new(), &listen(declared, json!({"taskIds": []}))).is_none(),
            "no version header: rmcp answers"
        );
    }
}
