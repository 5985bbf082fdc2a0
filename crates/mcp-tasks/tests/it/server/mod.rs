//! The server half: the task runtime (`runtime`), its gates (admission,
//! rate, drain, idempotent creation, budgets), expiry, the serving recipe
//! over real HTTP (access, connections, limits, OAuth), listen streams, the
//! 2025-11-25 era it serves, and telemetry.

mod access;
mod admission;
mod budget;
mod connections;
mod drain;
mod expiry;
mod first_step;
mod http;
pub(crate) mod idempotent;
mod legacy_server;
mod listen_budget;
mod listen_stream;
#[cfg(feature = "oauth")]
mod oauth;
mod observe;
mod progress;
mod rate;
mod read_ahead;
mod restart;
mod router;
mod runtime;
mod store_outage;
mod task_tools;
#[cfg(feature = "otel")]
mod traces;
