//! Following one task for one principal: each new version of its record,
//! in order, until it ends. What every server loop that waits on a task's
//! changes for a client is built on, whatever the era: a listen stream's
//! tasks (`notifications/tasks`), a blocked 2025-11-25 `tasks/result`, and
//! that era's `notifications/tasks/status`.
//!
//! A follower is a [`Waiter`] (woken by the store's change feed as soon as
//! any replica changes the task) and one re-read interval,
//! [`REREAD_EVERY`], after which it reads the task even unwoken.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use tokio::time::Instant;

use super::runtime::{TaskRuntime, WeakRuntime};
use crate::server::engine::waiters::Waiter;
use crate::store::{PackedRecord, Principal};
use crate::task::TaskId;

/// How long a follower goes without reading its task when nothing woke it.
///
/// The change feed wakes a follower at once for every change any replica
/// makes (and every follower when the feed lagged or a shared store
/// reports a gap), so this re-read is only a safety net: for a change the
/// feed lost and nothing reported. 5 s because a blocked `tasks/result`
/// has a client waiting on it that does not poll meanwhile: such a change
/// must not hold it for long (it re-read every 5 s before this follower).
/// Listen streams and status notifications, whose clients poll anyway,
/// take the same value (they re-read every 30 s and 10 s before): none of
/// the three waits longer than it did, and a closed 2025-11-25 session is
/// noticed sooner. The price is a read of each followed task every 5 s:
/// a fifth of what a client polling `tasks/get` at the runtime's default
/// poll interval (1 s) costs, which is what listens and a blocking
/// `tasks/result` exist to save.
pub(crate) const REREAD_EVERY: Duration = Duration::from_secs(5);

/// One task followed for one principal (see the [module docs](self)).
/// Holds only a weak reference to the runtime: a follower ends with it.
pub(crate) struct Follower {
    runtime: WeakRuntime,
    id: TaskId,
    principal: Principal,
    waiter: Waiter,
    /// The version last yielded (or that the caller saw already).
    seen: Option<u64>,
    /// Woken, or the re-read is due: the next step reads before it waits.
    due: bool,
    /// When to read unwoken.
    reread_at: Instant,
    /// Ended: its final state was yielded, it is gone or not the
    /// principal's, or the runtime is gone.
    over: bool,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No id: it is a bearer token.
        f.debug_struct("Follower")
            .field("seen", &self.seen)
            .field("over", &self.over)
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// Follows task `id` of `runtime` for `principal`. Registered at once,
    /// so a change after this call is not missed; its first step reads
    /// without waiting, and yields the record as it is.
    pub(crate) fn new(runtime: &TaskRuntime, id: TaskId, principal: Principal) -> Self {
        let waiter = runtime.inner.waiters.register(&id);
        Self::with_waiter(runtime, id, principal, waiter)
    }

    /// [`Follower::new`] woken by `waiter`.
    fn with_waiter(
        runtime: &TaskRuntime,
        id: TaskId,
        principal: Principal,
        waiter: Waiter,
    ) -> Self {
        Self {
            runtime: runtime.downgrade(),
            id,
            principal,
            waiter,
            seen: None,
            due: true,
            reread_at: Instant::now() + REREAD_EVERY,
            over: false,
        }
    }

    /// The caller has read the record at `version` already: only another
    /// version is yielded (the first step still reads at once).
    pub(crate) fn seen_at(mut self, version: u64) -> Self {
        self.seen = Some(version);
        self
    }

    /// Makes the next step read at once, unwoken: for a caller that has
    /// learnt otherwise that the task may have changed (it wrote to it).
    pub(crate) fn reread(&mut self) {
        self.due = true;
    }

    /// The task's id.
    pub(crate) fn id(&self) -> &TaskId {
        &self.id
    }

    /// True once the follower has ended (see [`Follower::next`]).
    pub(crate) fn is_over(&self) -> bool {
        self.over
    }

    /// The next version of the record, once it differs from the last one
    /// seen: waits for a wake-up or [`REREAD_EVERY`], then reads. An error
    /// is a read that failed: -32602 (the task is gone, or not the
    /// principal's) ends the follower; after another (the store failed)
    /// the next step waits and reads again. `None` once the follower has
    /// ended: after the task's final state (a terminal status) or a
    /// -32602, or when the runtime is gone. Cancel safe: a wake-up whose
    /// read was cut short is read again by the next step.
    pub(crate) async fn next(&mut self) -> Option<Result<Arc<PackedRecord>, ErrorData>> {
        loop {
            if self.over {
                return None;
            }
            self.woken().await;
            if let Some(read) = self.read().await {
                return Some(read);
            }
        }
    }

    /// Waits until a read is due: at once when it is already, else for a
    /// wake-up or the re-read time. Never, once the follower has ended.
    /// Cancel safe.
    pub(crate) async fn woken(&mut self) {
        if self.over {
            return std::future::pending().await;
        }
        if !self.due {
            tokio::select! {
                () = self.waiter.changed() => {}
                () = tokio::time::sleep_until(self.reread_at) => {}
            }
            self.due = true;
        }
    }

