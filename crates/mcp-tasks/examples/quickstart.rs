//! A task end to end in one process: an rmcp server whose tool becomes a
//! task (rmcp's own `TaskManager`), and our client calling it, watching its
//! status, answering its question and printing the result.
//!
//! `cargo run --example quickstart`
#![allow(clippy::print_stdout)]

use std::time::Duration;

use mcp_tasks::{AwaitOptions, CallOptions, TaskOutcome, TasksClient};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, CreateTaskResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    GetTaskParams, GetTaskResult, Implementation, ProtocolVersion, ServerCapabilities,
    ServerConfig, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleServer, serve_client_with_lifecycle};
use rmcp::task_manager::{TaskManager, TaskOptions};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServerHandler, ServiceExt};
use serde_json::json;

/// The server: every call becomes a task that works, asks a name, and greets.
#[derive(Clone, Default)]
struct Server(TaskManager);

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }
    async fn call_tool(
        &self,
        _: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let options = TaskOptions::new().with_poll_interval_ms(100);
        let task = self.0.spawn(options, |ctx| Box::pin(async move {
            ctx.set_status_message("warming up");
            tokio::time::sleep(Duration::from_millis(300)).await;
            let form = json!({"method": "elicitation/create", "params": {"message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
            let answer = ctx.request_input("name", serde_json::from_value(form).expect("a form")).await?;
            let name = answer["content"]["name"].as_str().unwrap_or("stranger").to_owned();
            Ok(CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name}!"))]))
        }));
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }
    async fn get_task(
        &self,
        request: GetTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.0.get_task(&request.task_id)?))
    }
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0
            .update_task(&request.task_id, request.input_responses)
    }
}

/// The client's handler answers elicitation forms.
#[derive(Clone)]
struct Client;

impl ClientHandler for Client {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            println!("server asks: {message} -> answering Ada");
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"})))
    }
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(Default::default());
        ClientConfig::new(capabilities, Implementation::new("quickstart", "0.1.0"))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = Server::default().serve(server_io);
    let server = tokio::spawn(async move {
        if let Ok(running) = server.await {
            let _ = running.waiting().await;
        }
    });
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = TasksClient::new(serve_client_with_lifecycle(Client, client_io, lifecycle).await?);
    println!("server supports tasks: {}", client.server_supports());

    let options = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(10)))
        .with_observer(|state| {
            println!(
                "  {} {}",
                state.status,
                state.status_message.as_deref().unwrap_or("")
            )
        });
    match client
        .call_and_await("greet", None, CallOptions::default(), &options)
        .await?
    {
        TaskOutcome::Completed(result) => println!(
            "result: {}",
            result.content[0].as_text().map_or("", |t| &t.text)
        ),
        other => anyhow::bail!("the task ended {}", other.status()),
    }
    drop(client);
    server.abort();
    Ok(())
}
