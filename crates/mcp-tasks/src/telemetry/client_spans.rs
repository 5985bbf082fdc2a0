//! The client's `CLIENT` span per request it sends, and the trace context
//! it writes into the request's `params._meta` (`traceparent`,
//! `tracestate`) so that the server continues the trace; nothing without
//! feature `otel`. Names and attributes as [`otel`](super::otel) says
//! (OpenTelemetry's
//! [semantic conventions for MCP](https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/)).
//!
//! The span's parent is the caller's current context: a host's span, the
//! span of the request a gateway is answering, or none (a new trace). The
//! span ends with [`Trace::end_answer`] or [`Trace::end_error`](super::Trace),
//! the client's error saying what it was through [`SpanError`](super::SpanError).

use std::borrow::Cow;

use rmcp::model::{ClientRequest, JsonObject};
use serde_json::Value;

use super::Trace;
#[cfg(feature = "otel")]
use super::otel::{self, RequestAttributes};

/// Starts the span of a request of `method` about to be sent, as a child of
/// the current context.
#[inline]
pub(crate) fn start(method: &str, request: &ClientRequest) -> Trace {
    #[cfg(feature = "otel")]
    {
        let tool = match request {
            ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
            _ => None,
        };
        start_request(method, tool)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (method, request);
        Trace::default()
    }
}

/// Starts the span of a request sent as a raw `method` (the 2025-11-25
/// wire): `tools/call` names its tool in `params.name`.
#[inline]
pub(crate) fn start_raw(method: &str, params: &Value) -> Trace {
    #[cfg(feature = "otel")]
    {
        let tool = (method == "tools/call")
            .then(|| params.get("name").and_then(Value::as_str))
            .flatten();
        start_request(method, tool)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (method, params);
        Trace::default()
    }
}

#[cfg(feature = "otel")]
fn start_request(method: &str, tool: Option<&str>) -> Trace {
    if !super::spans_on() {
        return Trace::current();
    }
    Trace {
        context: otel::start_request(
            opentelemetry::trace::SpanKind::Client,
            RequestAttributes {
                method,
                tool,
                ..RequestAttributes::default()
            },
            &opentelemetry::Context::current(),
        ),
    }
}

/// Writes the current context's trace context into `meta`.
#[inline]
pub(crate) fn inject_current(meta: &mut JsonObject) {
    #[cfg(feature = "otel")]
    otel::inject(&opentelemetry::Context::current(), meta);
    #[cfg(not(feature = "otel"))]
    let _ = meta;
}

/// `meta` with `span`'s trace context first (the caller's entries win);
/// `meta` itself without `otel`.
#[inline]
pub(crate) fn with_trace<'a>(span: &Trace, meta: &'a JsonObject) -> Cow<'a, JsonObject> {
    #[cfg(feature = "otel")]
    {
        let mut traced = JsonObject::new();
        otel::inject(&span.context, &mut traced);
        traced.extend(meta.clone());
        Cow::Owned(traced)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = span;
        Cow::Borrowed(meta)
    }
}
