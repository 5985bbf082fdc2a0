//! The shim every half calls whatever the features: [`Trace`], the trace
//! context a span lives in, [`instrument`] to run a future in one, and the
//! ends of a request's span (with an [`Outcome`]). With feature
//! `otel` they do OpenTelemetry's work (see [`otel`](super::otel)); without
//! it `Trace` is a zero-sized type and every call an empty inline function
//! the compiler removes, as rustls's logging macros expand to nothing
//! without its `logging` feature. Callers write no `cfg` of their own.

#![cfg_attr(
    not(all(feature = "client", feature = "server", feature = "http-server")),
    allow(dead_code, reason = "each half uses its own part")
)]

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(feature = "otel")]
use opentelemetry::Context;
#[cfg(feature = "otel")]
use opentelemetry::trace::TraceContextExt;
use rmcp::model::{RequestId, ServerResult};

#[cfg(feature = "otel")]
use super::otel;
use super::outcome::{Outcome, SpanError};

/// Whether spans are made (feature `otel`): what registers the task spans
/// as an observer tests it, so that without the feature nothing is called.
pub(crate) const ENABLED: bool = cfg!(feature = "otel");

/// Whether the program wants spans (see [`set_spans`]).
static WANTED: AtomicBool = AtomicBool::new(true);

/// Turns this crate's OpenTelemetry spans (feature `otel`) off, or on
/// again; they are on by default, and without the feature there are none.
///
/// With `otel`, every request the crate sends or answers and every task
/// gets a span from the global tracer provider, and the spans' trace
/// context travels in `params._meta`. A program that installs no provider
/// still pays for spans of its no-op one: about a microsecond of CPU per
/// request answered, on the server's `tasks/get` a tenth of what it costs
/// (see BENCHMARKS.md). A program that knows it exports no traces (the
/// `mcp-tasks` binary without `--otlp-endpoint`) calls `set_spans(false)`
/// first: then no span is made, a request's `_meta` trace context is not
/// read, and what a client sends carries the program's own current
/// context, as the propagator writes it, and no span of ours.
///
/// Call it before building runtimes and servers: a task runtime decides
/// when it is built whether its tasks get spans.
pub fn set_spans(on: bool) {
    WANTED.store(on, Ordering::Relaxed);
}

/// Whether spans are made: feature `otel`, and not turned off.
#[inline]
pub(crate) fn spans_on() -> bool {
    ENABLED && WANTED.load(Ordering::Relaxed)
}

/// The trace context a span lives in: an OpenTelemetry `Context` with
/// feature `otel`, nothing (zero-sized) without it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    #[cfg(feature = "otel")]
    pub(super) context: Context,
}

// Free without `otel`: nothing to carry (checked as the crate builds).
#[cfg(not(feature = "otel"))]
const _: () = assert!(size_of::<Trace>() == 0 && size_of::<Attached>() == 0);

impl Trace {
    /// The current trace context (the caller's span, or none).
    #[cfg(feature = "otel")]
    pub(crate) fn current() -> Self {
        Self {
            context: Context::current(),
        }
    }

    /// Whether this context's span is sampled.
    #[cfg(feature = "otel")]
    pub(crate) fn is_sampled(&self) -> bool {
        self.context.span().span_context().is_sampled()
    }

    /// Makes this the current context until the guard is dropped.
    #[inline]
    pub(crate) fn attach(&self) -> Attached {
        Attached {
            #[cfg(feature = "otel")]
            _guard: self.context.clone().attach(),
        }
    }

    /// Records the id the request of this span was sent with
    /// (`jsonrpc.request.id`).
    #[inline]
    pub(crate) fn sent(&self, id: &RequestId) {
        #[cfg(feature = "otel")]
        otel::record_request_id(&self.context, id);
        #[cfg(not(feature = "otel"))]
        let _ = id;
    }

    /// Ends this request span with `outcome`.
    #[inline]
    pub(crate) fn end(&self, outcome: &Outcome<'_>) {
        #[cfg(feature = "otel")]
        otel::end_request(&self.context, outcome);
        #[cfg(not(feature = "otel"))]
        let _ = outcome;
    }

    /// Ends this request span with its answer: a result (a `CallToolResult`
    /// with `isError` is a tool error) or an error.
    #[inline]
    pub(crate) fn end_answer<E: SpanError>(&self, answer: &Result<ServerResult, E>) {
        if ENABLED {
            match answer {
                Ok(ServerResult::CallToolResult(result)) if result.is_error == Some(true) => {
                    self.end(&Outcome::ToolError);
                }
                Ok(_) => self.end(&Outcome::Answered),
                Err(error) => self.end(&error.outcome()),
            }
        }
    }

    /// Ends this request span with `error`.
    #[inline]
    pub(crate) fn end_error<E: SpanError>(&self, error: &E) {
        if ENABLED {
            self.end(&error.outcome());
        }
    }

    /// Ends this request span with `error`, or as answered without one.
    #[inline]
    pub(crate) fn end_with<E: SpanError>(&self, error: Option<&E>) {
        if ENABLED {
            match error {
                None => self.end(&Outcome::Answered),
                Some(error) => self.end(&error.outcome()),
            }
        }
    }
}

/// The guard of [`Trace::attach`]: the previous context is current again
/// when it is dropped.
#[derive(Debug)]
#[must_use = "the context is current only while the guard lives"]
pub(crate) struct Attached {
    #[cfg(feature = "otel")]
    _guard: opentelemetry::ContextGuard,
}

/// `future`, run in `trace` (each poll in its context, so that what it
/// sends on continues the trace); `future` itself without `otel`.
#[cfg(feature = "otel")]
#[inline]
pub(crate) fn instrument<F: Future>(future: F, trace: Trace) -> impl Future<Output = F::Output> {
    opentelemetry::context::FutureExt::with_context(future, trace.context)
}

/// `future`, run in `trace` (each poll in its context, so that what it
/// sends on continues the trace); `future` itself without `otel`.
#[cfg(not(feature = "otel"))]
#[inline(always)]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the same signature as with `otel`"
)]
pub(crate) fn instrument<F: Future>(future: F, trace: Trace) -> impl Future<Output = F::Output> {
    let _ = trace;
    future
}
