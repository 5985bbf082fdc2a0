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
//! It may import the engine's creation path and live tasks (it is one more
//! way to answer a `tools/call`); the transports, the gateway and the
//! servers of the CLI import it, never the reverse.
//!
//! [`TaskRuntimeBuilder::with_task_tools`]: crate::server::TaskRuntimeBuilder::with_task_tools

mod follow;
mod shown;
mod tools;
pub(crate) mod window;

pub use crate::task::HANDLE_META;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::era;
use super::policy::TaskPolicy;
use super::tasks::runtime::TaskRuntime;

/// How long a caller that declared no tasks waits for its task before it
/// gets a handle, by default: long enough for a tool that is quick most of
/// the time to answer as before, far below every host's own timeout.
pub const DEFAULT_TASK_TOOLS_WINDOW: Duration = Duration::from_secs(5);

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

/// Which tools hand a caller that declared no tasks a handle, and how long
/// it waits first ([`TaskRuntimeBuilder::with_task_tools`]).
///
/// [`TaskRuntimeBuilder::with_task_tools`]: crate::server::TaskRuntimeBuilder::with_task_tools
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTools {
    covered: Covered,
    window: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Covered {
    None,
    All,
    Only(Arc<BTreeSet<String>>),
}

impl Default for TaskTools {
    fn default() -> Self {
        Self::off()
    }
}

impl TaskTools {
    /// Off: a caller that declared no tasks gets synchronous calls, as the
    /// spec says (the default).
    pub fn off() -> Self {
        Self {
            covered: Covered::None,
            window: DEFAULT_TASK_TOOLS_WINDOW,
        }
    }

    /// On for every tool whose policy allows a task (optional or
    /// required).
    pub fn all() -> Self {
        Self {
            covered: Covered::All,
            ..Self::off()
        }
    }

    /// On for the tools `names` only (as callers call them), where their
    /// policy allows a task.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names: BTreeSet<String> = names.into_iter().map(Into::into).collect();
        Self {
            covered: Covered::Only(Arc::new(names)),
            ..Self::off()
        }
    }

    /// How long the caller waits for its task before it gets a handle
    /// (default [`DEFAULT_TASK_TOOLS_WINDOW`]; zero: a handle at once,
    /// unless the tool's first step finished it).
    pub fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The window ([`TaskTools::with_window`]).
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Whether any tool is covered: the task tools are served.
    pub fn is_on(&self) -> bool {
        self.covered != Covered::None
    }

    /// Whether the tool `name` is covered (its policy decides the rest).
    pub fn covers(&self, name: &str) -> bool {
        match &self.covered {
            Covered::None => false,
            Covered::All => true,
            Covered::Only(names) => names.contains(name),
        }
    }
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
    /// [`TaskRouter`](crate::server::TaskRouter), the gateway.
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
