//! The client's `CLIENT` span per request it sends (feature `otel`), and
//! the trace context it writes into the request's `params._meta`
//! (`traceparent`, `tracestate`) so that the server continues the trace.
//! Names and attributes as the crate's `otel` module says (OpenTelemetry's
//! [semantic conventions for MCP](https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/)).
//!
//! The span's parent is the caller's current context: a host's span, the
//! span of the request a gateway is answering, or none (a new trace).

use opentelemetry::Context;
use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanKind, TraceContextExt};
use rmcp::model::{ClientRequest, JsonObject, RequestId, ServerResult};

use super::error::Error;
use crate::telemetry::otel::{self, Outcome, RequestAttributes};

/// Starts the span of a request of `method` about to be sent, as a child of
/// the current context.
pub(crate) fn start(method: &str, request: &ClientRequest) -> Context {
    let tool = match request {
        ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
        _ => None,
    };
    otel::start_request(
        SpanKind::Client,
        RequestAttributes {
            method,
            tool,
            ..RequestAttributes::default()
        },
        &Context::current(),
    )
}

/// Starts the span of a request sent as a raw `method` (the 2025-11-25
/// wire): `tools/call` names its tool in `params.name`.
pub(crate) fn start_raw(method: &str, params: &serde_json::Value) -> Context {
    let tool = (method == "tools/call")
        .then(|| params.get("name").and_then(serde_json::Value::as_str))
        .flatten();
    otel::start_request(
        SpanKind::Client,
        RequestAttributes {
            method,
            tool,
            ..RequestAttributes::default()
        },
        &Context::current(),
    )
}

/// Writes the current context's trace context into `meta`.
pub(crate) fn inject(meta: &mut JsonObject) {
    otel::inject(&Context::current(), meta);
}

/// Writes `span`'s trace context into `meta`.
pub(crate) fn inject_span(span: &Context, meta: &mut JsonObject) {
    otel::inject(span, meta);
}

/// Records the id rmcp gave the request.
pub(crate) fn sent(span: &Context, id: &RequestId) {
    let span = span.span();
    if span.is_recording()
        && let Some(id) = serde_json::to_value(id)
            .ok()
            .as_ref()
            .and_then(otel::request_id_text)
    {
        span.set_attribute(KeyValue::new("jsonrpc.request.id", id));
    }
}

/// Ends a request's span with its answer.
pub(crate) fn end(span: &Context, answer: &Result<ServerResult, Error>) {
    match answer {
        Ok(ServerResult::CallToolResult(result)) if result.is_error == Some(true) => {
            otel::end_request(span, &Outcome::ToolError);
        }
        Ok(_) => otel::end_request(span, &Outcome::Answered),
        Err(error) => end_error(span, error),
    }
}

/// Ends a request's span with `error`.
pub(crate) fn end_error(span: &Context, error: &Error) {
    let outcome = match error.rpc_error() {
        Some(rpc) => Outcome::Error {
            code: rpc.code,
            message: &rpc.message,
        },
        None if error.is_timeout() => Outcome::Failed("timeout"),
        None => Outcome::Failed("_OTHER"),
    };
    otel::end_request(span, &outcome);
}
