//! The task-event hook: [`TaskObserver`], what the runtime tells an
//! operator's instruments (metrics, traces) about every task's life, and
//! [`Observers`], the runtime's side of it.
//!
//! The runtime calls its observers after the store write succeeded: a task
//! created (with its tool's name), every change of a task's status (the
//! status before, the record after), a task ended (how, after how long, and
//! how long it waited for input) and a task removed (deleted by the sweeper
//! once past its retention). Calls are synchronous and must be cheap: an
//! observer counts, stamps or queues, and never waits (no `.await`, no
//! blocking lock held for long); work that needs to wait belongs on a task
//! of its own that the observer feeds.
//!
//! The runtime, not each observer, remembers what a record does not carry:
//! the tool a task runs and the time it spent in `input_required`. It does so
//! for the tasks created in this process, in a table that exists only when
//! an observer is registered, so a runtime without observers pays one branch
//! on `None` per write and nothing else. A task this process did not create
//! (created before a restart, or by another replica on a shared store) is
//! still reported when it changes here, with no tool
//! ([`TaskEnded::tool`] is `None`) and an input time of zero.
//!
//! The events never carry anything an observer should not print: a record
//! holds the task's id, which is a bearer token; observers that name a task
//! (spans, logs) name it by its keyed hash, never by the id.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::store::{Change, TaskRecord};
use crate::task::{TaskId, TaskStatus, UnixMillis};

/// What an operator's instrument hears of the runtime's tasks. Every method
/// does nothing unless implemented; each says when it is called.
///
/// The runtime remembers, for the tasks this process created, what a
/// record does not carry (the tool, the time in `input_required`), in a
/// table kept only while an observer is registered. A task this process
/// did not create (before a restart, or on another replica) is still
/// reported when it changes here, with no tool and no input time. The
/// events carry the record, whose id is a bearer token: an observer that
/// names a task (a span, a log line) names it by its keyed hash.
///
/// Register one with
/// [`TaskRuntimeBuilder::with_observer`](https://docs.rs/mcp-tasks/latest/mcp_tasks/server/struct.TaskRuntimeBuilder.html#method.with_observer)
/// (several may be). The calls are synchronous, made after the store write
/// succeeded, on the task that made the write: keep them cheap and never
/// block in them.
pub trait TaskObserver: Send + Sync + 'static {
    /// A task was created in the store, running `tool`. Its record may be
    /// finished already (a tool that returned from its first step is
    /// stored finished): [`TaskObserver::task_ended`] follows at once then.
    fn task_created(&self, record: &TaskRecord, tool: &str) {
        let _ = (record, tool);
    }

    /// The status of a task changed from `before` to `record.status()`
    /// (only a change of status: a status message, a keep-alive or an
    /// extended TTL is not one). A change into a terminal status is
    /// followed by [`TaskObserver::task_ended`].
    fn status_changed(&self, before: &TaskStatus, record: &TaskRecord) {
        let _ = (before, record);
    }

    /// A task reached its terminal status.
    fn task_ended(&self, ended: &TaskEnded<'_>) {
        let _ = ended;
    }

    /// A finished task's record was deleted, past its retention.
    fn task_removed(&self, id: &TaskId) {
        let _ = id;
    }
}

/// How a task ended, as [`TaskObserver::task_ended`] hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskOutcome {
    /// Its tool returned a result (which may have `isError: true`).
    Completed,
    /// Its tool returned a JSON-RPC error or panicked, or its server stopped.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// It outlived its TTL (`failed` on the wire, with the expiry's error).
    Expired,
}

impl TaskOutcome {
    /// The outcome's name, as metrics label it: `completed`, `failed`,
    /// `cancelled` or `expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

impl fmt::Display for TaskOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task that reached its terminal status.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TaskEnded<'a> {
    /// The finished record.
    pub record: &'a TaskRecord,
    /// How it ended.
    pub outcome: TaskOutcome,
    /// The tool it ran, when this process created it.
    pub tool: Option<&'a str>,
    /// From its creation to its end, by the runtime's clock.
    pub duration: Duration,
    /// How long it spent in `input_required`, as seen by this process.
    pub input_required: Duration,
}

/// The runtime's observers, and what it remembers for them of each task it
/// created (its tool, its time waiting for input).
pub(crate) struct Observers {
    each: Vec<Arc<dyn TaskObserver>>,
    tracked: Mutex<Table>,
}

/// The tasks created here and not yet ended, with how many of them are in
/// `input_required`, kept as they change: a scrape of the live gauges reads
/// two numbers instead of walking a table that may hold every long task of
/// the process (under the lock every creation takes).
#[derive(Default)]
struct Table {
    tasks: HashMap<TaskId, Tracked>,
    asking: usize,
}

impl Table {
    fn insert(&mut self, id: TaskId, task: Tracked) {
        let asking = task.status == TaskStatus::InputRequired;
        if let Some(old) = self.tasks.insert(id, task) {
            self.asking -= usize::from(old.status == TaskStatus::InputRequired);
        }
        self.asking += usize::from(asking);
    }

    fn remove(&mut self, id: &TaskId) -> Option<Tracked> {
        let task = self.tasks.remove(id)?;
        self.asking -= usize::from(task.status == TaskStatus::InputRequired);
        Some(task)
    }
}

/// What the runtime remembers of one task it created, until it ends.
struct Tracked {
    tool: Arc<str>,
    /// Its status as last written here (`working` or `input_required`).
    status: TaskStatus,
    /// When it last entered `input_required`, while it is there.
    input_since: Option<UnixMillis>,
    input_total: Duration,
}

