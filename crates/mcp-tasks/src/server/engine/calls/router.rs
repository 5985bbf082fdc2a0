//! Tools written with rmcp's macros, run as tasks: [`TaskRouter`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use rmcp::handler::server::common::{AsRequestContext, FromContextPart};
use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest, CustomResult,
    GetTaskParams, GetTaskResult, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::server::engine::budget::response_within;
use crate::server::engine::calls::{Plan, Synchronous};
use crate::server::engine::policy::ToolTasks;
use crate::server::engine::progress::ProgressSink;
use crate::server::engine::tasks::context::TaskContext;
use crate::server::engine::tasks::runtime::TaskRuntime;

/// An rmcp [`ToolRouter`] (what `#[tool_router]` writes) whose tools run
/// as tasks where their policy says so, on a [`TaskRuntime`].
///
/// It has the methods rmcp's `#[tool_handler]` calls on a router (`call`,
/// `list_all`, `get`) and the ones [`delegate_task_methods!`](crate::delegate_task_methods) calls on a
/// runtime, so a macro-written server gains tasks by keeping a
/// `TaskRouter<Self>`, naming it in `#[tool_handler(router = self.tasks)]`
/// and writing `delegate_task_methods!(tasks)`:
///
/// ```
/// use mcp_tasks::server::{TaskContext, TaskRouter, TaskRuntime, ToolTasks};
/// use mcp_tasks::store::MemoryStore;
/// use rmcp::handler::server::wrapper::Parameters;
/// use rmcp::model::{ServerCapabilities, ServerConfig};
/// use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Build { target: String }
///
/// #[derive(Clone)]
/// struct Builds { tasks: TaskRouter<Self> }
///
/// #[tool_router]
/// impl Builds {
///     /// Builds a target; long, so it runs as a task.
///     #[tool]
///     async fn build(&self, Parameters(build): Parameters<Build>, task: TaskContext)
///         -> Result<String, ErrorData> {
///         task.set_status_message(format!("building {}", build.target)).await?;
///         Ok(format!("built {}", build.target))
///     }
/// }
///
/// #[tool_handler(router = self.tasks)]
/// impl ServerHandler for Builds {
///     fn get_info(&self) -> ServerConfig {
///         ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
///     }
///     mcp_tasks::delegate_task_methods!(tasks);
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let runtime = TaskRuntime::builder(MemoryStore::new()).build();
/// let server = Builds {
///     tasks: TaskRouter::new(Builds::tool_router(), runtime)
///         .with_tool("build", ToolTasks::required()),
/// };
/// # let _ = server;
/// # }
/// ```
///
/// A tool reaches its [`TaskContext`] by taking one as an argument (rmcp's
/// extractors: it comes after `&self`, in any position among the others).
/// When the tool runs synchronously (no policy, a forbidden one, or an
/// optional one on a request that did not declare the extension) it is
/// called by rmcp as usual and gets a synchronous context, whose status
/// messages do nothing and whose input requests fail with -32021 (on a
/// 2025-11-25 session they are asked on the session); it may return an
/// MRTR `InputRequiredResult` then. [`TaskRouter::with_tool`] also
/// announces the policy to 2025-11-25 clients
/// ([`TaskRuntime::advertise_tool`]). Run as a task, its result
/// (or rmcp's tool error for arguments that do not parse) becomes the
/// task's; rmcp's `CancellationToken` extractor gives the task's token.
///
/// Calls of a tool that runs as a task need the server value itself after
/// the request has been answered, so the server must be `Clone` (rmcp
/// servers usually are: their router is shared).
pub struct TaskRouter<S> {
    tools: Arc<ToolRouter<S>>,
    runtime: TaskRuntime,
    policies: Arc<HashMap<String, ToolTasks>>,
}

impl<S> Clone for TaskRouter<S> {
    fn clone(&self) -> Self {
        Self {
            tools: self.tools.clone(),
            runtime: self.runtime.clone(),
            policies: self.policies.clone(),
        }
    }
}