    /// Reads the task if a read is due (see [`Follower::woken`]): as
    /// [`Follower::next`], but `None` also when no read was due or the
    /// record is the version seen already.
    pub(crate) async fn read(&mut self) -> Option<Result<Arc<PackedRecord>, ErrorData>> {
        if self.over || !self.due {
            return None;
        }
        let Some(runtime) = self.runtime.upgrade() else {
            self.over = true;
            return None;
        };
        let read = runtime.current(&self.id, &self.principal).await;
        // Read: the wake-ups so far are answered (a step cut short above
        // leaves `due` set, and is read again).
        self.due = false;
        self.reread_at = Instant::now() + REREAD_EVERY;
        match read {
            Ok(record) if Some(record.version()) == self.seen => None,
            Ok(record) => {
                self.seen = Some(record.version());
                self.over = record.status().is_terminal();
                Some(Ok(record))
            }
            Err(error) => {
                self.over = error.code == ErrorCode::INVALID_PARAMS;
                Some(Err(error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::engine::waiters::Waiters;
    use crate::store::{Change, MemoryStore, TaskRecord};
    use crate::task::{TaskStatus, Ttl};

    fn alice() -> Principal {
        Principal::new("alice")
    }

    /// A runtime with one working task of alice's.
    async fn runtime_with_task() -> (TaskRuntime, TaskId) {
        let runtime = TaskRuntime::builder(MemoryStore::new()).build();
        let now = runtime.inner.clock.now();
        let id = crate::server::engine::wire::new_task_id(now).expect("an id");
        let record = TaskRecord::new(id.clone(), alice(), now, Ttl::Unlimited, None);
        runtime.store().create(record).await.expect("stored");
        (runtime, id)
    }

    async fn change(runtime: &TaskRuntime, id: &TaskId, change: Change) {
        runtime.inner.modify(id, &change).await.expect("changed");
    }

    fn message(record: &PackedRecord) -> Option<String> {
        serde_json::to_value(crate::server::engine::wire::detailed_task(record).expect("a task"))
            .expect("JSON")["statusMessage"]
            .as_str()
            .map(str::to_owned)
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_step_yields_the_task_and_a_change_wakes_it_at_once() {
        let (runtime, id) = runtime_with_task().await;
        let mut follower = Follower::new(&runtime, id.clone(), alice());
        let started = Instant::now();
        let first = follower.next().await.expect("a step").expect("the task");
        assert_eq!(*first.status(), TaskStatus::Working);
        let changing = {
            let (runtime, id) = (runtime.clone(), id.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                change(&runtime, &id, Change::StatusMessage("halfway".into())).await;
            })
        };
        let next = follower.next().await.expect("a step").expect("the task");
        assert_eq!(message(&next).as_deref(), Some("halfway"));
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(300),
            "woken at once"
        );
        changing.await.expect("changed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_the_feed_missed_is_read_after_the_interval_and_no_version_twice() {
        let (runtime, id) = runtime_with_task().await;
        // Woken by nothing: every change is one the feed missed.
        let deaf = Waiters::default();
        let waiter = deaf.register(&id);
        let mut follower = Follower::with_waiter(&runtime, id.clone(), alice(), waiter);
        let seen = follower.next().await.expect("a step").expect("the task");
        let started = Instant::now();
        change(&runtime, &id, Change::StatusMessage("halfway".into())).await;
        let next = follower.next().await.expect("a step").expect("the task");
        assert_eq!(message(&next).as_deref(), Some("halfway"));
        assert_eq!(started.elapsed(), REREAD_EVERY);
        assert!(next.version() > seen.version());
        // Woken with nothing new: nothing is yielded, the wait goes on.
        deaf.wake(&id);
        let unchanged = tokio::time::timeout(3 * REREAD_EVERY, follower.next()).await;
        assert!(unchanged.is_err(), "the same version again");
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_that_saw_a_version_yields_only_another() {
        let (runtime, id) = runtime_with_task().await;
        let version = runtime
            .current(&id, &alice())
            .await
            .expect("read")
            .version();
        let mut follower = Follower::new(&runtime, id.clone(), alice()).seen_at(version);
        change(&runtime, &id, Change::StatusMessage("halfway".into())).await;
        let next = follower.next().await.expect("a step").expect("the task");
        assert_eq!(message(&next).as_deref(), Some("halfway"));
    }

    #[tokio::test(start_paused = true)]
    async fn it_ends_after_the_final_state() {
        let (runtime, id) = runtime_with_task().await;
        let mut follower = Follower::new(&runtime, id.clone(), alice());
        follower.next().await.expect("a step").expect("the task");
        change(
            &runtime,
            &id,
            Change::Complete(serde_json::json!({"content": []})),
        )
        .await;
        let last = follower.next().await.expect("a step").expect("the task");
        assert_eq!(*last.status(), TaskStatus::Completed);
        assert!(follower.is_over());
        assert!(follower.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_task_of_another_principal_or_gone_ends_it_with_the_error() {
        let (runtime, id) = runtime_with_task().await;
        let mut follower = Follower::new(&runtime, id.clone(), Principal::new("mallory"));
        let error = follower
            .next()
            .await
            .expect("a step")
            .expect_err("not hers");
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(follower.next().await.is_none());
        let mut follower = Follower::new(&runtime, id.clone(), alice());
        follower.next().await.expect("a step").expect("the task");
        runtime.store().delete(&id).await.expect("deleted");
        // Deleted (as the sweeper does past its retention): the next read
        // finds it gone.
        let error = follower.next().await.expect("a step").expect_err("gone");
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(follower.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_cut_short_loses_no_wake_up_and_it_ends_with_the_runtime() {
        let (runtime, id) = runtime_with_task().await;
        let mut follower = Follower::new(&runtime, id.clone(), alice());
        follower.next().await.expect("a step").expect("the task");
        change(&runtime, &id, Change::StatusMessage("halfway".into())).await;
        // Woken, then dropped before its read.
        follower.woken().await;
        let started = Instant::now();
        let next = follower.next().await.expect("a step").expect("the task");
        assert_eq!(message(&next).as_deref(), Some("halfway"));
        assert_eq!(started.elapsed(), Duration::ZERO);
        drop(runtime);
        // The sweeper and the feed's listener hold the runtime weakly too.
        tokio::time::sleep(REREAD_EVERY).await;
        assert!(follower.next().await.is_none(), "the runtime is gone");
    }
}
