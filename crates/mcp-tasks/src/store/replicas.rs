//! What a store shared by several server processes (replicas) adds to
//! [`TaskStore`](super::TaskStore): leases, so that the tasks of a replica
//! that died are ended (or run again) by another, and a signal for changes
//! its change feed may have missed. A store kept by one process (memory,
//! SQLite) has none of it: [`TaskStore::replicas`](super::TaskStore::replicas)
//! answers `None` and the runtime runs without leases.
//!
//! # The design
//!
//! * Every runtime on such a store holds one lease under a [`RunnerId`] of
//!   its own and renews it; each task it creates names that runner
//!   ([`TaskRecord::runner`](super::TaskRecord::runner)). One lease covers
//!   all of a replica's tasks, so renewing costs one store write per
//!   renewal, not one per task.
//! * A lease that ran out by the store's clock is *claimed* by
//!   [`Replicas::orphans`]: from then on it can never be renewed, and the
//!   tasks of its runner are listed for the caller to take over through the
//!   transition function, with [`TaskRecord::apply_as`](super::TaskRecord::apply_as)
//!   naming the dead runner: failed with
//!   [`Change::RunnerStopped`](super::Change::RunnerStopped), cancelled if a
//!   cancel was asked, or given to a new runner with
//!   [`Change::Resume`](super::Change::Resume) when the task is resumable.
//!   Several replicas may take over at once: compare-and-set lets one win.
//! * Fencing: every write a runner makes for its own tasks names the runner
//!   ([`modify_as`](super::modify_as)); once another replica has taken a
//!   task over, the record names another runner (or is finished) and the
//!   old runner's writes are refused, so no task ends twice. A runner whose
//!   renewal answers "claimed" stops its tools without writing anything.
//!
//! # Seats
//!
//! Bounds that must hold across all replicas (the tasks running at once,
//! the tasks queued, the unfinished tasks of one caller, the calls of one
//! tool at once) are counted with *seats* in named *pools* that the store
//! keeps ([`SeatPool`]: `running`, `queued`, `caller:<principal>`,
//! `tool:<name>`, or any name the runtime chooses).
//!
//! * A seat is a [`SeatId`] the runtime makes at random for each task (not
//!   the task id: that is a bearer token, and seats are stored in plain
//!   sight). A task holds its seat in several pools at once, and in
//!   each at most once.
//! * [`Replicas::take_seats`] takes the seat in every pool listed, all or
//!   nothing, in one atomic step: a pool has room when it holds fewer
//!   seats than the limit given with it; a pool that already holds this
//!   seat always has room (a take is idempotent). The answer names the
//!   first pool that is full ([`Seating::Full`]), and then nothing was
//!   taken. [`Replicas::create_seated`] does the same and creates the task's
//!   record in the same step, only if the seats were taken: admission then
//!   costs a creation no extra round trip to the store.
//! * [`Replicas::move_seats`] does the same and, in the same step, gives the
//!   seat up in other pools: a queued task that starts swaps `queued` for
//!   `running` (and `tool:<name>` when its tool has a bound) without a
//!   moment where it holds both or neither. If a pool to take is full,
//!   nothing changes: the task keeps its `queued` seat.
//! * [`Replicas::free_seats`] gives the seat up in the pools listed (those
//!   that do not hold it are skipped): at a task's end, every pool it
//!   holds a seat in. It need not wait for the task's last write: sent
//!   beside it (`tokio::join!`), it adds no waiting. A store that can do
//!   both in one step ([`Replicas::frees_with_swap`]) frees the seats with
//!   the write itself ([`Replicas::compare_and_swap_freeing`]): a task's end
//!   then costs one round trip, and the runtime frees them apart only when
//!   that write did not happen. [`Replicas::seats_taken`] counts a pool's
//!   seats.
//! * Every seat is held by the runner that took it. A take needs a lease
//!   ([`Seating::NoLease`] for a runner that never took one or whose lease
//!   was claimed). When a lease is *claimed* ([`Replicas::orphans`]), every
//!   seat of its runner is freed in the same atomic step: a replica killed
//!   with SIGKILL gives its seats back once another replica claims its
//!   lease, that is within one lease period with the runtime's timing (see
//!   `server::lease`). A lease that ran out but was not claimed yet keeps its
//!   seats: it may still be renewed, and its tools still run, so counting
//!   its seats out would let a bound be passed after an outage of the store.
//!   A task that another replica resumes must take its seats again, under
//!   the new runner.
//! * Whenever seats are freed (by a free, a move or a claim), on any replica,
//!   [`Replicas::seats_freed`] goes up on every replica (and after a gap in
//!   the store's feed, when news may have been missed): the runtime retries
//!   its queued tasks then.
//! * A store keeps nothing for an empty pool, so pools named after callers
//!   or tools do not pile up; a backend must not put a pool's name in its
//!   keys as it is (it may hold a principal): the Redis store keys a pool by
//!   a hash of its name.
//!
//! # Rates and fair turns
//!
//! Two more things a store may keep for all replicas, each behind a
//! `supports_…` switch whose default (`false`) leaves the runtime counting
//! them in memory, per process, as on a store of one process:
//!
//! * **Creation rates** ([`Replicas::take_rate`], when
//!   [`Replicas::supports_rate`]): a GCRA bucket per [`RateBucket`] name,
//!   read on the *store's* clock. A bucket holds one number, its
//!   *theoretical arrival time* `tat` (nothing, or a `tat` in the past, is
//!   the same as `tat = now`). A take at `now` with emission interval `T`
//!   and burst `b` computes `t = max(tat, now)`; if `t - now > (b - 1) * T`
//!   it is refused with `retry_after = t - now - (b - 1) * T` and nothing
//!   changes, else `tat` becomes `t + T`. A bucket whose `tat` passed may be
//!   forgotten at any time (the Redis store lets its key expire then), so
//!   quiet callers cost nothing. As for pools, the name may hold a principal:
//!   a store keys a bucket by a hash of it.
//! * **Fair turns** at the running seats ([`Replicas::create_seated_fairly`]
//!   and [`Replicas::move_seats_fairly`], when
//!   [`Replicas::supports_fair_share`]): the weighted fair share of
//!   `AdmissionLimits` (the server's admission) between callers,
//!   decided in the store for the tasks queued on every replica. See
//!   [`FairTurn`] for the exact rules.
//!
//! Stores kept by one process have no [`Replicas`]: the runtime counts its
//! bounds in memory there.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{BoxFuture, StoreError, Swap, TaskRecord, Transition};
use crate::task::TaskId;

