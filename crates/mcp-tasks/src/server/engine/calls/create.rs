//! The second step of creation: a task the gates admitted is stored,
//! durably, before its `CreateTaskResult` is answered, and its tool runs
//! under its supervision (`supervise.rs`).
//!
//! Two ways, by what the gates handed on:
//!
//! * **It runs now** ([`TaskRuntime::store_running`]): the tool's first
//!   step runs before the task is stored, and a tool that returns from it
//!   is stored finished, in one write. A call with an idempotency key has
//!   that step run once its record holds the key instead.
//! * **It waits** ([`TaskRuntime::store_waiting`]) for a place in this
//!   process's queue or for its seats in a shared store: stored first, with
//!   its place, then supervised until it may run.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, MetaObject, Task,
};
use serde_json::Value;
use tokio::sync::SetOnce;
use tokio_util::sync::CancellationToken;

use super::gates::{self, Admitted, Ask, raced};
use super::plan::NewTask;
use super::stop::Stop;
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::admission::limits::Seat;
use crate::server::engine::admission::queue::{Entry, RunSlot, queued_message};
use crate::server::engine::admission::shared::{Seated, TaskSeats};
use crate::server::engine::lease::Lease;
use crate::server::engine::policy::ToolTasks;
use crate::server::engine::tasks::context::TaskContext;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::tasks::supervise::{
    Finished, Tool, Waiting, catch_panics, outcome_of, record_outcome, spawn_supervision,
    supervise, supervise_queued,
};
use crate::server::engine::tasks::takeover::resumable_call;
use crate::server::engine::wire::{store_failure, wire_task};
use crate::store::{Change, Keyed, Modified, TaskRecord};
use crate::task::{OUTCOME_META, TaskStatus};
use crate::telemetry::{Trace, instrument};

/// A task about to be stored: its record, and its tool ready to run in its
/// context.
struct Launch<T> {
    record: TaskRecord,
    token: CancellationToken,
    /// Set once the record is stored: what the tool does to its task waits
    /// for it.
    stored: Arc<SetOnce<()>>,
    tool: Pin<Box<T>>,
    lease: Option<Arc<Lease>>,
}

