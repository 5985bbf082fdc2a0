//! The runtime's shared state, [`Inner`]: what every clone of a
//! [`TaskRuntime`](crate::server::TaskRuntime) shares, with the settings the
//! builder chose and the store writes every part makes through it.
//!
//! One floor below everything that reads it: the runtime's handle
//! (`runtime.rs`), tool contexts (`context.rs`), supervision
//! (`supervise.rs`), takeover (`takeover.rs`) and the follower of a task's
//! changes (`follower.rs`) all hold an `Arc<Inner>` (or a weak one) and read it;
//! this file imports only the parts it is made of (admission, the caller
//! and stream counts, the lease, the clock, the waiters), never the files
//! above. The builder (`builder.rs`) makes it.
//!
//! Every change of a task's record goes through [`Inner::modify_at`], which
//! tells the runtime's observers (`observe.rs`) after the write succeeded.
//!
//! The state is the engine's own: its fields, and the runtime's handle on
//! it, are visible inside `server::engine` only. The transports, the
//! 2025-11-25 era and the operator listener reach it through
//! [`TaskRuntime`](crate::server::TaskRuntime)'s methods.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;

use super::admission::queue::Admission;
use super::admission::rate::{CreationRate, RateLimits};
use super::asked::AskedNow;
use super::clock::Clock;
use super::draining::Draining;
use super::lease::{Lease, LeaseError, Leasing};
use super::policy::Advertised;
use super::waiters::Waiters;
use super::wire::store_failure;
use crate::server::auth::principal::PrincipalExtractor;
use crate::server::engine::admission::limits::{Listeners, LiveTasks};
use crate::store::{
    Change, Freeing, Modified, RunnerId, SharedStore, StoreError, TaskRecord, modify_observed,
};
use crate::task::{TaskId, Ttl, UnixMillis};
use crate::telemetry::observe::Observers;
use crate::telemetry::task_hash::TaskHasher;
use crate::telemetry::task_spans::TaskSpans;

/// What every clone of a runtime shares.
pub(crate) struct Inner {
    pub(in crate::server::engine) store: SharedStore,
    pub(in crate::server::engine) live: Arc<LiveTasks>,
    /// The bounds on running and queued tasks, and the queue.
    pub(in crate::server::engine) admission: Arc<Admission>,
    /// What a drain tells the supervision of each task.
    pub(in crate::server::engine) draining: Draining,
    pub(in crate::server::engine) clock: Arc<dyn Clock>,
    pub(in crate::server::engine) principal: PrincipalExtractor,
    /// Whether `principal` is the program's, not the default one.
    #[cfg_attr(
        not(feature = "http-server"),
        allow(dead_code, reason = "read by the HTTP recipe's fast path")
    )]
    pub(in crate::server::engine) custom_principal: bool,
    pub(in crate::server::engine) waiters: Waiters,
    pub(in crate::server::engine) listeners: Listeners,
    pub(in crate::server::engine) settings: Settings,
    /// This process's leases, on a store shared by several processes.
    pub(in crate::server::engine) leasing: Option<Leasing>,
    /// Whether a resumable task taken over from a stopped server runs
    /// again here (the builder was given the code, which the takeover in
    /// `takeover.rs` holds: it names the `TaskContext`, a floor above).
    pub(in crate::server::engine) resumes: bool,
    /// The runner this runtime names in the resumable tasks it runs on a
    /// store of one process (on a shared store, its lease names them), so
    /// that the next process on the store (SQLite) resumes them.
    pub(in crate::server::engine) runner: RunnerId,
    /// Each tool's policy as 2025-11-25 clients read it in `tools/list`.
    pub(in crate::server::engine) advertised: Advertised,
    /// Each caller's creation rate, when limited.
    pub(in crate::server::engine) rate: Option<Arc<RateLimits>>,
    /// The spans of the sampled tasks this process created (zero-sized
    /// without feature `otel`).
    pub(in crate::server::engine) task_spans: Arc<TaskSpans>,
    /// What hears each task's events, if anything does.
    pub(in crate::server::engine) observers: Option<Observers>,
    /// The task hasher of the store's key, read from the store once.
    pub(in crate::server::engine) hasher: tokio::sync::OnceCell<TaskHasher>,
    /// The input requests the task tools asked on a caller's connection
    /// and that are not answered yet.
    pub(in crate::server::engine) asked_now: AskedNow,
}