/// The identity under which one server process holds its lease in a shared
/// store: random, new for each lease (a replica whose lease was claimed
/// takes a new one). Not a secret.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunnerId(String);

impl RunnerId {
    /// A runner named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RunnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunnerId({})", self.0)
    }
}

impl fmt::Display for RunnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An unfinished task whose runner's lease was claimed: to be taken over.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Orphan {
    /// The task.
    pub id: TaskId,
    /// The runner whose lease was claimed; the takeover names it
    /// ([`modify_as`](super::modify_as)), so it fails if another replica
    /// took the task over first.
    pub runner: RunnerId,
}

impl Orphan {
    /// Task `id` of the claimed runner `runner`.
    pub fn new(id: TaskId, runner: RunnerId) -> Self {
        Self { id, runner }
    }
}

/// One task's seat in the [seat pools](self#seats): random, made by the
/// runtime for each task. Not the task id, which is a bearer token; not a
/// secret.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeatId(String);

impl SeatId {
    /// The seat `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SeatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SeatId({})", self.0)
    }
}

/// A named pool of [seats](self#seats), shared by every replica on the
/// store. Its name may hold a principal: stores key a pool by a hash of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeatPool(String);

impl SeatPool {
    /// The pool named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// `running`: the tasks whose tool runs.
    pub fn running() -> Self {
        Self::new("running")
    }

    /// `queued`: the tasks waiting for a running seat.
    pub fn queued() -> Self {
        Self::new("queued")
    }

    /// `caller:<principal>`: the unfinished tasks counted against `principal`.
    pub fn caller(principal: &super::Principal) -> Self {
        Self(format!("caller:{}", principal.as_str()))
    }

    /// `waiting:<principal>`: the queued tasks of `principal`, which name
    /// it in the store's [fair turns](FairTurn).
    pub fn waiting(principal: &super::Principal) -> Self {
        Self(format!("waiting:{}", principal.as_str()))
    }

