//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for
//! [rmcp](https://docs.rs/rmcp) 3.11.
//!
//! In MCP 2026-07-28 a server may answer a `tools/call` with a *task*
//! instead of a result; the caller then polls `tasks/get`, answers input
//! requests with `tasks/update`, and may `tasks/cancel`. rmcp has the wire
//! types and the raw calls; this crate adds the rest on top of any rmcp
//! transport (in-process, stdio child process, Streamable HTTP): the client
//! half ([`TasksClient`]) and the server half ([`server::TaskRuntime`] with
//! pluggable [`store`]s).
//!
//! # Quick start
//!
//! Wrap a running rmcp client in a [`TasksClient`], call a tool and await
//! its outcome. The client's own rmcp `ClientHandler` answers the task's
//! elicitation, sampling and roots requests.
//!
//! ```
//! # use std::time::Duration;
//! # use rmcp::model::*;
//! # use rmcp::service::{ClientLifecycleMode, RequestContext, RoleServer, serve_client_with_lifecycle};
//! # use rmcp::task_manager::{TaskManager, TaskOptions};
//! # use rmcp::{ErrorData, ServerHandler, ServiceExt};
//! # #[derive(Clone, Default)]
//! # struct Server(TaskManager);
//! # impl ServerHandler for Server {
//! #     fn get_info(&self) -> ServerConfig {
//! #         ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
//! #     }
//! #     async fn call_tool(&self, _: CallToolRequestParams, _: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
//! #         let task = self.0.spawn(TaskOptions::new().with_poll_interval_ms(50), |_| Box::pin(async {
//! #             tokio::time::sleep(Duration::from_millis(100)).await;
//! #             Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
//! #         }));
//! #         Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
//! #     }
//! #     async fn get_task(&self, request: GetTaskParams, _: RequestContext<RoleServer>) -> Result<GetTaskResult, ErrorData> {
//! #         Ok(GetTaskResult::new(self.0.get_task(&request.task_id)?))
//! #     }
//! # }
//! use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TasksClient};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let (server_io, transport) = tokio::io::duplex(65536);
//! # tokio::spawn(async move { Server::default().serve(server_io).await.unwrap().waiting().await });
//! // `transport`: any rmcp client transport; `()` is a handler that answers no input.
//! let lifecycle = ClientLifecycleMode::Discover {
//!     preferred_versions: vec![ProtocolVersion::V_2026_07_28],
//! };
//! let client = TasksClient::new(serve_client_with_lifecycle((), transport, lifecycle).await?);
//! assert!(client.server_supports());
//!
//! // One call: the extension is declared on this request only.
//! let CallResponse::Task(task) = client.call_tool("export", None, CallOptions::default()).await? else {
//!     panic!("the server ran the tool at once");
//! };
//! // Poll until it is done (60 s deadline by default), then take the tool's result.
//! let result = client.await_task(&task, &AwaitOptions::default()).await?.into_result()?;
//! assert_eq!(result.content[0].as_text().unwrap().text, "done");
//!
//! // Or all in one: MRTR rounds, the task, the wait.
//! let outcome = client
//!     .call_and_await("export", None, CallOptions::default(), &AwaitOptions::default())
//!     .await?;
//! assert!(matches!(outcome, mcp_tasks::TaskOutcome::Completed(_)));
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! | feature | default | what |
//! |---|---|---|
//! | `client` | yes | [`TasksClient`]: call, await, input, cancel |
//! | `server` | yes | [`server::TaskRuntime`] for rmcp servers, the [`store::TaskStore`] trait and [`store::MemoryStore`] |
//! | `http` | yes | `server::http::fast_tasks`: answers `tasks/*` over Streamable HTTP straight from the runtime, in front of rmcp's service |
//! | `contract` | no | [`store::contract`]: the test suite every store backend must pass |
//!
//! The SQLite store (tasks survive a restart) is the crate `mcp-tasks-sqlite`.
//!
//! Whatever the features, [`form`] reads the `requestedSchema` of an
//! elicitation form (with rmcp's schema types) and checks, fills and
//! normalizes answers to it.
//!
//! # Waiting
//!
//! [`TasksClient::await_task`] polls at the task's latest `pollIntervalMs`
//! clamped to [`AwaitOptions::min_interval`, `max_interval`] (50 ms and 30 s
//! by default; hostile values such as 0, negatives, `5000.0` or 10^12 are
//! read leniently), stops at a deadline with [`Error::Timeout`] (carrying the
//! time waited and the last status read), retries transient transport
//! failures with backoff inside the deadline, and answers `input_required`
//! as [`InputMode`] says, never answering a key twice in one wait and giving
//! up with [`Error::Stalled`] when the task stays `input_required` with
//! nothing new to answer.
//!
//! Cancel safety: dropping a wait stops polling and nothing else; the task
//! keeps running on the server and can be awaited again by id, or cancelled
//! with [`TasksClient::cancel`].
//!
//! # Errors
//!
//! One [`Error`] type, grouped by who is at fault: the server refused
//! ([`Error::Rpc`], [`Error::UnknownTask`] for -32602 on `tasks/*`), the
//! server misbehaved ([`Error::Protocol`], holding the offending payload),
//! the task ended badly ([`Error::TaskFailed`], [`Error::TaskCancelled`],
//! [`Error::InputRequired`]), the wait ended ([`Error::Timeout`],
//! [`Error::Stalled`]), an input answer was invalid, or the transport
//! failed. Accessors such as [`Error::code`], [`Error::is_timeout`] and
//! [`Error::last_status`] beat string matching. Nothing a peer sends makes
//! this crate panic.
//!
//! # Task ids are bearer tokens
//!
//! [`TaskId`]'s `Debug` and `Display` never print the id, and nothing here
//! logs one; use [`TaskId::expose`] where the id itself must be shown.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod form;
pub mod task;

#[cfg(feature = "client")]
pub mod client;

#[doc(hidden)]
pub use rmcp as __rmcp;

pub use task::{RpcError, TASKS_EXTENSION, TaskId, TaskStatus, Timestamp, Ttl, UnixMillis};

#[cfg(feature = "client")]
pub use client::{
    AwaitFrom, AwaitOptions, CallOptions, CallResponse, Error, InputMode, TaskFailure, TaskOutcome,
    TaskState, TasksClient, error, validate_input_response, with_tasks_extension,
};

#[cfg(feature = "store")]
pub mod store;

#[cfg(feature = "server")]
pub mod server;
