//! OpenTelemetry for MCP (feature `otel`): the span names, kinds and
//! attributes of the semantic conventions for MCP, and trace context carried
//! in a request's `params._meta`, which the spans of the client
//! ([`client_spans`](super::client_spans)), the server
//! ([`server_spans`](super::server_spans), [`http_spans`](super::http_spans))
//! and the tasks ([`task_spans`](super::task_spans)) share.
//!
//! The conventions followed are OpenTelemetry's
//! [semantic conventions for the Model Context Protocol](https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/)
//! (status: development):
//!
//! * one span per request, named `{mcp.method.name} {target}` where the
//!   target is the tool's name (`tools/call long_job`), or
//!   `{mcp.method.name}` alone when there is no low-cardinality target
//!   (`tasks/get`: a task id is a bearer token and never a target); kind
//!   `CLIENT` on the side that sends it, `SERVER` on the side that answers;
//! * attributes `mcp.method.name`, `jsonrpc.request.id` (its string form),
//!   `network.transport` (`tcp` for Streamable HTTP, `pipe` for stdio),
//!   `mcp.protocol.version` when the request names one, and for
//!   `tools/call` `gen_ai.tool.name` with `gen_ai.operation.name =
//!   execute_tool`;
//! * on a JSON-RPC error, `error.type` and `rpc.response.status_code` are
//!   the error's code as a string and the span's status is `ERROR` with the
//!   error's message; a `CallToolResult` with `isError` is `error.type =
//!   tool_error`;
//! * trace context travels as W3C `traceparent` and `tracestate` keys of the
//!   request's `params._meta` (also SEP-414 of MCP): a client writes them,
//!   a server reads them as its span's remote parent.
//!
//! What the conventions recommend and this leaves out, on purpose:
//! `mcp.session.id` (on Streamable HTTP a session id admits its holder to
//! the session, so it is not written where an operator's tools keep it; the
//! 2026-07-28 era has no sessions anyway), and every task id: a task is
//! named by its keyed hash only (`mcp_tasks.task.hash`, see
//! [`task_spans`](super::task_spans)).
//!
//! Only the `opentelemetry` API is used here: spans go to the global tracer
//! provider and context through the global text-map propagator, which the
//! application installs (the `mcp-tasks` binary installs the SDK's, with an
//! OTLP exporter, and the W3C TraceContext propagator). Until it does, both
//! are no-ops and a span costs about a microsecond of CPU (a tracer, a span
//! and a context made and dropped); a program that installs none turns the
//! spans off with [`set_spans`](crate::set_spans).

#![cfg_attr(
    not(all(feature = "client", feature = "server", feature = "http-server")),
    allow(dead_code, reason = "each half uses its own part")
)]

use std::borrow::Cow;

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, global};
use rmcp::model::RequestId;
use serde_json::{Map, Value};

use super::outcome::Outcome;

/// The instrumentation scope of every span this crate makes.
pub(crate) const SCOPE: &str = "mcp-tasks";

/// The tracer of this crate, from the global provider.
pub(crate) fn tracer() -> global::BoxedTracer {
    global::tracer(SCOPE)
}

/// What one request span says about its request.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RequestAttributes<'a> {
    /// `mcp.method.name`.
    pub(crate) method: &'a str,
    /// The tool a `tools/call` calls.
    pub(crate) tool: Option<&'a str>,
    /// The JSON-RPC id, written as `jsonrpc.request.id` in its string form.
    pub(crate) request_id: Option<&'a Value>,
    /// `network.transport`: `tcp` (Streamable HTTP) or `pipe` (stdio).
    pub(crate) transport: Option<&'static str>,
    /// `mcp.protocol.version`.
    pub(crate) protocol_version: Option<&'a str>,
}

