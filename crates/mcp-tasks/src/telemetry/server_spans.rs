//! The server's `SERVER` span per request it answers, named, attributed and
//! parented as the
//! [semantic conventions for MCP](https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/)
//! say (see [`otel`](super::otel)); nothing without feature `otel`.
//!
//! rmcp hands every request of a connection to one function,
//! `Service::handle_request`: wrapping the server there ([`Traced`], feature
//! `otel`) covers stdio, rmcp's Streamable HTTP service and the serving
//! recipe's `tools/call` fast path (which calls the same function,
//! [`answer`]) in one place. The recipe's `tasks/*` fast path answers
//! without rmcp and makes the same span with [`request_span_w3c`]. The
//! handler runs in the span's context, so what a tool sends on (the
//! gateway's upstream calls) continues the trace, and a task created by the
//! request keeps that context for its whole life ([`RequestTrace`] carries
//! it where rmcp runs the handler in a task of its own).

use std::future::Future;

#[cfg(feature = "otel")]
use opentelemetry::Context;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{ClientRequest, Extensions, ServerResult};
use rmcp::service::RequestContext;
#[cfg(feature = "otel")]
use serde_json::Map;
use serde_json::Value;

use super::Trace;
#[cfg(feature = "otel")]
use super::otel::{self, RequestAttributes};

/// `network.transport` of Streamable HTTP.
pub(crate) const TCP: &str = "tcp";
/// `network.transport` of stdio (and any newline-delimited pipe).
#[cfg(feature = "otel")]
pub(crate) const PIPE: &str = "pipe";

/// The span of an rmcp request, parented by its `_meta`'s trace context.
#[inline]
pub(crate) fn span_of(
    request: &ClientRequest,
    context: &RequestContext<RoleServer>,
    transport: &'static str,
) -> Trace {
    #[cfg(feature = "otel")]
    {
        if !super::spans_on() {
            return Trace::default();
        }
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
    #[cfg(not(feature = "otel"))]
    {
        let _ = (request, context, transport);
        Trace::default()
    }
}

/// The `SERVER` span of one request: `method` (`tool` for a `tools/call`),
/// JSON-RPC `id`, the request's `_meta`.
#[cfg(feature = "otel")]
pub(super) fn request_span(
    method: &str,
    tool: Option<&str>,
    id: Option<&Value>,
    meta: &Map<String, Value>,
    transport: &'static str,
    protocol_version: Option<&str>,
) -> Trace {
    if !super::spans_on() {
        return Trace::default();
    }
    let parent = otel::extract(meta);
    Trace {
        context: otel::start_request(
            opentelemetry::trace::SpanKind::Server,
            RequestAttributes {
                method,
                tool,
                request_id: id,
                transport: Some(transport),
                protocol_version,
            },
            &parent,
        ),
    }
}

/// The `SERVER` span of one request without a tool, whose `_meta` carried
/// the W3C trace context `traceparent` and `tracestate` (the `tasks/*` fast
/// path, which reads only those).
#[inline]
pub(crate) fn request_span_w3c(
    method: &str,
    id: &Value,
    traceparent: Option<&str>,
    tracestate: Option<&str>,
    transport: &'static str,
    protocol_version: Option<&str>,
) -> Trace {
    #[cfg(feature = "otel")]
    {
        if !super::spans_on() {
            return Trace::default();
        }
        let mut meta = Map::new();
        if let Some(parent) = traceparent {
            meta.insert("traceparent".to_owned(), Value::String(parent.to_owned()));
        }
        if let Some(state) = tracestate {
            meta.insert("tracestate".to_owned(), Value::String(state.to_owned()));
        }
        request_span(method, None, Some(id), &meta, transport, protocol_version)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (
            method,
            id,
            traceparent,
            tracestate,
            transport,
            protocol_version,
        );
        Trace::default()
    }
}

/// rmcp's `answer` to a request, run in its `span`, which ends with it;
/// `answer` itself without `otel`.
///
/// On the heap with `otel`: `with_context` moves the future it wraps, and
/// a handler's future can be large (about 10 KB on a task runtime before
/// `TaskRuntime::call_tool` boxed its creation); tokio copies a task's
/// whole future as it spawns and first polls it, boxed only a pointer (see
/// docs/benchmarks-history.md, a stdio server's calls).
#[cfg(feature = "otel")]
pub(crate) fn answer<F>(span: Trace, answer: F) -> impl Future<Output = F::Output> + use<F>
where
    F: Future<Output = Result<ServerResult, ErrorData>>,
{
    use opentelemetry::context::FutureExt as _;
    let answer = Box::pin(answer);
    async move {
        let answer = answer.with_context(span.context.clone()).await;
        span.end_answer(&answer);
        answer
    }
}

/// rmcp's `answer` to a request, run in its `span`, which ends with it;
/// `answer` itself without `otel`.
#[cfg(not(feature = "otel"))]
#[inline(always)]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the same signature as with `otel`"
)]
pub(crate) fn answer<F>(span: Trace, answer: F) -> impl Future<Output = F::Output> + use<F>
where
    F: Future<Output = Result<ServerResult, ErrorData>>,
{
    let _ = span;
    answer
}