impl<S> fmt::Debug for TaskRouter<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tools: Vec<_> = self.tools.map.keys().collect();
        tools.sort();
        f.debug_struct("TaskRouter")
            .field("tools", &tools)
            .field("policies", &self.policies)
            .finish_non_exhaustive()
    }
}

impl<S> TaskRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    /// Routes `tools` on `runtime`. Every tool runs synchronously until
    /// [`TaskRouter::with_tool`] gives it a policy.
    ///
    /// # Panics
    ///
    /// If `runtime` serves the task tools
    /// ([`TaskRuntimeBuilder::with_task_tools`](crate::server::TaskRuntimeBuilder::with_task_tools))
    /// and `tools` has a tool of the same name as one of them.
    pub fn new(tools: ToolRouter<S>, runtime: TaskRuntime) -> Self {
        if runtime.task_tools().is_on()
            && let Some(name) = crate::server::TASK_TOOL_NAMES
                .into_iter()
                .find(|name| tools.has_route(name))
        {
            panic!(
                "TaskRouter::new: the router's tool {name:?} has the name of a task tool (--task-tools)"
            );
        }
        Self {
            tools: Arc::new(tools),
            runtime,
            policies: Arc::new(HashMap::new()),
        }
    }

    /// Sets the task policy (and TTL and poll interval) of the tool `name`.
    ///
    /// # Panics
    ///
    /// If the router has no tool `name`: a policy for a tool that does not
    /// exist is a typo that would otherwise go unnoticed.
    pub fn with_tool(mut self, name: &str, tasks: ToolTasks) -> Self {
        assert!(
            self.tools.has_route(name),
            "TaskRouter::with_tool: the router has no tool named {name:?}"
        );
        // 2025-11-25 clients read it in tools/list before they call.
        self.runtime.advertise_tool(name, tasks.policy);
        Arc::make_mut(&mut self.policies).insert(name.to_owned(), tasks);
        self
    }

    /// The runtime tasks run on.
    pub fn runtime(&self) -> &TaskRuntime {
        &self.runtime
    }

    /// The rmcp router underneath.
    pub fn tool_router(&self) -> &ToolRouter<S> {
        &self.tools
    }

    /// The policy of the tool `name`, if it has one.
    pub fn policy(&self, name: &str) -> Option<&ToolTasks> {
        self.policies.get(name)
    }

    /// `tools/call`, as `#[tool_handler]` calls it: rmcp's routing when the
    /// tool runs synchronously, a task created on the runtime otherwise.
    pub async fn call(
        &self,
        context: ToolCallContext<'_, S>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tasks = self.policies.get(context.name());
        let service = context.service.clone();
        let ToolCallContext {
            request_context,
            name,
            arguments,
            input_responses,
            request_state,
            ..
        } = context;
        let mut request = CallToolRequestParams::new(name);
        request.arguments = arguments;
        request.input_responses = input_responses;
        request.request_state = request_state;
        if let Some(answered) = self
            .runtime
            .call_task_tool(&request, &request_context)
            .await
        {
            return answered.map(CallToolResponse::from);
        }
        let call = self.runtime.read_call(&request, &request_context)?;
        let Some(tasks) = tasks else {
            let call = self.runtime.synchronous(call, &request);
            return self
                .call_once(&service, request, request_context, call)
                .await;
        };
        let task = match self
            .runtime
            .decide(call, &request, &request_context, tasks)?
        {
            Plan::Task(task) => task,
            Plan::Synchronous(call) => {
                return self
                    .call_once(&service, request, request_context, call)
                    .await;
            }
        };
        let tools = self.tools.clone();
        // A 2025-11-25 caller's progress token stays valid for its task.
        let progress = ProgressSink::for_task(&request_context);
        self.runtime
            .create(task, move |task| {
                let task = task.with_progress(progress);
                let mut request_context = request_context;
                request_context.ct = task.cancellation_token();
                request_context.extensions.insert(task);
                async move {
                    let call = ToolCallContext::new(&service, request, request_context);
                    match tools.call(call).await? {
                        CallToolResponse::Complete(result) => Ok(result),
                        CallToolResponse::InputRequired(_) => Err(ErrorData::internal_error(
                            "a tool running as a task returned an InputRequiredResult; \
                             it asks for input with TaskContext::request_input instead",
                            None,
                        )),
                        _ => Err(ErrorData::internal_error(
                            "a tool running as a task returned a task of its own",
                            None,
                        )),
                    }
                }
            })
            .await
    }

    /// A call that runs synchronously: rmcp's routing, once under the
    /// call's idempotency key when it sent one (see
    /// [`TaskRuntime::declare_idempotency`]), its answer held to the
    /// runtime's result budget ([`TaskRuntime::max_result_bytes`]).
    async fn call_once(
        &self,
        service: &S,
        request: CallToolRequestParams,
        request_context: RequestContext<RoleServer>,
        call: Synchronous,
    ) -> Result<CallToolResponse, ErrorData> {
        let limit = self.runtime.max_result_bytes();
        if !call.sent_key() || !self.runtime.honours_idempotency() {
            let call = ToolCallContext::new(service, request, request_context);
            return response_within(self.tools.call(call).await, limit);
        }
        let cancelled = request_context.ct.clone();
        let (service, tools) = (service.clone(), self.tools.clone());
        // Held to the budget by run_synchronous, before it is kept for the key.
        let run = async move {
            let call = ToolCallContext::new(&service, request, request_context);
            tools.call(call).await
        };
        self.runtime.run_synchronous(call, &cancelled, run).await
    }

    /// `tools/list`, as `#[tool_handler]` calls it: rmcp's list.
    pub fn list_all(&self) -> Vec<Tool> {
        self.tools.list_all()
    }

    /// `tools/list` for the caller of `context`: rmcp's list, with the
    /// task tools for a caller that declared no tasks when the runtime
    /// serves them ([`TaskRuntime::list_tools_for`]). `#[tool_handler]`
    /// writes a `list_tools` that calls [`TaskRouter::list_all`] unless the
    /// impl has its own: a server with task tools on writes
    /// `list_tools` to call this.
    pub fn list_for(&self, context: &RequestContext<RoleServer>) -> Vec<Tool> {
        self.runtime.list_tools_for(self.tools.list_all(), context)
    }

    /// One tool's definition, as `#[tool_handler]` calls it.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// [`TaskRuntime::get_task`], for [`delegate_task_methods!`](crate::delegate_task_methods).
    pub async fn get_task(
        &self,
        request: GetTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.runtime.get_task(request, context).await
    }

    /// [`TaskRuntime::update_task`], for [`delegate_task_methods!`](crate::delegate_task_methods).
    pub async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.runtime.update_task(request, context).await
    }

    /// [`TaskRuntime::on_custom_request`] (task listens over stdio), for
    /// [`delegate_task_methods!`](crate::delegate_task_methods).
    pub async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.runtime.on_custom_request(request, context).await
    }

    /// [`TaskRuntime::serve_custom_request`] (task listens, 2025-11-25
    /// tasks), for [`delegate_task_methods!`](crate::delegate_task_methods).
    pub async fn serve_custom_request<H: rmcp::ServerHandler>(
        &self,
        server: &H,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.runtime
            .serve_custom_request(server, request, context)
            .await
    }

    /// [`TaskRuntime::cancel_task`], for [`delegate_task_methods!`](crate::delegate_task_methods).
    pub async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.runtime.cancel_task(request, context).await
    }
}

/// A tool function's [`TaskContext`] argument: the task's when the tool
/// runs as a task under a [`TaskRouter`], a synchronous one otherwise.
impl<C: AsRequestContext> FromContextPart<C> for TaskContext {
    fn from_context_part(context: &mut C) -> Result<Self, ErrorData> {
        let context = context.as_request_context();
        Ok(context
            .extensions
            .get::<TaskContext>()
            .cloned()
            .unwrap_or_else(|| TaskContext::synchronous(context)))
    }
}
