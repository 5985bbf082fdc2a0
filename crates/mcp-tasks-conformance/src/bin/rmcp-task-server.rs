//! A fixture MCP server whose task support comes only from rmcp's own
//! [`rmcp::task_manager::TaskManager`] (the `io.modelcontextprotocol/tasks`
//! extension, SEP-2663). Integration tests use it to prove that the client
//! round-trips against rmcp's server side.
//!
//! ```text
//! rmcp-task-server stdio
//! rmcp-task-server http 127.0.0.1:0 [--sse] [--sessions]
//! ```
//!
//! `stdio` serves newline-delimited JSON-RPC on stdin/stdout. `http` serves
//! rmcp's Streamable HTTP server at `/mcp` and prints one line,
//! `listening on http://ADDR/mcp`, then serves until killed or until stdin is
//! closed. By default the HTTP server is stateless (no `Mcp-Session-Id`;
//! 2026-07-28 requests are always stateless in rmcp) and answers with plain
//! JSON where it can; `--sse` answers with `text/event-stream` instead and
//! `--sessions` turns on rmcp's legacy session mode for `initialize`-era
//! clients.
//!
//! Tools (each becomes a task when the `tools/call` request declares the
//! tasks extension in its client capabilities; tasks poll every 50 ms and
//! live for 60 s):
//!
//! - `slow {"ms": N}` (default 200): status message `halfway` after N/2 ms,
//!   completes after N ms with the text `slept N ms`.
//! - `is_error_tool`: completes with `isError: true` and `tool said no`.
//! - `protocol_error_tool`: fails with JSON-RPC error -32603 `boom`.
//! - `ask_name`: asks for `{name}` with an elicitation form under the
//!   `inputRequests` key `name`, then completes with `Hello, NAME!` (or
//!   `no name` when the answer is not an accepted name).
//! - `forever`: runs until `tasks/cancel`, then ends `cancelled`.
//!
//! Without the tasks extension `slow`, `is_error_tool` and
//! `protocol_error_tool` run synchronously; `ask_name` and `forever` answer
//! -32021 (missing required client capability), as rmcp does.

use std::{io::Write as _, sync::Arc, time::Duration};

use rmcp::{
    ErrorData as McpError, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
        ClientCapabilities, ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult,
        Implementation, InputRequest, JsonObject, ListToolsResult, PaginatedRequestParams,
        ServerCapabilities, ServerConfig, Tool, UpdateTaskParams,
    },
    service::{RequestContext, RoleServer},
    task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions},
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};

/// Suggested polling interval for every task, in milliseconds.
const POLL_INTERVAL_MS: u64 = 50;
/// Time to live for every task, in milliseconds.
const TTL_MS: u64 = 60_000;
/// Default duration of the `slow` tool, in milliseconds.
const DEFAULT_SLOW_MS: u64 = 200;
/// The `inputRequests` key under which `ask_name` asks for the name.
const NAME_INPUT_KEY: &str = "name";

/// The fixture server: a tool list and one shared [`TaskManager`].
///
/// Clones share the task store, so the per-request service instances of the
/// stateless HTTP server all see the same tasks.
#[derive(Clone, Default)]
struct TaskServer {
    tasks: TaskManager,
}

impl std::fmt::Debug for TaskServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskServer").finish_non_exhaustive()
    }
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tools() -> Vec<Tool> {
    let empty = || schema(json!({"type": "object", "properties": {}}));
    vec![
        Tool::new(
            "slow",
            "Sleeps `ms` milliseconds (default 200); says `halfway` half way through.",
            schema(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0}},
            })),
        ),
        Tool::new(
            "is_error_tool",
            "Completes with a tool error (isError: true).",
            empty(),
        ),
        Tool::new(
            "protocol_error_tool",
            "Fails with JSON-RPC error -32603 `boom`.",
            empty(),
        ),
        Tool::new(
            "ask_name",
            "Asks for a name through an elicitation form, then greets it.",
            empty(),
        ),
        Tool::new("forever", "Runs until cancelled.", empty()),
    ]
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn is_error_result() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text("tool said no")])
}

fn boom() -> McpError {
    McpError::internal_error("boom", None)
}

fn tasks_required() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn slow_ms(arguments: Option<&JsonObject>) -> Result<u64, McpError> {
    match arguments.and_then(|arguments| arguments.get("ms")) {
        None | Some(Value::Null) => Ok(DEFAULT_SLOW_MS),
        Some(value) => value
            .as_u64()
            .ok_or_else(|| McpError::invalid_params("`ms` must be a non-negative integer", None)),
    }
}

/// `slow` as a task: honours `tasks/cancel` while sleeping.
async fn slow_task(ctx: TaskContext, ms: u64) -> Result<CallToolResult, TaskExit> {
    let half = Duration::from_millis(ms / 2);
    let rest = Duration::from_millis(ms - ms / 2);
    tokio::select! {
        () = ctx.cancelled() => return Err(TaskExit::Cancelled),
        () = tokio::time::sleep(half) => {}
    }
    ctx.set_status_message("halfway");
    tokio::select! {
        () = ctx.cancelled() => return Err(TaskExit::Cancelled),
        () = tokio::time::sleep(rest) => {}
    }
    Ok(text_result(format!("slept {ms} ms")))
}