/// The trace context of a request whose handler rmcp runs in a task of its
/// own, where the current context is not the request's: the serving recipe
/// leaves it in the request's HTTP extensions (see
/// [`http_spans`](super::http_spans)). Zero-sized without `otel`.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestTrace {
    #[cfg(feature = "otel")]
    context: Option<Context>,
}

/// What the serving recipe leaves in a request's HTTP extensions: its span's
/// context.
#[cfg(all(feature = "otel", feature = "http-server"))]
#[derive(Clone, Debug)]
pub(super) struct InExtensions(pub(super) Context);

#[cfg(not(feature = "otel"))]
const _: () = assert!(size_of::<RequestTrace>() == 0);

impl RequestTrace {
    /// The context the serving recipe left in the HTTP parts among
    /// `extensions` (those of an rmcp `RequestContext`), if any.
    #[inline]
    pub(crate) fn of(extensions: &Extensions) -> Self {
        #[cfg(all(feature = "otel", feature = "http-server"))]
        {
            Self {
                context: extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<InExtensions>())
                    .map(|trace| trace.0.clone()),
            }
        }
        #[cfg(not(all(feature = "otel", feature = "http-server")))]
        {
            let _ = extensions;
            Self::default()
        }
    }

    /// The request's context when the recipe left one, else the current one.
    #[inline]
    pub(crate) fn or_current(&self) -> Trace {
        #[cfg(feature = "otel")]
        return match &self.context {
            Some(context) => Trace {
                context: context.clone(),
            },
            None => Trace::current(),
        };
        #[cfg(not(feature = "otel"))]
        Trace::default()
    }
}

#[cfg(feature = "otel")]
pub use traced::Traced;

#[cfg(feature = "otel")]
mod traced {
    use std::borrow::Cow;
    use std::future::Future;

    use rmcp::model::{ClientRequest, ProtocolVersion, ServerConfig, ServerResult};
    use rmcp::service::{NotificationContext, RequestContext, Service};
    use rmcp::{ErrorData, RoleServer};

    /// An rmcp server whose requests each get a `SERVER` span (feature
    /// `otel`), named, attributed and parented as OpenTelemetry's
    /// [semantic conventions for MCP](https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/)
    /// say.
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
                transport: super::PIPE,
            }
        }

        /// `server`, its spans saying `network.transport = tcp` (Streamable HTTP).
        pub fn http(server: S) -> Self {
            Self {
                inner: server,
                transport: super::TCP,
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
            let span = super::span_of(&request, &context, self.transport);
            super::answer(span, self.inner.handle_request(request, context))
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
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use opentelemetry::global;
    use opentelemetry::trace::TraceContextExt;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

    use super::*;

    #[test]
    fn spans_turned_off_are_not_made_and_read_no_trace_context() {
        // This test's own provider and propagator (no other unit test
        // installs one or asserts spans).
        global::set_tracer_provider(
            SdkTracerProvider::builder()
                .with_simple_exporter(InMemorySpanExporter::default())
                .build(),
        );
        global::set_text_map_propagator(TraceContextPropagator::new());
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let span = || {
            let trace = request_span_w3c(
                "tasks/get",
                &Value::from(7),
                Some(parent),
                None,
                TCP,
                Some("2026-07-28"),
            );
            trace.context.span().span_context().clone()
        };
        let on = span();
        assert!(on.is_sampled(), "on: the parent's sampled span continued");
        assert_eq!(
            on.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        crate::set_spans(false);
        let off = span();
        crate::set_spans(true);
        assert!(!off.is_valid(), "off: no span, no parent read");
        assert!(span().is_sampled(), "on again");
    }
}
