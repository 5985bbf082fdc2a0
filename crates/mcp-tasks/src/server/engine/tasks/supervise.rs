//! Background work of the runtime: supervising each tool to its outcome
//! (or to the end a drain gives it: see `draining.rs`), the sweeper (expiry
//! and retention, read from the injected clock), and the listener that
//! turns the store's change feed into wake-ups. (The leases of a shared
//! store are in `lease.rs`, their renewal and takeover in `takeover.rs`.)

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::handoff::hand_off;
use crate::server::engine::admission::limits::Seat;
use crate::server::engine::admission::queue::{Place, RunSlot, Ticket, queued_message};
use crate::server::engine::admission::shared::Shared;
use crate::server::engine::budget::outcome_within;
use crate::server::engine::draining::{Ended, shut_down_message, suspended_message};
use crate::server::engine::lease::{Lease, LeaseError, lease_lost};
use crate::server::engine::state::Inner;
use crate::server::engine::wire::error_json;
use crate::store::{Change, Freeing, Modified, StoreError, StoreErrorKind};
use crate::task::TaskId;

/// The status message of a queued task whose turn came here while every
/// replica together is at its bound.
pub(crate) const WAITING_FOR_SEATS: &str = "queued: waiting for a free slot on the servers";

/// The most records one sweep acts on.
const SWEEP_BATCH: usize = 1024;

/// How long recording a tool's outcome is retried while the store cannot
/// be reached.
const OUTCOME_RETRY_FOR: Duration = Duration::from_secs(600);

