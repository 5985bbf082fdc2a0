//! Task listens over Streamable HTTP, in front of rmcp's service (see
//! [`listen`](crate::server::transport::listen) for what rmcp 3.11 lacks).
//!
//! [`answer`] answers a POST of `subscriptions/listen` that names
//! `taskIds` with an SSE response of its own: the acknowledgement, then
//! `notifications/tasks`, then, when the server ends the stream, the listen
//! result. It sends `X-Accel-Buffering: no` (so proxies pass events on at
//! once) and a comment line every 15 s while nothing happens. Closing the
//! response ends the subscription, and everything it held goes with it.
//!
//! A stream past the runtime's listen budget (server-wide or per caller,
//! see [`listen`](crate::server::transport::listen)) gets HTTP 503 with
//! `Retry-After` and the JSON-RPC error of the refusal, at once, and its
//! connection is closed after it (the [front](super::super::front)
//! middleware closes every refusal's connection).
//!
//! As on the `tasks/*` fast path, a request that is not exactly a
//! well-formed 2026-07-28 task listen, admitted by the guard, goes to rmcp, which validates
//! it; rmcp does not know `taskIds`, so such a client is acknowledged no
//! task and polls. A well-formed task listen
//! that does not declare the Tasks extension gets -32021 here.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::ErrorData;
use rmcp::model::Extensions;
use serde_json::{Value, json};

use crate::server::TaskRuntime;
use crate::server::engine::admission::refusal::retry_after_secs;
use crate::server::engine::wire::tasks_required;
use crate::server::transport::http::reply;
use crate::server::transport::listen::{
    ACKNOWLEDGED, LISTEN, Subscription, TASK_NOTIFICATION, requested_task_ids,
};
use crate::task::TASKS_EXTENSION;

/// How often an idle stream sends a comment line.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Serves an accepted listen request: its acknowledgement, then its
/// stream of task notifications.
pub(crate) async fn answer(runtime: &TaskRuntime, parts: Parts, listen: Listen) -> Response {
    let requested = match listen.requested {
        Ok(requested) => requested,
        Err(error) => return reply::error(StatusCode::OK, &listen.id, &error),
    };
    if !listen.declared {
        return reply::error(StatusCode::BAD_REQUEST, &listen.id, &tasks_required());
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
/// here rather than through the request's mark, as the front middleware
/// does not mark a listen (its answer is an event stream).
pub(crate) fn busy(id: &Value, error: &ErrorData, retry_after: Duration) -> Response {
    let mut response = reply::error(StatusCode::SERVICE_UNAVAILABLE, id, error);
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_secs(retry_after)),
    );
    response
}

pub(crate) fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/event-stream"))
}

/// A task listen this layer serves.
pub(crate) struct Listen {
    id: Value,
    requested: Result<Vec<String>, ErrorData>,
    declared: bool,
}

/// The request, if it is a well-formed 2026-07-28 listen naming `taskIds`
/// whose version header matches its body.
pub(crate) fn accept(headers: &HeaderMap, message: &Value) -> Option<Listen> {
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
