//! The engine wing: the task runtime itself. It decides whether a call
//! becomes a task and creates it through the admission gates ([`calls`]),
//! runs and supervises live tasks and answers `tasks/*` ([`tasks`]), and
//! keeps the runtime's shared state, admission, leases, budgets, policies
//! and clock beside them.
//!
//! It may import the auth wing (principals) and the crate's telemetry leaf,
//! store and task types; never a transport, the operator listener or the
//! 2025-11-25 era (`legacy`), which all build on it.

pub(crate) mod admission;
pub(crate) mod budget;
pub(crate) mod builder;
pub(crate) mod calls;
pub(crate) mod clock;
pub(crate) mod drain;
pub(crate) mod draining;
pub(crate) mod era;
pub(crate) mod handles;
pub(crate) mod idempotent;
pub(crate) mod lease;
pub(crate) mod policy;
pub(crate) mod progress;
pub(crate) mod state;
pub(crate) mod tasks;
pub(crate) mod waiters;
pub(crate) mod wire;
