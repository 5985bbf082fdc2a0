//! The conformance fixtures of mcp-tasks, for `interop/` and CI only:
//! nothing here ships in the `mcp-tasks` binary users install.
//!
//! | binary | source | what it is |
//! |---|---|---|
//! | `conformance-server` | `src/bin/conformance-server.rs` | [`FixtureServer`] over stdio or stateless Streamable HTTP, judged by the official conformance suite and by fastmcp's client (`interop/run`) |
//! | `plain-upstream` | `src/bin/plain-upstream.rs` | [`plain`]: a task-less 2025-11-25 server on stdio, put behind the task gateway by its tests |
//! | `mcp-tasks-conformance` | `src/bin/mcp-tasks-conformance/` | the client the suite drives (`npx conformance client --command ...`), on `TasksClient` |
//!
//! [`FixtureServer`] runs, on the library's `TaskRuntime`, the seven
//! fixture tools the suite's `tasks-*` scenarios call (`greet`,
//! `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`,
//! `multi_input`, `test_tool_with_task`) and the eleven synchronous MRTR
//! diagnostics of its 2026-07-28 server scenarios (`test_missing_capability`,
//! `test_streaming_elicitation`, `test_logging_tool` and the
//! `test_input_required_result_*` family), whose `requestState` is sealed
//! with rmcp's `RequestStateCodec`.

pub mod hostile;
pub mod plain;
mod server;

pub use server::{FixtureServer, serve_http};
