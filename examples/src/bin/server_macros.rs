//! An rmcp server written with rmcp's tool macros, made task-capable: its
//! router goes into a `TaskRouter` that gives some tools a task policy, and
//! each tool that wants its task takes a `TaskContext` argument.
//!
//! `cargo run -p mcp-tasks-examples --bin server_macros -- [ADDR]` (default
//! 127.0.0.1:8080); then `cargo run -p mcp-tasks-examples --bin client --
//! http://ADDR/mcp` (or `--bin client_journal`, whose `crunch` runs here).
//! Needs rmcp's `server` and `macros` features.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use mcp_tasks::Elicited;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskContext, TaskRouter, TaskRuntime, ToolTasks};
use mcp_tasks::store::MemoryStore;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};

/// The form `deploy` asks the user to fill in.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Approval {
    /// Go ahead?
    approve: bool,
}

/// The arguments of `crunch`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Crunch {
    /// How long to work, in seconds (default 5).
    seconds: Option<u64>,
}

#[derive(Clone)]
struct Server {
    tasks: TaskRouter<Self>,
}

#[tool_router]
impl Server {
    /// Builds for two seconds, saying how far it got.
    #[tool]
    async fn build(&self, task: TaskContext) -> Result<String, ErrorData> {
        // "0 of 4" ... "3 of 4" as the status message (and progress
        // notifications to a synchronous caller that asked for them).
        for done in 0..4 {
            task.progress(done, 4).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok("built".into())
    }

    /// Crunches numbers for a few seconds, saying how far it got: long
    /// enough to kill the client that waits for it (see `client_journal`).
    #[tool]
    async fn crunch(
        &self,
        Parameters(crunch): Parameters<Crunch>,
        task: TaskContext,
    ) -> Result<String, ErrorData> {
        let seconds = crunch.seconds.unwrap_or(5);
        for second in 0..seconds {
            task.set_status_message(format!("{second} of {seconds} s"))
                .await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(format!("crunched for {seconds} s"))
    }

    /// Asks for approval, then deploys.
    #[tool]
    async fn deploy(&self, task: TaskContext) -> Result<String, ErrorData> {
        Ok(
            match task.elicit::<Approval>("approval", "Deploy now?").await? {
                Elicited::Accept(Approval { approve: true }) => "deployed".into(),
                _ => "not deployed".into(),
            },
        )
    }

    /// Runs until cancelled.
    #[tool]
    async fn forever(&self, task: TaskContext) -> String {
        task.cancelled().await;
        "cancelled".into()
    }

    /// Answers at once: a plain rmcp tool, no task policy.
    #[tool]
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
}

// The macro calls `self.tasks` as it would call a `ToolRouter`.
#[tool_handler(router = self.tasks)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    mcp_tasks::delegate_task_methods!(tasks);
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let polled = Duration::from_millis(250);
    let tasks = TaskRouter::new(Server::tool_router(), runtime.clone())
        .with_tool("build", ToolTasks::required().with_poll_interval(polled))
        .with_tool("deploy", ToolTasks::required().with_poll_interval(polled))
        .with_tool("crunch", ToolTasks::required().with_poll_interval(polled))
        .with_tool("forever", ToolTasks::optional());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    StreamableHttpServer::new(Server { tasks }, runtime)
        .serve(listener)
        .await?;
    Ok(())
}
