//! Whether a tool's calls become tasks: [`ToolTasks`] and [`TaskPolicy`];
//! and which tools hand a caller that declared no tasks a handle
//! ([`TaskTools`], served by `handles`).
//! The protocol has no per-tool policy; this is the server's private
//! configuration: the 2026-07-28 Tasks extension (SEP-2663) lets the server
//! decide per call, and -32021 tells a client that did not declare it.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;

use crate::task::Ttl;

/// Whether a call becomes a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TaskPolicy {
    /// Always run synchronously.
    Forbidden,
    /// A task when the request declared the extension, else synchronous.
    #[default]
    Optional,
    /// Always a task; without the declaration the call fails with -32021.
    Required,
}

/// Decides the policy of one call from its request.
pub type PolicySelector = Arc<dyn Fn(&CallToolRequestParams) -> TaskPolicy + Send + Sync>;

/// How one tool uses tasks: its policy, and what its tasks look like.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ToolTasks {
    /// The policy (default optional).
    pub policy: TaskPolicy,
    /// Decides the policy per call instead of `policy`.
    pub selector: Option<PolicySelector>,
    /// The TTL of this tool's tasks (`None`: the runtime's default).
    pub ttl: Option<Ttl>,
    /// The `pollIntervalMs` suggested for this tool's tasks (`None`: the
    /// runtime's default).
    pub poll_interval: Option<Duration>,
    /// Whether the TTL counts from creation only, extended by nothing but
    /// the tool's own [`TaskContext::extend_ttl`](crate::server::TaskContext::extend_ttl)
    /// heartbeats (default `false`: the TTL follows activity, see
    /// [`TaskRuntimeBuilder::with_default_ttl`](crate::server::TaskRuntimeBuilder::with_default_ttl)).
    pub ttl_from_creation: bool,
    /// Whether the tool's task runs again when the server running it stops
    /// (default false: the task fails with "the server running this task
    /// stopped", or on SQLite "server restarted before the task finished"):
    /// on another server of a shared store (Redis, PostgreSQL), or on the same server
    /// started again on a store that outlives it (SQLite); only where the
    /// runtime was given the code to run it again
    /// ([`TaskRuntimeBuilder::with_resume`](crate::server::TaskRuntimeBuilder::with_resume)).
    /// The task then keeps the call's name and arguments. The tool runs
    /// again from its last [`TaskContext::checkpoint`](crate::server::TaskContext::checkpoint)
    /// (read with [`TaskContext::resumed`](crate::server::TaskContext::resumed)), or
    /// from the start if it made none: what it did since its last
    /// checkpoint is done again, so checkpoint after each unit of work.
    /// Input it asked for under a key is not asked again: the tool asking
    /// under the same key gets the answer (or waits for it).
    pub resumable: bool,
    /// For a resumable tool: whether a drain waits for its task to end
    /// (up to the drain's timeout, as for a tool that is not resumable)
    /// before it hands the task to another server or leaves it for the
    /// next start (default false: on a shared store a drain hands it off
    /// at once, at its next checkpoint). For a tool that starts over when
    /// resumed, whose work in progress a hand-off would throw away.
    pub drain_wait: bool,
}

impl fmt::Debug for ToolTasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolTasks")
            .field("policy", &self.policy)
            .field("selector", &self.selector.as_ref().map(|_| ".."))
            .field("ttl", &self.ttl)
            .field("poll_interval", &self.poll_interval)
            .field("ttl_from_creation", &self.ttl_from_creation)
            .field("resumable", &self.resumable)
            .field("drain_wait", &self.drain_wait)
            .finish()
    }
}

impl ToolTasks {
    /// Never a task.
    pub fn forbidden() -> Self {
        Self::with_policy(TaskPolicy::Forbidden)
    }

    /// A task when the client declared the extension.
    pub fn optional() -> Self {
        Self::with_policy(TaskPolicy::Optional)
    }

    /// Always a task.
    pub fn required() -> Self {
        Self::with_policy(TaskPolicy::Required)
    }

    fn with_policy(policy: TaskPolicy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// Decides the policy per call.
    pub fn with_selector(
        mut self,
        selector: impl Fn(&CallToolRequestParams) -> TaskPolicy + Send + Sync + 'static,
    ) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }

    /// This tool's TTL.
    pub fn with_ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The TTL counts from creation, as the extension defines it: the
    /// runtime does not keep the task alive while the tool runs, and only
    /// the tool's [`TaskContext::extend_ttl`](crate::server::TaskContext::extend_ttl)
    /// heartbeats extend it (a tool that hangs then expires at its TTL,
    /// however short). The maximum lifetime still bounds it.
    pub fn with_ttl_from_creation(mut self) -> Self {
        self.ttl_from_creation = true;
        self
    }

    /// The poll interval suggested for this tool's tasks.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// Whether another server may run this tool's task again when the
    /// server running it stops (see [`ToolTasks::resumable`]).
    pub fn with_resumable(mut self, resumable: bool) -> Self {
        self.resumable = resumable;
        self
    }

    /// Whether a drain waits for this resumable tool's task to end before
    /// it hands the task off (see [`ToolTasks::drain_wait`]).
    pub fn with_drain_wait(mut self, wait: bool) -> Self {
        self.drain_wait = wait;
        self
    }

    /// The policy of the call `request`.
    pub(crate) fn policy_for(&self, request: &CallToolRequestParams) -> TaskPolicy {
        match &self.selector {
            Some(select) => select(request),
            None => self.policy,
        }
    }
}

/// The policy of each tool as the runtime announces it to 2025-11-25
/// clients, which read it in `tools/list` (each tool's
/// `execution.taskSupport`) before they call: the extension of 2026-07-28
/// has no such field, the older era cannot do without it. Filled by
/// [`TaskRuntime::advertise_tool`](crate::server::TaskRuntime::advertise_tool)
/// ([`TaskRouter::with_tool`](crate::server::TaskRouter::with_tool) and the gateway
/// call it).
#[derive(Debug, Default)]
pub(crate) struct Advertised(RwLock<HashMap<String, TaskPolicy>>);

impl Advertised {
    pub(crate) fn set(&self, name: String, policy: TaskPolicy) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name, policy);
    }

    pub(crate) fn get(&self, name: &str) -> Option<TaskPolicy> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .copied()
    }
}

/// How long a caller that declared no tasks waits for its task before it
/// gets a handle, by default: long enough for a tool that is quick most of
/// the time to answer as before, far below every host's own timeout.
pub const DEFAULT_TASK_TOOLS_WINDOW: Duration = Duration::from_secs(5);

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
    /// policy allows a task; off when `names` is empty.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let names: BTreeSet<String> = names.into_iter().map(Into::into).collect();
        let covered = match names.is_empty() {
            true => Covered::None,
            false => Covered::Only(Arc::new(names)),
        };
        Self {
            covered,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_tools_cover_all_some_or_no_tools() {
        assert!(!TaskTools::off().is_on() && !TaskTools::off().covers("sleep"));
        assert_eq!(TaskTools::default(), TaskTools::off());
        let all = TaskTools::all();
        assert!(all.is_on() && all.covers("sleep") && all.covers("anything"));
        assert_eq!(all.window(), DEFAULT_TASK_TOOLS_WINDOW);
        let some = TaskTools::only(["sleep"]).with_window(Duration::ZERO);
        assert!(some.is_on() && some.covers("sleep") && !some.covers("long_job"));
        assert_eq!(some.window(), Duration::ZERO);
        // No names: nothing covered, so no task tools either.
        let none = TaskTools::only(Vec::<String>::new());
        assert!(!none.is_on() && !none.covers("sleep"));
    }
}
