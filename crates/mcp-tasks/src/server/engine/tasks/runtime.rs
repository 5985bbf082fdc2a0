//! [`TaskRuntime`]: answers `tasks/*`, and binds every task to its
//! principal.
//!
//! The runtime is a handle on its shared state (`Inner`, in the engine's
//! `state.rs`, a floor down); what is built on the handle lives above it,
//! in the file of its concern: creation (deciding between a synchronous run
//! and a task, the gates, the store write) in the engine's `calls/`, making
//! one in its `builder.rs`, the requests rmcp cannot parse in the transport
//! wing's `custom.rs` (listens and 2025-11-25 tasks).

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{
    CancelTaskParams, Extensions, GetTaskParams, GetTaskResult, InputResponses, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::supervise::sweep;
use crate::server::auth::principal::Principal;
use crate::server::engine::admission::caller::{Caller, quota_of};
use crate::server::engine::admission::queue::Load;
use crate::server::engine::budget::input_within;
use crate::server::engine::lease::{Lease, LeaseError};
use crate::server::engine::policy::TaskPolicy;
use crate::server::engine::state::Inner;
use crate::server::engine::wire::{detailed_task, store_failure, task_not_found};
use crate::store::{Change, Modified, PackedRecord, SharedStore, StoreError};
use crate::task::{TaskId, UnixMillis};
use crate::telemetry::task_hash::TaskHasher;

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
    pub(in crate::server::engine) inner: Arc<Inner>,
}

/// A runtime's handle that does not keep it alive: for what lives as long
/// as a connection, not as long as the runtime.
#[derive(Clone)]
pub(crate) struct WeakRuntime(Weak<Inner>);

impl fmt::Debug for WeakRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakRuntime")
            .field("alive", &(self.0.strong_count() > 0))
            .finish()
    }
}

impl WeakRuntime {
    /// The runtime, if it is still there.
    pub(crate) fn upgrade(&self) -> Option<TaskRuntime> {
        self.0.upgrade().map(|inner| TaskRuntime { inner })
    }
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

