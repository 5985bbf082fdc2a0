//! Integration tests of `mcp-tasks`: the client against a scripted
//! in-process server and against rmcp's own task server over stdio and
//! Streamable HTTP; the server runtime in process and over HTTP.

mod client;
mod restart;
mod runtime_server;
mod schema;
mod scripted;
mod server;
mod transports;