impl TaskRuntime {
    /// Creates `task` through the gates; what [`TaskRuntime::create`]
    /// answers, before the refusal is the wire's.
    pub(super) async fn start<F, Fut>(
        &self,
        task: NewTask,
        run: F,
    ) -> Result<CallToolResponse, Stop>
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let NewTask {
            caller,
            described,
            tasks,
            handle: _,
            checkpoint,
        } = task;
        let ask = Ask {
            runtime: self,
            caller: &caller,
            tool: &described.name,
        };
        let Admitted {
            seat,
            entry,
            lease,
            seats,
        } = gates::admit(&ask).await?;
        let record = self
            .new_record(&caller, &described, &tasks, lease.as_ref())?
            .with_first_checkpoint(checkpoint);
        let tool: &str = &described.name;
        let launch = self.launch(&caller, tool, record, lease, &tasks, run).await;
        match (entry, seats) {
            (Entry::Run(slot), None) => self.store_running(&caller, tool, launch, seat, slot).await,
            // On the heap: the rarer way, whose state would otherwise weigh
            // on every creation's future.
            (entry, seats) => {
                let waiting = self.store_waiting(&caller, tool, launch, (seat, entry), seats);
                Box::pin(waiting).await
            }
        }
    }

    /// The record of a new task of `caller`, as `described` and `tasks`
    /// say, naming `lease`'s runner on a shared store.
    fn new_record(
        &self,
        caller: &Caller,
        described: &CallToolRequestParams,
        tasks: &ToolTasks,
        lease: Option<&Arc<Lease>>,
    ) -> Result<TaskRecord, ErrorData> {
        let inner = &self.inner;
        let (mut record, _) = self.fresh_record(caller, &described.name, tasks, true)?;
        if let Some(idempotent) = &caller.idempotent {
            record = record.with_idempotency(&idempotent.key, idempotent.fingerprint.clone());
        }
        let resumes = tasks.resumable && inner.resumes;
        match lease {
            // On a shared store the task names this process's lease.
            Some(lease) => {
                let call = resumes.then(|| resumable_call(described));
                record = record.with_runner(lease.runner().clone(), call);
            }
            // On a store of one process, a resumable task keeps its call for
            // the next process on the store (SQLite) to run it again.
            None if resumes => {
                record = record.with_runner(inner.runner.clone(), Some(resumable_call(described)));
            }
            None => {}
        }
        Ok(record.with_drain_wait(resumes && tasks.drain_wait))
    }

    /// `run`'s tool (`tool`) in the context of the task of `record`, its
    /// panics caught; with the `otel` feature, in the task's span when the
    /// call's request is sampled (what the tool sends on continues its
    /// trace).
    async fn launch<F, Fut>(
        &self,
        caller: &Caller,
        tool: &str,
        record: TaskRecord,
        lease: Option<Arc<Lease>>,
        tasks: &ToolTasks,
        run: F,
    ) -> Launch<impl Tool + use<F, Fut>>
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let inner = &self.inner;
        let token = CancellationToken::new();
        let stored = Arc::new(SetOnce::new());
        let id = record.id().clone();
        let context = TaskContext::task(id, inner.clone(), token.clone(), lease.clone())
            .stored_when(stored.clone())
            .resumable(tasks.resumable && inner.resumes)
            .drain_waits(tasks.drain_wait);
        let work = self.task_span(caller, record.id(), tool).await;
        let future = Box::pin(catch_panics(instrument(run(context), work)));
        Launch {
            record,
            token,
            stored,
            tool: future,
            lease,
        }
    }

    /// The trace context the tool of task `id` works in: the task's span
    /// when the call's request is sampled, else the current context (with
    /// feature `otel`; nothing without it, and the hasher is not read).
    fn task_span<'a>(
        &'a self,
        caller: &Caller,
        id: &'a crate::task::TaskId,
        tool: &'a str,
    ) -> impl Future<Output = Trace> + Send + 'a {
        let hash = async move { Some(self.task_hasher().await.ok()?.hash(id)) };
        self.inner
            .task_spans
            .work(id, tool, caller.trace.or_current(), hash)
    }

    /// Stores a task whose tool may run now, and supervises it.
    async fn store_running<T: Tool>(
        &self,
        caller: &Caller,
        tool: &str,
        launch: Launch<T>,
        seat: Seat,
        slot: RunSlot,
    ) -> Result<CallToolResponse, Stop> {
        let inner = &self.inner;
        let Launch {
            record,
            token,
            stored,
            tool: mut future,
            lease,
        } = launch;
        // The tool's first step runs before the task is stored (what touches
        // the task waits for it): a tool that returns from that step, as many
        // do, is stored finished, in one write instead of two.
        // Not for a call with an idempotency key: its tool runs only once
        // its record holds the key (a creation that loses the race for it
        // drops its tool untouched).
        if caller.idempotent.is_none()
            && let Poll::Ready(finished) = futures::poll!(&mut future)
        {
            token.cancel();
            drop(slot);
            return self
                .store_finished(caller, record, finished, tool, seat)
                .await;
        }
        let (id, idle_ttl) = (record.id().clone(), record.idle_ttl());
        let created = wire_task(&record);
        let observed = inner.observers.as_ref().map(|_| record.clone());
        // Durable before we answer: a tasks/get right after finds it.
        if let Some(existing) = self.store_new(record, caller).await? {
            return Ok(existing);
        }
        if let Some(record) = &observed {
            inner.created(record, tool, None);
        }
        let _ = stored.set(());
        // A call with an idempotency key: its record holds the key now, so
        // its tool's first step runs. One that returns from it has its
        // outcome recorded before the answer, which says so: its caller
        // needs no stream to learn it (two writes, as when it finishes
        // later, but one exchange fewer for the caller).
        if caller.idempotent.is_some()
            && let Poll::Ready(finished) = futures::poll!(&mut future)
        {
            token.cancel();
            drop(slot);
            let outcome = outcome_of(finished, inner);
            return Ok(self
                .first_step_ended(caller, id, outcome, lease, seat, created)
                .await);
        }
        spawn_supervision(supervise(
            inner.clone(),
            id,
            idle_ttl,
            token,
            future,
            (seat, slot),
            None,
            lease,
        ));
        Ok(task_created(created))
    }

    /// Stores the task of `record` finished, by its tool's first step, in
    /// one write.
    async fn store_finished(
        &self,
        caller: &Caller,
        record: TaskRecord,
        finished: Finished,
        tool: &str,
        seat: Seat,
    ) -> Result<CallToolResponse, Stop> {
        let inner = &self.inner;
        let outcome = outcome_of(finished, inner);
        let finished = record
            .apply(&outcome, inner.clock.now(), inner.settings.retention)
            .map_err(|refused| ErrorData::internal_error(refused.to_string(), None))?
            .into_record();
        let answer = finished_created(&finished, caller);
        let observed = inner.observers.as_ref().map(|_| finished.clone());
        inner.store.create(finished).await.map_err(store_failure)?;
        drop(seat);
        if let Some(finished) = &observed {
            inner.created(finished, tool, Some(&outcome));
        }
        Ok(answer)
    }

    /// The answer to a keyed call whose tool's first step, run once its
    /// task was stored (`created`), ended with `outcome`: the task with its
    /// outcome recorded; `created` (`working`) when the outcome could not
    /// be written yet, written in the background then, retried as a
    /// supervision does.
    async fn first_step_ended(
        &self,
        caller: &Caller,
        id: crate::task::TaskId,
        outcome: Change,
        lease: Option<Arc<Lease>>,
        seat: Seat,
        created: Task,
    ) -> CallToolResponse {
        let inner = &self.inner;
        match inner.modify_as_runner(&id, &outcome, lease.as_ref()).await {
            Ok(Modified::Applied(record) | Modified::Refused(record, _)) => {
                drop(seat);
                finished_created(&record, caller)
            }
            _ => {
                let inner = inner.clone();
                tokio::spawn(async move {
                    record_outcome(&inner, &id, &outcome, lease.as_ref()).await;
                    drop(seat);
                });
                task_created(created)
            }
        }
    }

    /// Stores a task that waits (for its turn in this process's queue, or
    /// for its seats in a shared store), with its place if it has one; its
    /// tool starts under its supervision once it may run.
    async fn store_waiting<T: Tool>(
        &self,
        caller: &Caller,
        tool: &str,
        launch: Launch<T>,
        (seat, entry): (Seat, Entry),
        seats: Option<TaskSeats>,
    ) -> Result<CallToolResponse, Stop> {
        let inner = &self.inner;
        let Launch {
            record,
            token,
            stored,
            tool: future,
            lease,
        } = launch;
        let record = match &entry {
            Entry::Queued(ticket) => {
                let message = queued_message(ticket.place.ahead().unwrap_or(0));
                record
                    .apply(
                        &Change::StatusMessage(message),
                        inner.clock.now(),
                        inner.settings.retention,
                    )
                    .map_err(|refused| ErrorData::internal_error(refused.to_string(), None))?
                    .into_record()
            }
            Entry::Run(_) => record,
        };
        let (id, idle_ttl) = (record.id().clone(), record.idle_ttl());
        let created = wire_task(&record);
        let observed = inner.observers.as_ref().map(|_| record.clone());
        let seated = match (&seats, &lease) {
            (Some(seats), Some(lease)) => {
                let runs = matches!(entry, Entry::Run(_));
                seats.create(&inner.store, record, lease, runs).await?
            }
            _ => match self.store_new(record, caller).await? {
                Some(existing) => return Ok(existing),
                None => Seated::Queued,
            },
        };
        if seated == Seated::Existing {
            return Ok(raced(self, caller, None).await?);
        }
        let _ = stored.set(());
        if let Some(record) = &observed {
            inner.created(record, tool, None);
        }
        let seats = seats.map(Arc::new);
        let waiting = match (entry, seated) {
            (Entry::Run(slot), Seated::Running) => {
                let run = supervise(
                    inner.clone(),
                    id,
                    idle_ttl,
                    token,
                    future,
                    (seat, slot),
                    seats,
                    lease,
                );
                spawn_supervision(run);
                return Ok(task_created(created));
            }
            (Entry::Run(slot), _) => Waiting::Seats(slot),
            (Entry::Queued(ticket), _) => Waiting::Turn(ticket),
        };
        let (inner, seat) = (inner.clone(), (seat, waiting));
        spawn_supervision(supervise_queued(
            inner, id, idle_ttl, token, future, seat, seats, lease,
        ));
        Ok(task_created(created))
    }

    /// Stores a new record: with the caller's idempotency key when it sent
    /// one, and then, if a task of the caller holds the key already (a
    /// creation with the same key won a race), that task's answer instead,
    /// with nothing stored.
    async fn store_new(
        &self,
        record: TaskRecord,
        caller: &Caller,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        let store = &self.inner.store;
        if caller.idempotent.is_none() {
            store.create(record).await.map_err(store_failure)?;
            return Ok(None);
        }
        match store.create_keyed(record).await.map_err(store_failure)? {
            Keyed::Created => Ok(None),
            Keyed::Existing(found) => raced(self, caller, Some(&found)).await.map(Some),
        }
    }
}

/// The answer to a call that made `task`.
fn task_created(task: Task) -> CallToolResponse {
    CallToolResponse::Task(CreateTaskResult::new(task))
}

/// The answer to `caller`'s call whose tool's first step ended, its task
/// now `record`: with the task's outcome under [`OUTCOME_META`] when it
/// finished and the call declared
/// [`CREATED_OUTCOME_EXTENSION`](crate::task::CREATED_OUTCOME_EXTENSION),
/// the very `result` or `error` of a `tasks/get` now.
fn finished_created(record: &TaskRecord, caller: &Caller) -> CallToolResponse {
    let mut created = CreateTaskResult::new(wire_task(record));
    let outcome = match record.status() {
        TaskStatus::Completed => record.result().map(|result| ("result", result)),
        TaskStatus::Failed => record.error().map(|error| ("error", error)),
        _ => None,
    };
    if caller.created_outcome
        && let Some((key, value)) = outcome
    {
        let mut outcome = serde_json::Map::with_capacity(1);
        outcome.insert(key.to_owned(), value.clone());
        let mut meta = MetaObject::new();
        meta.insert(OUTCOME_META.to_owned(), Value::Object(outcome));
        created.meta = Some(meta);
    }
    CallToolResponse::Task(created)
}
