//! The two task servers the library's benches compare, with the same
//! tools: ours ([`OurServer`], on a `TaskRuntime`) and rmcp's own
//! `TaskManager` alone ([`RmcpServer`]). `wait` runs forever, `instant`
//! returns at once, `live` returns after [`LIVE`].

use std::time::Duration;

use mcp_tasks::server::{AdmissionLimits, TaskRuntime, ToolTasks};
use mcp_tasks::store::SharedStore;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CreateTaskResult, GetTaskParams, GetTaskResult, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, ServerHandler};

/// The TTL of every task of the benches: none expires during a run.
pub const TTL_MS: u64 = 3_600_000;
/// The poll interval rmcp's tasks suggest.
pub const POLL_MS: u64 = 1_000;
/// How long the `live` tool runs: long enough that thousands of tasks are
/// live at once under load, as with real tools.
pub const LIVE: Duration = Duration::from_millis(100);

/// The result of every tool: `done`.
pub fn done() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text("done")])
}

/// The options of every task rmcp's `TaskManager` spawns here.
pub fn rmcp_options() -> TaskOptions {
    TaskOptions::new()
        .with_ttl_ms(TTL_MS)
        .with_poll_interval_ms(POLL_MS)
}

/// Tools and tasks.
pub fn capabilities() -> ServerConfig {
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build(),
    )
}

/// Our runtime with the three tools.
#[derive(Clone)]
pub struct OurServer {
    pub runtime: TaskRuntime,
}

impl OurServer {
    /// On `store`, for one caller that makes every task: no per-caller cap
    /// (its default, 1,000 unfinished tasks, would refuse the 10,000
    /// running ones), and no bound on running tools (its default, 1,024,
    /// would queue most of them).
    pub fn new(store: SharedStore) -> Self {
        Self {
            runtime: TaskRuntime::builder(store)
                .with_max_tasks_per_caller(None)
                .with_admission(AdmissionLimits::unbounded())
                .build(),
        }
    }
}

impl ServerHandler for OurServer {
    fn get_info(&self) -> ServerConfig {
        capabilities()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (runtime, tasks) = (&self.runtime, ToolTasks::required());
        match request.name.as_ref() {
            "wait" => {
                runtime
                    .call_tool(&request, &context, &tasks, |_| {
                        std::future::pending::<Result<CallToolResult, ErrorData>>()
                    })
                    .await
            }
            "instant" => {
                runtime
                    .call_tool(&request, &context, &tasks, |_| async { Ok(done()) })
                    .await
            }
            "live" => {
                runtime
                    .call_tool(&request, &context, &tasks, |_| async {
                        tokio::time::sleep(LIVE).await;
                        Ok(done())
                    })
                    .await
            }
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// The same tools on rmcp's own `TaskManager`.
#[derive(Clone, Default)]
pub struct RmcpServer {
    tasks: TaskManager,
}

impl ServerHandler for RmcpServer {
    fn get_info(&self) -> ServerConfig {
        capabilities()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let options = rmcp_options();
        let task = match request.name.as_ref() {
            "wait" => self.tasks.spawn(options, |_| {
                Box::pin(std::future::pending::<Result<CallToolResult, TaskExit>>())
            }),
            "instant" => self
                .tasks
                .spawn(options, |_| Box::pin(async { Ok(done()) })),
            "live" => self.tasks.spawn(options, |_| {
                Box::pin(async {
                    tokio::time::sleep(LIVE).await;
                    Ok(done())
                })
            }),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }
}
