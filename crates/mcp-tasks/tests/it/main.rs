//! Integration tests of the `mcp-tasks` client: against a scripted
//! in-process server, and against rmcp's own task server over stdio and
//! Streamable HTTP.

mod client;
mod schema;
mod scripted;
mod transports;