impl fmt::Debug for Observers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observers")
            .field("observers", &self.each.len())
            .finish_non_exhaustive()
    }
}

impl Observers {
    /// The observers `each`, or `None` when there are none (the runtime
    /// then keeps no table and makes no call).
    pub(crate) fn new(each: Vec<Arc<dyn TaskObserver>>) -> Option<Self> {
        (!each.is_empty()).then(|| Self {
            each,
            tracked: Mutex::default(),
        })
    }

    fn tracked(&self) -> MutexGuard<'_, Table> {
        // A panic in an observer does not poison the table for the others.
        self.tracked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A task was stored, running `tool`; `ending` is the change it was
    /// stored finished by, if it was.
    pub(crate) fn created(&self, record: &TaskRecord, tool: &str, ending: Option<&Change>) {
        for observer in &self.each {
            observer.task_created(record, tool);
        }
        if record.status().is_terminal() {
            let outcome = outcome_of(record.status(), ending);
            self.ended(record, outcome, Some(tool), Duration::ZERO);
            return;
        }
        let input_since =
            (*record.status() == TaskStatus::InputRequired).then(|| record.updated_at());
        self.tracked().insert(
            record.id().clone(),
            Tracked {
                tool: Arc::from(tool),
                status: record.status().clone(),
                input_since,
                input_total: Duration::ZERO,
            },
        );
    }

    /// `change` was applied to a task whose status was `before`, making `record`.
    pub(crate) fn changed(&self, before: &TaskStatus, change: &Change, record: &TaskRecord) {
        let after = record.status();
        if before == after {
            return;
        }
        for observer in &self.each {
            observer.status_changed(before, record);
        }
        let at = record.updated_at();
        let mut tracked = self.tracked();
        if after.is_terminal() {
            let known = tracked.remove(record.id());
            drop(tracked);
            let (tool, input) = match &known {
                Some(known) => (
                    Some(&*known.tool),
                    known.input_total
                        + known
                            .input_since
                            .map_or(Duration::ZERO, |since| at.saturating_since(since)),
                ),
                None => (None, Duration::ZERO),
            };
            self.ended(record, outcome_of(after, Some(change)), tool, input);
        } else if let Table { tasks, asking } = &mut *tracked
            && let Some(known) = tasks.get_mut(record.id())
        {
            let was_asking = known.status == TaskStatus::InputRequired;
            known.status = after.clone();
            *asking = *asking + usize::from(*after == TaskStatus::InputRequired)
                - usize::from(was_asking);
            if let Some(since) = known.input_since.take() {
                known.input_total += at.saturating_since(since);
            }
            if *after == TaskStatus::InputRequired {
                known.input_since = Some(at);
            }
        }
    }

    fn ended(
        &self,
        record: &TaskRecord,
        outcome: TaskOutcome,
        tool: Option<&str>,
        input_required: Duration,
    ) {
        let ended = TaskEnded {
            record,
            outcome,
            tool,
            duration: record.updated_at().saturating_since(record.created_at()),
            input_required,
        };
        for observer in &self.each {
            observer.task_ended(&ended);
        }
    }

    /// The task `id` is no longer supervised here: forgets it if it ended
    /// elsewhere (another replica wrote its end).
    pub(crate) fn forget(&self, id: &TaskId) {
        self.tracked().remove(id);
    }

    /// How many tasks created here are unfinished now: `(working,
    /// input_required)`, as this process last wrote them.
    #[cfg_attr(not(feature = "operator"), allow(dead_code))] // read by the operator listener
    pub(crate) fn live(&self) -> (usize, usize) {
        let tracked = self.tracked();
        (tracked.tasks.len() - tracked.asking, tracked.asking)
    }

    /// The record of task `id` was deleted.
    pub(crate) fn removed(&self, id: &TaskId) {
        self.tracked().remove(id);
        for observer in &self.each {
            observer.task_removed(id);
        }
    }
}

/// How a task that reached `status` by `change` ended.
fn outcome_of(status: &TaskStatus, change: Option<&Change>) -> TaskOutcome {
    match (status, change) {
        (_, Some(Change::Expire)) => TaskOutcome::Expired,
        (TaskStatus::Completed, _) => TaskOutcome::Completed,
        (TaskStatus::Cancelled, _) => TaskOutcome::Cancelled,
        _ => TaskOutcome::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(status: TaskStatus) -> Tracked {
        Tracked {
            tool: Arc::from("tool"),
            status,
            input_since: None,
            input_total: Duration::ZERO,
        }
    }

    #[test]
    fn the_table_counts_the_tasks_asking_for_input_as_they_change() {
        let mut table = Table::default();
        table.insert(TaskId::new("a"), tracked(TaskStatus::Working));
        table.insert(TaskId::new("b"), tracked(TaskStatus::InputRequired));
        table.insert(TaskId::new("c"), tracked(TaskStatus::InputRequired));
        assert_eq!((table.tasks.len(), table.asking), (3, 2));
        // Stored again with another status: counted once, as it is now.
        table.insert(TaskId::new("c"), tracked(TaskStatus::Working));
        assert_eq!((table.tasks.len(), table.asking), (3, 1));
        assert!(table.remove(&TaskId::new("b")).is_some());
        assert_eq!((table.tasks.len(), table.asking), (2, 0));
        assert!(table.remove(&TaskId::new("b")).is_none(), "removed once");
        assert_eq!((table.tasks.len(), table.asking), (2, 0));
    }
}
