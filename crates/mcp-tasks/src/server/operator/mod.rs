//! The operator wing: what operators reach. The admin operations and
//! their audit log ([`admin`], always built: `mcp-tasks admin` drives them
//! over a store), and (feature `operator`) the operator listener:
//! `/metrics`, `/healthz`, `/readyz` and the admin routes, on a port of
//! its own.
//!
//! The top of the server: it may import every other wing (the engine, the
//! transports, auth); nothing of the server imports it.

#[cfg(feature = "operator")]
mod access;
pub mod admin;
#[cfg(feature = "operator")]
mod listener;
#[cfg(feature = "operator")]
mod page;

#[cfg(feature = "operator")]
pub use listener::*;
