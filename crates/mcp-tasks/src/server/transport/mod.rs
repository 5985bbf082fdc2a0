//! The transport wing: how requests reach the engine. Newline-delimited
//! stdio ([`stdio::StdioTransport`]), Streamable HTTP ([`http`], feature
//! `http-server`), task listens that rmcp cannot route yet ([`listen`]),
//! the plain `tools/call` read both share (`plain`) and the custom requests
//! rmcp hands past its parsing (`custom`).
//!
//! It may import the engine, the auth wing and the 2025-11-25 era
//! (`legacy`); only the operator listener builds on it.

pub(crate) mod custom;
#[cfg(feature = "http-server")]
pub mod http;
pub mod listen;
pub(crate) mod plain;
pub(crate) mod stdio;
