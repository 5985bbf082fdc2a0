//! What the transports hand to rmcp's `ServerHandler::on_custom_request`
//! past rmcp's parsing, routed: task listens to [`listen`](super::listen),
//! 2025-11-25 tasks to [`legacy`](crate::server::legacy).
//!
//! `impl TaskRuntime` above the runtime's file and the two folders it
//! routes to: both build on the runtime's handle, so the routing cannot
//! live in `runtime.rs` without a circle.

use rmcp::model::{CustomRequest, CustomResult, ErrorCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::listen::{REROUTED, answer_rerouted};
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::legacy;

impl TaskRuntime {
    /// rmcp's `ServerHandler::on_custom_request` of a server on this
    /// runtime: serves what the transports ([`StdioTransport`], the HTTP
    /// recipe, [`ListenReader`]) hand to it past rmcp's parsing: task
    /// listens (see [`listen`](super::listen)) and the requests of
    /// 2025-11-25 tasks from clients that opened the connection with
    /// `initialize` (a `tools/call` that asks for a task goes to `server`'s
    /// own `call_tool`, marked so that the runtime makes the task). Any
    /// other custom method gets -32601. Wired by
    /// [`delegate_task_methods!`](crate::delegate_task_methods); a server
    /// with custom requests of its own answers those and hands the others here.
    ///
    /// [`StdioTransport`]: crate::server::StdioTransport
    /// [`ListenReader`]: super::listen::ListenReader
    pub async fn serve_custom_request<S: ServerHandler>(
        &self,
        server: &S,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method == legacy::CALL {
            return legacy::call_tool(self, server, request.params, context).await;
        }
        self.on_custom_request(request, context).await
    }

    /// [`TaskRuntime::serve_custom_request`] without the server: task
    /// listens and the 2025-11-25 task requests but `tools/call`, which it
    /// refuses (it needs the server to run the tool).
    pub async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method == REROUTED {
            return answer_rerouted(self, request.params, context).await;
        }
        if request.method.starts_with(legacy::PREFIX) {
            return legacy::answer(self, request, context).await;
        }
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ))
    }
}
