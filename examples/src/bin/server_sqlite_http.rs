//! A task server on SQLite over Streamable HTTP, written by hand: a
//! `ServerHandler` that hands each `tools/call` to the `TaskRuntime` with the
//! tool's task policy. Tasks survive a restart (the file keeps them).
//!
//! `cargo run -p mcp-tasks-examples --bin server_sqlite_http -- [ADDR] [FILE]`
//! (default 127.0.0.1:8080, and mcp-tasks-example-tasks.db in the temporary
//! folder); then `cargo run -p mcp-tasks-examples --bin client --
//! http://ADDR/mcp`. Needs rmcp's `server` feature (`mcp-tasks`'s
//! default `http-server` feature brings the rest) and `mcp-tasks-sqlite`.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use mcp_tasks::Elicited;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskContext, TaskRuntime, ToolTasks};
use mcp_tasks_sqlite::SqliteStore;
use rmcp::model::*;
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, schemars};

/// The form `deploy` asks the user to fill in.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Approval {
    /// Go ahead?
    approve: bool,
}

#[derive(Clone)]
struct Server {
    runtime: TaskRuntime,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let empty = rmcp::handler::server::common::schema_for_empty_input();
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "build",
                "Builds for two seconds, saying how far it got",
                empty.clone(),
            ),
            Tool::new("deploy", "Asks for approval, then deploys", empty.clone()),
            Tool::new("forever", "Runs until cancelled", empty),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Each tool's policy; a tool may also set its own TTL and poll interval.
        let tasks = ToolTasks::required().with_poll_interval(Duration::from_millis(250));
        let name = request.name.to_string();
        self.runtime
            .call_tool(&request, &context, &tasks, |task| run(name, task))
            .await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// The tools' code: it runs after `tools/call` has been answered with the task.
async fn run(name: String, task: TaskContext) -> Result<CallToolResult, ErrorData> {
    let text = match name.as_str() {
        "build" => {
            // "0 of 4" ... "3 of 4" as the status message (and progress
            // notifications to a synchronous caller that asked for them).
            for done in 0..4 {
                task.progress(done, 4).await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            "built".to_owned()
        }
        "deploy" => match task.elicit::<Approval>("approval", "Deploy now?").await? {
            Elicited::Accept(Approval { approve: true }) => "deployed".to_owned(),
            _ => "not deployed".to_owned(),
        },
        "forever" => std::future::pending().await,
        other => {
            return Err(ErrorData::invalid_params(
                format!("no tool {other:?}"),
                None,
            ));
        }
    };
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    // In the temporary folder by default: an example leaves nothing in
    // the folder it is run from.
    let file = args.next().map_or_else(
        || std::env::temp_dir().join("mcp-tasks-example-tasks.db"),
        std::path::PathBuf::from,
    );
    eprintln!("tasks kept in {}", file.display());
    // Tasks left unfinished by a previous run are failed when the file is opened.
    let store = SqliteStore::open(&file)?;
    let runtime = TaskRuntime::builder(store).build();
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    // The recipe: stateless JSON answers, tasks/* and listens answered from the
    // runtime, malformed requests refused, bounded bodies and connections,
    // TCP_NODELAY; every part has a builder method on StreamableHttpServer.
    let server = Server {
        runtime: runtime.clone(),
    };
    StreamableHttpServer::new(server, runtime)
        .serve(listener)
        .await?;
    Ok(())
}
