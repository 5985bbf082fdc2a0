//! What an operator sees of the crate, in one place: every metric name
//! ([`names`]), the keyed hash that names a task wherever an operator looks
//! ([`task_hash`]; a task id is a bearer token and is never shown), and the
//! OpenTelemetry conventions and trace-context propagation the client, the
//! server and the gateway share ([`otel`], feature `otel`).
//!
//! A leaf: it imports nothing of the crate's halves (the client, the server,
//! the gateway), only the task and store types below them, so that every
//! half can name its metrics and tasks without reaching into another.

#[cfg(feature = "server")]
pub(crate) mod metered;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub(crate) mod names;
#[cfg(feature = "server")]
pub(crate) mod observe;
#[cfg(all(feature = "otel", any(feature = "client", feature = "server")))]
#[cfg_attr(
    not(all(feature = "client", feature = "server", feature = "http-server")),
    allow(dead_code, reason = "each half uses its own part")
)]
pub(crate) mod otel;
#[cfg(feature = "server")]
pub(crate) mod task_hash;