/// The string form of a JSON-RPC id (`10`, `request-7`), as
/// `jsonrpc.request.id` wants it.
pub(crate) fn request_id_text(id: &Value) -> Option<String> {
    match id {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// Starts the span of one request, as a child of `parent`, and returns a
/// context holding it. The attributes are set only on a span that records
/// (sampled): an unsampled request allocates none of them.
pub(crate) fn start_request(
    kind: SpanKind,
    attributes: RequestAttributes<'_>,
    parent: &Context,
) -> Context {
    let tracer = tracer();
    let name: Cow<'static, str> = match attributes.tool {
        Some(tool) => format!("{} {tool}", attributes.method).into(),
        None => attributes.method.to_owned().into(),
    };
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .start_with_context(&tracer, parent);
    let context = parent.with_span(span);
    if context.span().is_recording() {
        let mut values = Vec::with_capacity(6);
        values.push(KeyValue::new(
            "mcp.method.name",
            attributes.method.to_owned(),
        ));
        if let Some(tool) = attributes.tool {
            values.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
            values.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        if let Some(id) = attributes.request_id.and_then(request_id_text) {
            values.push(KeyValue::new("jsonrpc.request.id", id));
        }
        if let Some(transport) = attributes.transport {
            values.push(KeyValue::new("network.transport", transport));
        }
        if let Some(version) = attributes.protocol_version {
            values.push(KeyValue::new("mcp.protocol.version", version.to_owned()));
        }
        context.span().set_attributes(values);
    }
    context
}

/// Ends the span of `context` with `outcome`.
pub(crate) fn end_request(context: &Context, outcome: &Outcome<'_>) {
    let span = context.span();
    if !span.is_recording() {
        return;
    }
    match outcome {
        Outcome::Answered => {}
        Outcome::ToolError => {
            span.set_attribute(KeyValue::new("error.type", "tool_error"));
            span.set_status(Status::error("tool_error"));
        }
        Outcome::Error { code, message } => {
            let code = code.to_string();
            span.set_attribute(KeyValue::new("error.type", code.clone()));
            span.set_attribute(KeyValue::new("rpc.response.status_code", code));
            span.set_status(Status::error((*message).to_owned()));
        }
        Outcome::Failed(class) => {
            span.set_attribute(KeyValue::new("error.type", *class));
            span.set_status(Status::error(*class));
        }
    }
    span.end();
}

/// Records on the span of `context` the id its request was sent with.
pub(crate) fn record_request_id(context: &Context, id: &RequestId) {
    let span = context.span();
    if span.is_recording()
        && let Some(id) = serde_json::to_value(id)
            .ok()
            .as_ref()
            .and_then(request_id_text)
    {
        span.set_attribute(KeyValue::new("jsonrpc.request.id", id));
    }
}

/// The trace context a request's `_meta` carries (`traceparent`,
/// `tracestate`), read by the global propagator; the current context when
/// it carries none the propagator reads.
pub(crate) fn extract(meta: &Map<String, Value>) -> Context {
    if !meta.contains_key("traceparent") {
        return Context::current();
    }
    global::get_text_map_propagator(|propagator| {
        propagator.extract_with_context(&Context::current(), &MetaReader(meta))
    })
}

/// Writes `context`'s trace context into a request's `_meta`, with the
/// global propagator (nothing when it has none installed).
pub(crate) fn inject(context: &Context, meta: &mut Map<String, Value>) {
    global::get_text_map_propagator(|propagator| {
        propagator.inject_context(context, &mut MetaWriter(meta));
    });
}

/// `_meta` read as a propagator's carrier: its string values.
struct MetaReader<'a>(&'a Map<String, Value>);

impl Extractor for MetaReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// `_meta` written as a propagator's carrier.
struct MetaWriter<'a>(&'a mut Map<String, Value>);

impl Injector for MetaWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), Value::String(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_written_as_strings() {
        assert_eq!(request_id_text(&Value::from(10)).as_deref(), Some("10"));
        assert_eq!(
            request_id_text(&Value::from("request-7")).as_deref(),
            Some("request-7")
        );
        assert_eq!(request_id_text(&Value::Null), None);
    }

    #[test]
    fn meta_without_traceparent_is_the_current_context() {
        let meta = Map::new();
        assert!(!extract(&meta).span().span_context().is_valid());
    }
}
