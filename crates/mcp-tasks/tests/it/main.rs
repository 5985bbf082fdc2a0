//! Integration tests of `mcp-tasks`, by half: `client` (the client against
//! scripted servers, rmcp's own task server over stdio and Streamable HTTP,
//! a scripted 2025-11-25 server in process and over HTTP, and our runtime),
//! `server` (the runtime in process and over HTTP, its clock-driven expiry,
//! a restart on SQLite, the 2025-11-25 era it serves), `gateway` (any MCP
//! server's tools served as tasks), `ops` (the Grafana dashboard and alert
//! rules of `ops/` against the metric names, with promtool). `cargo test -p mcp-tasks --test it
//! server::` runs one half. The peers and helpers come from the workspace's
//! test kit (`support`); the `mcp-tasks` binary's end-to-end tests are the
//! CLI crate's.

mod support;

mod client;
#[cfg(feature = "gateway")]
mod gateway;
#[cfg(feature = "server")]
mod ops;
mod schema;
mod server;