    /// Who a request with `extensions` comes from, for admission.
    pub(crate) fn caller_of(&self, extensions: &Extensions) -> Caller {
        let principal = self.principal_of(extensions);
        let quota = quota_of(&principal, extensions, self.inner.settings.quota_by_header);
        Caller::new(principal, quota, extensions)
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
    /// [`ToolTasks`](crate::server::ToolTasks) to [`TaskRuntime::call_tool`] calls this once per tool
    /// (a tool never announced is listed without `execution`, which that
    /// era reads as `forbidden`). The latest call for a name wins.
    ///
    /// [`TaskRouter::with_tool`]: crate::server::TaskRouter::with_tool
    pub fn advertise_tool(&self, name: impl Into<String>, policy: TaskPolicy) {
        self.inner.advertised.set(name.into(), policy);
    }

    /// The policy announced for the tool `name` ([`TaskRuntime::advertise_tool`]).
    pub fn advertised_policy(&self, name: &str) -> Option<TaskPolicy> {
        self.inner.advertised.get(name)
    }

    /// How many tools run now and how many tasks wait for a slot, in this
    /// process (see [`AdmissionLimits`](crate::server::AdmissionLimits)).
    pub fn load(&self) -> Load {
        self.inner.admission.load()
    }

    /// How many tools of each name run now in this process, by name (tools
    /// with none running left out).
    pub fn running_by_tool(&self) -> Vec<(String, usize)> {
        self.inner.admission.running_by_tool()
    }

    /// The bounds this runtime admits tasks by
    /// ([`TaskRuntimeBuilder::with_admission`](crate::server::TaskRuntimeBuilder::with_admission)).
    pub fn admission_limits(&self) -> &crate::server::AdmissionLimits {
        self.inner.admission.limits()
    }

    /// How many unfinished tasks count against `principal`'s cap in this
    /// process: the principal a caller's caps count under, its
    /// authenticated one, `http:unauthenticated` for every HTTP caller that
    /// is not (unless [`TaskRuntimeBuilder::with_quota_by_header`][by_header]), the
    /// process over stdio.
    ///
    /// [by_header]: crate::server::TaskRuntimeBuilder::with_quota_by_header
    pub fn unfinished_tasks_of(&self, principal: &Principal) -> usize {
        self.inner.live.count(principal)
    }

    /// The principal of a request, by the runtime's extractor.
    pub fn principal_of(&self, extensions: &Extensions) -> Principal {
        (self.inner.principal)(extensions)
    }

    /// [`TaskRuntime::principal_of`] an HTTP request's `parts`: read from
    /// them by the default extractor, without the rmcp `Extensions` a
    /// program's extractor is given them in.
    #[cfg(feature = "http-server")]
    pub(crate) fn principal_of_parts(&self, parts: ::http::request::Parts) -> Principal {
        if self.inner.custom_principal {
            let mut extensions = Extensions::new();
            extensions.insert(parts);
            self.principal_of(&extensions)
        } else {
            crate::server::auth::principal::principal_of_parts(&parts)
        }
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

    /// `principal`'s own tasks, a page of at most `limit` after the task
    /// `after` (in the store's order of ids), each as
    /// [`TaskRuntime::get_task_as`] shows it: an unfinished task past its TTL
    /// reads as expired. No other caller's task is ever listed.
    pub async fn list_tasks_as(
        &self,
        principal: &Principal,
        after: Option<&TaskId>,
        limit: usize,
    ) -> Result<Vec<Arc<PackedRecord>>, ErrorData> {
        let records = self
            .inner
            .store
            .list_owned(principal, after, limit)
            .await
            .map_err(store_failure)?;
        let now = self.inner.clock.now();
        let mut listed = Vec::with_capacity(records.len());
        for record in records {
            if !record.status().is_terminal() && record.is_due(now) {
                // As `tasks/get` shows it: expired, even before the sweeper ran.
                if let Ok(record) = self.current(record.id(), principal).await {
                    listed.push(record);
                }
            } else {
                listed.push(Arc::new(PackedRecord::pack(record)));
            }
        }
        Ok(listed)
    }

    /// A handle that does not keep the runtime alive (see [`WeakRuntime`]).
    pub(crate) fn downgrade(&self) -> WeakRuntime {
        WeakRuntime(Arc::downgrade(&self.inner))
    }

    /// Applies `change` to task `id` as is, whoever owns it: for the callers
    /// that checked the owner themselves (the 2025-11-25 `tasks/cancel`).
    pub(crate) async fn apply(&self, id: &TaskId, change: &Change) -> Result<Modified, ErrorData> {
        self.inner.modify(id, change).await
    }

    /// An operator's cancel of task `id` (the admin API), told to the
    /// observers like every change.
    pub(crate) async fn cancel_by_operator(&self, id: &TaskId) -> Result<Modified, StoreError> {
        let now = self.inner.clock.now();
        self.inner
            .modify_at(id, &Change::RequestCancelByOperator, None, now)
            .await
    }

    /// Deletes task `id`'s record (the admin API's purge), told to the
    /// observers.
    pub(crate) async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        self.inner.delete(id).await
    }

    /// The time now, by the runtime's clock.
    pub(crate) fn now(&self) -> UnixMillis {
        self.inner.clock.now()
    }

    /// How many tasks of this process are working and how many wait for
    /// input, when the runtime has observers (they count them).
    #[cfg_attr(
        not(feature = "operator"),
        allow(dead_code, reason = "the operator listener's scrape reads it")
    )]
    pub(crate) fn live_by_status(&self) -> Option<(usize, usize)> {
        self.inner
            .observers
            .as_ref()
            .map(|observers| observers.live())
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
    /// now: a stream a handler serves beside the runtime's own (the
    /// gateway's `tools/list` changes) ends with them.
    pub fn subscriptions_ending(&self) -> tokio_util::sync::CancellationToken {
        self.inner.listeners.ending()
    }

    /// How many listen streams are open now.
    pub fn open_subscriptions(&self) -> usize {
        self.inner.listeners.open()
    }

    /// The most listen streams open at once
    /// ([`TaskRuntimeBuilder::with_max_listen_streams`][max]).
    ///
    /// [max]: crate::server::TaskRuntimeBuilder::with_max_listen_streams
    pub fn max_listen_streams(&self) -> usize {
        self.inner.settings.max_listen_streams
    }

    /// The most bytes of JSON one tool outcome may weigh
    /// ([`TaskRuntimeBuilder::with_max_result_bytes`][max]; `None`: no bound).
    ///
    /// [max]: crate::server::TaskRuntimeBuilder::with_max_result_bytes
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
