//! The task gateway (`mcp_tasks::gateway`, feature `gateway`) in process, in
//! front of upstreams served in process over Streamable HTTP: the
//! conformance fixture server (`tasks`) and a plain 2025-11-25 rmcp server
//! (`http_upstream`). Its tests in front of a real stdio child process
//! (`plain-upstream`, a binary of the conformance crate, which a test of
//! this package cannot have built) stay in
//! `crates/mcp-tasks-conformance/tests/it/gateway/`; the binary's
//! `serve --upstream` is tested end to end by the CLI crate.

mod http_upstream;
mod tasks;
