//! The serving recipe's one middleware in front of rmcp's service, and the
//! fast paths' one entrance: the [`guard`](super::guard), then the fast
//! path for the request's `Mcp-Method` ([`fast`](super::fast):
//! [`tasks`](super::fast::tasks) for `tasks/*`,
//! [`listen`](super::fast::listen) for `subscriptions/listen`,
//! [`call`](super::fast::call) for `tools/call`), then rmcp for everything
//! they do not take.
//!
//! Every refusal for load it answers (HTTP 503 or 429) carries
//! `Connection: close`, so the connection closes after it.
//!
//! One layer instead of four: every axum middleware layer clones the
//! service behind it and boxes a future for each request, and each fast
//! path read the body again. Here the guard reads the body once, a
//! `tasks/get` or `tasks/cancel` is read straight from its bytes
//! ([`quick`](super::fast::quick)), and only the other requests are parsed
//! into a `serde_json::Value` (which also answers a body that is not a
//! JSON-RPC message).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use rmcp::ServerHandler;

use serde_json::Value;

use super::fast::call::ToolCalls;
use super::fast::{MCP_METHOD, listen, quick, tasks};
use super::guard::{self, Admitted, Guard};
use crate::server::TaskRuntime;
use crate::server::engine::admission::refusal::{RetryMark, retry_after_secs};
use crate::server::engine::tasks::listening::ListenSlot;
use crate::server::legacy;
use crate::server::transport::listen::LISTEN;
use crate::telemetry::http_spans;
use crate::telemetry::metrics;

/// What the middleware needs: the guard's settings, the runtime for
/// `tasks/*` and listens, the server for `tools/call`.
pub(super) struct Front<S: ServerHandler> {
    pub(super) guard: Guard,
    pub(super) runtime: TaskRuntime,
    pub(super) calls: ToolCalls<S>,
}

/// The middleware, in the quiet scope (see [`quiet`](crate::quiet)): the
/// service loops rmcp starts for a request, and the answers it streams,
/// log no message.
pub(super) async fn front<S>(
    State(front): State<Arc<Front<S>>>,
    request: Request,
    next: Next,
) -> Response
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let start = std::time::Instant::now();
    let method = request
        .headers()
        .get(&MCP_METHOD)
        .and_then(|value| value.to_str().ok())
        .map_or("other", metrics::method_label);
    let mut response = crate::quiet::scope(serve(front, request, next)).await;
    close_if_refused(&mut response);
    if is_event_stream(&response) {
        // A stream answers as it goes: counted when it starts.
        metrics::request("http", method, "stream", start.elapsed());
        return response;
    }
    response.map(|body| {
        Body::new(Metered {
            body,
            method,
            start,
            code: None,
        })
    })
}

async fn serve<S>(front: Arc<Front<S>>, request: Request, next: Next) -> Response
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let (parts, bytes) = match guard::read(&front.guard, request).await {
        Ok(Admitted::Post(parts, bytes)) => (parts, bytes),
        Ok(Admitted::Session(request)) => return rmcp(next, request).await,
        Err(refusal) => return refusal,
    };
    if let Some(method) = tasks::tasks_method(&parts.headers)
        && let Some(call) = quick::accept(method, &parts.headers, &bytes)
    {
        return tasks::respond(&front.runtime, parts, call).await;
    }
    let mut parts = parts;
    let mark = RetryMark::default();
    parts.extensions.insert(mark.clone());
    retry_later(answer(front, parts, bytes, next).await, &mark)
}

