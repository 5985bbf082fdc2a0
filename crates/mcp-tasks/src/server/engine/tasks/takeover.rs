//! The lease's background work on a store shared by several server
//! processes (see [`crate::store::replicas`] and `lease.rs` for the design
//! and its timing): renewing this process's lease, and taking over the
//! tasks of runners whose lease ran out: they fail, are cancelled, or run
//! again here ([`ResumeTool`]).
//!
//! A floor above the lease (`lease.rs`) and the runtime's state
//! (`state.rs`): it reads the state, starts a resumed tool with its
//! [`TaskContext`] and supervises it. The builder starts it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::context::TaskContext;
use super::supervise::{Waiting, catch_panics, spawn_supervision, supervise, supervise_queued};
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::admission::queue::Entry;
use crate::server::engine::admission::shared::TaskSeats;
use crate::server::engine::lease::{Lease, LeaseError, Leasing};
use crate::server::engine::state::Inner;
use crate::store::{BoxFuture, Change, Modified, Orphan, Replicas, StoreError};

/// The most orphaned tasks one scan takes over.
const REAP_BATCH: usize = 256;

/// Runs a resumable tool's call again ([`TaskRuntimeBuilder::with_resume`]):
/// the call's name and arguments, and the task's context.
///
/// [`TaskRuntimeBuilder::with_resume`]: crate::server::TaskRuntimeBuilder::with_resume
pub type ResumeTool = Arc<
    dyn Fn(
            CallToolRequestParams,
            TaskContext,
        ) -> BoxFuture<'static, Result<CallToolResult, ErrorData>>
        + Send
        + Sync,
>;

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
/// their tasks over (running resumable ones again with `resume`), until
/// the runtime is dropped.
pub(crate) async fn run_reaper(inner: Weak<Inner>, resume: Option<ResumeTool>, period: Duration) {
    let mut ticks = tokio::time::interval((period / 4).max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        match reap(&inner, resume.as_ref()).await {
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "taking over the tasks of stopped servers failed"),
        }
    }
}

/// One scan: claims the leases that ran out and takes over their tasks.
/// Returns how many tasks it took over. Does nothing until this process's
/// own renewals have succeeded for a whole hold period.
pub(crate) async fn reap(
    inner: &Arc<Inner>,
    resume: Option<&ResumeTool>,
) -> Result<usize, StoreError> {
    let (Some(leasing), Some(replicas)) = (&inner.leasing, inner.store.replicas()) else {
        return Ok(0);
    };
    // A draining process takes nothing over: it is about to stop.
    if !leasing.may_claim() || inner.live.is_closed() {
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
        match take_over(inner, resume, leasing, replicas, &orphan).await {
            Ok(true) => taken += 1,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "taking over a task failed"),
        }
    }
    Ok(taken)
}

/// Ends, cancels or resumes one task of a claimed runner (resumes it with
/// `resume`, if given, when its tool is resumable). False when another
/// process took it over first.
async fn take_over(
    inner: &Arc<Inner>,
    resume: Option<&ResumeTool>,
    leasing: &Leasing,
    replicas: &dyn Replicas,
    orphan: &Orphan,
) -> Result<bool, StoreError> {
    let Some(record) = inner.store.get(&orphan.id).await? else {
        return Ok(false);
    };
    let resume = match (resume, record.resumable_call()) {
        (Some(resume), Some(call)) if !record.cancel_requested() => Some((resume, call.clone())),
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
    let modified = inner
        .modify_at(&orphan.id, &change, Some(&orphan.runner), inner.clock.now())
        .await?;
    let Modified::Applied(record) = modified else {
        return Ok(false);
    };
    if let (Some((resume, call)), Some(lease)) = (resume, lease) {
        run_again(inner, resume, &record, &call, Some(lease));
    }
    Ok(true)
}

/// Runs again (with `resume`) the resumable tasks the last process on a
/// store of one process left unfinished ([`TaskStore::left_unfinished`]),
/// from their last checkpoint; without `resume`, or for a task whose
/// cancel was asked, ends them as the store would have at open.
///
/// [`TaskStore::left_unfinished`]: crate::store::TaskStore::left_unfinished
pub(crate) async fn resume_left_unfinished(inner: Weak<Inner>, resume: Option<ResumeTool>) {
    let Some(strong) = inner.upgrade() else {
        return;
    };
    let left = match strong.store.left_unfinished().await {
        Ok(left) => left,
        Err(error) => {
            tracing::error!(%error, "reading the tasks the last server left unfinished failed");
            return;
        }
    };
    drop(strong);
    let mut resumed = 0usize;
    let mut ended = 0usize;
    for id in left {
        let Some(inner) = inner.upgrade() else { return };
        match resume_one(&inner, resume.as_ref(), &id).await {
            Ok(true) => resumed += 1,
            Ok(false) => ended += 1,
            Err(error) => tracing::warn!(%error, "resuming a task left unfinished failed"),
        }
    }
    if resumed + ended > 0 {
        tracing::info!(
            resumed,
            ended,
            "tasks the last server left unfinished: resumable ones run again from their checkpoint"
        );
    }
}

/// Resumes (true) or ends (false) one task left unfinished.
async fn resume_one(
    inner: &Arc<Inner>,
    resume: Option<&ResumeTool>,
    id: &crate::task::TaskId,
) -> Result<bool, StoreError> {
    let Some(record) = inner.store.get(id).await? else {
        return Ok(false);
    };
    let call = match (resume, record.resumable_call()) {
        (Some(resume), Some(call)) if !record.cancel_requested() => Some((resume, call.clone())),
        _ => None,
    };
    let change = match (&call, record.cancel_requested()) {
        (Some(_), _) => Change::Resume(inner.runner.clone()),
        (None, true) => Change::Cancel,
        (None, false) => Change::Abandon,
    };
    let modified = inner
        .modify_at(id, &change, record.runner(), inner.clock.now())
        .await?;
    match (modified, call) {
        (Modified::Applied(record), Some((resume, call))) => {
            run_again(inner, resume, &record, &call, None);
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Runs a resumed task's tool again here, with `resume`, from its last
/// checkpoint (under `lease` on a shared store).
fn run_again(
    inner: &Arc<Inner>,
    resume: &ResumeTool,
    record: &crate::store::TaskRecord,
    call: &Value,
    lease: Option<Arc<Lease>>,
) {
    let id = record.id().clone();
    // Taken over, the task counts against its caller here, whatever the limit.
    let Ok(seat) = inner.live.take(record.owner(), None) else {
        return;
    };
    let token = CancellationToken::new();
    let context = TaskContext::task(id.clone(), inner.clone(), token.clone(), lease.clone())
        .resuming(record.checkpoint().cloned())
        .drain_waits(record.drain_waits());
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
    let seats = TaskSeats::plan(
        &inner.store,
        inner.admission.limits(),
        inner.settings.max_tasks_per_caller,
        &caller,
        &tool,
    )
    .map(|seats| Arc::new(seats.taken_over()));
    let waiting = match inner.admission.enter_taken_over(&caller, &tool) {
        Entry::Run(slot) if seats.is_none() => {
            spawn_supervision(supervise(
                inner.clone(),
                id,
                record.idle_ttl(),
                token,
                catch_panics(future),
                (seat, slot),
                None,
                lease,
            ));
            return;
        }
        Entry::Run(slot) => Waiting::Seats(slot),
        Entry::Queued(ticket) => Waiting::Turn(ticket),
    };
    spawn_supervision(supervise_queued(
        inner.clone(),
        id,
        record.idle_ttl(),
        token,
        catch_panics(future),
        (seat, waiting),
        seats,
        lease,
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
