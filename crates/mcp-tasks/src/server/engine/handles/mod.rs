//! Durable tasks for callers that declare none, through tools.
//!
//! Most hosts (coding agents, chat apps, CLIs) send a plain `tools/call`
//! and wait, up to a timeout of their own: they never hold a task. With
//! [`TaskTools`] on ([`TaskRuntimeBuilder::with_task_tools`]), a call of a
//! covered tool whose policy allows a task, from a caller that declared no
//! tasks, runs as a task all the same (`calls/plan.rs` decides it); the
//! caller waits for it a short window (`window.rs`) and gets its plain
//! result when it ends within it, exactly as a synchronous call would, or
//! a handle otherwise: a plain `CallToolResult` whose text tells a model
//! which tool to call with which id. The task tools (`tools.rs`) follow
//! the task for its caller: wait for its outcome, read its status, cancel
//! it, answer its questions, list the caller's unfinished tasks. How a
//! task reads to a model is `shown.rs`; the wait that the window and
//! `tasks_wait` share, asking a caller whose session takes elicitation on
//! its own connection, is `follow.rs`.
//!
//! Everything of a task holds for these: bound to the caller (another
//! caller's id is answered as an unknown one), admitted and capped, kept
//! for its TTL, drained and resumed on durable stores. The spec says a
//! call without the extension runs synchronously; a handle is a plain
//! result, but one a caller that declared tasks never gets, hence off by
//! default (docs/task-tools.md argues it).
//!
//! It imports live tasks (the runtime, the follower, asking on a
//! connection), the era's rules, the policies and the result budget; the
//! creation path (`calls`) imports its window, and the doors a
//! `tools/call` comes in by (`TaskRouter`, the gateway, the CLI's servers)
//! its two entry points, never the reverse.
//!
//! [`TaskRuntimeBuilder::with_task_tools`]: crate::server::TaskRuntimeBuilder::with_task_tools

mod follow;
mod shown;
mod tools;
pub(crate) mod window;

pub use crate::server::engine::policy::{DEFAULT_TASK_TOOLS_WINDOW, TaskTools};
pub use crate::task::HANDLE_META;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::era;
use super::policy::TaskPolicy;
use super::tasks::runtime::TaskRuntime;

/// The tool that waits for a task's outcome.
pub const TASKS_WAIT: &str = "tasks_wait";
/// The tool that reads a task's status.
pub const TASKS_STATUS: &str = "tasks_status";
/// The tool that cancels a task.
pub const TASKS_CANCEL: &str = "tasks_cancel";
/// The tool that answers a task's questions.
pub const TASKS_ANSWER: &str = "tasks_answer";
/// The tool that lists the caller's unfinished tasks.
pub const TASKS_LIST: &str = "tasks_list";

/// The names of the task tools. No tool of a server that turns them on may
/// have one of them (the gateway refuses such an upstream at start,
/// [`TaskRouter::new`](crate::server::TaskRouter::new) panics).
pub const TASK_TOOL_NAMES: [&str; 5] = [
    TASKS_WAIT,
    TASKS_STATUS,
    TASKS_CANCEL,
    TASKS_ANSWER,
    TASKS_LIST,
];

/// Whether `name` is one of the task tools.
pub fn is_task_tool(name: &str) -> bool {
    TASK_TOOL_NAMES.contains(&name)
}

impl TaskRuntime {
    /// The task tools this runtime serves ([`TaskRuntimeBuilder::with_task_tools`]).
    ///
    /// [`TaskRuntimeBuilder::with_task_tools`]: crate::server::TaskRuntimeBuilder::with_task_tools
    pub fn task_tools(&self) -> &TaskTools {
        &self.inner.settings.task_tools
    }

    /// Whether a call of tool `name` under `policy` from a caller that
    /// declared no tasks runs as a task that hands out a handle (past the
    /// window): the task tools cover it and its policy allows a task.
    pub fn hands_out(&self, name: &str, policy: TaskPolicy) -> bool {
        policy != TaskPolicy::Forbidden && self.task_tools().covers(name)
    }

    /// `tools/list` for the caller of `context`: `tools` as they are,
    /// unless task tools are on and the caller declared no tasks; then the
    /// tools that hand out a handle (by their [advertised policy]) are
    /// listed without `outputSchema` (a handle is not their output, and
    /// the SDKs check it against that schema), followed by the five task
    /// tools. On a 2025-11-25 session, which cannot say in a `tools/list`
    /// whether it holds tasks (rmcp does not keep the client's
    /// `capabilities.tasks`), they are listed unless it declared the
    /// extension.
    ///
    /// [advertised policy]: TaskRuntime::advertise_tool
    pub fn list_tools_for(
        &self,
        mut tools: Vec<Tool>,
        context: &RequestContext<RoleServer>,
    ) -> Vec<Tool> {
        if !self.task_tools().is_on() || declares_tasks_in_list(context) {
            return tools;
        }
        // Served as task tools: a tool of the same name could not be called.
        tools.retain(|tool| !is_task_tool(&tool.name));
        for tool in &mut tools {
            let policy = self
                .advertised_policy(&tool.name)
                .unwrap_or(TaskPolicy::Forbidden);
            if self.hands_out(&tool.name, policy) {
                tool.output_schema = None;
            }
        }
        tools.extend(tools::definitions());
        tools
    }

    /// Answers `request` when it calls one of the task tools and they are
    /// on (`None` otherwise: route the call as usual). Every door a
    /// `tools/call` comes in by asks this first: [`TaskRuntime::call_tool`],
    /// [`TaskRouter`](crate::server::TaskRouter), the gateway; so does a
    /// handler that routes calls by their tool's name before it reaches
    /// `call_tool` (or answers an unknown name itself).
    pub async fn call_task_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResult, ErrorData>> {
        if !self.task_tools().is_on() || !is_task_tool(&request.name) {
            return None;
        }
        Some(Box::pin(tools::call(self, request, context)).await)
    }
}

/// Whether the caller of a `tools/list` declared tasks: per request on
/// 2026-07-28 (the extension); on an initialize-era session, only when it
/// declared the extension.
fn declares_tasks_in_list(context: &RequestContext<RoleServer>) -> bool {
    !era::is_old_tasks_era(context) && era::declares_tasks(context)
}