/// Everything but the `tasks/get` and `tasks/cancel` that `quick` read.
async fn answer<S>(
    front: Arc<Front<S>>,
    parts: http::request::Parts,
    mut bytes: Bytes,
    next: Next,
) -> Response
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let method = tasks::tasks_method(&parts.headers);
    let session = parts.headers.contains_key(guard::SESSION_ID);
    // A plain `tools/call`, read from its bytes: no `Value` to build.
    if !session
        && method.is_none()
        && let Some(call) = front.calls.read(&parts.headers, &bytes)
    {
        return front.calls.answer(parts, call).await;
    }
    let mut message = match guard::message(&bytes, session) {
        Ok(message) => message,
        Err(refusal) => return refusal,
    };
    // The 2025-11-25 task requests of a session reach the runtime past
    // rmcp's parsing (see `server::legacy`).
    if session
        && let Value::Object(fields) = &mut message
        && legacy::reroute(fields)
    {
        bytes = message.to_string().into();
        return rmcp(next, Request::from_parts(parts, Body::from(bytes))).await;
    }
    let named = |method: &str| {
        parts
            .headers
            .get(&MCP_METHOD)
            .is_some_and(|value| value == method)
    };
    if let Some(method) = method {
        // A `tasks/get` or `tasks/cancel` that the fast path answers was
        // read by `quick` already: what it left goes to rmcp.
        if method == "tasks/update"
            && let Some(call) = tasks::accept_update(&parts.headers, &message)
        {
            return tasks::respond(&front.runtime, parts, call).await;
        }
    } else if named(LISTEN) {
        if listen::accepts_event_stream(&parts.headers)
            && let Some(listen) = listen::accept(&parts.headers, &message)
        {
            return listen::answer(&front.runtime, parts, listen).await;
        }
        // A listen rmcp serves (tool list changes, say) holds its
        // connection as long as a task listen: it counts against the same
        // budget, for as long as its answer is open.
        let mut extensions = rmcp::model::Extensions::new();
        extensions.insert(parts.clone());
        let quota = front.runtime.caller_of(&extensions).quota;
        let slot = match front.runtime.listen_slot(&quota) {
            Ok(slot) => slot,
            Err(refusal) => {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                let refused = crate::server::transport::listen::Refused::from(refusal);
                return listen::busy(&id, &refused.error, refused.retry_after);
            }
        };
        let response = rmcp_traced(next, parts, bytes, &message).await;
        return response.map(|body| Body::new(Holding(body, slot)));
    } else if named("tools/call")
        && let Some(accepted) = front.calls.accepts(&parts.headers, &message)
    {
        return front.calls.answer_value(parts, message, accepted).await;
    }
    // Not for a fast path: rmcp validates and answers.
    rmcp_traced(next, parts, bytes, &message).await
}

/// rmcp's answer to the request `message` (read from `bytes`), in its
/// span with feature `otel` (see `telemetry::http_spans`).
async fn rmcp_traced(
    next: Next,
    parts: http::request::Parts,
    bytes: Bytes,
    message: &Value,
) -> Response {
    http_spans::traced(parts, message, |parts| {
        rmcp(next, Request::from_parts(parts, Body::from(bytes)))
    })
    .await
}

/// `response` as a 503 with `Retry-After` when the request was refused for
/// load (see [`refusal`](crate::server::engine::admission::refusal)), unless it
/// is an event stream.
fn retry_later(mut response: Response, mark: &RetryMark) -> Response {
    let Some(retry_after) = mark.get() else {
        return response;
    };
    if is_event_stream(&response) {
        return response;
    }
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from(retry_after_secs(retry_after)),
    );
    response
}

/// A refusal for load (503: the listen budget, admission, a draining
/// server, an unreachable OAuth issuer; or a 429) closes its connection: a
/// refused client that keeps its connection would hold a place in the
/// connection bound for nothing. hyper closes the connection once it has
/// written an answer with `Connection: close`.
fn close_if_refused(response: &mut Response) {
    if matches!(
        response.status(),
        http::StatusCode::SERVICE_UNAVAILABLE | http::StatusCode::TOO_MANY_REQUESTS
    ) {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"))
}

/// rmcp's answer to `request`; an event stream is read in the quiet scope
/// too (rmcp logs each message of a stateless one as it is read).
async fn rmcp(next: Next, request: Request) -> Response {
    let response = next.run(request).await;
    if is_event_stream(&response) {
        response.map(|body| Body::new(Quiet(body)))
    } else {
        response
    }
}

/// A body read in the quiet scope.
struct Quiet(Body);

impl HttpBody for Quiet {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        crate::quiet::in_scope(|| Pin::new(&mut self.0).poll_frame(cx))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// A body that holds a listen stream's place until it is dropped.
struct Holding(
    Body,
    #[allow(dead_code, reason = "held for its Drop")] ListenSlot,
);

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// An answer's body that counts its request in the metrics once it is
/// sent (or dropped), with the JSON-RPC code read from its first bytes.
struct Metered {
    body: Body,
    method: &'static str,
    start: std::time::Instant,
    code: Option<&'static str>,
}

impl HttpBody for Metered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if self.code.is_none()
            && let Poll::Ready(Some(Ok(frame))) = &frame
            && let Some(data) = frame.data_ref()
        {
            self.code = Some(metrics::answer_code(data));
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        let code = self.code.unwrap_or("none");
        metrics::request("http", self.method, code, self.start.elapsed());
    }
}
