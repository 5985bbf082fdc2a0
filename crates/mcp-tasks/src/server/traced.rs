//! [`Traced`]: a `SERVER` span around every request an rmcp server answers
//! (feature `otel`), named, attributed and parented as the
//! [semantic conventions for MCP](https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/)
//! say (see the crate's `otel` module for the details).
//!
//! rmcp hands every request of a connection to one function,
//! `Service::handle_request`: wrapping the server there covers stdio, rmcp's
//! Streamable HTTP service and the serving recipe's `tools/call` fast path
//! (which calls the same function) in one place. The recipe's `tasks/*` fast
//! path answers without rmcp and makes the same span with
//! [`request_span`]. The handler runs in the span's context, so what a tool
//! sends on (the gateway's upstream calls) continues the trace, and a task
//! created by the request keeps that context for its whole life.

use std::borrow::Cow;
use std::future::Future;

use opentelemetry::Context;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::SpanKind;
use rmcp::model::{ClientRequest, ProtocolVersion, ServerConfig, ServerResult};
use rmcp::service::{NotificationContext, RequestContext, Service};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value};

use crate::telemetry::otel::{self, Outcome, RequestAttributes};

/// An rmcp server whose requests each get a `SERVER` span (feature `otel`).
///
/// Serve it as the server itself (`Traced::stdio(server).serve(transport)`);
/// the serving recipe (`server::http::StreamableHttpServer`) makes the same
/// spans by itself.
#[derive(Debug, Clone)]
pub struct Traced<S> {
    inner: S,
    transport: &'static str,
}

impl<S> Traced<S> {
    /// `server`, its spans saying `network.transport = pipe` (stdio, a
    /// socket pair, an in-process pipe).
    pub fn stdio(server: S) -> Self {
        Self {
            inner: server,
            transport: otel::PIPE,
        }
    }

    /// `server`, its spans saying `network.transport = tcp` (Streamable HTTP).
    pub fn http(server: S) -> Self {
        Self {
            inner: server,
            transport: otel::TCP,
        }
    }

    /// The server inside.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Service<RoleServer>> Service<RoleServer> for Traced<S> {
    fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ServerResult, ErrorData>> + Send + '_ {
        let span = span_of(&request, &context, self.transport);
        // On the heap: rmcp spawns a task per request around this future,
        // and a handler's future can be large (about 10 KB on a task
        // runtime before `TaskRuntime::call_tool` boxed its creation);
        // tokio copies a task's whole future as it spawns and first polls
        // it, boxed only a pointer (see docs/benchmarks-history.md, a stdio
        // server's calls).
        let answer = Box::pin(self.inner.handle_request(request, context));
        async move {
            let answer = answer.with_context(span.clone()).await;
            end(&span, &answer);
            answer
        }
    }

    fn handle_notification(
        &self,
        notification: rmcp::model::ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        self.inner.handle_notification(notification, context)
    }

    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }
}

/// The context of a request's span, as the serving recipe leaves it in the
/// request's HTTP extensions for what runs outside it (see
/// [`RequestTrace::of`]).
#[derive(Clone, Debug)]
#[cfg_attr(
    not(feature = "http-server"),
    allow(dead_code, reason = "made by the HTTP recipe")
)]
pub(crate) struct RequestTrace(pub(crate) Context);

impl RequestTrace {
    /// The context the serving recipe left in the HTTP parts among
    /// `extensions` (those of an rmcp `RequestContext`), if any: rmcp runs
    /// a handler in a task of its own, where the current context is not the
    /// request's.
    pub(crate) fn of(extensions: &rmcp::model::Extensions) -> Option<Context> {
        #[cfg(feature = "http-server")]
        {
            extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<RequestTrace>())
                .map(|trace| trace.0.clone())
        }
        #[cfg(not(feature = "http-server"))]
        {
            let _ = extensions;
            None
        }
    }
}

/// The span of an rmcp request, parented by its `_meta`'s trace context.
pub(crate) fn span_of(
    request: &ClientRequest,
    context: &RequestContext<RoleServer>,
    transport: &'static str,
) -> Context {
    let method = request.method();
    let tool = match request {
        ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
        _ => None,
    };
    let id = serde_json::to_value(&context.id).ok();
    let version = context.meta.protocol_version();
    request_span(
        method,
        tool,
        id.as_ref(),
        &context.meta.0.0,
        transport,
        version.as_ref().map(|version| version.as_str()),
    )
}

/// The `SERVER` span of one request: `method` (`tool` for a `tools/call`),
/// JSON-RPC `id`, the request's `_meta`.
pub(crate) fn request_span(
    method: &str,
    tool: Option<&str>,
    id: Option<&Value>,
    meta: &Map<String, Value>,
    transport: &'static str,
    protocol_version: Option<&str>,
) -> Context {
    let parent = otel::extract(meta);
    otel::start_request(
        SpanKind::Server,
        RequestAttributes {
            method,
            tool,
            request_id: id,
            transport: Some(transport),
            protocol_version,
        },
        &parent,
    )
}

/// Ends a request span with rmcp's answer.
pub(crate) fn end(span: &Context, answer: &Result<ServerResult, ErrorData>) {
    let outcome = match answer {
        Ok(ServerResult::CallToolResult(result)) if result.is_error == Some(true) => {
            Outcome::ToolError
        }
        Ok(_) => Outcome::Answered,
        Err(error) => Outcome::Error {
            code: i64::from(error.code.0),
            message: &error.message,
        },
    };
    otel::end_request(span, &outcome);
}

/// Ends a request span with a JSON-RPC error or a plain answer (the fast
/// paths' answers).
#[cfg_attr(
    not(feature = "http-server"),
    allow(dead_code, reason = "for the HTTP recipe")
)]
pub(crate) fn end_with(span: &Context, error: Option<&ErrorData>) {
    let outcome = match error {
        None => Outcome::Answered,
        Some(error) => Outcome::Error {
            code: i64::from(error.code.0),
            message: &error.message,
        },
    };
    otel::end_request(span, &outcome);
}
