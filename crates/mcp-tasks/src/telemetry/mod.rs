//! What an operator sees of the crate, in one place: every metric name
//! ([`names`]), the metrics the server records ([`metrics`], [`metered`]),
//! the task-event hook they and the task spans hear ([`observe`]), the keyed
//! hash that names a task wherever an operator looks ([`task_hash`]; a task
//! id is a bearer token and is never shown), and the spans: the
//! OpenTelemetry conventions and trace-context propagation ([`otel`],
//! feature `otel`), the client's request spans ([`client_spans`]), the
//! server's ([`server_spans`], [`http_spans`]) and the tasks'
//! ([`task_spans`]).
//!
//! The spans are a shim ([`trace`]), as rustls's logging is: every half
//! calls them whatever the features ([`Trace`], [`instrument`], the span
//! helpers), and without feature `otel` they are zero-sized types and empty
//! inline functions, so no `cfg` is written where they are called and
//! nothing of OpenTelemetry is built.
//!
//! A leaf: it imports nothing of the crate's halves (the client, the server,
//! the gateway), only rmcp, the task and store types below them, so that
//! every half can name its metrics, tasks and spans without reaching into
//! another. Where a half's type must say what a span records of it (the
//! client's error, as a span's outcome), the half implements the shim's
//! trait ([`SpanError`]).

#[cfg(feature = "client")]
pub(crate) mod client_spans;
#[cfg(feature = "http-server")]
pub(crate) mod http_spans;
#[cfg(feature = "server")]
pub(crate) mod metered;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub(crate) mod names;
#[cfg(feature = "server")]
pub(crate) mod observe;
#[cfg(feature = "otel")]
mod otel;
mod outcome;
#[cfg(feature = "server")]
#[cfg_attr(
    not(feature = "http-server"),
    allow(dead_code, reason = "most of it is for the HTTP recipe")
)]
pub(crate) mod server_spans;
#[cfg(feature = "server")]
pub(crate) mod task_hash;
#[cfg(feature = "server")]
pub(crate) mod task_spans;
mod trace;

pub use self::trace::set_spans;
#[cfg_attr(
    not(all(feature = "client", feature = "server", feature = "http-server")),
    allow(unused_imports, reason = "each half uses its own part")
)]
pub(crate) use self::{
    outcome::{Outcome, SpanError},
    trace::{Trace, instrument, spans_on},
};
