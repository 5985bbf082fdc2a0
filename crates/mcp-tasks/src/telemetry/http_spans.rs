//! The `SERVER` span of a request the serving recipe hands to rmcp's
//! Streamable HTTP service ([`traced`]; nothing without feature `otel`):
//! made here, from the message the recipe's front middleware parsed,
//! because rmcp's service takes only a `ServerHandler` (no wrapper of ours
//! fits there) and runs the handler in a task of its own. The span's
//! context rides in the request's extensions (read back as a
//! [`RequestTrace`](super::server_spans::RequestTrace)) to what the handler
//! starts (a task, its tool's upstream calls), and its outcome is read back
//! from rmcp's JSON answer. The fast paths make their own spans
//! ([`server_spans`](super::server_spans)); a stdio server is wrapped in
//! `server::Traced`.

use std::future::Future;

use axum::response::Response;
use http::request::Parts;
use serde_json::Value;

/// rmcp's `answer` to the request `message` (whose HTTP `parts` it is
/// given), in the request's span when `message` is a JSON-RPC request (not
/// a notification, a response or a batch); `answer` itself without `otel`.
#[inline]
pub(crate) fn traced<A, F>(
    parts: Parts,
    message: &Value,
    answer: A,
) -> impl Future<Output = Response> + use<A, F>
where
    A: FnOnce(Parts) -> F,
    F: Future<Output = Response>,
{
    #[cfg(feature = "otel")]
    {
        use opentelemetry::context::FutureExt as _;
        let mut parts = parts;
        let span = otel_spans::start(&mut parts, message);
        let answer = answer(parts);
        async move {
            match span {
                None => answer.await,
                Some(span) => {
                    let response = answer.with_context(span.clone()).await;
                    otel_spans::finish(&span, response).await
                }
            }
        }
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = message;
        answer(parts)
    }
}

#[cfg(feature = "otel")]
mod otel_spans {
    use axum::body::{Body, Bytes};
    use axum::response::Response;
    use http::request::Parts;
    use http_body_util::BodyExt;
    use opentelemetry::Context;
    use opentelemetry::trace::TraceContextExt;
    use serde_json::{Map, Value};

    use crate::telemetry::Outcome;
    use crate::telemetry::otel;
    use crate::telemetry::server_spans::{InExtensions, TCP, request_span};

    /// Starts the span of the JSON-RPC request `message` (nothing for a
    /// notification, a response or a batch) and leaves its context in
    /// `parts`' extensions.
    pub(super) fn start(parts: &mut Parts, message: &Value) -> Option<Context> {
        let request = message.as_object()?;
        let method = request.get("method")?.as_str()?;
        let id = request.get("id")?;
        let params = request.get("params").and_then(Value::as_object);
        let empty = Map::new();
        let meta = params
            .and_then(|params| params.get("_meta"))
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let tool = (method == "tools/call")
            .then(|| {
                params
                    .and_then(|params| params.get("name"))
                    .and_then(Value::as_str)
            })
            .flatten();
        let header = parts
            .headers
            .get("mcp-protocol-version")
            .and_then(|value| value.to_str().ok());
        let version = meta
            .get("io.modelcontextprotocol/protocolVersion")
            .and_then(Value::as_str)
            .or(header);
        let span = request_span(method, tool, Some(id), meta, TCP, version).context;
        parts.extensions.insert(InExtensions(span.clone()));
        Some(span)
    }

    /// Ends `span` with rmcp's `response`: a JSON answer is read for its
    /// JSON-RPC error (only when the span is recorded); an event stream ends
    /// the span as it starts.
    pub(super) async fn finish(span: &Context, response: Response) -> Response {
        if !span.span().is_recording() || !is_json(&response) {
            otel::end_request(span, &Outcome::Answered);
            return response;
        }
        let (parts, body) = response.into_parts();
        let bytes: Bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                otel::end_request(span, &Outcome::Failed("_OTHER"));
                return Response::from_parts(parts, Body::empty());
            }
        };
        let answer = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
        let outcome = match answer.get("error") {
            Some(error) => Outcome::Error {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            },
            None if answer.pointer("/result/isError") == Some(&Value::Bool(true)) => {
                Outcome::ToolError
            }
            None => Outcome::Answered,
        };
        otel::end_request(span, &outcome);
        Response::from_parts(parts, Body::from(bytes))
    }

    fn is_json(response: &Response) -> bool {
        response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|value| value.as_bytes().starts_with(b"application/json"))
    }
}