/// Wakes the waiters of each changed task; wakes them all when the feed
/// lagged or (a shared store's) `gaps` says it may have missed changes.
pub(crate) async fn listen_for_changes(
    inner: Weak<Inner>,
    mut feed: broadcast::Receiver<TaskId>,
    mut gaps: Option<watch::Receiver<u64>>,
) {
    loop {
        let gap = async {
            match &mut gaps {
                Some(gaps) => gaps.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            next = feed.recv() => {
                let Some(inner) = inner.upgrade() else { return };
                match next {
                    Ok(id) => {
                        inner.waiters.wake(&id);
                        follow_task_span(&inner, &id).await;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => inner.waiters.wake_all(),
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
            open = gap => {
                let Some(inner) = inner.upgrade() else { return };
                inner.waiters.wake_all();
                if !open {
                    gaps = None;
                }
            }
        }
    }
}

/// A change of task `id` heard on the feed, when this process has a span
/// for it: the span ends if the task ended (another replica may have ended
/// it: an expiry, a takeover). The events come from the observer's calls.
/// Without feature `otel` no task has a span.
async fn follow_task_span(inner: &Inner, id: &TaskId) {
    if !inner.task_spans.tracks(id) {
        return;
    }
    match inner.store.get(id).await {
        Ok(Some(record)) => inner.task_spans.heard(&record),
        Ok(None) => inner.task_spans.removed(id),
        Err(_) => {}
    }
}

/// Sweeps every `every` until the runtime is dropped.
pub(crate) async fn run_sweeper(inner: Weak<Inner>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(error) = sweep(&inner).await {
            tracing::warn!(%error, "task sweep failed");
        }
    }
}

/// One sweep at the clock's time: unfinished tasks past their TTL fail,
/// finished ones past their retention are deleted.
pub(crate) async fn sweep(inner: &Inner) -> Result<usize, StoreError> {
    let now = inner.clock.now();
    let due = inner.store.expired(now, SWEEP_BATCH).await?;
    let count = due.len();
    for id in due {
        match inner.modify_at(&id, &Change::Expire, None, now).await {
            // Unfinished past its TTL: now failed, kept for the retention window.
            Ok(Modified::Applied(_) | Modified::Missing) => {}
            // Finished and past its retention: gone.
            Ok(Modified::Refused(record, _)) => {
                if record.is_due(now) {
                    inner.delete(&id).await?;
                }
            }
            // A record that cannot be read (corrupt) must not block the
            // others behind it in the index: it is past its time, drop it.
            Err(error) => {
                tracing::warn!(%error, "an expired task could not be read; deleting it");
                inner.delete(&id).await?;
            }
        }
    }
    Ok(count)
}

/// The shortest pause between two keep-alives of one task.
const MIN_KEEP_ALIVE: Duration = Duration::from_millis(50);

/// How a supervised tool ended.
enum Ending {
    /// Record this outcome.
    Outcome(Change),
    /// Write nothing: the task is not ours any more (lease lost, taken over).
    Stop,
    /// Leave the task unfinished, with this status message: a drain
    /// stopped its resumable tool, which runs again from its checkpoint.
    Suspend(String),
    /// Hand the resumable task to another replica (a drain on a shared
    /// store): see `handoff.rs`.
    HandOff,
}

/// How a tool's future ended: its outcome, or the panic it raised.
pub(crate) type Finished = std::thread::Result<Result<CallToolResult, ErrorData>>;

/// A tool's future with its panics caught ([`catch_panics`]).
pub(crate) trait Tool: Future<Output = Finished> + Send + 'static {}

impl<F: Future<Output = Finished> + Send + 'static> Tool for F {}

/// `future` with a panic in it caught, to fail its task.
pub(crate) fn catch_panics<Fut>(future: Fut) -> impl Tool
where
    Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
{
    std::panic::AssertUnwindSafe(future).catch_unwind()
}

/// The change that records how a tool ended: a panic, or an outcome past
/// the runtime's result budget, fails the task (see `budget.rs`).
pub(crate) fn outcome_of(finished: Finished, inner: &Inner) -> Change {
    outcome_within(finished, inner.settings.max_result_bytes)
}

/// Spawns a supervision ([`supervise`], [`supervise_queued`]) with its
/// future on the heap: it is a few KB, and tokio copies a task's whole
/// future at each of its stages (spawned, polled to its end, its output
/// dropped), where a boxed one costs a pointer.
pub(crate) fn spawn_supervision(
    supervision: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(Box::pin(supervision))
}

/// Runs the tool to its outcome and records it; stops it on cancel or
/// expiry, and without writing when this server lost the task (`lease`).
/// While it runs, a task that follows activity is kept alive: a
/// [`Change::KeepAlive`] every third of its idle TTL. `seats` (on a shared
/// store) are freed at the end.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn supervise(
    inner: Arc<Inner>,
    id: TaskId,
    idle_ttl: Option<Duration>,
    token: CancellationToken,
    tool: impl Tool,
    (seat, slot): (Seat, RunSlot),
    seats: Shared,
    lease: Option<Arc<Lease>>,
) {
    let mut waiter = inner.waiters.register(&id);
    // Whether a drain's hand-off grace found the task not resumable.
    let mut handing_checked = false;
    let keep_alive_every = idle_ttl.map(|idle| (idle / 3).max(MIN_KEEP_ALIVE));
    let mut next_keep_alive = keep_alive_every.map(|every| tokio::time::Instant::now() + every);
    // The tool runs inside this task (no second spawn), and is dropped at
    // the end of this block, before anything is written.
    let ending = {
        tokio::pin!(tool);
        loop {
            let keep_alive = async {
                match next_keep_alive {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                finished = &mut tool => break Ending::Outcome(outcome_of(finished, &inner)),
                // Every change of this task wakes us (the fallback only covers a
                // store whose change feed is gone).
                () = waiter.wait(Duration::from_secs(30)) => {
                    if let Some(ending) = changed(&inner, &id, lease.as_ref()).await {
                        break ending;
                    }
                }
                () = keep_alive => {
                    next_keep_alive = keep_alive_every.map(|every| tokio::time::Instant::now() + every);
                    // Refused while the task waits for input: then only its own
                    // changes keep it alive. A failed write is tried at the next.
                    let kept = inner.modify_as_runner(&id, &Change::KeepAlive, lease.as_ref()).await;
                    if let Err(error) = kept {
                        tracing::warn!(%error, "keeping a running task alive failed");
                    }
                }
                () = lease_lost(lease.as_ref()) => break Ending::Stop,
                () = inner.draining.hand_off_due(), if lease.is_some() && !handing_checked => {
                    handing_checked = true;
                    if hands_off_early(&inner, &id).await {
                        break Ending::HandOff;
                    }
                }
                () = inner.draining.ending() => break drained(&inner, &id, lease.as_ref()).await,
            }
        }
    };
    token.cancel();
    // The tool has stopped: the next task in the queue may start.
    drop(slot);
    finish(&inner, &id, ending, seats, lease.as_ref()).await;
    // The task is finished: its caller may start another.
    drop(seat);
}

/// Records how a task ended and frees its shared seats: with the
/// outcome's write on a store that frees seats with a swap (one round
/// trip; apart only when that write did not happen), else side by side.
async fn finish(
    inner: &Inner,
    id: &TaskId,
    ending: Ending,
    seats: Shared,
    lease: Option<&Arc<Lease>>,
) {
    let pools = seats.as_ref().map(|seats| seats.held()).unwrap_or_default();
    let free = seats
        .as_ref()
        .filter(|_| !pools.is_empty())
        .map(|seats| (seats.seat(), pools.as_slice()));
    let with_outcome = free.is_some()
        && lease.is_some()
        && matches!(ending, Ending::Outcome(_) | Ending::Suspend(_))
        && inner
            .store
            .replicas()
            .is_some_and(|replicas| replicas.frees_with_swap());
    let free = free.filter(|_| with_outcome);
    let outcome = async {
        match ending {
            Ending::Outcome(change) => {
                record_outcome_freeing(inner, id, &change, lease, free).await
            }
            Ending::Suspend(message) => {
                let change = Change::StatusMessage(message);
                record_outcome_freeing(inner, id, &change, lease, free).await
            }
            Ending::HandOff => {
                if let Some(lease) = lease
                    && !hand_off(inner, id, lease).await
                    && let Ending::Outcome(change) = shut_down(inner)
                {
                    // Not handed off: failed honestly rather than left.
                    record_outcome(inner, id, &change, Some(lease)).await;
                }
                false
            }
            Ending::Stop => false,
        }
    };
    let freed = async {
        if let Some(seats) = &seats {
            seats.free(&inner.store).await;
        }
    };
    if with_outcome {
        if !outcome.await {
            freed.await;
        }
    } else {
        tokio::join!(outcome, freed);
    }
    // Ended here (already heard) or elsewhere: no longer this process's to track.
    if let Some(observers) = &inner.observers {
        observers.forget(id);
    }
}

/// How often a queued task's status message is brought up to date (when
/// its place changed).
const QUEUE_REPORT_EVERY: Duration = Duration::from_secs(1);

/// What a queued task waits for first.
pub(crate) enum Waiting {
    /// Its turn in this process's queue, then (on a shared store) its
    /// running seats.
    Turn(Ticket),
    /// It has its turn here: its running seats in the shared store.
    Seats(RunSlot),
}

/// Keeps a queued task until it may run, then [`supervise`]s its tool;
/// meanwhile its status message follows its place in the queue, and a
/// cancel (or its expiry) takes it out of the queue without running it. No
/// keep-alive is sent while it waits: its TTL and maximum lifetime count.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn supervise_queued(
    inner: Arc<Inner>,
    id: TaskId,
    idle_ttl: Option<Duration>,
    token: CancellationToken,
    tool: impl Tool,
    (seat, waiting): (Seat, Waiting),
    seats: Shared,
    lease: Option<Arc<Lease>>,
) {
    let (mut place, mut start, mut turn) = match waiting {
        Waiting::Turn(ticket) => (Some(ticket.place), Some(ticket.start), None),
        Waiting::Seats(slot) => (None, None, Some(slot)),
    };
    // Seats are shared through a lease; without one there is nothing to wait for.
    let shared = seats.clone().zip(lease.clone());
    // A slot here, waiting for its seats in the shared store.
    let mut seated_wait: Option<RunSlot> = None;
    let mut waiter = inner.waiters.register(&id);
    let mut handing_checked = false;
    let mut shown = place.as_ref().and_then(Place::ahead);
    let mut reports = tokio::time::interval(QUEUE_REPORT_EVERY);
    reports.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    reports.reset();
    let ending = loop {
        if let Some(slot) = turn.take() {
            let started = match &shared {
                Some((seats, lease)) => seats.try_start(&inner.store, lease).await,
                None => Ok(true),
            };
            match started {
                Ok(true) => {
                    drop(waiter);
                    return supervise(inner, id, idle_ttl, token, tool, (seat, slot), seats, lease)
                        .await;
                }
                Ok(false) => {
                    let message = Change::StatusMessage(WAITING_FOR_SEATS.to_owned());
                    if let Err(error) = inner.modify_as_runner(&id, &message, lease.as_ref()).await
                    {
                        tracing::warn!(%error, "reporting a queued task's wait failed");
                    }
                    seated_wait = Some(slot);
                }
                Err(_) => break Ending::Stop,
            }
        }
        let turn_came = async {
            match start.as_mut() {
                Some(start) => start.await.ok(),
                None => std::future::pending().await,
            }
        };
        let seats_came = async {
            match (&shared, &seated_wait) {
                (Some((seats, lease)), Some(_)) => seats.start(&inner.store, lease).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            slot = turn_came => match slot {
                Some(slot) => {
                    (start, place) = (None, None);
                    turn = Some(slot);
                }
                // The runtime is gone.
                None => return,
            },
            started = seats_came => match started {
                Ok(()) => {
                    let slot = seated_wait.take().expect("waited with a slot");
                    drop(waiter);
                    return supervise(inner, id, idle_ttl, token, tool, (seat, slot), seats, lease)
                        .await;
                }
                Err(_) => break Ending::Stop,
            },
            () = waiter.wait(Duration::from_secs(30)) => {
                if let Some(ending) = changed(&inner, &id, lease.as_ref()).await {
                    break ending;
                }
            }
            _ = reports.tick(), if place.is_some() => {
                let ahead = place.as_ref().and_then(Place::ahead);
                if ahead != shown && let Some(ahead) = ahead {
                    let message = Change::StatusMessage(queued_message(ahead));
                    match inner.modify_as_runner(&id, &message, lease.as_ref()).await {
                        Ok(_) => shown = Some(ahead),
                        Err(error) => tracing::warn!(%error, "reporting a queued task's place failed"),
                    }
                }
            }
            () = lease_lost(lease.as_ref()) => break Ending::Stop,
            () = inner.draining.hand_off_due(), if lease.is_some() && !handing_checked => {
                handing_checked = true;
                if hands_off_early(&inner, &id).await {
                    break Ending::HandOff;
                }
            }
            () = inner.draining.ending() => break drained(&inner, &id, lease.as_ref()).await,
        }
    };
    drop((place, start, seated_wait));
    token.cancel();
    drop(tool);
    finish(&inner, &id, ending, seats, lease.as_ref()).await;
    drop(seat);
}

/// How a supervised task ends after a change of its record, if it does:
/// taken over by another server (stop, write nothing), or cancelled,
/// expired, finished elsewhere or deleted (cancel: a queued task is then
/// never run). `None` while it goes on, or when the record cannot be read.
async fn changed(inner: &Inner, id: &TaskId, lease: Option<&Arc<Lease>>) -> Option<Ending> {
    match inner.store.get(id).await {
        Ok(Some(record)) if taken_over(&record, lease) => Some(Ending::Stop),
        Ok(Some(record)) if !record.cancel_requested() && !record.status().is_terminal() => None,
        Ok(_) => Some(Ending::Outcome(Change::Cancel)),
        Err(error) => {
            tracing::warn!(%error, "reading a supervised task failed");
            None
        }
    }
}

/// How a drain ends a task it stopped waiting for: a resumable task whose
/// store outlives this process is left unfinished, to continue from its
/// checkpoint (here, when the server starts again; on a shared store,
/// wherever this server's lease is taken over); any other fails, saying
/// how long the drain waited.
async fn drained(inner: &Inner, id: &TaskId, lease: Option<&Arc<Lease>>) -> Ending {
    let (resumable, last) = match inner.store.get(id).await {
        Ok(Some(record)) => (
            record.resumable_call().is_some() && !record.cancel_requested(),
            record.status_message().map(str::to_owned),
        ),
        _ => (false, None),
    };
    if resumable && inner.resumes {
        if lease.is_some() {
            return Ending::HandOff;
        }
        if inner.store.outlives_process() {
            inner.draining.count(Ended::Suspended);
            return Ending::Suspend(suspended_message(last.as_deref()));
        }
    }
    shut_down(inner)
}

/// The failure of a task the drain ends: the server shut down before it
/// finished, and how long the drain waited.
fn shut_down(inner: &Inner) -> Ending {
    inner.draining.count(Ended::Failed);
    let error = ErrorData::internal_error(shut_down_message(inner.draining.waited()), None);
    Ending::Outcome(Change::Fail(error_json(&error)))
}

/// Whether task `id` is one a drain hands to another replica before the
/// drain's end: resumable, not being cancelled, not one the drain waits
/// for ([`TaskRecord::drain_waits`]), on a runtime that resumes tasks.
///
/// [`TaskRecord::drain_waits`]: crate::store::TaskRecord::drain_waits
async fn hands_off_early(inner: &Inner, id: &TaskId) -> bool {
    inner.resumes
        && matches!(
            inner.store.get(id).await,
            Ok(Some(record)) if record.resumable_call().is_some()
                && !record.cancel_requested()
                && !record.drain_waits()
        )
}

/// True when `record` names another runner than `lease`'s.
fn taken_over(record: &crate::store::TaskRecord, lease: Option<&Arc<Lease>>) -> bool {
    lease.is_some_and(|lease| record.runner() != Some(lease.runner()))
}

/// Records a tool's outcome, retrying while the store cannot be reached
/// (for at most [`OUTCOME_RETRY_FOR`]) and giving up if the lease is lost.
pub(crate) async fn record_outcome(
    inner: &Inner,
    id: &TaskId,
    change: &Change,
    lease: Option<&Arc<Lease>>,
) {
    record_outcome_freeing(inner, id, change, lease, None).await;
}

/// [`record_outcome`] whose write gives `free`'s seat up too, where the
/// store frees seats with a swap: `true` when it did (else the caller
/// frees them).
async fn record_outcome_freeing(
    inner: &Inner,
    id: &TaskId,
    change: &Change,
    lease: Option<&Arc<Lease>>,
    free: Option<Freeing<'_>>,
) -> bool {
    let give_up = tokio::time::Instant::now() + OUTCOME_RETRY_FOR;
    let mut pause = Duration::from_millis(50);
    loop {
        match inner
            .modify_as_runner_freeing(id, change, lease, free)
            .await
        {
            Ok((_, freed)) => return freed,
            Err(LeaseError::Lost) => {
                tracing::warn!("a tool finished after this server lost its task: not recorded");
                return false;
            }
            Err(LeaseError::Store(error))
                if error.kind() == StoreErrorKind::Unavailable
                    && tokio::time::Instant::now() + pause < give_up =>
            {
                tracing::warn!(%error, "recording a task outcome failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = lease_lost(lease) => return false,
                }
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(LeaseError::Store(error)) => {
                tracing::error!(%error, "recording a task outcome failed");
                return false;
            }
        }
    }
}
