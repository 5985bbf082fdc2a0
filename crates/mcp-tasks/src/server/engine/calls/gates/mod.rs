//! The gates a new task passes, in order, before it is created: each in a
//! file of its own with one job, each able to stop the creation (with the
//! call's answer, a refusal for load, or an error). A new gate is a new
//! file and one line in [`admit`]; what a gate hands on to creation is a
//! field of [`Admitted`].

mod caller_seats;
mod idempotency;
mod lease;
mod queue;
mod rate;
mod shared_seats;

use std::sync::Arc;

pub(super) use idempotency::raced;

use super::stop::Stop;
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::admission::limits::Seat;
use crate::server::engine::admission::queue::Entry;
use crate::server::engine::admission::shared::TaskSeats;
use crate::server::engine::lease::Lease;
use crate::server::engine::tasks::runtime::TaskRuntime;

/// What the gates look at: a call of `tool` from `caller`, on `runtime`.
pub(super) struct Ask<'a> {
    pub(super) runtime: &'a TaskRuntime,
    pub(super) caller: &'a Caller,
    pub(super) tool: &'a str,
}

/// What the gates hand on to creation.
pub(super) struct Admitted {
    /// The task's seat among its caller's unfinished tasks, held by its
    /// supervision until it ends.
    pub(super) seat: Seat,
    /// A slot to run now, or a place in this process's queue.
    pub(super) entry: Entry,
    /// On a store shared by several processes, this process's lease, which
    /// the task names.
    pub(super) lease: Option<Arc<Lease>>,
    /// On a shared store with bounds, the seats the task takes there as it
    /// is stored.
    pub(super) seats: Option<TaskSeats>,
}

/// Passes the gates in order: what a creation may go on with, or why not.
pub(super) async fn admit(ask: &Ask<'_>) -> Result<Admitted, Stop> {
    idempotency::pass(ask).await?;
    rate::pass(ask).await?;
    let seat = caller_seats::take(ask)?;
    let entry = queue::enter(ask)?;
    let lease = lease::check(ask).await?;
    let seats = shared_seats::plan(ask, lease.as_ref());
    Ok(Admitted {
        seat,
        entry,
        lease,
        seats,
    })
}

#[cfg(test)]
mod tests {
    //! Each gate alone, on a runtime built for it; and their order: a
    //! call a gate stops holds nothing a later gate hands out.

    use std::num::NonZeroU32;

    use serde_json::Value;

    use super::*;
    use crate::idempotency::IdempotencyKey;
    use crate::server::auth::principal::Principal;
    use crate::server::engine::admission::queue::AdmissionLimits;
    use crate::server::engine::admission::rate::CreationRate;
    use crate::server::engine::idempotent::Idempotent;
    use crate::store::{MemoryStore, TaskRecord};
    use crate::task::Ttl;

    fn alice() -> Caller {
        Caller::owner(Principal::new("alice"))
    }

    async fn admit_as(runtime: &TaskRuntime, caller: &Caller) -> Result<Admitted, Stop> {
        let ask = Ask {
            runtime,
            caller,
            tool: "export",
        };
        admit(&ask).await
    }

    /// The `data` of the refusal `stop` is.
    fn refused(stop: Stop) -> Value {
        match stop {
            Stop::Refused(refusal) => refusal.into_error(None).data.expect("data"),
            other => panic!("not a refusal: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_runtime_without_bounds_admits_a_task_to_run_now() {
        let runtime = TaskRuntime::builder(MemoryStore::new()).build();
        let admitted = admit_as(&runtime, &alice()).await.expect("admitted");
        assert!(matches!(admitted.entry, Entry::Run(_)));
        assert!(admitted.lease.is_none() && admitted.seats.is_none());
        assert_eq!(runtime.unfinished_tasks_of(&Principal::new("alice")), 1);
        drop(admitted);
        assert_eq!(runtime.unfinished_tasks_of(&Principal::new("alice")), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_gate_refuses_a_caller_past_its_rate_before_it_takes_a_seat() {
        let rate = CreationRate::per_minute(NonZeroU32::MIN);
        let runtime = TaskRuntime::builder(MemoryStore::new())
            .with_rate_per_caller(Some(rate))
            .build();
        let _first = admit_as(&runtime, &alice()).await.expect("the first");
        let data = refused(admit_as(&runtime, &alice()).await.err().expect("refused"));
        assert_eq!(data["reason"], "rateLimited");
        assert_eq!(runtime.unfinished_tasks_of(&Principal::new("alice")), 1);
        assert!(
            admit_as(&runtime, &Caller::owner(Principal::new("bob")))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn the_caller_seats_gate_refuses_past_the_cap_and_everyone_in_a_drain() {
        let runtime = TaskRuntime::builder(MemoryStore::new())
            .with_max_tasks_per_caller(Some(1))
            .build();
        let first = admit_as(&runtime, &alice()).await.expect("the first");
        let data = refused(admit_as(&runtime, &alice()).await.err().expect("refused"));
        assert_eq!(data["reason"], "callerTasks");
        assert_eq!(data["maxTasksPerCaller"], 1);
        drop(first);
        runtime.inner.live.close();
        let data = refused(admit_as(&runtime, &alice()).await.err().expect("refused"));
        assert_eq!(data["reason"], "draining");
    }

    #[tokio::test]
    async fn the_queue_gate_queues_past_the_running_bound_and_refuses_past_its_own() {
        let limits = AdmissionLimits::default()
            .with_max_running(Some(1))
            .with_max_queued(Some(1));
        let runtime = TaskRuntime::builder(MemoryStore::new())
            .with_admission(limits)
            .build();
        let running = admit_as(&runtime, &alice()).await.expect("runs");
        assert!(matches!(running.entry, Entry::Run(_)));
        let queued = admit_as(&runtime, &alice()).await.expect("queued");
        assert!(matches!(queued.entry, Entry::Queued(_)));
        let data = refused(admit_as(&runtime, &alice()).await.err().expect("refused"));
        assert_eq!(data["reason"], "queueFull");
        // The refused call gave its seat back.
        assert_eq!(runtime.unfinished_tasks_of(&Principal::new("alice")), 2);
    }

    #[tokio::test]
    async fn the_idempotency_gate_answers_a_call_sent_again_before_any_other() {
        let runtime = TaskRuntime::builder(MemoryStore::new())
            .with_max_tasks_per_caller(Some(0))
            .build();
        let key = IdempotencyKey::new("export-1").expect("a key");
        let idempotent = Idempotent {
            key: key.clone(),
            fingerprint: "f".into(),
        };
        let caller = alice().with_idempotent(Some(idempotent));
        // Without a task holding the key, the call goes on to the cap.
        let data = refused(admit_as(&runtime, &caller).await.err().expect("refused"));
        assert_eq!(data["reason"], "callerTasks");
        let now = runtime.inner.clock.now();
        let record = TaskRecord::new(
            crate::server::engine::wire::new_task_id(now).expect("an id"),
            Principal::new("alice"),
            now,
            Ttl::Unlimited,
            None,
        )
        .with_idempotency(&key, "f".into());
        runtime.store().create(record).await.expect("stored");
        match admit_as(&runtime, &caller).await {
            Err(Stop::Answer(answer)) => {
                assert!(matches!(*answer, rmcp::model::CallToolResponse::Task(_)));
            }
            Err(other) => panic!("not the first task: {other:?}"),
            Ok(_) => panic!("admitted again"),
        }
    }
}
