//! The first step of creation: who calls ([`Call`]), and whether the call
//! runs synchronously or as a task ([`Plan`]).

use rmcp::model::CallToolRequestParams;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::server::auth::principal::Principal;
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::era;
use crate::server::engine::handles::window::Handle;
use crate::server::engine::idempotent::Idempotent;
use crate::server::engine::policy::{TaskPolicy, ToolTasks};
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::tasks_required;

/// A `tools/call` as the runtime reads it before it decides: who sends it
/// (the principal its task would be bound to) and under which idempotency
/// key. Made by [`TaskRuntime::read_call`].
#[derive(Debug)]
pub struct Call {
    caller: Caller,
}

impl Call {
    /// The principal the call comes from: the owner of its task, if it
    /// becomes one.
    pub fn principal(&self) -> &Principal {
        &self.caller.principal
    }
}

/// What the runtime decided for a call ([`TaskRuntime::decide`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Plan {
    /// The call runs synchronously: hand it to
    /// [`TaskRuntime::run_synchronous`].
    Synchronous(Synchronous),
    /// The call becomes a task: hand it to [`TaskRuntime::create`].
    Task(NewTask),
}

/// A call that runs synchronously, once under its idempotency key.
#[derive(Debug)]
pub struct Synchronous {
    pub(super) caller: Caller,
    pub(super) described: CallToolRequestParams,
    pub(super) tasks: ToolTasks,
}

impl Synchronous {
    /// Whether the call sent an idempotency key: without one (or on a
    /// runtime that does not [honour keys](TaskRuntime::honours_idempotency)),
    /// it needs no record and may be run straight away.
    pub fn sent_key(&self) -> bool {
        self.caller.idempotent.is_some()
    }
}

/// A call that becomes a task, not created yet.
#[derive(Debug)]
pub struct NewTask {
    pub(super) caller: Caller,
    /// The call as the task keeps it: its tool's name, and its arguments
    /// when the task is resumable.
    pub(super) described: CallToolRequestParams,
    pub(super) tasks: ToolTasks,
    /// For a caller that declared no tasks: the window it waits before it
    /// gets a handle ([`TaskTools`](crate::server::TaskTools)).
    pub(super) handle: Option<Box<Handle>>,
    /// The first checkpoint, stored with the task's record when it is made.
    pub(super) checkpoint: Option<serde_json::Value>,
}

impl NewTask {
    /// Stores `state` as the task's checkpoint in the record that creates
    /// it, in the same write: a resumed run reads it with
    /// [`TaskContext::resumed`](crate::server::TaskContext::resumed) as it
    /// would read one the tool wrote, even when the server stopped before
    /// the tool ran at all. For a caller that knows before the task exists
    /// what a resumed run needs (the gateway: the upstream's task it
    /// follows). Only a resumable task is run again.
    #[must_use]
    pub fn with_checkpoint(mut self, state: serde_json::Value) -> Self {
        self.checkpoint = Some(state);
        self
    }

    /// Whether a drain waits for this task to end before it hands it off
    /// ([`ToolTasks::drain_wait`]), whatever its tool's policy said.
    #[must_use]
    pub fn with_drain_wait(mut self, wait: bool) -> Self {
        self.tasks.drain_wait = wait;
        self
    }

    /// The same call run synchronously instead, for a caller that cannot
    /// hold a task of this server (the gateway's calls that resume an
    /// upstream's parked call).
    pub fn into_synchronous(self) -> Synchronous {
        Synchronous {
            caller: self.caller,
            described: self.described,
            tasks: self.tasks,
        }
    }
}

impl TaskRuntime {
    /// Reads `request`: its caller (by the runtime's principal extractor),
    /// its idempotency key (-32602 for a `_meta` key that is not one) and
    /// whether it asks for a finished task's outcome with the task
    /// ([`CREATED_OUTCOME_EXTENSION`](crate::CREATED_OUTCOME_EXTENSION)).
    pub fn read_call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Call, ErrorData> {
        let idempotent = Idempotent::of(&context.meta, request)?;
        let caller = self
            .caller_of(&context.extensions)
            .with_idempotent(idempotent)
            .with_created_outcome(era::declares_created_outcome(&context.meta));
        Ok(Call { caller })
    }