    /// `tool:<name>`: the running calls of tool `name`.
    pub fn tool(name: &str) -> Self {
        Self(format!("tool:{name}"))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How many hex digits of a name's SHA-256 [`stored_name`] keeps.
pub const STORED_NAME_LEN: usize = 32;

/// How a store names a [`SeatPool`] or a [`RateBucket`] in its keys or
/// rows: the first [`STORED_NAME_LEN`] hex digits of the SHA-256 of its
/// name, so the name (which may hold a principal) is neither stored nor
/// able to break a key.
pub fn stored_name(name: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let digest = Sha256::digest(name.as_bytes());
    let mut id = String::with_capacity(STORED_NAME_LEN);
    for byte in &digest[..STORED_NAME_LEN / 2] {
        let _ = write!(id, "{byte:02x}");
    }
    id
}

/// What [`Replicas::take_seats`] and [`Replicas::move_seats`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Seating {
    /// The seat is held in every pool to take (and freed in those to free).
    Seated,
    /// The pool at this index of the list to take is full: nothing changed.
    Full(usize),
    /// The runner holds no lease (it never took one, or it was claimed):
    /// nothing changed. The runtime takes a new lease and tries again.
    NoLease,
    /// [`Replicas::create_seated`] only: a record of the same owner holds
    /// the new record's idempotency key (see
    /// [`TaskStore::create_keyed`](super::TaskStore::create_keyed)):
    /// nothing changed; [`TaskStore::find_keyed`](super::TaskStore::find_keyed)
    /// reads it.
    Existing,
}

impl Seating {
    /// A take's answer by the convention of the Redis and PostgreSQL
    /// stores' scripts and functions: 0 seated, -1 no lease, `i` (from 1)
    /// the `i`-th of `pools` pools full. `None` for anything else.
    pub fn from_code(code: i64, pools: usize) -> Option<Self> {
        match code {
            0 => Some(Self::Seated),
            -1 => Some(Self::NoLease),
            full => usize::try_from(full - 1)
                .ok()
                .filter(|index| *index < pools)
                .map(Self::Full),
        }
    }
}

/// A named creation-rate bucket (see [Rates and fair turns](self#rates-and-fair-turns)):
/// `caller:<principal>` for a caller's creation rate. Its name may hold a
/// principal: stores key a bucket by a hash of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RateBucket(String);

impl RateBucket {
    /// The bucket named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// `caller:<principal>`: the creations counted against `principal`.
    pub fn caller(principal: &super::Principal) -> Self {
        Self(format!("caller:{}", principal.as_str()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What [`Replicas::take_rate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum RateTake {
    /// The take was counted.
    Allowed,
    /// Too soon: nothing was counted; a take after `retry_after` (on the
    /// store's clock) is allowed, unless others take first.
    Limited {
        /// How long until the bucket allows one take.
        retry_after: Duration,
    },
}

/// A caller's claim to a fair turn at the running seats, given with a take
/// of seats on a store that [supports fair share](Replicas::supports_fair_share).
///
/// The store keeps, per caller, a *served* count (a number; the caller's
/// key is [`FairTurn::caller`], the pool of the caller's queued seats, so
/// the caller *waits* while that pool holds a seat), one number *last*
/// (the served count of the caller that took the last turn) and one time
/// *held since* (empty, or since when a free running seat was held back for
/// a less served caller). With [`FairTurn::gate`] `None` (a task that
/// queues) the take goes as [`Replicas::take_seats`] and, if it took a seat
/// in `caller` and that pool was empty before, the caller's served count
/// becomes `max(served, last)` (an idle caller does not save up turns).
/// With `gate` `Some(i)` (a task that takes running seats; the pool at
/// index `i` of the take is the shared one), in the same atomic step, after
/// the lease and the room of every pool were checked as usual:
///
/// 1. *mine* is the caller's served count if it waits, else
///    `max(served, last)`; *least* is the lowest served count among the
///    callers that wait (the caller itself included).
/// 2. The take may go on when no caller waits, or *mine* ≤ *least*, or a
///    seat has been held back for at least [`FairTurn::patience`] (so a
///    less served caller whose tasks cannot start, its replica dead or its
///    tool at its bound, delays the others by that much at most). Else the
///    answer is [`Seating::Full`]`(i)`, nothing is taken, and *held since*
///    is set to now if it was empty.
/// 3. When it goes on and some caller waits: *last* = *mine*, the caller's
///    served count = *mine* + [`FairTurn::share`]; and if *mine* ≤ *least*,
///    *held since* is emptied. When no caller waits, nothing is written.
///
/// Served counts at or below *last* may be forgotten for callers that do
/// not wait (they read as *last*); once no caller waits, everything may be
/// forgotten; a store may also forget it all after a while with no take
/// (the Redis store: ten minutes). A caller whose queued seats were freed
/// by a claim (its replica died) stops waiting then, with no write of its
/// own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FairTurn {
    /// The pool of the caller's queued seats (`waiting:<principal>`), which
    /// also names the caller in the store.
    pub caller: SeatPool,
    /// What one turn adds to the caller's served count: a larger weight is
    /// a smaller share.
    pub share: u64,
    /// The index, in the pools to take, of the pool whose free seats are
    /// shared fairly (`running`); `None` for a take that queues.
    pub gate: Option<usize>,
    /// How long a free seat may be held back for a less served caller.
    pub patience: Duration,
}

impl FairTurn {
    /// A queued take for the caller whose queued seats are in `caller`.
    pub fn queue(caller: SeatPool, share: u64) -> Self {
        Self {
            caller,
            share,
            gate: None,
            patience: Duration::ZERO,
        }
    }

    /// A take of running seats, the pool at `gate` shared fairly, holding a
    /// seat back at most `patience`.
    pub fn start(caller: SeatPool, share: u64, gate: usize, patience: Duration) -> Self {
        Self {
            caller,
            share,
            gate: Some(gate),
            patience,
        }
    }
}

/// Leases and feed gaps of a store shared by several server processes. See
/// the [module docs](self). Times are the store's, so replicas whose clocks
/// disagree still agree on whose lease ran out.
pub trait Replicas: Send + Sync {
    /// Takes a new lease for `runner`, held `hold` from now.
    fn acquire<'a>(
        &'a self,
        runner: &'a RunnerId,
        hold: std::time::Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Renews `runner`'s lease for `hold` from now: `Ok(false)` when the
    /// lease was claimed (it ran out and another process takes its tasks
    /// over), so the runner must stop writing for its tasks. A lease that
    /// ran out but was not claimed yet is renewed.
    fn renew<'a>(
        &'a self,
        runner: &'a RunnerId,
        hold: std::time::Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Claims every lease that ran out, then lists at most `limit`
    /// unfinished tasks of claimed runners, for the caller to take over.
    /// A claimed runner with no unfinished task left is forgotten.
    fn orphans(&self, limit: usize) -> BoxFuture<'_, Result<Vec<Orphan>, StoreError>>;

    /// A counter bumped whenever the change feed may have missed changes
    /// (its subscription was lost and made again): the runtime then wakes
    /// every waiter, which re-reads its task.
    fn feed_gaps(&self) -> watch::Receiver<u64>;

    /// Takes `seat` for `runner` in every pool of `take` that has room (it
    /// holds fewer seats than the limit beside it, or holds this seat
    /// already), all or nothing, and gives it up in every pool of `free`,
    /// in one atomic step. [`Seating::Full`] names the first pool of `take`
    /// without room; then nothing changed. The pools of `take` and `free`
    /// are distinct. See [Seats](self#seats).
    fn move_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Seating, StoreError>>;

    /// Takes `seat` for `runner` in every pool of `take`, all or nothing, as
    /// [`Replicas::take_seats`] does, and creates `record` (as
    /// [`TaskStore::create`](super::TaskStore::create)) only when they were
    /// taken, in one atomic step: a creation admitted by seats costs no more
    /// than one without. An existing id is an error, and then nothing was
    /// taken. A record made with an idempotency key is created as
    /// [`TaskStore::create_keyed`](super::TaskStore::create_keyed) does: if
    /// a record of the same owner holds the key, the answer is
    /// [`Seating::Existing`] and nothing was taken or created.
    fn create_seated<'a>(
        &'a self,
        record: TaskRecord,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
    ) -> BoxFuture<'a, Result<Seating, StoreError>>;

    /// [`Replicas::move_seats`] with nothing to free: takes `seat` for
    /// `runner` in every pool of `pools`, all or nothing.
    fn take_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        pools: &'a [(SeatPool, u64)],
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        self.move_seats(seat, runner, pools, &[])
    }

    /// Gives `seat` up in every pool of `pools` that holds it, whichever
    /// runner took it; needs no lease.
    fn free_seats<'a>(
        &'a self,
        seat: &'a SeatId,
        pools: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Whether [`Replicas::compare_and_swap_freeing`] swaps and frees in
    /// one step. `false` (the default): a caller swaps and frees apart.
    fn frees_with_swap(&self) -> bool {
        false
    }

    /// [`TaskStore::compare_and_swap`](super::TaskStore::compare_and_swap)
    /// that, when it swaps, also gives `seat` up in every pool of `free`
    /// that holds it (as [`Replicas::free_seats`]), in one atomic step, so
    /// a task's last write and the release of its seats cost one round
    /// trip. A conflict or a missing record frees nothing. A store whose
    /// [`Replicas::frees_with_swap`] is `false` answers an error, and swaps
    /// nothing.
    fn compare_and_swap_freeing<'a>(
        &'a self,
        transition: Transition,
        seat: &'a SeatId,
        free: &'a [SeatPool],
    ) -> BoxFuture<'a, Result<Swap, StoreError>> {
        let _ = (transition, seat, free);
        Box::pin(std::future::ready(Err(StoreError::msg(
            "this store cannot free seats with a swap",
        ))))
    }

    /// How many seats `pool` holds (the seats of claimed runners are gone).
    fn seats_taken<'a>(&'a self, pool: &'a SeatPool) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Whether [`Replicas::take_rate`] counts creation rates for all
    /// replicas. `false` (the default): the runtime counts them per process.
    fn supports_rate(&self) -> bool {
        false
    }

    /// Takes one from the GCRA bucket `bucket` with emission interval
    /// `interval` and burst `burst` (at least 1), on the store's clock, in
    /// one atomic step (see [Rates and fair turns](self#rates-and-fair-turns)):
    /// [`RateTake::Limited`] with the wait when too soon (nothing counted).
    /// Needs no lease. A store whose [`Replicas::supports_rate`] is `false`
    /// answers an error.
    fn take_rate<'a>(
        &'a self,
        bucket: &'a RateBucket,
        interval: Duration,
        burst: u32,
    ) -> BoxFuture<'a, Result<RateTake, StoreError>> {
        let _ = (bucket, interval, burst);
        Box::pin(std::future::ready(Err(StoreError::msg(
            "this store cannot count creation rates",
        ))))
    }

    /// Whether [`Replicas::create_seated_fairly`] and
    /// [`Replicas::move_seats_fairly`] keep fair turns for all replicas.
    /// `false` (the default): they ignore the turn, and the runtime keeps
    /// its fair queue per process.
    fn supports_fair_share(&self) -> bool {
        false
    }

    /// [`Replicas::create_seated`] with a fair turn ([`FairTurn`]), in the
    /// same atomic step; a turn not come yet answers
    /// [`Seating::Full`] of the turn's gate. The default ignores `fair`.
    fn create_seated_fairly<'a>(
        &'a self,
        record: TaskRecord,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        fair: &'a FairTurn,
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        let _ = fair;
        self.create_seated(record, seat, runner, take)
    }

    /// [`Replicas::move_seats`] with a fair turn ([`FairTurn`]), in the same
    /// atomic step; a turn not come yet answers [`Seating::Full`] of the
    /// turn's gate. The default ignores `fair`.
    fn move_seats_fairly<'a>(
        &'a self,
        seat: &'a SeatId,
        runner: &'a RunnerId,
        take: &'a [(SeatPool, u64)],
        free: &'a [SeatPool],
        fair: &'a FairTurn,
    ) -> BoxFuture<'a, Result<Seating, StoreError>> {
        let _ = fair;
        self.move_seats(seat, runner, take, free)
    }

    /// A counter bumped whenever seats were freed, on any replica: a queued
    /// task may find room now. It is bumped too after a gap in the store's
    /// feed (news may have been missed then); a news that got lost with no
    /// gap reported (a connection that died silently) is not, so a waiter
    /// also retries now and then.
    fn seats_freed(&self) -> watch::Receiver<u64>;
}
