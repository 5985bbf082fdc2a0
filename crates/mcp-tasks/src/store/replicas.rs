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

use std::fmt;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::{BoxFuture, StoreError};
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
}
