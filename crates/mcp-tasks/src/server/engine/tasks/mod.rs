//! Live tasks: [`runtime::TaskRuntime`] answers `tasks/*` for them,
//! `supervise` runs each tool to its outcome, [`context::TaskContext`] is
//! what tool code gets, and `handoff` / `takeover` pass resumable tasks
//! between the replicas of a shared store.
//!
//! It imports the engine's lower rooms (state, admission, leases, wire
//! shapes, budgets, policies); the creation path (`calls`) and the builder
//! import it.

pub(crate) mod asking;
pub(crate) mod context;
pub(crate) mod follower;
pub(crate) mod handoff;
pub(crate) mod listening;
pub(crate) mod runtime;
pub(crate) mod supervise;
pub(crate) mod takeover;
