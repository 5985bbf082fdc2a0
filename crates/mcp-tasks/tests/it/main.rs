//! Integration tests of `mcp-tasks`: the client against a scripted
//! in-process server and against rmcp's own task server over stdio and
//! Streamable HTTP, and a scripted 2025-11-25 server in process and over
//! HTTP (JSON and SSE answers); the server runtime in process and over HTTP, its
//! clock-driven expiry, and a restart on SQLite.

mod support;

mod access;
mod admission;
mod budget;
mod client;
mod connect;
mod connections;
mod deadline;
mod drain;
mod expiry;
mod first_step;
mod http;
mod idempotent;
mod input;
mod journal;
mod legacy;
mod legacy_http;
mod legacy_server;
mod listen;
mod many;
#[cfg(feature = "oauth")]
mod oauth;
mod observe;
mod one_run;
mod progress;
mod rate;
mod read_ahead;
mod restart;
mod resume;
mod router;
mod schema;
mod server;
mod steps;
mod store_outage;
#[cfg(feature = "otel")]
mod traces;
mod transports;
