//! The runtime's shared state, [`Inner`]: what every clone of a
//! [`TaskRuntime`](super::TaskRuntime) shares, with the settings the
//! builder chose and the store writes every part makes through it.
//!
//! One floor below everything that reads it: the runtime's handle
//! (`runtime.rs`), tool contexts (`context.rs`), supervision
//! (`supervise.rs`), takeover (`takeover.rs`), listen streams and the
//! 2025-11-25 tasks all hold an `Arc<Inner>` (or a weak one) and read it;
//! this file imports only the parts it is made of (admission, the caller
//! and stream counts, the lease, the clock, the waiters), never the files
//! above. The builder (`builder.rs`) makes it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;

use super::admission::queue::Admission;
use super::admission::rate::{CreationRate, RateLimits};
use super::clock::Clock;
use super::lease::{Lease, LeaseError, Leasing};
use super::limits::{Listeners, LiveTasks};
use super::policy::Advertised;
use super::principal::PrincipalExtractor;
#[cfg(feature = "otel")]
use super::task_spans::TaskSpans;
use super::waiters::Waiters;
use super::wire::store_failure;
use crate::store::{Change, Modified, SharedStore, StoreError, TaskRecord, modify, modify_as};
use crate::task::{TaskId, Ttl};

/// What every clone of a runtime shares.
pub(crate) struct Inner {
    pub(crate) store: SharedStore,
    pub(crate) live: Arc<LiveTasks>,
    /// The bounds on running and queued tasks, and the queue.
    pub(crate) admission: Arc<Admission>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) principal: PrincipalExtractor,
    pub(crate) waiters: Waiters,
    pub(crate) listeners: Listeners,
    pub(crate) settings: Settings,
    /// This process's leases, on a store shared by several processes.
    pub(crate) leasing: Option<Leasing>,
    /// Whether a resumable task taken over from a stopped server runs
    /// again here (the builder was given the code, which the takeover in
    /// `takeover.rs` holds: it names the `TaskContext`, a floor above).
    pub(crate) resumes: bool,
    /// Each tool's policy as 2025-11-25 clients read it in `tools/list`.
    pub(crate) advertised: Advertised,
    /// Each caller's creation rate, when limited.
    pub(crate) rate: Option<Arc<RateLimits>>,
    /// The spans of the sampled tasks this process created.
    #[cfg(feature = "otel")]
    pub(crate) task_spans: TaskSpans,
}

/// The runtime's settings, as the builder set them.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) default_ttl: Ttl,
    pub(crate) poll_interval: Duration,
    pub(crate) retention: Duration,
    pub(crate) sweep_interval: Duration,
    pub(crate) max_tasks_per_caller: Option<usize>,
    pub(crate) max_lifetime: Option<Duration>,
    pub(crate) max_listen_streams: usize,
    pub(crate) max_listen_streams_per_caller: usize,
    pub(crate) lease_period: Duration,
    pub(crate) quota_by_header: bool,
    pub(crate) rate_per_caller: Option<CreationRate>,
}

impl Inner {
    /// Applies `change` to task `id` at the clock's time.
    pub(crate) async fn modify(&self, id: &TaskId, change: &Change) -> Result<Modified, ErrorData> {
        self.modify_now(id, change).await.map_err(store_failure)
    }

    /// [`Inner::modify`] with the store's error.
    async fn modify_now(&self, id: &TaskId, change: &Change) -> Result<Modified, StoreError> {
        modify(
            &*self.store,
            id,
            change,
            self.clock.now(),
            self.settings.retention,
        )
        .await
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
        let (Some(lease), Some(leasing), Some(replicas)) =
            (lease, &self.leasing, self.store.replicas())
        else {
            return self.modify_now(id, change).await.map_err(LeaseError::Store);
        };
        leasing.ensure(replicas, lease).await?;
        modify_as(
            &*self.store,
            id,
            change,
            lease.runner(),
            self.clock.now(),
            self.settings.retention,
        )
        .await
        .map_err(LeaseError::Store)
    }

    pub(crate) async fn read(&self, id: &TaskId) -> Result<TaskRecord, ErrorData> {
        self.store
            .get(id)
            .await
            .map_err(store_failure)?
            .ok_or_else(|| ErrorData::internal_error("the task is gone", None))
    }
}
