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
//! [`TaskRuntimeBuilder::with_lease_period`]: super::TaskRuntimeBuilder::with_lease_period
//! [`TaskRecord::apply_as`]: crate::store::TaskRecord::apply_as

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::admission::caller::Caller;
use super::admission::queue::Entry;
use super::admission::shared::TaskSeats;
use super::context::TaskContext;
use super::runtime::Inner;
use super::supervise::{Waiting, catch_panics, supervise, supervise_queued};
use super::wire::new_task_id;
use crate::store::{Change, Modified, Orphan, Replicas, RunnerId, StoreError, modify_as};

/// The most orphaned tasks one scan takes over.
const REAP_BATCH: usize = 256;

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

    /// Completes when the lease is lost.
    pub(crate) async fn lost(&self) {
        self.lost.cancelled().await;
    }
}

/// A new runner id: random, or (if the system has no randomness to give)
/// this process's id, the time and a counter, unique all the same.
fn fresh_runner() -> RunnerId {
    static MADE: AtomicU64 = AtomicU64::new(0);
    match new_task_id() {
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
    async fn renew(&self, replicas: &dyn Replicas, lease: &Arc<Lease>) -> Result<(), LeaseError> {
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
    fn may_claim(&self) -> bool {
        let hold = self.hold();
        self.healthy_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|since| since.elapsed() >= hold)
    }
}

/// Renews the current lease every sixth of the period until the runtime is
/// dropped.
pub(crate) async fn run_renewals(inner: Weak<Inner>, period: Duration) {
    let mut ticks = tokio::time::interval((period / 6).max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let (Some(leasing), Some(replicas)) = (&inner.leasing, inner.store.replicas()) else {
            return;
        };
        // A lost lease is replaced at once: renew the new one too.
        for _ in 0..2 {
            let lease = leasing.current();
            match leasing.renew(replicas, &lease).await {
                Ok(()) => break,
                Err(LeaseError::Lost) => continue,
                Err(LeaseError::Store(error)) => {
                    tracing::warn!(%error, "renewing this server's lease failed");
                    break;
                }
            }
        }
    }
}

/// Every quarter of the period, claims the leases that ran out and takes
/// their tasks over, until the runtime is dropped.
pub(crate) async fn run_reaper(inner: Weak<Inner>, period: Duration) {
    let mut ticks = tokio::time::interval((period / 4).max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        match reap(&inner).await {
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "taking over the tasks of stopped servers failed"),
        }
    }
}

/// One scan: claims the leases that ran out and takes over their tasks.
/// Returns how many tasks it took over. Does nothing until this process's
/// own renewals have succeeded for a whole hold period.
pub(crate) async fn reap(inner: &Arc<Inner>) -> Result<usize, StoreError> {
    let (Some(leasing), Some(replicas)) = (&inner.leasing, inner.store.replicas()) else {
        return Ok(0);
    };
    if !leasing.may_claim() {
        return Ok(0);
    }
    // Our own lease first: after a stall, renewing it (if it was not
    // claimed yet) keeps this process from claiming itself.
    let own = leasing.current();
    match leasing.ensure(replicas, &own).await {
        Ok(()) => {}
        Err(LeaseError::Lost) => return Ok(0),
        Err(LeaseError::Store(error)) => return Err(error),
    }
    let orphans = replicas.orphans(REAP_BATCH).await?;
    let mut taken = 0;
    for orphan in orphans {
        match take_over(inner, leasing, replicas, &orphan).await {
            Ok(true) => taken += 1,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "taking over a task failed"),
        }
    }
    Ok(taken)
}

/// Ends, cancels or resumes one task of a claimed runner. False when
/// another process took it over first.
async fn take_over(
    inner: &Arc<Inner>,
    leasing: &Leasing,
    replicas: &dyn Replicas,
    orphan: &Orphan,
) -> Result<bool, StoreError> {
    let Some(record) = inner.store.get(&orphan.id).await? else {
        return Ok(false);
    };
    let resume = match (&inner.resume, record.resumable_call()) {
        (Some(_), Some(call)) if !record.cancel_requested() => Some(call.clone()),
        _ => None,
    };
    let (change, lease) = match &resume {
        Some(_) => {
            let lease = leasing.current();
            match leasing.ensure(replicas, &lease).await {
                Ok(()) => (Change::Resume(lease.runner().clone()), Some(lease)),
                Err(LeaseError::Store(error)) => return Err(error),
                // Our own lease is being replaced: leave it for the next scan.
                Err(LeaseError::Lost) => return Ok(false),
            }
        }
        None if record.cancel_requested() => (Change::Cancel, None),
        None => (Change::RunnerStopped, None),
    };
    let modified = modify_as(
        &*inner.store,
        &orphan.id,
        &change,
        &orphan.runner,
        inner.clock.now(),
        inner.settings.retention,
    )
    .await?;
    let Modified::Applied(record) = modified else {
        return Ok(false);
    };
    if let (Some(call), Some(lease)) = (resume, lease) {
        run_again(inner, &record, &call, lease);
    }
    Ok(true)
}

/// Runs a resumed task's tool again here, under `lease`.
fn run_again(
    inner: &Arc<Inner>,
    record: &crate::store::TaskRecord,
    call: &Value,
    lease: Arc<Lease>,
) {
    let Some(resume) = &inner.resume else { return };
    let id = record.id().clone();
    // Taken over, the task counts against its caller here, whatever the limit.
    let Ok(seat) = inner.live.take(record.owner(), None, None) else {
        return;
    };
    let token = CancellationToken::new();
    let context = TaskContext::task(
        id.clone(),
        inner.clone(),
        token.clone(),
        Some(lease.clone()),
    );
    let params = resumable_params(call);
    let tool = params
        .as_ref()
        .map_or("", |params| params.name.as_ref())
        .to_owned();
    let future = match params {
        Some(params) => resume(params, context),
        None => {
            let error =
                ErrorData::internal_error("the stored call of the task is not a call", None);
            Box::pin(async move { Err(error) })
        }
    };
    // It waits for a slot like any task, but a full queue does not refuse
    // it; its seats in the shared store are taken under this runner.
    let caller = Caller::owner(record.owner().clone());
    let seats = TaskSeats::taken_over(inner, &caller, &tool).map(Arc::new);
    let waiting = match inner.admission.enter_taken_over(&caller, &tool) {
        Entry::Run(slot) if seats.is_none() => {
            tokio::spawn(supervise(
                inner.clone(),
                id,
                record.idle_ttl(),
                token,
                catch_panics(future),
                (seat, slot),
                None,
                Some(lease),
            ));
            return;
        }
        Entry::Run(slot) => Waiting::Seats(slot),
        Entry::Queued(ticket) => Waiting::Turn(ticket),
    };
    tokio::spawn(supervise_queued(
        inner.clone(),
        id,
        record.idle_ttl(),
        token,
        catch_panics(future),
        (seat, waiting),
        seats,
        Some(lease),
    ));
}

/// What a resumable task keeps of its call: the tool's name and arguments.
pub(crate) fn resumable_call(request: &CallToolRequestParams) -> Value {
    json!({"name": request.name, "arguments": request.arguments})
}

/// The call [`resumable_call`] kept.
fn resumable_params(call: &Value) -> Option<CallToolRequestParams> {
    let name = call.get("name")?.as_str()?.to_owned();
    let mut params = CallToolRequestParams::new(name);
    params.arguments = match call.get("arguments") {
        Some(Value::Object(arguments)) => Some(arguments.clone()),
        _ => None,
    };
    Some(params)
}