fn name_request() -> Result<InputRequest, McpError> {
    serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "What is your name?",
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
    }))
    .map_err(|error| McpError::internal_error(format!("elicitation request: {error}"), None))
}

/// `ask_name` as a task: a parked `request_input` wakes with
/// [`TaskExit::Cancelled`] on `tasks/cancel`.
async fn ask_name_task(ctx: TaskContext) -> Result<CallToolResult, TaskExit> {
    let response = ctx.request_input(NAME_INPUT_KEY, name_request()?).await?;
    let accepted = response.get("action").and_then(Value::as_str) == Some("accept");
    let name = response
        .get("content")
        .and_then(|content| content.get("name"))
        .and_then(Value::as_str)
        .filter(|name| accepted && !name.is_empty());
    Ok(text_result(match name {
        Some(name) => format!("Hello, {name}!"),
        None => "no name".to_owned(),
    }))
}

async fn forever_task(ctx: TaskContext) -> Result<CallToolResult, TaskExit> {
    ctx.cancelled().await;
    Err(TaskExit::Cancelled)
}

impl TaskServer {
    fn spawn_task(
        &self,
        name: &str,
        arguments: Option<&JsonObject>,
    ) -> Result<CreateTaskResult, McpError> {
        let options = TaskOptions::new()
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_ttl_ms(TTL_MS);
        let task = match name {
            "slow" => {
                let ms = slow_ms(arguments)?;
                self.tasks
                    .spawn(options, move |ctx| Box::pin(slow_task(ctx, ms)))
            }
            "is_error_tool" => self
                .tasks
                .spawn(options, |_ctx| Box::pin(async { Ok(is_error_result()) })),
            "protocol_error_tool" => self.tasks.spawn(options, |_ctx| {
                Box::pin(async { Err(TaskExit::Error(boom())) })
            }),
            "ask_name" => self
                .tasks
                .spawn(options, |ctx| Box::pin(ask_name_task(ctx))),
            "forever" => self.tasks.spawn(options, |ctx| Box::pin(forever_task(ctx))),
            _ => return Err(unknown_tool(name)),
        };
        Ok(CreateTaskResult::new(task))
    }

    async fn call_sync(
        name: &str,
        arguments: Option<&JsonObject>,
    ) -> Result<CallToolResult, McpError> {
        match name {
            "slow" => {
                let ms = slow_ms(arguments)?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(text_result(format!("slept {ms} ms")))
            }
            "is_error_tool" => Ok(is_error_result()),
            "protocol_error_tool" => Err(boom()),
            "ask_name" | "forever" => Err(tasks_required()),
            _ => Err(unknown_tool(name)),
        }
    }
}

fn unknown_tool(name: &str) -> McpError {
    McpError::invalid_params(format!("tool not found: {name}"), None)
}

impl ServerHandler for TaskServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "rmcp-task-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let client_supports_tasks = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let arguments = request.arguments.as_ref();
        if client_supports_tasks {
            Ok(CallToolResponse::Task(
                self.spawn_task(&request.name, arguments)?,
            ))
        } else {
            Self::call_sync(&request.name, arguments)
                .await
                .map(CallToolResponse::from)
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }
}

async fn serve_stdio() -> Result<(), String> {
    let service = TaskServer::default()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| format!("stdio server failed to start: {error}"))?;
    service
        .waiting()
        .await
        .map_err(|error| format!("stdio server failed: {error}"))?;
    Ok(())
}

async fn serve_http(address: &str, sse: bool, sessions: bool) -> Result<(), String> {
    let server = TaskServer::default();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(sessions)
        .with_json_response(!sse)
        .with_sse_keep_alive(None);
    let service: StreamableHttpService<TaskServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| format!("cannot bind {address}: {error}"))?;
    let local = listener
        .local_addr()
        .map_err(|error| format!("no local address: {error}"))?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{local}/mcp")
            .and_then(|()| stdout.flush())
            .map_err(|error| format!("cannot write to stdout: {error}"))?;
    }
    tokio::select! {
        result = axum::serve(listener, router).into_future() => {
            result.map_err(|error| format!("http server failed: {error}"))
        }
        () = stdin_closed() => Ok(()),
    }
}

/// Resolves once stdin reaches end of file (or fails).
async fn stdin_closed() {
    use tokio::io::AsyncReadExt as _;
    let mut stdin = tokio::io::stdin();
    let mut buffer = [0_u8; 1024];
    while matches!(stdin.read(&mut buffer).await, Ok(n) if n > 0) {}
}

const USAGE: &str =
    "usage: rmcp-task-server stdio | rmcp-task-server http ADDR [--sse] [--sessions]";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["stdio"] => serve_stdio().await,
        ["http", address, flags @ ..]
            if flags
                .iter()
                .all(|flag| matches!(*flag, "--sse" | "--sessions")) =>
        {
            serve_http(
                address,
                flags.contains(&"--sse"),
                flags.contains(&"--sessions"),
            )
            .await
        }
        _ => Err(USAGE.to_owned()),
    };
    // Exit explicitly: a pending blocking read of stdin would otherwise keep
    // the runtime from shutting down.
    let code = match result {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("rmcp-task-server: {message}");
            2
        }
    };
    std::process::exit(code);
}