/// The runtime's settings, as the builder set them.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(in crate::server::engine) default_ttl: Ttl,
    pub(in crate::server::engine) poll_interval: Duration,
    pub(in crate::server::engine) retention: Duration,
    pub(in crate::server::engine) sweep_interval: Duration,
    pub(in crate::server::engine) max_tasks_per_caller: Option<usize>,
    pub(in crate::server::engine) max_lifetime: Option<Duration>,
    pub(in crate::server::engine) max_listen_streams: usize,
    pub(in crate::server::engine) max_listen_streams_per_caller: usize,
    pub(in crate::server::engine) lease_period: Duration,
    pub(in crate::server::engine) quota_by_header: bool,
    pub(in crate::server::engine) rate_per_caller: Option<CreationRate>,
    /// The most bytes of JSON one tool outcome may weigh (`None`: no bound).
    pub(in crate::server::engine) max_result_bytes: Option<usize>,
    /// Which tools answer a caller that declared no tasks with a handle.
    pub(in crate::server::engine) task_tools: crate::server::engine::policy::TaskTools,
}

impl Inner {
    /// Applies `change` to task `id` at the clock's time.
    pub(crate) async fn modify(&self, id: &TaskId, change: &Change) -> Result<Modified, ErrorData> {
        self.modify_now(id, change).await.map_err(store_failure)
    }

    /// [`Inner::modify`] with the store's error.
    async fn modify_now(&self, id: &TaskId, change: &Change) -> Result<Modified, StoreError> {
        self.modify_at(id, change, None, self.clock.now()).await
    }

    /// Applies `change` to task `id` at `now` (in the name of `runner`, when
    /// given: see [`modify_as`](crate::store::modify_as)) and tells the
    /// observers what it did: where every change of a record is made.
    pub(crate) async fn modify_at(
        &self,
        id: &TaskId,
        change: &Change,
        runner: Option<&RunnerId>,
        now: UnixMillis,
    ) -> Result<Modified, StoreError> {
        self.modify_freeing(id, change, runner, now, None).await
    }

    /// [`Inner::modify_at`] whose swap gives `free`'s seat up too: freed
    /// if and only if the answer is [`Modified::Applied`].
    async fn modify_freeing(
        &self,
        id: &TaskId,
        change: &Change,
        runner: Option<&RunnerId>,
        now: UnixMillis,
        free: Option<Freeing<'_>>,
    ) -> Result<Modified, StoreError> {
        let (modified, before) = modify_observed(
            &*self.store,
            id,
            change,
            runner,
            now,
            self.settings.retention,
            free,
        )
        .await?;
        if let (Some(observers), Modified::Applied(record), Some(before)) =
            (&self.observers, &modified, &before)
        {
            observers.changed(before, change, record);
        }
        Ok(modified)
    }

    /// Deletes the record of task `id`, and tells the observers.
    pub(crate) async fn delete(&self, id: &TaskId) -> Result<(), StoreError> {
        self.store.delete(id).await?;
        if let Some(observers) = &self.observers {
            observers.removed(id);
        }
        Ok(())
    }

    /// Tells the observers a task was stored, running `tool` (`ending`:
    /// the change it was stored finished by, if it was).
    pub(crate) fn created(&self, record: &TaskRecord, tool: &str, ending: Option<&Change>) {
        if let Some(observers) = &self.observers {
            observers.created(record, tool, ending);
        }
    }

    /// Applies `change` to task `id` for the runner of `lease`: after
    /// checking the lease, and refused once the task names another runner
    /// (fencing). Without a lease, [`Inner::modify`].
    pub(crate) async fn modify_as_runner(
        &self,
        id: &TaskId,
        change: &Change,
        lease: Option<&Arc<Lease>>,
    ) -> Result<Modified, LeaseError> {
        let (modified, _) = self
            .modify_as_runner_freeing(id, change, lease, None)
            .await?;
        Ok(modified)
    }

    /// [`Inner::modify_as_runner`] whose swap gives `free`'s seat up too,
    /// on a store that [frees with a swap](crate::store::Replicas::frees_with_swap):
    /// the answer says whether it did (else the caller frees them).
    pub(crate) async fn modify_as_runner_freeing(
        &self,
        id: &TaskId,
        change: &Change,
        lease: Option<&Arc<Lease>>,
        free: Option<Freeing<'_>>,
    ) -> Result<(Modified, bool), LeaseError> {
        let (Some(lease), Some(leasing), Some(replicas)) =
            (lease, &self.leasing, self.store.replicas())
        else {
            let modified = self
                .modify_now(id, change)
                .await
                .map_err(LeaseError::Store)?;
            return Ok((modified, false));
        };
        leasing.ensure(replicas, lease).await?;
        let free = free.filter(|_| replicas.frees_with_swap());
        let freeing = free.is_some();
        let modified = self
            .modify_freeing(id, change, Some(lease.runner()), self.clock.now(), free)
            .await
            .map_err(LeaseError::Store)?;
        let freed = freeing && matches!(modified, Modified::Applied(_));
        Ok((modified, freed))
    }

    pub(crate) async fn read(&self, id: &TaskId) -> Result<TaskRecord, ErrorData> {
        self.store
            .get(id)
            .await
            .map_err(store_failure)?
            .ok_or_else(|| ErrorData::internal_error("the task is gone", None))
    }
}
