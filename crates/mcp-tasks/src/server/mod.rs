//! The server half: a task runtime for rmcp servers.
//!
//! An rmcp `ServerHandler` keeps a [`TaskRuntime`], advertises the
//! extension (`ServerCapabilities::builder().enable_tasks()`), and
//! delegates to it: `call_tool` to [`TaskRuntime::call_tool`] with the
//! tool's [`ToolTasks`] policy and its code, and `get_task`, `update_task`,
//! `cancel_task` to the methods of the same names
//! ([`delegate_task_methods!`](crate::delegate_task_methods) writes those
//! three, and `on_custom_request` for what rmcp cannot parse: task listens
//! and 2025-11-25 tasks). The runtime
//! decides between a synchronous run and a task, creates the task in the
//! store before answering, runs the tool with a [`TaskContext`], records its
//! outcome, binds every task to the principal that created it, sweeps
//! expired tasks in the background, and pushes every change of a task to
//! the `subscriptions/listen` streams that asked for it ([`listen`]).
//!
//! ```no_run
//! use mcp_tasks::server::{TaskRuntime, ToolTasks};
//! use mcp_tasks::store::MemoryStore;
//! use rmcp::model::*;
//! use rmcp::service::{RequestContext, RoleServer};
//! use rmcp::{ErrorData, ServerHandler};
//!
//! #[derive(Clone)]
//! struct Server {
//!     runtime: TaskRuntime, // TaskRuntime::builder(MemoryStore::new()).build(), inside tokio
//! }
//!
//! impl ServerHandler for Server {
//!     fn get_info(&self) -> ServerConfig {
//!         ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
//!     }
//!     async fn call_tool(
//!         &self,
//!         request: CallToolRequestParams,
//!         context: RequestContext<RoleServer>,
//!     ) -> Result<CallToolResponse, ErrorData> {
//!         self.runtime
//!             .call_tool(&request, &context, &ToolTasks::optional(), |task| async move {
//!                 task.set_status_message("exporting").await?;
//!                 // ... the work; `task.request_input(..)` asks the client ...
//!                 Ok(CallToolResult::success(vec![ContentBlock::text("exported")]))
//!             })
//!             .await
//!     }
//!     mcp_tasks::delegate_task_methods!(runtime);
//! }
//! ```
//!
//! On a store that several server processes share (one whose
//! [`TaskStore::replicas`](crate::store::TaskStore::replicas) answers, such
//! as the crate `mcp-tasks-redis`), the runtime also holds a lease, renews
//! it, and takes over the tasks of replicas whose lease ran out: they fail
//! with "the server running this task stopped", or run again here for tools
//! marked [`ToolTasks::with_resumable`] when the builder was given the code
//! ([`TaskRuntimeBuilder::with_resume`]); a replica that lost its lease
//! writes nothing more for its tasks. See [`crate::store::replicas`] for the
//! design and [`TaskRuntimeBuilder::with_lease_period`] for the timing.
//!
//! Both eras: clients that open the connection with `initialize` (2025-11-25,
//! the TypeScript SDK v1 and the Python SDK 1.x among them) get that era's
//! experimental tasks from the same runtime, store and policies (see
//! [`legacy`]): serve over stdio with [`StdioTransport`] and over HTTP with
//! [`http::StreamableHttpServer`][http-server] (feature `http-server`), and tell
//! the runtime each tool's policy with [`TaskRuntime::advertise_tool`]
//! ([`TaskRouter`] does it), since those clients read it in `tools/list`
//! before they call.
//!
//! Over Streamable HTTP, serve with rmcp's `StreamableHttpService`
//! configured stateless with `with_json_response(true)` and set
//! `TCP_NODELAY` on accepted sockets: `tasks/*` answers then go out as one
//! plain JSON write instead of several SSE writes held back by delayed ACKs.
//!
//! [http-server]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/struct.StreamableHttpServer.html

pub mod auth;
pub(crate) mod engine;
pub mod legacy;
pub mod operator;
pub(crate) mod transport;

