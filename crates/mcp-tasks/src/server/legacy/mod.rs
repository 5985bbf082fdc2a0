//! The 2025-11-25 era of tasks on the server, which rmcp 3.11 removed: this
//! module adds it back, so that the hosts people run today (built on the
//! TypeScript SDK v1 and the Python SDK 1.x, whose clients speak that era's
//! *experimental* tasks) get tasks from the same runtime, store and
//! policies as 2026-07-28 clients. It is the only place on the server that
//! knows the old wire; delete it the day rmcp speaks it again.
//!
//! On a connection opened with `initialize` (and only there: a 2026-07-28
//! client never sees any of it, as the spec requires):
//!
//! * The `InitializeResult` of a server that declares the Tasks extension
//!   also declares `capabilities.tasks: {list, cancel, requests: {tools:
//!   {call}}}`, and `tools/list` marks each tool's `execution.taskSupport`
//!   with the policy announced by [`TaskRuntime::advertise_tool`] (rmcp's
//!   typed model has neither field: both are written on the way out, by
//!   [`StdioTransport`](super::StdioTransport) and by the HTTP recipe's
//!   sessions).
//! * A `tools/call` with `params.task: {ttl?}` (a field rmcp drops when it
//!   parses the request) reaches the server's own `call_tool` with a mark in
//!   its context, so the runtime makes a task of it (its `ttl` honoured from
//!   1 s up to the runtime's maximum lifetime), answered in the old nested
//!   shape `{task: {taskId, status, ..., ttl, pollInterval}}`. A `required`
//!   tool called without it, or a `forbidden` one called with it, is -32601,
//!   as that era says; never the extension's -32021.
//! * `tasks/get` answers the bare task (`ttl`, `pollInterval`; a tool
//!   result with `isError: true` reads as `failed`, the rule of that era);
//!   `tasks/result` blocks until the task ends and returns the tool's
//!   result with the related-task `_meta` (or its JSON-RPC error exactly),
//!   and while it blocks, the task's input requests go to the client as
//!   `elicitation/create`, `sampling/createMessage` and `roots/list`
//!   requests tagged with the related task, whose answers answer the task
//!   as `tasks/update` would; `tasks/list` lists the caller's own tasks,
//!   paginated with opaque cursors (-32602 for a bad one); `tasks/cancel`
//!   cancels at once and returns the cancelled task (-32602 for a task
//!   that already ended).
//! * Each task created on the session is followed, and every change of it
//!   goes to the client as `notifications/tasks/status` until it ends.
//!
//! A task made by a 2025-11-25 client is the same record a 2026-07-28
//! client of the same principal reads and cancels with the extension.
//!
//! The era wing, an adapter: it may import the engine (through
//! [`TaskRuntime`]'s methods; the engine's state is not its to read) and the
//! auth wing; the transports register it (`transport/custom.rs` routes its
//! methods here, the stdio reader and the HTTP sessions wrap their lines in
//! its `Lines` and `Outbound`), and nothing else of the server imports it.
//!
//! How the requests get here: rmcp parses `tools/call` without its `task`,
//! and answers `tasks/get` and `tasks/cancel` with the extension's rules.
//! So the transports rename these requests, on initialize-era sessions
//! only, to methods under `mcp-tasks/2025-11-25/` before rmcp reads them:
//! over stdio the reader of [`StdioTransport`](super::StdioTransport), over
//! Streamable HTTP the serving recipe's front middleware (for requests of
//! a session). rmcp hands them to the server's `on_custom_request`, which
//! [`delegate_task_methods!`](crate::delegate_task_methods) wires to
//! [`TaskRuntime::serve_custom_request`].

mod answer;
mod notify;
pub(crate) mod outbound;
mod reroute;
mod wire;

pub(crate) use answer::{CALL, answer, call_tool};
pub(crate) use reroute::Lines;
#[cfg(feature = "http-server")]
pub(crate) use reroute::reroute;

#[cfg(doc)]
use super::TaskRuntime;
pub(crate) use crate::server::engine::era::is_initialize_era;

/// The prefix of the methods under which the transports hand the requests
/// of this era's tasks to rmcp's custom-request hook.
pub(crate) const PREFIX: &str = "mcp-tasks/2025-11-25/";
