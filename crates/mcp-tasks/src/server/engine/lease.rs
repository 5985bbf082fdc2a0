//! The runtime's side of leases on a store shared by several server
//! processes (see [`crate::store::replicas`] for the design): holding and
//! renewing this process's lease, checking it before every write a runner
//! makes, and taking over the tasks of runners whose lease ran out.
//!
//! Timing, for a lease period `P` ([`TaskRuntimeBuilder::with_lease_period`]):
//! the lease is held for `P/2` and renewed every `P/6`; every `P/4` the
//! runtime claims the leases that ran out and takes their tasks over. A
//! replica that dies was renewed at most `P/6` before, so its lease runs
//! out within `P/2` and is claimed at most `P/4` later: its tasks end
//! within `3P/4` plus the time of the writes. A runtime claims nothing
//! until it has renewed its own lease without a failure for `P/2`, so after
//! the store was unreachable for a while, every live replica renews (a
//! lease that ran out but was not claimed can be renewed) before anyone
//! claims.
//!
//! A write for a task this process runs first checks the lease: valid by
//! this process's clock until `P/2` after the renewal that was sent, so a
//! long pause (a stopped process, an overloaded machine) is noticed before
//! the write and the lease renewed first; if the renewal answers
//! "claimed", the lease is lost: the write is refused, every tool running
//! under it is stopped without writing, and a new lease is taken for new
//! tasks. The record names its runner, so a write racing a takeover fails
//! on compare-and-set too (fencing: see [`TaskRecord::apply_as`]).
//!
//! This file is the lease itself, one floor below what reads it (the
//! runtime's state, supervision, shared seats, tool contexts); the
//! background work that renews it and takes tasks over reads the runtime's
//! state and runs tools, so it lives a floor above, in `takeover.rs`.
//!
//! [`TaskRuntimeBuilder::with_lease_period`]: crate::server::TaskRuntimeBuilder::with_lease_period
//! [`TaskRecord::apply_as`]: crate::store::TaskRecord::apply_as

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::wire::new_task_id;
use crate::store::{Replicas, RunnerId, StoreError};

/// The lease period when the builder sets none.
pub(crate) const DEFAULT_LEASE_PERIOD: Duration = Duration::from_secs(10);

/// This process's leases.
pub(crate) struct Leasing {
    period: Duration,
    current: Mutex<Arc<Lease>>,
    /// One renewal at a time.
    renewing: tokio::sync::Mutex<()>,
    /// Since when every renewal succeeded.
    healthy_since: Mutex<Option<Instant>>,
}

/// One lease: the runner it names and how long it is known to be valid.
pub(crate) struct Lease {
    runner: RunnerId,
    state: Mutex<LeaseState>,
    /// Fired when the lease is lost: the tools running under it stop.
    lost: CancellationToken,
}

#[derive(Default)]
struct LeaseState {
    acquired: bool,
    valid_until: Option<Instant>,
}

/// Why a runner may not write now.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaseError {
    /// The lease was claimed: another process takes the task over.
    #[error("this server's lease was claimed by another server")]
    Lost,
    /// The store could not be asked.
    #[error(transparent)]
    Store(StoreError),
}

impl LeaseError {
    pub(crate) fn into_error_data(self) -> ErrorData {
        match self {
            Self::Lost => lost_lease(),
            Self::Store(error) => super::wire::store_failure(error),
        }
    }
}

/// The error of a write refused because this server no longer runs the task.
pub(crate) fn lost_lease() -> ErrorData {
    ErrorData::internal_error(
        "this server no longer runs the task: its lease in the shared task store ran out \
         and another server took the task over",
        None,
    )
}

impl Lease {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            runner: fresh_runner(),
            state: Mutex::default(),
            lost: CancellationToken::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The runner this lease names.
    pub(crate) fn runner(&self) -> &RunnerId {
        &self.runner
    }

    /// True once the lease is lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// Completes when the lease is lost.
    pub(crate) async fn lost(&self) {
        self.lost.cancelled().await;
    }
}

/// A new runner id: shaped as a task id (the system's time, not the
/// runtime's clock: it names a process, not a task), or (if the system has
/// no randomness to give) this process's id, the time and a counter,
/// unique all the same.
pub(crate) fn fresh_runner() -> RunnerId {
    static MADE: AtomicU64 = AtomicU64::new(0);
    match new_task_id(crate::task::UnixMillis::now()) {
        Ok(id) => RunnerId::new(id.into_inner()),
        Err(_) => RunnerId::new(format!(
            "{}-{}-{}",
            std::process::id(),
            crate::task::UnixMillis::now().as_millis(),
            MADE.fetch_add(1, Ordering::Relaxed)
        )),
    }
}

/// Completes when `lease` is lost; never without a lease.
pub(crate) async fn lease_lost(lease: Option<&Arc<Lease>>) {
    match lease {
        Some(lease) => lease.lost().await,
        None => std::future::pending().await,
    }
}

impl Leasing {
    pub(crate) fn new(period: Duration) -> Self {
        Self {
            period,
            current: Mutex::new(Lease::new()),
            renewing: tokio::sync::Mutex::new(()),
            healthy_since: Mutex::new(None),
        }
    }

    /// How long a lease holds after a renewal.
    fn hold(&self) -> Duration {
        self.period / 2
    }

    /// The lease new tasks run under.
    pub(crate) fn current(&self) -> Arc<Lease> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes sure `lease` is valid now: at once when its last renewal is
    /// recent enough, else after renewing it.
    pub(crate) async fn ensure(
        &self,
        replicas: &dyn Replicas,
        lease: &Arc<Lease>,
    ) -> Result<(), LeaseError> {
        if lease.lost.is_cancelled() {
            return Err(LeaseError::Lost);
        }
        let now = Instant::now();
        if lease.state().valid_until.is_some_and(|until| now < until) {
            return Ok(());
        }
        self.renew(replicas, lease).await
    }

    /// Takes or renews `lease` now.
    pub(crate) async fn renew(
        &self,
        replicas: &dyn Replicas,
        lease: &Arc<Lease>,
    ) -> Result<(), LeaseError> {
        let _one = self.renewing.lock().await;
        if lease.lost.is_cancelled() {
            return Err(LeaseError::Lost);
        }
        let sent = Instant::now();
        let hold = self.hold();
        let acquired = lease.state().acquired;
        let renewed = if acquired {
            replicas.renew(&lease.runner, hold).await
        } else {
            replicas.acquire(&lease.runner, hold).await.map(|()| true)
        };
        match renewed {
            Ok(true) => {
                let mut state = lease.state();
                state.acquired = true;
                state.valid_until = Some(sent + hold);
                drop(state);
                let mut healthy = self.healthy_since.lock().unwrap_or_else(|p| p.into_inner());
                healthy.get_or_insert(sent);
                Ok(())
            }
            Ok(false) => {
                tracing::error!(
                    runner = %lease.runner,
                    "this server's lease in the shared task store was claimed by another \
                     server (it was not renewed in time): its tasks are stopped here and taken \
                     over there"
                );
                lease.lost.cancel();
                crate::telemetry::metrics::lease_lost();
                let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
                if Arc::ptr_eq(&current, lease) {
                    *current = Lease::new();
                }
                Err(LeaseError::Lost)
            }
            Err(error) => {
                *self.healthy_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Err(LeaseError::Store(error))
            }
        }
    }

    /// True once renewals have succeeded for a whole hold period.
    pub(crate) fn may_claim(&self) -> bool {
        let hold = self.hold();
        self.healthy_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|since| since.elapsed() >= hold)
    }
}
