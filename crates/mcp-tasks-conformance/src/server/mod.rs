//! [`FixtureServer`]: an rmcp server on our [`TaskRuntime`] with the
//! fixture and diagnostic tools of [`self::tools`], and [`serve_http`],
//! which serves it with the library's Streamable HTTP recipe.

mod tools;

use std::sync::Arc;

use mcp_tasks::server::TaskRuntime;
use mcp_tasks::server::http::StreamableHttpServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};

use self::tools::RequestStates;

/// The conformance fixture server: an rmcp `ServerHandler` that runs the
/// fixture and diagnostic tools on a [`TaskRuntime`]. Cheap to clone;
/// clones share the runtime and the key that seals `requestState`, so one
/// value can serve every HTTP request.
#[derive(Debug, Clone)]
pub struct FixtureServer {
    runtime: TaskRuntime,
    states: Arc<RequestStates>,
}

impl FixtureServer {
    /// Serves the tools on `runtime`, with a fresh random key for the
    /// diagnostics' `requestState`; fails only when the operating system
    /// has no randomness to give.
    pub fn new(runtime: TaskRuntime) -> Result<Self, getrandom::Error> {
        Ok(Self {
            runtime,
            states: Arc::new(RequestStates::new()?),
        })
    }
}

impl ServerHandler for FixtureServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcp-tasks-conformance-server",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Fixture tools for the official MCP conformance suite: the tasks scenarios' \
             fixtures and the 2026-07-28 MRTR diagnostics, on the mcp-tasks task runtime.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::find(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        tools::call(&self.runtime, &self.states, request, context).await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// Serves `server` over Streamable HTTP at `/mcp` on `listener` until the
/// process ends, with the library's serving recipe, as `mcp-tasks serve
/// --http` does.
pub async fn serve_http(
    server: FixtureServer,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let runtime = server.runtime.clone();
    StreamableHttpServer::new(server, runtime)
        .serve(listener)
        .await
}

/// Test helpers (shared with the tool tests of `self::tools`) and the
/// tests of discovery and HTTP.
#[cfg(test)]
pub(crate) mod tests;
