//! The task gateway (`mcp_tasks::gateway`) in front of a real child process
//! over stdio: `plain-upstream`, this crate's task-less 2025-11-25 server
//! (`--dual` for 2026-07-28 too). They live here, not beside the gateway
//! in `crates/mcp-tasks/tests/it/gateway/`, because they spawn that binary,
//! which Cargo builds only for this package's tests
//! (`env!("CARGO_BIN_EXE_plain-upstream")`); the gateway's in-process tests
//! are there.

mod budget;
mod mrtr;
mod roots;
mod stdio;
mod sync;
