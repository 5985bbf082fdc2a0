//! [`TaskRuntime`]: decides between a synchronous run and a task, creates
//! tasks durably, answers `tasks/*`, and binds every task to its principal.
//!
//! The runtime is a handle on its shared state (`Inner`, in `state.rs`,
//! one floor down); what is built on the handle lives above it, in the file
//! of its concern: making one in `builder.rs`, the requests rmcp cannot
//! parse in `custom.rs` (listens and 2025-11-25 tasks).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use rmcp::model::ErrorCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    Extensions, GetTaskParams, GetTaskResult, InputResponses, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::SetOnce;
use tokio_util::sync::CancellationToken;

use super::admission::caller::{Caller, quota_of};
use super::admission::queue::{Entry, Load, queued_message};
use super::admission::shared::{Seated, TaskSeats};
use super::budget::input_within;
use super::context::TaskContext;
use super::era;
use super::idempotent::Idempotent;
use super::lease::{Lease, LeaseError};
use super::policy::{TaskPolicy, ToolTasks};
use super::principal::Principal;
use super::progress::ProgressSink;
use super::state::Inner;
use super::supervise::{
    Waiting, catch_panics, outcome_of, record_outcome, spawn_supervision, supervise,
    supervise_queued, sweep,
};
use super::takeover::resumable_call;
use super::task_hash::TaskHasher;
use super::wire::{
    detailed_task, new_task_id, store_failure, task_not_found, tasks_required, wire_task,
};
use crate::store::{Change, Keyed, Modified, PackedRecord, SharedStore, StoreError, TaskRecord};
use crate::task::TaskId;

/// The longest a task may live, however long its tool keeps it alive,
/// unless the builder says otherwise.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// How many unfinished tasks one caller may have at once, unless the
/// builder says otherwise.
pub const DEFAULT_MAX_TASKS_PER_CALLER: usize = 1000;

/// The task runtime. Cheap to clone; clones share the store and the sweeper.
///
/// An rmcp `ServerHandler` keeps one and delegates `call_tool` to
/// [`TaskRuntime::call_tool`] and `tasks/*` to [`TaskRuntime::get_task`],
/// [`TaskRuntime::update_task`] and [`TaskRuntime::cancel_task`]
/// ([`delegate_task_methods!`](crate::delegate_task_methods) writes those three).
#[derive(Clone)]
pub struct TaskRuntime {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for TaskRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRuntime")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl TaskRuntime {
    /// The store.
    pub fn store(&self) -> &SharedStore {
        &self.inner.store
    }

