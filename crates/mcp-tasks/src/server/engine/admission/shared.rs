//! The bounds across all replicas on a shared store: each task's seats in
//! the store's pools (see [Seats](crate::store::replicas#seats)).
//!
//! On a store shared by replicas (Redis), the per-caller cap, the running
//! and queued bounds and each tool's bound hold for all replicas together,
//! beside the counts each process keeps for its own fair queue:
//!
//! * a creation takes the task's seat in `caller:<quota>` (the cap) and,
//!   if the local queue lets it run, in `running` and `tool:<name>`, else in
//!   `queued`, in the same store step that creates the record; a full
//!   `running` or tool pool makes it a queued task instead, a full `caller`
//!   or `queued` pool refuses it (the [`refusal`](super::refusal) shape);
//! * a queued task whose local turn came swaps `queued` for `running` (and
//!   its tool) in one step, retried whenever seats are freed on any replica
//!   (and every second, in case a signal was missed);
//! * a task's end frees its seats, with the write of its outcome on a
//!   store that [frees with a swap](crate::store::Replicas::frees_with_swap)
//!   (one round trip), else beside it; a replica that dies gives its seats
//!   back when another claims its lease, within one lease period.
//!
//! Unbounded settings take no seat at all, so a server without bounds pays
//! nothing for them; a task that took no seat (no cap, no running or tool
//! bound, never queued) frees none at its end either.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::ErrorData;

use super::caller::Caller;
use super::queue::AdmissionLimits;
use super::refusal::{Denial, Refusal, caller_tasks, queue_full};
use crate::server::auth::principal::push_hex;
use crate::server::engine::lease::{Lease, LeaseError};
use crate::server::engine::wire::store_failure;
use crate::store::{SeatId, SeatPool, Seating, SharedStore, TaskRecord};

/// The longest a queued task waits between two tries for a running seat.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// How long freeing a finished task's seats is retried while the store
/// cannot be reached.
const FREE_FOR: Duration = Duration::from_secs(600);

/// One task's seats in the shared pools.
#[derive(Debug)]
pub(crate) struct TaskSeats {
    seat: SeatId,
    /// The cap's pool and limit, if the caller has a cap.
    caller: Option<(SeatPool, u64)>,
    /// The pools a running task holds a seat in, with their limits.
    running: Vec<(SeatPool, u64)>,
    /// The queue's pool and limit.
    queued: (SeatPool, u64),
    /// Whether the task may hold a seat in the queue's pool: set before
    /// one is taken, cleared once a start gave it up. A task that holds
    /// no seat anywhere (no cap, no running bound, never queued) frees
    /// none at its end: no round trip to the store.
    may_hold_queued: AtomicBool,
}

/// Where a task's seats put it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seated {
    /// Its tool may run.
    Running,
    /// It holds a queued seat: it waits for a running one.
    Queued,
    /// Nothing was created: a task of the same caller holds the record's
    /// idempotency key.
    Existing,
}

fn limit(bound: Option<usize>) -> Option<u64> {
    bound.map(|bound| u64::try_from(bound).unwrap_or(u64::MAX))
}

impl TaskSeats {
    /// The seats a task of `tool` from `caller` needs on `store`, under
    /// the runtime's `limits` and per-caller `cap`: `None` on a store of
    /// one process, or when nothing is bounded.
    pub(crate) fn plan(
        store: &SharedStore,
        limits: &AdmissionLimits,
        cap: Option<usize>,
        caller: &Caller,
        tool: &str,
    ) -> Option<Self> {
        store.replicas()?;
        let cap = limit(cap).map(|cap| (SeatPool::caller(&caller.quota), cap));
        let mut running = Vec::new();
        if let Some(max) = limit(limits.max_running()) {
            running.push((SeatPool::running(), max));
        }
        if let Some(max) = limit(limits.tool_concurrency(tool)) {
            running.push((SeatPool::tool(tool), max));
        }
        let queued = (
            SeatPool::queued(),
            limit(limits.max_queued()).unwrap_or(u64::MAX),
        );
        if cap.is_none() && running.is_empty() && queued.1 == u64::MAX {
            return None;
        }
        // Random, never derived from the task id (a bearer token).
        let mut bytes = [0u8; 12];
        getrandom::fill(&mut bytes).ok()?;
        let mut seat = String::with_capacity(24);
        push_hex(&mut seat, &bytes);
        let seat = SeatId::new(seat);
        Some(Self {
            seat,
            caller: cap,
            running,
            queued,
            may_hold_queued: AtomicBool::new(false),
        })
    }

    /// These seats, for a task taken over from a stopped replica: counted
    /// against its owner's cap without refusing it.
    pub(crate) fn taken_over(mut self) -> Self {
        if let Some((_, cap)) = &mut self.caller {
            *cap = u64::MAX;
        }
        self.queued.1 = u64::MAX;
        self
    }

