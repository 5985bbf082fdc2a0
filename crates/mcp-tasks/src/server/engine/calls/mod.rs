//! The task engine: the one way a `tools/call` becomes a task or a
//! synchronous run, for every door a call comes in by.
//!
//! Creation is two steps on [`TaskRuntime`]:
//!
//! 1. [`TaskRuntime::read_call`] reads who sends the call and under which
//!    idempotency key ([`Call`]); [`TaskRuntime::decide`] then decides,
//!    from the tool's [`ToolTasks`] and the request's declaration, whether
//!    it runs synchronously or as a task ([`Plan`]).
//! 2. [`TaskRuntime::create`] creates a [`NewTask`] through the gates and
//!    runs its tool under supervision; [`TaskRuntime::run_synchronous`]
//!    runs a [`Synchronous`] call once under its key.
//!
//! [`TaskRuntime::call_tool`], the [`TaskRouter`](crate::server::TaskRouter) (and
//! through them the HTTP and stdio fast paths and the 2025-11-25 answers)
//! and the gateway all create through these four; none reaches past them.
//!
//! A task is admitted by an ordered list of gates (`gates/`, one file
//! each: the same call sent again, the caller's rate, its seats, the
//! queue, the lease, the shared seats); what they hand over is stored and
//! supervised by `create.rs`. A gate that refuses for load says so with a
//! [`Refusal`](super::admission::refusal::Refusal), which becomes the
//! wire's error here, at the engine's edge, and nowhere deeper.
//!
//! What this folder may import: the runtime's state and handle
//! (`state.rs`, `runtime.rs`), the parts a creation is made of
//! (admission, the caller's seats, the lease, the context, supervision,
//! takeover's stored call, the idempotent answer, the era's rules) and the
//! store. Nothing of a transport (HTTP, stdio), of the gateway or of the
//! operator's side: they import the engine, never the reverse.

mod create;
mod gates;
pub(crate) mod once;
mod plan;
mod record;
pub(crate) mod router;
mod stop;

use std::future::Future;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio_util::sync::CancellationToken;

use super::policy::ToolTasks;
use super::progress::ProgressSink;
use crate::server::engine::tasks::context::TaskContext;
use crate::server::engine::tasks::runtime::TaskRuntime;

pub use plan::{Call, NewTask, Plan, Synchronous};

impl TaskRuntime {
    /// Runs one `tools/call`: synchronously or as a task, as `tasks` and
    /// the request's declaration decide. A task is in the store before this
    /// returns its `CreateTaskResult`.
    ///
    /// The tool's first step (its future's first poll) runs here, before
    /// the task is stored; what it does to its task (a status message, an
    /// input request) waits until the task is. A tool that returns from
    /// that step is stored already finished, in one write, and its
    /// `CreateTaskResult` says `completed` (or `failed`). A call with an
    /// idempotency key has its tool's first step run once the task (which
    /// holds the key) is stored, still before the answer: a tool that
    /// returns from it has its outcome written before the answer, which
    /// says so too. So that step should not block: the answer waits for it.
    ///
    /// The same as [`TaskRuntime::call_task_tool`] (a call of a task
    /// tool, when they are on), else [`TaskRuntime::read_call`],
    /// [`TaskRuntime::decide`], then [`TaskRuntime::create`] or
    /// [`TaskRuntime::run_synchronous`].
    pub async fn call_tool<F, Fut>(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        tasks: &ToolTasks,
        run: F,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        if let Some(answered) = self.call_task_tool(request, context).await {
            return answered.map(CallToolResponse::from);
        }
        let call = self.read_call(request, context)?;
        let task = match self.decide(call, request, context, tasks)? {
            Plan::Synchronous(call) => {
                let run = run(TaskContext::synchronous(context));
                let run = async move { run.await.map(CallToolResponse::from) };
                return self.run_synchronous(call, &context.ct, run).await;
            }
            Plan::Task(task) => task,
        };
        // A 2025-11-25 caller's progress token stays valid for its task.
        let progress = ProgressSink::for_task(context);
        let run = move |task: TaskContext| run(task.with_progress(progress));
        self.create(task, run).await
    }

    /// Creates `task` durably and runs `run` under its supervision: through
    /// the gates first (a call sent again under its idempotency key gets
    /// its first task back, before anything else; then the caller's rate,
    /// its cap, the queue, the lease and the shared seats). Answers the
    /// `CreateTaskResult` once the task is in the store (see
    /// [`TaskRuntime::call_tool`] for when the tool's first step runs), or
    /// the refusal: -32603 with `data.reason` and `retryAfterMs`, which the
    /// HTTP serving recipe answers with 503 and `Retry-After`.
    pub async fn create<F, Fut>(&self, task: NewTask, run: F) -> Result<CallToolResponse, ErrorData>
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let mark = task.caller.mark.clone();
        let mut task = task;
        let handle = task.handle.take();
        let principal = handle.as_ref().map(|_| task.caller.principal.clone());
        // On the heap: a task's creation is most of a handler's future
        // (about 10 KB), and a transport that spawns a task per request
        // (rmcp's service loop does) copies the whole future as it spawns
        // and polls it; boxed, the caller's future stays small (and a debug
        // build's stack holds the gateway's).
        let created = match Box::pin(self.start(task, run)).await {
            Ok(created) => created,
            Err(stop) => return stop.into_answer(mark.as_ref()),
        };
        match (handle, principal) {
            (Some(handle), Some(principal)) => {
                Box::pin(self.within_window(created, *handle, &principal)).await
            }
            _ => Ok(created),
        }
    }

    /// Runs `run`, the synchronous answer to `call`, once under the call's
    /// idempotency key when it sent one and the store keeps keys (see
    /// [`TaskRuntime::declare_idempotency`]): the same call sent again gets
    /// this run's answer, never a second run. Its answer is held to the
    /// result budget ([`TaskRuntime::max_result_bytes`]), and a panic in
    /// `run` is answered as an internal error. `cancelled` fires when the
    /// caller is gone: a call sent again stops waiting for the first run
    /// then.
    pub async fn run_synchronous<Fut>(
        &self,
        call: Synchronous,
        cancelled: &CancellationToken,
        run: Fut,
    ) -> Result<CallToolResponse, ErrorData>
    where
        Fut: Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
    {
        // On the heap, as a creation is (see `create`).
        Box::pin(self.run_once(&call.caller, &call.described, &call.tasks, cancelled, run)).await
    }
}