    /// Decides whether `call` (of `request`, on the session of `context`)
    /// runs as a task: by the tool's policy in `tasks`, and whether the
    /// request declared the extension; -32021 when the tool requires a
    /// task and the extension was not declared. On an `initialize`-era
    /// session (2025-11-25 and before) that did not declare the extension,
    /// the rules of that era apply instead: a task when the call asked for
    /// one (`params.task`) and the policy allows it, -32601 when it asked
    /// against a forbidden policy or did not ask for a required tool, and
    /// the task's TTL is the one it asked for (within 1 s and the maximum
    /// lifetime). A call that declared no tasks in either era, of a tool
    /// whose policy allows a task and that the runtime's
    /// [`TaskTools`](crate::server::TaskTools) cover, becomes a task that
    /// answers with its result or, past the window, a handle.
    pub fn decide(
        &self,
        call: Call,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        tasks: &ToolTasks,
    ) -> Result<Plan, ErrorData> {
        let mode = self.mode_of(request, context, tasks)?;
        let tasks = era::with_requested_ttl(tasks, context, self.inner.settings.max_lifetime);
        let described = match tasks.resumable {
            true => request.clone(),
            false => CallToolRequestParams::new(request.name.clone()),
        };
        let (caller, tasks) = (call.caller, tasks.into_owned());
        Ok(match mode {
            Mode::Task => Plan::Task(NewTask {
                caller,
                described,
                tasks,
                handle: None,
                checkpoint: None,
            }),
            Mode::Handle => Plan::Task(NewTask {
                caller,
                described,
                tasks,
                handle: Some(Box::new(Handle {
                    window: self.task_tools().window(),
                    context: context.clone(),
                })),
                checkpoint: None,
            }),
            Mode::Synchronous => Plan::Synchronous(Synchronous {
                caller,
                described,
                tasks,
            }),
        })
    }

    /// `call` of `request` run synchronously without deciding: for a tool
    /// that has no task policy at all (a tool of the handler's own, beside
    /// those of a [`TaskRouter`](crate::server::TaskRouter)), whatever the
    /// request asked for. Its record, when it sent an idempotency key,
    /// lives for the runtime's default TTL.
    pub fn synchronous(&self, call: Call, request: &CallToolRequestParams) -> Synchronous {
        Synchronous {
            caller: call.caller,
            described: CallToolRequestParams::new(request.name.clone()),
            tasks: ToolTasks::forbidden(),
        }
    }
}

/// How a call runs (see [`TaskRuntime::decide`]).
enum Mode {
    Synchronous,
    Task,
    /// A task, for a caller that declared none: a handle past the window.
    Handle,
}

impl TaskRuntime {
    /// How `request` runs (see [`TaskRuntime::decide`]).
    fn mode_of(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        tasks: &ToolTasks,
    ) -> Result<Mode, ErrorData> {
        let policy = tasks.policy_for(request);
        // Task tools off (the default): nothing more of the request is read.
        if self.hands_out(&request.name, policy) && !era::declares_tasks(context) {
            return Ok(Mode::Handle);
        }
        let as_task = match era::is_old_tasks_era(context) {
            true => era::runs_as_task(request, context, policy)?,
            false => match (policy, era::declares_tasks(context)) {
                (TaskPolicy::Forbidden, _) => false,
                (TaskPolicy::Optional, declared) => declared,
                (TaskPolicy::Required, true) => true,
                (TaskPolicy::Required, false) => return Err(tasks_required()),
            },
        };
        Ok(if as_task {
            Mode::Task
        } else {
            Mode::Synchronous
        })
    }
}