    /// Creates `record` with its seats, running if `runs` and the pools
    /// have room, else queued; refused when the caller's cap or the queue
    /// is full. `lease` is the creating runner's.
    pub(crate) async fn create(
        &self,
        store: &SharedStore,
        record: TaskRecord,
        lease: &Lease,
        runs: bool,
    ) -> Result<Seated, Denial> {
        let replicas = store
            .replicas()
            .ok_or_else(|| ErrorData::internal_error("the store has no shared seats", None))?;
        if runs {
            let take = self.pools(&self.running);
            match replicas
                .create_seated(record.clone(), &self.seat, lease.runner(), &take)
                .await
                .map_err(store_failure)?
            {
                Seating::Seated => return Ok(Seated::Running),
                Seating::Full(index) if self.is_cap(index) => {
                    return Err(self.refused_cap().into());
                }
                Seating::Full(_) => {}
                Seating::NoLease => return Err(LeaseError::Lost.into_error_data().into()),
                Seating::Existing => return Ok(Seated::Existing),
            }
        }
        let take = self.pools(std::slice::from_ref(&self.queued));
        self.may_hold_queued.store(true, Ordering::SeqCst);
        match replicas
            .create_seated(record, &self.seat, lease.runner(), &take)
            .await
            .map_err(store_failure)?
        {
            Seating::Seated => Ok(Seated::Queued),
            Seating::Full(index) if self.is_cap(index) => Err(self.refused_cap().into()),
            Seating::Full(_) => Err(queue_full(self.queued.1).into()),
            Seating::NoLease => Err(LeaseError::Lost.into_error_data().into()),
            Seating::Existing => Ok(Seated::Existing),
        }
    }

    /// Tries once to take the running seats of a queued task (giving its
    /// queued seat up): `Ok(false)` while they are full (or the store
    /// cannot be reached), `Err` when the lease was lost. The caller's cap
    /// is taken again with them: a no-op for a seat that holds it, and
    /// the first take for a task taken over from another replica.
    pub(crate) async fn try_start(
        &self,
        store: &SharedStore,
        lease: &Lease,
    ) -> Result<bool, LeaseError> {
        let Some(replicas) = store.replicas() else {
            return Ok(true);
        };
        let take = self.pools(&self.running);
        let free = [self.queued.0.clone()];
        match replicas
            .move_seats(&self.seat, lease.runner(), &take, &free)
            .await
        {
            Ok(Seating::Seated) => {
                // The queued seat was given up in the same step.
                self.may_hold_queued.store(false, Ordering::SeqCst);
                Ok(true)
            }
            Ok(Seating::NoLease) => Err(LeaseError::Lost),
            Ok(Seating::Full(_) | Seating::Existing) => Ok(false),
            Err(error) => {
                tracing::warn!(%error, "taking a running seat failed; retrying");
                Ok(false)
            }
        }
    }

    /// Takes the running seats of a queued task (giving its queued seat
    /// up), waiting while they are full; `Err` when the lease was lost.
    pub(crate) async fn start(&self, store: &SharedStore, lease: &Lease) -> Result<(), LeaseError> {
        let Some(replicas) = store.replicas() else {
            return Ok(());
        };
        let mut freed = replicas.seats_freed();
        loop {
            freed.borrow_and_update();
            if self.try_start(store, lease).await? {
                return Ok(());
            }
            tokio::select! {
                _ = freed.changed() => {}
                () = tokio::time::sleep(RETRY_EVERY) => {}
                () = lease.lost() => return Err(LeaseError::Lost),
            }
        }
    }

    /// The task's seat (random, not its id).
    pub(crate) fn seat(&self) -> &SeatId {
        &self.seat
    }

    /// The pools the task may hold its seat in: empty when it never held
    /// one.
    pub(crate) fn held(&self) -> Vec<SeatPool> {
        let mut pools: Vec<SeatPool> = self.running.iter().map(|(pool, _)| pool.clone()).collect();
        if self.may_hold_queued.load(Ordering::SeqCst) {
            pools.push(self.queued.0.clone());
        }
        pools.extend(self.caller.iter().map(|(pool, _)| pool.clone()));
        pools
    }

    /// Gives every seat of the task up, retrying while the store cannot
    /// be reached.
    pub(crate) async fn free(&self, store: &SharedStore) {
        let Some(replicas) = store.replicas() else {
            return;
        };
        let pools = self.held();
        if pools.is_empty() {
            // It never held a seat: nothing to give up.
            return;
        }
        let give_up = tokio::time::Instant::now() + FREE_FOR;
        let mut pause = Duration::from_millis(50);
        loop {
            match replicas.free_seats(&self.seat, &pools).await {
                Ok(()) => return,
                Err(error) if tokio::time::Instant::now() + pause < give_up => {
                    tracing::warn!(%error, "freeing a task's seats failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(error) => {
                    tracing::error!(%error, "freeing a task's seats failed");
                    return;
                }
            }
        }
    }

    /// `pools` after the caller's cap, if any.
    fn pools(&self, pools: &[(SeatPool, u64)]) -> Vec<(SeatPool, u64)> {
        self.caller.iter().chain(pools).cloned().collect()
    }

    /// Whether the pool at `index` of what [`TaskSeats::pools`] gave is
    /// the caller's cap (it comes first).
    fn is_cap(&self, index: usize) -> bool {
        self.caller.is_some() && index == 0
    }

    fn refused_cap(&self) -> Refusal {
        caller_tasks(self.caller.as_ref().map_or(0, |(_, cap)| *cap))
    }
}

/// Seats shared between the supervision and whatever frees them.
pub(crate) type Shared = Option<Arc<TaskSeats>>;