pub use crate::telemetry::metered::MeteredStore;
pub use crate::telemetry::metrics;
pub use crate::telemetry::metrics::MetricsObserver;
pub use crate::telemetry::observe::{TaskEnded, TaskObserver, TaskOutcome};
#[cfg(feature = "otel")]
pub use crate::telemetry::server_spans::Traced;
pub use crate::telemetry::task_hash::{TASK_HASH_LEN, TASK_HASH_PREFIX, TaskHasher};
#[cfg(feature = "oauth")]
pub use auth::oauth;
pub use auth::principal::{
    Authenticated, Principal, PrincipalExtractor, authenticated_principal, default_principal,
};
pub use engine::admission::queue::{
    AdmissionLimits, DEFAULT_MAX_QUEUED, DEFAULT_MAX_RUNNING, Load,
};
pub use engine::admission::rate::{CreationRate, InvalidCreationRate};
pub use engine::budget::DEFAULT_MAX_RESULT_BYTES;
pub use engine::builder::TaskRuntimeBuilder;
pub use engine::calls::router::TaskRouter;
pub use engine::calls::{Call, NewTask, Plan, Synchronous};
pub use engine::clock::{Clock, ManualClock, SystemClock, TokioClock};
pub use engine::draining::DrainReport;
pub use engine::era::{declares_tasks, missing_client_capabilities};
pub use engine::handles::{
    DEFAULT_TASK_TOOLS_WINDOW, HANDLE_META, TASK_TOOL_NAMES, TASKS_ANSWER, TASKS_CANCEL,
    TASKS_LIST, TASKS_STATUS, TASKS_WAIT, TaskTools, is_task_tool,
};
pub use engine::policy::{PolicySelector, TaskPolicy, ToolTasks};
pub use engine::tasks::context::{MAX_CHECKPOINT_BYTES, TaskContext};
pub use engine::tasks::runtime::{DEFAULT_MAX_LIFETIME, DEFAULT_MAX_TASKS_PER_CALLER, TaskRuntime};
pub use engine::tasks::takeover::ResumeTool;
pub use operator::admin;
#[cfg(feature = "http-server")]
pub use transport::http;
pub use transport::listen;
pub use transport::listen::{DEFAULT_MAX_LISTEN_STREAMS, DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER};
pub use transport::stdio::StdioTransport;

/// Writes the `get_task`, `update_task`, `cancel_task` and
/// `on_custom_request` methods of an rmcp `ServerHandler` impl, delegating
/// to the [`TaskRuntime`] (or [`TaskRouter`]) in the named field.
/// `on_custom_request` serves what the transports hand past rmcp's parsing
/// (task listens over stdio, see [`listen`]; 2025-11-25 tasks, see
/// [`legacy`]); a server with custom requests of its own writes it by hand
/// and hands the others to [`TaskRuntime::serve_custom_request`] with
/// itself.
///
/// ```ignore
/// impl ServerHandler for MyServer {
///     // get_info, call_tool, ...
///     mcp_tasks::delegate_task_methods!(runtime);
/// }
/// ```
#[macro_export]
macro_rules! delegate_task_methods {
    ($runtime:ident) => {
        async fn get_task(
            &self,
            request: $crate::__rmcp::model::GetTaskParams,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<$crate::__rmcp::model::GetTaskResult, $crate::__rmcp::ErrorData>
        {
            self.$runtime.get_task(request, &context).await
        }

        async fn update_task(
            &self,
            request: $crate::__rmcp::model::UpdateTaskParams,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<(), $crate::__rmcp::ErrorData> {
            self.$runtime.update_task(request, &context).await
        }

        async fn cancel_task(
            &self,
            request: $crate::__rmcp::model::CancelTaskParams,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<(), $crate::__rmcp::ErrorData> {
            self.$runtime.cancel_task(request, &context).await
        }

        async fn on_custom_request(
            &self,
            request: $crate::__rmcp::model::CustomRequest,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<$crate::__rmcp::model::CustomResult, $crate::__rmcp::ErrorData> {
            self.$runtime
                .serve_custom_request(self, request, context)
                .await
        }
    };
}
