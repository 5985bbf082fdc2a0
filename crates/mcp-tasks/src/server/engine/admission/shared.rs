//! The bounds across all replicas on a shared store: each task's seats in
//! the store's pools (see [Seats](crate::store::replicas#seats)).
//!
//! On a store shared by replicas (Redis, PostgreSQL), the per-caller cap, the running
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
//!
//! **Fair turns across replicas.** When some caller has a weight, the
//! running tools are bounded and the store
//! [keeps fair turns](crate::store::Replicas::supports_fair_share)
//! (Redis, PostgreSQL), the fair share between callers (their
//! [weights](crate::server::AdmissionLimits::with_weight)) is decided in the
//! store, for the tasks queued on every replica ([`FairTurn`]): a queued
//! task also holds a seat in its caller's `waiting:<quota>` pool, and a
//! running seat goes to a caller that is the least served among the callers
//! waiting (or to anyone once a free seat was held back [`PATIENCE`] for a
//! less served caller that did not take it: a dead replica or a tool at its
//! bound delays the others by that much at most). This process's queue
//! then bounds nothing ([`turns_in_store`]): every task asks the store,
//! and a queued one asks again whenever seats are freed (or every second).
//! Its status message says it waits for a free slot on the servers, not
//! how many tasks are ahead. A store error while a queued task asks is
//! logged and the task asks again later, as for any seat. Not kept yet: the
//! order of one caller's own queued tasks (any of them may take the caller's
//! turn), and a bound on how many queued tasks ask at once (every one asks
//! when seats are freed).

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
use crate::store::{FairTurn, SeatId, SeatPool, Seating, SharedStore, TaskRecord};

/// The longest a queued task waits between two tries for a running seat.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// How long a free running seat is held back for a less served caller
/// (see the module docs): twice the longest wait between two tries, so a
/// caller whose tasks can start takes its turn first.
pub(crate) const PATIENCE: Duration = Duration::from_secs(2);

/// Whether the store keeps the bounds and the fair turns of `limits` for
/// all replicas: some caller has a weight, the running tools are bounded,
/// and the store is shared and
/// [keeps fair turns](crate::store::Replicas::supports_fair_share).
/// Without weights each replica keeps its own fair queue, as before: a
/// caller's tasks then start in the order they came on each replica, which
/// the store's turns do not keep (see the module docs).
pub(crate) fn turns_in_store(store: &SharedStore, limits: &AdmissionLimits) -> bool {
    limits.has_weights()
        && limits.max_running().is_some()
        && store
            .replicas()
            .is_some_and(|replicas| replicas.supports_fair_share())
}

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
    /// With [fair turns in the store](turns_in_store): the pool of the
    /// caller's queued seats, and the share a turn adds to its count.
    fair: Option<(SeatPool, u64)>,
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
        let fair = turns_in_store(store, limits).then(|| {
            (
                SeatPool::waiting(&caller.quota),
                limits.share(&caller.quota),
            )
        });
        Some(Self {
            seat,
            caller: cap,
            running,
            queued,
            fair,
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
            let seated = match self.turn_to_start() {
                Some(turn) => {
                    let seat = &self.seat;
                    replicas
                        .create_seated_fairly(record.clone(), seat, lease.runner(), &take, &turn)
                        .await
                }
                None => {
                    replicas
                        .create_seated(record.clone(), &self.seat, lease.runner(), &take)
                        .await
                }
            };
            match seated.map_err(store_failure)? {
                Seating::Seated => return Ok(Seated::Running),
                Seating::Full(index) if self.is_cap(index) => {
                    return Err(self.refused_cap().into());
                }
                Seating::Full(_) => {}
                Seating::NoLease => return Err(LeaseError::Lost.into_error_data().into()),
                Seating::Existing => return Ok(Seated::Existing),
            }
        }
        let mut take = self.pools(std::slice::from_ref(&self.queued));
        self.may_hold_queued.store(true, Ordering::SeqCst);
        let seated = match &self.fair {
            Some((waiting, share)) => {
                take.push((waiting.clone(), u64::MAX));
                let turn = FairTurn::queue(waiting.clone(), *share);
                replicas
                    .create_seated_fairly(record, &self.seat, lease.runner(), &take, &turn)
                    .await
            }
            None => {
                replicas
                    .create_seated(record, &self.seat, lease.runner(), &take)
                    .await
            }
        };
        match seated.map_err(store_failure)? {
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
        let mut free = vec![self.queued.0.clone()];
        let moved = match self.turn_to_start() {
            Some(turn) => {
                free.push(turn.caller.clone());
                replicas
                    .move_seats_fairly(&self.seat, lease.runner(), &take, &free, &turn)
                    .await
            }
            None => {
                replicas
                    .move_seats(&self.seat, lease.runner(), &take, &free)
                    .await
            }
        };
        match moved {
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
            pools.extend(self.fair.iter().map(|(waiting, _)| waiting.clone()));
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

    /// The fair turn of a take of the running seats, with fair turns in
    /// the store: `running` comes first among them, after the cap.
    fn turn_to_start(&self) -> Option<FairTurn> {
        let (waiting, share) = self.fair.as_ref()?;
        let gate = usize::from(self.caller.is_some());
        Some(FairTurn::start(waiting.clone(), *share, gate, PATIENCE))
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