    /// The hasher that names this runtime's tasks in logs, metrics and
    /// traces, with the store's key ([`TaskStore::hash_key`](crate::store::TaskStore::hash_key)):
    /// read from the store at the first call, then kept.
    ///
    /// # Errors
    ///
    /// The store could not be read (the next call tries again).
    pub async fn task_hasher(&self) -> Result<TaskHasher, StoreError> {
        self.inner
            .hasher
            .get_or_try_init(|| async { Ok(TaskHasher::new(&self.inner.store.hash_key().await?)) })
            .await
            .cloned()
    }

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
        let caller = self.caller_of_call(context, request)?;
        if !self.runs_as_task(request, context, tasks)? {
            // Once under its idempotency key, as a task would be.
            let run = run(TaskContext::synchronous(context));
            let run = async move { run.await.map(CallToolResponse::from) };
            return Box::pin(self.run_once(&caller, request, tasks, &context.ct, run)).await;
        }
        let tasks = self.tasks_for_call(tasks, context);
        // A 2025-11-25 caller's progress token stays valid for its task.
        let progress = ProgressSink::for_task(context);
        let run = move |task: TaskContext| run(task.with_progress(progress));
        // On the heap: a task's creation is most of a handler's future
        // (about 10 KB), and a transport that spawns a task per request
        // (rmcp's service loop does) copies the whole future as it spawns
        // and polls it; boxed, the handler's future stays small.
        Box::pin(self.start_task(caller, request, &tasks, run)).await
    }

    /// `tasks` as a call's task uses them: with the TTL a 2025-11-25 call
    /// asked for (`params.task.ttl`, within 1 s and the maximum lifetime).
    pub(crate) fn tasks_for_call<'a>(
        &self,
        tasks: &'a ToolTasks,
        context: &RequestContext<RoleServer>,
    ) -> std::borrow::Cow<'a, ToolTasks> {
        era::with_requested_ttl(tasks, context, self.inner.settings.max_lifetime)
    }

    /// Whether this call runs as a task: its policy, and whether the
    /// request declared the extension. -32021 when the tool requires a task
    /// and the extension was not declared. On an `initialize`-era session
    /// (2025-11-25 and before) that did not declare the extension, the
    /// rules of that era apply instead: a task
    /// when the call asked for one (`params.task`) and the policy allows
    /// it, -32601 when it asked against a forbidden policy or did not ask
    /// for a required tool.
    pub(crate) fn runs_as_task(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        tasks: &ToolTasks,
    ) -> Result<bool, ErrorData> {
        if era::is_old_tasks_era(context) {
            return era::runs_as_task(request, context, tasks.policy_for(request));
        }
        let declared = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        match tasks.policy_for(request) {
            TaskPolicy::Forbidden => Ok(false),
            TaskPolicy::Optional => Ok(declared),
            TaskPolicy::Required if declared => Ok(true),
            TaskPolicy::Required => Err(tasks_required()),
        }
    }

    /// Who a request with `extensions` comes from, for admission.
    pub(crate) fn caller_of(&self, extensions: &Extensions) -> Caller {
        let principal = self.principal_of(extensions);
        let quota = quota_of(&principal, extensions, self.inner.settings.quota_by_header);
        Caller::new(principal, quota, extensions)
    }

    /// Who `request` comes from, with its idempotency key (-32602 for a
    /// `_meta` key that is not one).
    pub(crate) fn caller_of_call(
        &self,
        context: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
    ) -> Result<Caller, ErrorData> {
        let idempotent = Idempotent::of(&context.meta, request)?;
        Ok(self
            .caller_of(&context.extensions)
            .with_idempotent(idempotent))
    }

    /// The answer to a call whose idempotency key a task of its caller
    /// holds (`found`, read from the store): that task as it is now, or
    /// -32602 for another call under the key; `None` when the task is gone
    /// by now.
    async fn keyed_answer(
        &self,
        caller: &Caller,
        idempotent: &Idempotent,
        found: &TaskRecord,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        if found.ran_synchronously() {
            // The first send ran synchronously: its answer, never a task.
            let never = CancellationToken::new();
            return self
                .answer_again(caller, idempotent, found.id(), &never)
                .await
                .map(Some);
        }
        match self.current(found.id(), &caller.principal).await {
            Ok(record) => idempotent.answer(&record).map(Some),
            Err(error) if error.code == ErrorCode::INVALID_PARAMS => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Stores a new record: with the caller's idempotency key when it sent
    /// one, and then, if a task of the caller holds the key already (a
    /// creation with the same key won a race), that task's answer instead,
    /// with nothing stored.
    async fn store_new(
        &self,
        record: TaskRecord,
        caller: &Caller,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        let store = &self.inner.store;
        let Some(idempotent) = &caller.idempotent else {
            store.create(record).await.map_err(store_failure)?;
            return Ok(None);
        };
        match store.create_keyed(record).await.map_err(store_failure)? {
            Keyed::Created => Ok(None),
            Keyed::Existing(found) => self.raced(caller, idempotent, Some(&found)).await.map(Some),
        }
    }

    /// The answer to a creation that lost a race for its idempotency key:
    /// the winner's task (`found`, or read again).
    async fn raced(
        &self,
        caller: &Caller,
        idempotent: &Idempotent,
        found: Option<&TaskRecord>,
    ) -> Result<CallToolResponse, ErrorData> {
        let read;
        let found = match found {
            Some(found) => found,
            None => {
                read = self
                    .inner
                    .store
                    .find_keyed(&caller.principal, &idempotent.key)
                    .await
                    .map_err(store_failure)?;
                match &read {
                    Some(found) => found,
                    None => return Err(key_holder_gone()),
                }
            }
        };
        self.keyed_answer(caller, idempotent, found)
            .await?
            .ok_or_else(key_holder_gone)
    }

    /// Creates a task for `caller`, durably, and runs `run` under its
    /// supervision. A call with an idempotency key that a task of the
    /// caller holds gets that task back instead, before anything else
    /// (no admission, no run of its tool).
    pub(crate) async fn start_task<F, Fut>(
        &self,
        caller: Caller,
        request: &CallToolRequestParams,
        tasks: &ToolTasks,
        run: F,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let inner = &self.inner;
        let settings = &inner.settings;
        // The same call sent again under its idempotency key: its task.
        if let Some(idempotent) = &caller.idempotent
            && let Some(found) = inner
                .store
                .find_keyed(&caller.principal, &idempotent.key)
                .await
                .map_err(store_failure)?
            && let Some(answer) = self.keyed_answer(&caller, idempotent, &found).await?
        {
            return Ok(answer);
        }
        if let Some(rate) = &inner.rate {
            rate.check(&caller)?;
        }
        // Held by the tool's supervision: the task counts until it ends.
        let seat = inner.live.take(
            &caller.quota,
            settings.max_tasks_per_caller,
            caller.mark.as_ref(),
        )?;
        // A slot to run now, or a place in the queue.
        let entry = inner.admission.enter(&caller, &request.name)?;
        // One reading of the runtime's clock for the id's time and `createdAt`.
        let now = inner.clock.now();
        let mut record = TaskRecord::new(
            new_task_id(now)?,
            caller.principal.clone(),
            now,
            tasks.ttl.unwrap_or(settings.default_ttl),
            Some(tasks.poll_interval.unwrap_or(settings.poll_interval)),
        )
        .with_lifetime(settings.max_lifetime, !tasks.ttl_from_creation)
        .with_tool(&request.name);
        if let Some(idempotent) = &caller.idempotent {
            record = record.with_idempotency(&idempotent.key, idempotent.fingerprint.clone());
        }
        // On a shared store the task names this process's lease, checked first.
        let lease = self.checked_lease().await?;
        match &lease {
            Some(lease) => {
                let call = (tasks.resumable && inner.resumes).then(|| resumable_call(request));
                record = record.with_runner(lease.runner().clone(), call);
            }
            // On a store of one process, a resumable task keeps its call for
            // the next process on the store (SQLite) to run it again.
            None if tasks.resumable && inner.resumes => {
                record = record.with_runner(inner.runner.clone(), Some(resumable_call(request)));
            }
            None => {}
        }
        let id = record.id().clone();
        let idle_ttl = record.idle_ttl();
        let token = CancellationToken::new();
        let stored = Arc::new(SetOnce::new());
        let context = TaskContext::task(id.clone(), inner.clone(), token.clone(), lease.clone())
            .stored_when(stored.clone())
            .resumable(tasks.resumable && inner.resumes);
        // The task's span (when its request is sampled), in whose context
        // the tool works: what it sends on continues the request's trace.
        #[cfg(feature = "otel")]
        let traced = {
            let request_trace = caller
                .trace
                .clone()
                .unwrap_or_else(opentelemetry::Context::current);
            match super::task_spans::TaskSpans::wanted(&request_trace) {
                true => self.task_hasher().await.ok().map(|hasher| {
                    let hash = hasher.hash(&id);
                    inner
                        .task_spans
                        .start(&id, hash, &request.name, &request_trace)
                }),
                false => None,
            }
        };
        #[cfg(feature = "otel")]
        let mut tool = {
            use opentelemetry::context::FutureExt as _;
            let work = traced
                .clone()
                .unwrap_or_else(opentelemetry::Context::current);
            Box::pin(catch_panics(run(context).with_context(work)))
        };
        #[cfg(not(feature = "otel"))]
        let mut tool = Box::pin(catch_panics(run(context)));
        // On a shared store with bounds, the task's seats there are taken
        // as it is created; it runs when both this process and the seats
        // let it.
        let seats = lease.as_ref().and_then(|_| {
            TaskSeats::plan(
                &inner.store,
                inner.admission.limits(),
                settings.max_tasks_per_caller,
                &caller,
                &request.name,
            )
        });
        let slot = match (entry, seats, &lease) {
            (Entry::Run(slot), None, _) => slot,
            (entry, seats, lease) => {
                // Stored first, with its place if it waits; its tool starts
                // under its supervision.
                let record = match &entry {
                    Entry::Queued(ticket) => {
                        let ahead = ticket.place.ahead().unwrap_or(0);
                        record
                            .apply(
                                &Change::StatusMessage(queued_message(ahead)),
                                inner.clock.now(),
                                settings.retention,
                            )
                            .map_err(|refused| {
                                ErrorData::internal_error(refused.to_string(), None)
                            })?
                            .into_record()
                    }
                    Entry::Run(_) => record,
                };
                let created = wire_task(&record);
                let observed = inner.observers.as_ref().map(|_| record.clone());
                let seated = match (&seats, lease) {
                    (Some(seats), Some(lease)) => {
                        let runs = matches!(entry, Entry::Run(_));
                        seats
                            .create(&inner.store, &caller, record, lease, runs)
                            .await?
                    }
                    _ => match self.store_new(record, &caller).await? {
                        Some(existing) => return Ok(existing),
                        None => Seated::Queued,
                    },
                };
                if seated == Seated::Existing {
                    return match &caller.idempotent {
                        Some(idempotent) => self.raced(&caller, idempotent, None).await,
                        None => Err(ErrorData::internal_error(
                            "the store found an idempotency key the call did not send",
                            None,
                        )),
                    };
                }
                let _ = stored.set(());
                if let Some(record) = &observed {
                    inner.created(record, &request.name, None);
                }
                let seats = seats.map(Arc::new);
                let lease = lease.clone();
                match (entry, seated) {
                    (Entry::Run(slot), Seated::Running) => spawn_supervision(supervise(
                        inner.clone(),
                        id,
                        idle_ttl,
                        token,
                        tool,
                        (seat, slot),
                        seats,
                        lease,
                    )),
                    // `Existing` returned above.
                    (Entry::Run(slot), Seated::Queued | Seated::Existing) => {
                        spawn_supervision(supervise_queued(
                            inner.clone(),
                            id,
                            idle_ttl,
                            token,
                            tool,
                            (seat, Waiting::Seats(slot)),
                            seats,
                            lease,
                        ))
                    }
                    (Entry::Queued(ticket), _) => spawn_supervision(supervise_queued(
                        inner.clone(),
                        id,
                        idle_ttl,
                        token,
                        tool,
                        (seat, Waiting::Turn(ticket)),
                        seats,
                        lease,
                    )),
                };
                return Ok(CallToolResponse::Task(CreateTaskResult::new(created)));
            }
        };
        // The tool's first step runs before the task is stored (what touches
        // the task waits for it): a tool that returns from that step, as many
        // do, is stored finished, in one write instead of two.
        // Not for a call with an idempotency key: its tool runs only once
        // its record holds the key (a creation that loses the race for it
        // drops its tool untouched).
        if caller.idempotent.is_none()
            && let Poll::Ready(finished) = futures::poll!(&mut tool)
        {
            token.cancel();
            let outcome = outcome_of(finished, inner);
            let finished = record
                .apply(&outcome, inner.clock.now(), settings.retention)
                .map_err(|refused| ErrorData::internal_error(refused.to_string(), None))?
                .into_record();
            let created = wire_task(&finished);
            let observed = inner.observers.as_ref().map(|_| finished.clone());
            drop(slot);
            inner.store.create(finished).await.map_err(store_failure)?;
            drop(seat);
            if let Some(finished) = &observed {
                inner.created(finished, &request.name, Some(&outcome));
            }
            return Ok(CallToolResponse::Task(CreateTaskResult::new(created)));
        }
        let created = wire_task(&record);
        let observed = inner.observers.as_ref().map(|_| record.clone());
        // Durable before we answer: a tasks/get right after finds it.
        if let Some(existing) = self.store_new(record, &caller).await? {
            return Ok(existing);
        }
        if let Some(record) = &observed {
            inner.created(record, &request.name, None);
        }
        let _ = stored.set(());
        // A call with an idempotency key: its record holds the key now, so
        // its tool's first step runs. One that returns from it has its
        // outcome recorded before the answer, which says so: its caller
        // needs no stream to learn it (two writes, as when it finishes
        // later, but one exchange fewer for the caller).
        if caller.idempotent.is_some()
            && let Poll::Ready(finished) = futures::poll!(&mut tool)
        {
            token.cancel();
            drop(slot);
            let outcome = outcome_of(finished, inner);
            let answer = match inner.modify_as_runner(&id, &outcome, lease.as_ref()).await {
                Ok(Modified::Applied(record) | Modified::Refused(record, _)) => wire_task(&record),
                // Not written: written in the background, retried as a
                // supervision does; the answer says `working` until then.
                _ => {
                    let inner = inner.clone();
                    tokio::spawn(async move {
                        record_outcome(&inner, &id, &outcome, lease.as_ref()).await;
                        drop(seat);
                    });
                    return Ok(CallToolResponse::Task(CreateTaskResult::new(created)));
                }
            };
            drop(seat);
            return Ok(CallToolResponse::Task(CreateTaskResult::new(answer)));
        }
        spawn_supervision(supervise(
            inner.clone(),
            id,
            idle_ttl,
            token,
            tool,
            (seat, slot),
            None,
            lease,
        ));
        Ok(CallToolResponse::Task(CreateTaskResult::new(created)))
    }

    /// On a store shared by several processes, the lease this process's
    /// new records name, checked (renewed if due) first; `None` on a store
    /// of one process.
    pub(crate) async fn checked_lease(&self) -> Result<Option<Arc<Lease>>, ErrorData> {
        let inner = &self.inner;
        let (Some(leasing), Some(replicas)) = (&inner.leasing, inner.store.replicas()) else {
            return Ok(None);
        };
        let lease = leasing.current();
        leasing
            .ensure(replicas, &lease)
            .await
            .map_err(LeaseError::into_error_data)?;
        Ok(Some(lease))
    }

    /// `tasks/get`: the task, if it exists and belongs to the caller.
    pub async fn get_task(
        &self,
        request: GetTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let principal = self.principal_of(&context.extensions);
        self.get_task_as(&TaskId::new(request.task_id), &principal)
            .await
    }

    /// `tasks/update`: records answers for outstanding keys; other keys are
    /// ignored, partial sets are accepted. Acks at once.
    pub async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.principal_of(&context.extensions);
        self.update_task_as(
            &TaskId::new(request.task_id),
            request.input_responses,
            &principal,
        )
        .await
    }

    /// `tasks/cancel`: records the request and stops the tool; acks at once,
    /// also for a finished task (which does not change).
    pub async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.principal_of(&context.extensions);
        self.cancel_task_as(&TaskId::new(request.task_id), &principal)
            .await
    }

    /// Announces the task policy of the tool `name` to 2025-11-25 clients:
    /// they read it in `tools/list`, as the tool's `execution.taskSupport`,
    /// and ask for a task (`params.task`) only where it says `optional` or
    /// `required`. The 2026-07-28 extension has no such field (the server
    /// decides per call), so a server that serves both eras tells the
    /// runtime each tool's policy up front: [`TaskRouter::with_tool`]
    /// and the gateway do it themselves; a server that passes a
    /// [`ToolTasks`] to [`TaskRuntime::call_tool`] calls this once per tool
    /// (a tool never announced is listed without `execution`, which that
    /// era reads as `forbidden`). The latest call for a name wins.
    ///
    /// [`TaskRouter::with_tool`]: super::TaskRouter::with_tool
    pub fn advertise_tool(&self, name: impl Into<String>, policy: TaskPolicy) {
        self.inner.advertised.set(name.into(), policy);
    }

    /// The policy announced for the tool `name` ([`TaskRuntime::advertise_tool`]).
    pub fn advertised_policy(&self, name: &str) -> Option<TaskPolicy> {
        self.inner.advertised.get(name)
    }

    /// How many tools run now and how many tasks wait for a slot, in this
    /// process (see [`AdmissionLimits`](super::AdmissionLimits)).
    pub fn load(&self) -> Load {
        self.inner.admission.load()
    }

    /// How many unfinished tasks count against `principal`'s cap in this
    /// process: the principal a caller's caps count under, its
    /// authenticated one, `http:unauthenticated` for every HTTP caller that
    /// is not (unless [`TaskRuntimeBuilder::with_quota_by_header`][by_header]), the
    /// process over stdio.
    ///
    /// [by_header]: super::TaskRuntimeBuilder::with_quota_by_header
    pub fn unfinished_tasks_of(&self, principal: &Principal) -> usize {
        self.inner.live.count(principal)
    }

    /// The principal of a request, by the runtime's extractor.
    pub fn principal_of(&self, extensions: &Extensions) -> Principal {
        (self.inner.principal)(extensions)
    }

    /// [`TaskRuntime::get_task`] for a principal found elsewhere.
    pub async fn get_task_as(
        &self,
        id: &TaskId,
        principal: &Principal,
    ) -> Result<GetTaskResult, ErrorData> {
        let record = self.current(id, principal).await?;
        Ok(GetTaskResult::new(detailed_task(&record)?))
    }

    /// The record as `tasks/get` shows it now, if it exists and `principal`
    /// owns it: an unfinished task past its TTL reads as expired (the
    /// sweeper may not have run yet).
    pub(crate) async fn current(
        &self,
        id: &TaskId,
        principal: &Principal,
    ) -> Result<Arc<PackedRecord>, ErrorData> {
        let mut record = self.owned(id, principal).await?;
        if !record.status().is_terminal()
            && record.is_due(self.inner.clock.now())
            && let Modified::Applied(next) | Modified::Refused(next, _) =
                self.inner.modify(id, &Change::Expire).await?
        {
            record = Arc::new(PackedRecord::pack(next));
        }
        Ok(record)
    }

    /// Ends every listen stream open now, gracefully (each gets its final
    /// result), for example before a graceful shutdown; streams opened
    /// later are not affected.
    pub fn end_subscriptions(&self) {
        self.inner.listeners.end_all();
    }

    /// Fired when [`TaskRuntime::end_subscriptions`] ends the streams open
    /// now: a stream served beside the runtime's own ends with them.
    #[cfg(feature = "gateway")]
    pub(crate) fn subscriptions_ending(&self) -> tokio_util::sync::CancellationToken {
        self.inner.listeners.ending()
    }

    /// How many listen streams are open now.
    pub fn open_subscriptions(&self) -> usize {
        self.inner.listeners.open()
    }

    /// The most listen streams open at once
    /// ([`TaskRuntimeBuilder::with_max_listen_streams`][max]).
    ///
    /// [max]: super::TaskRuntimeBuilder::with_max_listen_streams
    pub fn max_listen_streams(&self) -> usize {
        self.inner.settings.max_listen_streams
    }

    /// The most bytes of JSON one tool outcome may weigh
    /// ([`TaskRuntimeBuilder::with_max_result_bytes`][max]; `None`: no bound).
    ///
    /// [max]: super::TaskRuntimeBuilder::with_max_result_bytes
    pub fn max_result_bytes(&self) -> Option<usize> {
        self.inner.settings.max_result_bytes
    }

    /// [`TaskRuntime::update_task`] for a principal found elsewhere.
    pub async fn update_task_as(
        &self,
        id: &TaskId,
        input_responses: InputResponses,
        principal: &Principal,
    ) -> Result<(), ErrorData> {
        self.owned(id, principal).await?;
        let responses = input_responses.into_iter().collect();
        input_within(&responses, self.inner.settings.max_result_bytes)?;
        let change = Change::ProvideInput(responses);
        self.change(id, &change).await
    }

    /// [`TaskRuntime::cancel_task`] for a principal found elsewhere.
    pub async fn cancel_task_as(
        &self,
        id: &TaskId,
        principal: &Principal,
    ) -> Result<(), ErrorData> {
        self.owned(id, principal).await?;
        self.change(id, &Change::RequestCancel).await
    }

    async fn change(&self, id: &TaskId, change: &Change) -> Result<(), ErrorData> {
        match self.inner.modify(id, change).await? {
            Modified::Missing => Err(task_not_found()),
            Modified::Applied(_) | Modified::Refused(..) => Ok(()),
        }
    }

    /// The record, if it exists and `principal` owns it; the same -32602 otherwise.
    async fn owned(
        &self,
        id: &TaskId,
        principal: &Principal,
    ) -> Result<Arc<PackedRecord>, ErrorData> {
        match self
            .inner
            .store
            .get_packed(id)
            .await
            .map_err(store_failure)?
        {
            Some(record) if record.owner() == principal => Ok(record),
            _ => Err(task_not_found()),
        }
    }

    /// Runs one sweep now: unfinished tasks past their TTL fail, finished ones
    /// past their retention are deleted. Returns how many records it touched.
    /// The background sweeper does the same every sweep interval.
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        sweep(&self.inner).await
    }
}

/// A creation lost the race for its idempotency key to a task that is gone
/// again already (deleted at once): the caller may send the call again.
fn key_holder_gone() -> ErrorData {
    ErrorData::internal_error(
        "the task holding this call's idempotency key ended and was deleted meanwhile; \
         send the call again",
        None,
    )
}
