//! One task as a store keeps it ([`TaskRecord`]), who it belongs to
//! ([`Principal`]), and the one transition function every change goes
//! through ([`TaskRecord::apply`], which makes the only [`Transition`] a
//! store can swap in).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(doc)]
use super::keyed::call_fingerprint;
use super::keyed::{KeyedCall, slot};
use super::replicas::RunnerId;
use crate::idempotency::IdempotencyKey;
use crate::task::{TaskId, TaskStatus, Ttl, UnixMillis};

/// The JSON-RPC error code of a task that ran past its TTL, or whose server
/// stopped before it finished.
pub const EXPIRED_CODE: i64 = -32603;
/// The message of a task that ran past its TTL.
pub const EXPIRED_MESSAGE: &str = "task expired";
/// The status message of a task cancelled by its caller (`tasks/cancel`,
/// in either era): what it says once `cancelled`, in place of the tool's
/// last progress.
pub const CANCELLED_BY_CALLER_MESSAGE: &str = "cancelled by the caller";
/// The status message of a task cancelled by an operator
/// ([`Change::RequestCancelByOperator`]: `mcp-tasks admin cancel`).
pub const CANCELLED_BY_OPERATOR_MESSAGE: &str = "cancelled by an operator";
/// The status message of tasks a restarted server found unfinished.
pub const RESTARTED_MESSAGE: &str = "server restarted before the task finished";
/// The status message of a task whose server stopped (its lease ran out)
/// and that another server of a shared store failed.
pub const STOPPED_MESSAGE: &str = "the server running this task stopped";
/// The status message of a resumable task run again after the server
/// running it stopped: by another server of a shared store, or by the same
/// server started again on a store that outlives it (SQLite). The tool
/// continues from its last checkpoint, if it made one.
pub const RESUMED_MESSAGE: &str = "the server running this task stopped; the task runs again";
/// The status message of a resumable task that a draining server handed
/// to another server of a shared store ([`Change::HandOff`]).
pub const HANDED_OFF_MESSAGE: &str = "the server running this task is shutting down: another server continues the task from its \
     last checkpoint";

/// Who a task belongs to: the authorization context of the request that
/// created it. Every later `tasks/*` request about the task must come from
/// the same principal. Over HTTP the server's principal extractor derives
/// it from the request (by default a hash of the `Authorization` header),
/// so it holds no credential itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Principal(String);

impl Principal {
    /// A principal named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Principal {
    fn from(name: &str) -> Self {
        Self::new(name)
    }
}

impl From<String> for Principal {
    fn from(name: String) -> Self {
        Self(name)
    }
}

/// One task as a store keeps it.
///
/// Fields are read through accessors; a record changes only through
/// [`TaskRecord::apply`], whose [`Transition`] is the only thing
/// [`TaskStore::compare_and_swap`](super::TaskStore::compare_and_swap)
/// accepts. Serialized (stores keep it as JSON) it holds the task id, a
/// bearer token: treat the bytes as secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub(super) id: TaskId,
    pub(super) owner: Principal,
    pub(super) status: TaskStatus,
    pub(super) status_message: Option<String>,
    #[serde(rename = "created_at_ms")]
    pub(super) created_at: UnixMillis,
    #[serde(rename = "updated_at_ms")]
    pub(super) updated_at: UnixMillis,
    #[serde(rename = "ttl_ms")]
    pub(super) ttl: Ttl,
    #[serde(rename = "poll_interval_ms", with = "optional_millis")]
    pub(super) poll_interval: Option<Duration>,
    #[serde(rename = "expires_at_ms")]
    pub(super) expires_at: Option<UnixMillis>,
    /// Activity keeps the task alive this long ahead (records of older
    /// builds have none: their TTL counts from creation).
    #[serde(default, rename = "idle_ttl_ms", with = "optional_millis")]
    pub(super) idle_ttl: Option<Duration>,
    /// No extension goes past this.
    #[serde(default, rename = "max_expires_at_ms")]
    pub(super) max_expires_at: Option<UnixMillis>,
    pub(super) input_requests: BTreeMap<String, Value>,
    pub(super) issued_keys: BTreeSet<String>,
    pub(super) input_responses: BTreeMap<String, Value>,
    pub(super) result: Option<Value>,
    pub(super) error: Option<Value>,
    pub(super) cancel_requested: bool,
    /// The cancel was an operator's ([`Change::RequestCancelByOperator`]):
    /// the cancelled task's message says so.
    #[serde(default, skip_serializing_if = "is_false")]
    pub(super) cancelled_by_operator: bool,
    pub(super) version: u64,
    /// Who runs the task, in a store shared by several servers (boxed: most
    /// records have none, and the in-memory store keeps records inline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) run: Option<Box<Run>>,
    /// The name of the tool the task runs (records of older builds have
    /// none), for operators: the admin command lists tasks by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tool: Option<Box<str>>,
    /// The tool's last checkpoint ([`Change::Checkpoint`]), while the task
    /// is unfinished: what a resumed run continues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checkpoint: Option<Box<Value>>,
    /// The idempotency key's slot and the call's fingerprint, when the
    /// task was created with a key (see [`super::keyed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) keyed: Option<Box<KeyedCall>>,
}

/// The server process running a task in a store shared by several, and
/// what another one needs to run it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Run {
    runner: RunnerId,
    /// The `tools/call` params (`name`, `arguments`) of a resumable task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<Value>,
    /// How many times another server took the task over and ran it again.
    #[serde(default)]
    resumed: u32,
    /// A drain waits for the task to end before it hands it off (the
    /// tool's `drain_wait`).
    #[serde(default, skip_serializing_if = "is_false")]
    drain_wait: bool,
}

impl fmt::Debug for TaskRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRecord")
            .field("id", &self.id)
            .field("owner", &self.owner)
            .field("status", &self.status)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// A change to a task, applied by [`TaskRecord::apply`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// Set the status message.
    StatusMessage(String),
    /// Keep the tool's state (and set the status message, when given, in
    /// the same write): a resumed run of the tool gets the last one. Kept
    /// across [`Change::Resume`]; dropped when the task finishes.
    Checkpoint {
        /// The state, as JSON.
        state: Value,
        /// The status message to set with it.
        message: Option<String>,
    },
    /// Ask for input under a key never used before in this task.
    RequestInput {
        /// The key.
        key: String,
        /// The `{method, params}` request.
        request: Value,
    },
    /// Answers from `tasks/update`: keys that are not outstanding are ignored.
    ProvideInput(BTreeMap<String, Value>),
    /// `tasks/cancel` was received: the runtime stops the tool and ends the
    /// task with [`Change::Cancel`], whose message says the caller cancelled it.
    RequestCancel,
    /// An operator cancelled the task (`mcp-tasks admin cancel`): as
    /// [`Change::RequestCancel`], and the cancelled task's message says an
    /// operator cancelled it.
    RequestCancelByOperator,
    /// Keep a working task alive: it expires no earlier than this long from now.
    ExtendTtl(Duration),
    /// The task's tool is still running (the runtime sends this at a bounded
    /// rate): a working task that follows activity expires no earlier than
    /// its idle TTL from now. Refused for a task that waits for input.
    KeepAlive,
    /// The tool returned a result (even `isError: true`).
    Complete(Value),
    /// The tool ended with a JSON-RPC error.
    Fail(Value),
    /// The task was cancelled: it ends `cancelled`, its status message
    /// [`CANCELLED_BY_CALLER_MESSAGE`] (or [`CANCELLED_BY_OPERATOR_MESSAGE`]
    /// after [`Change::RequestCancelByOperator`]) instead of the tool's last.
    Cancel,
    /// The TTL passed: an unfinished task fails with "task expired".
    Expire,
    /// The process that ran the task is gone (a restart found it unfinished).
    Abandon,
    /// The server running the task stopped (its lease in a shared store ran
    /// out): an unfinished task fails with "the server running this task
    /// stopped".
    RunnerStopped,
    /// The server running a resumable task stopped; `runner` runs it again
    /// from its call. Outstanding input requests and received answers are
    /// kept, so the tool asking again under the same keys gets them.
    Resume(RunnerId),
    /// The server running a resumable task drains before it stops: the
    /// task goes to `runner`, a runner whose lease is left to run out, so
    /// that another server takes it over and resumes it from its last
    /// checkpoint (with [`Change::Resume`]) as after a crash. Made by the
    /// current runner ([`TaskRecord::apply_as`]); only for a resumable task.
    HandOff(RunnerId),
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// The task is finished; finished tasks never change.
    #[error("the task is finished ({0}) and cannot change")]
    Terminal(TaskStatus),
    /// The input key was used before in this task.
    #[error("input key {0:?} was already used in this task")]
    DuplicateKey(String),
    /// The record's version cannot grow any more (it was written by
    /// something else than this library: no task changes 2^64 times).
    #[error("the task's version is at its maximum and cannot change")]
    VersionExhausted,
    /// A keep-alive for a task that is not working (it waits for input):
    /// only its own changes keep it alive then.
    #[error("the task is not working, so its tool does not keep it alive")]
    NotWorking,
    /// The change was made for a runner that no longer runs the task (its
    /// lease ran out and another server took the task over): fencing.
    #[error("the task is no longer run by this server")]
    NotRunner,
    /// Only a task that keeps its call (made resumable) can be run again.
    #[error("the task is not resumable")]
    NotResumable,
}

/// A record changed by [`TaskRecord::apply`], with the version it was
/// computed from: what a store swaps in if its record still has that
/// version. Only the transition function makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    expected: u64,
    record: TaskRecord,
}

impl Transition {
    /// The version the stored record must have for the swap to happen.
    pub fn expected_version(&self) -> u64 {
        self.expected
    }

    /// The record after the change.
    pub fn record(&self) -> &TaskRecord {
        &self.record
    }

    /// The record after the change, for a store to keep.
    pub fn into_record(self) -> TaskRecord {
        self.record
    }
}

impl TaskRecord {
    /// A new `working` task created at `now` by `owner`, version 0.
    pub fn new(
        id: TaskId,
        owner: Principal,
        now: UnixMillis,
        ttl: Ttl,
        poll_interval: Option<Duration>,
    ) -> Self {
        Self {
            id,
            owner,
            status: TaskStatus::Working,
            status_message: None,
            created_at: now,
            updated_at: now,
            ttl,
            poll_interval,
            expires_at: ttl.limit().map(|ttl| now.saturating_add(ttl)),
            idle_ttl: None,
            max_expires_at: None,
            input_requests: BTreeMap::new(),
            issued_keys: BTreeSet::new(),
            input_responses: BTreeMap::new(),
            result: None,
            error: None,
            cancel_requested: false,
            cancelled_by_operator: false,
            version: 0,
            run: None,
            tool: None,
            checkpoint: None,
            keyed: None,
        }
    }

    /// This new record, of a task that runs the tool `name`.
    #[must_use]
    pub fn with_tool(mut self, name: &str) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// The name of the tool the task runs, when the record says.
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// This new record, created under its owner's idempotency key `key`
    /// by the call whose [`call_fingerprint`] is `fingerprint`: it keeps
    /// the key's slot (a hash of owner and key) and the fingerprint, for
    /// [`TaskStore::create_keyed`](super::TaskStore::create_keyed).
    #[must_use]
    pub fn with_idempotency(mut self, key: &IdempotencyKey, fingerprint: String) -> Self {
        self.keyed = Some(Box::new(KeyedCall {
            slot: slot(self.owner.as_str(), key),
            fingerprint,
            synchronous: false,
        }));
        self
    }

    /// This new record, made for a `tools/call` under its owner's
    /// idempotency key `key` that runs synchronously (no task is made of
    /// it): as [`TaskRecord::with_idempotency`], and the record keeps the
    /// call's answer, so that the same call sent again gets that answer
    /// instead of a second run. Its id is told to no one.
    #[must_use]
    pub fn for_synchronous_call(self, key: &IdempotencyKey, fingerprint: String) -> Self {
        let mut record = self.with_idempotency(key, fingerprint);
        if let Some(keyed) = record.keyed.as_deref_mut() {
            keyed.synchronous = true;
        }
        record
    }

    /// True for the record of a synchronous call
    /// ([`TaskRecord::for_synchronous_call`]): its result is that call's
    /// answer, not a task's.
    pub fn ran_synchronously(&self) -> bool {
        self.keyed.as_deref().is_some_and(|keyed| keyed.synchronous)
    }

    /// The slot of the idempotency key the task was created with
    /// ([`idempotency_slot`](super::idempotency_slot)), if any.
    pub fn idempotency_slot(&self) -> Option<&str> {
        self.keyed.as_deref().map(|keyed| keyed.slot.as_str())
    }

    /// The fingerprint of the call that created the task under an
    /// idempotency key ([`call_fingerprint`]), if any.
    pub fn call_fingerprint(&self) -> Option<&str> {
        self.keyed
            .as_deref()
            .map(|keyed| keyed.fingerprint.as_str())
    }

    /// The record bounded to `max_lifetime` from creation (`None`: no
    /// bound), however often it is extended; with `follows_activity`, a
    /// limited TTL is an idle TTL, pushed ahead of now by every change and
    /// by the runtime's [`Change::KeepAlive`] while the tool runs. An
    /// unlimited TTL stays unlimited.
    pub fn with_lifetime(mut self, max_lifetime: Option<Duration>, follows_activity: bool) -> Self {
        if let Ttl::Limited(idle) = self.ttl {
            self.idle_ttl = follows_activity.then_some(idle);
            self.max_expires_at = max_lifetime.map(|max| self.created_at.saturating_add(max));
            if let (Some(at), Some(cap)) = (self.expires_at, self.max_expires_at)
                && at > cap
            {
                self.set_expiry(cap);
            }
        }
        self
    }

    /// This new record, run by `runner` in a store shared by several
    /// servers; `call` (the `tools/call` params) makes it resumable: another
    /// server may run it again if `runner` stops. Set before
    /// [`TaskStore::create`](super::TaskStore::create); changes after that
    /// go through [`TaskRecord::apply`].
    #[must_use]
    pub fn with_runner(mut self, runner: RunnerId, call: Option<Value>) -> Self {
        self.run = Some(Box::new(Run {
            runner,
            call,
            resumed: 0,
            drain_wait: false,
        }));
        self
    }

    /// This new resumable record, which a drain waits for before it hands
    /// it off (`wait`): see [`TaskRecord::drain_waits`]. No change for a
    /// record that is not resumable.
    #[must_use]
    pub fn with_drain_wait(mut self, wait: bool) -> Self {
        if let Some(run) = self.run.as_deref_mut().filter(|run| run.call.is_some()) {
            run.drain_wait = wait;
        }
        self
    }

    /// This new record with `state` as its first checkpoint (`None`: no
    /// change), as if the tool had written it.
    #[must_use]
    pub fn with_first_checkpoint(mut self, state: Option<Value>) -> Self {
        if let Some(state) = state {
            self.checkpoint = Some(Box::new(state));
        }
        self
    }

    /// The task id (a bearer token: never log it).
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// The principal that created the task.
    pub fn owner(&self) -> &Principal {
        &self.owner
    }

    /// The status.
    pub fn status(&self) -> &TaskStatus {
        &self.status
    }

    /// A message for people about the current state.
    pub fn status_message(&self) -> Option<&str> {
        self.status_message.as_deref()
    }

    /// When the task was created.
    pub fn created_at(&self) -> UnixMillis {
        self.created_at
    }

    /// When the task last changed.
    pub fn updated_at(&self) -> UnixMillis {
        self.updated_at
    }

    /// The TTL, counted from creation (extended by activity when the task
    /// follows it).
    pub fn ttl(&self) -> Ttl {
        self.ttl
    }

    /// The poll interval suggested to clients.
    pub fn poll_interval(&self) -> Option<Duration> {
        self.poll_interval
    }

    /// When the sweeper acts on the record: an unfinished task past it fails
    /// ("task expired"); a finished one is deleted. `None`: never.
    pub fn expires_at(&self) -> Option<UnixMillis> {
        self.expires_at
    }

    /// How far ahead of its last activity the task is kept alive, when its
    /// TTL follows activity ([`TaskRecord::with_lifetime`]).
    pub fn idle_ttl(&self) -> Option<Duration> {
        self.idle_ttl
    }

    /// The latest the task may expire however often it is extended.
    pub fn max_expires_at(&self) -> Option<UnixMillis> {
        self.max_expires_at
    }

    /// True when `expires_at` is at or before `now`.
    pub fn is_due(&self, now: UnixMillis) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// Outstanding input requests by key (`{method, params}` objects).
    pub fn input_requests(&self) -> &BTreeMap<String, Value> {
        &self.input_requests
    }

    /// Every input key ever issued: keys are unique for the task's lifetime.
    pub fn issued_keys(&self) -> &BTreeSet<String> {
        &self.issued_keys
    }

    /// Answers received for issued keys, waiting for the tool code to read them.
    pub fn input_responses(&self) -> &BTreeMap<String, Value> {
        &self.input_responses
    }

    /// The tool's result (`completed`).
    pub fn result(&self) -> Option<&Value> {
        self.result.as_ref()
    }

    /// The JSON-RPC error (`failed`).
    pub fn error(&self) -> Option<&Value> {
        self.error.as_ref()
    }

    /// Whether `tasks/cancel` (or an operator's cancel) was received.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested
    }

    /// Whether the cancel was an operator's
    /// ([`Change::RequestCancelByOperator`]).
    pub fn cancelled_by_operator(&self) -> bool {
        self.cancelled_by_operator
    }

    /// Bumped on every change; compare-and-set compares it.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The server process running the task, in a store shared by several
    /// (`None`: a store without leases).
    pub fn runner(&self) -> Option<&RunnerId> {
        self.run.as_ref().map(|run| &run.runner)
    }

    /// The `tools/call` params (`name`, `arguments`) another server runs
    /// again if the task's runner stops: only for tools made resumable.
    pub fn resumable_call(&self) -> Option<&Value> {
        self.run.as_ref().and_then(|run| run.call.as_ref())
    }

    /// True for a resumable task a drain waits for (up to its timeout)
    /// before it hands it to another server, instead of handing it off at
    /// once.
    pub fn drain_waits(&self) -> bool {
        self.run
            .as_ref()
            .is_some_and(|run| run.call.is_some() && run.drain_wait)
    }

    /// The tool's last checkpoint ([`Change::Checkpoint`]), while the task
    /// is unfinished.
    pub fn checkpoint(&self) -> Option<&Value> {
        self.checkpoint.as_deref()
    }

    /// How many times the task was taken over and run again.
    pub fn resumed(&self) -> u32 {
        self.run.as_ref().map_or(0, |run| run.resumed)
    }

    /// [`TaskRecord::apply`] for a change made by the runner `runner`: refused
    /// with [`TransitionError::NotRunner`] when the record names another
    /// runner (the task was taken over). This is the fencing of leases: the
    /// swap then fails on the version if the task changed since it was read.
    pub fn apply_as(
        &self,
        runner: &RunnerId,
        change: &Change,
        now: UnixMillis,
        retention: Duration,
    ) -> Result<Transition, TransitionError> {
        if self.status.is_terminal() {
            return Err(TransitionError::Terminal(self.status.clone()));
        }
        if self.runner() != Some(runner) {
            return Err(TransitionError::NotRunner);
        }
        self.apply(change, now, retention)
    }

    /// The one transition function: the record after `change` at time
    /// `now`, as a [`Transition`] from this record's version, or why the
    /// change is refused. A finished task is kept `retention` after it ends.
    pub fn apply(
        &self,
        change: &Change,
        now: UnixMillis,
        retention: Duration,
    ) -> Result<Transition, TransitionError> {
        if self.status.is_terminal() {
            return Err(TransitionError::Terminal(self.status.clone()));
        }
        let mut next = self.clone();
        match change {
            Change::StatusMessage(message) => next.status_message = Some(message.clone()),
            Change::Checkpoint { state, message } => {
                next.checkpoint = Some(Box::new(state.clone()));
                if let Some(message) = message {
                    next.status_message = Some(message.clone());
                }
            }
            Change::RequestInput { key, request } => {
                if !next.issued_keys.insert(key.clone()) {
                    return Err(TransitionError::DuplicateKey(key.clone()));
                }
                next.input_requests.insert(key.clone(), request.clone());
                next.status = TaskStatus::InputRequired;
            }
            Change::ProvideInput(responses) => {
                for (key, response) in responses {
                    if next.input_requests.remove(key).is_some() {
                        next.input_responses.insert(key.clone(), response.clone());
                    }
                }
                if next.input_requests.is_empty() {
                    next.status = TaskStatus::Working;
                }
            }
            Change::RequestCancel => next.cancel_requested = true,
            Change::RequestCancelByOperator => {
                next.cancel_requested = true;
                next.cancelled_by_operator = true;
            }
            Change::ExtendTtl(by) => next.extend_to(now.saturating_add(*by)),
            Change::KeepAlive if next.status != TaskStatus::Working => {
                return Err(TransitionError::NotWorking);
            }
            // What a keep-alive does, every change of a task that follows
            // activity does too (below).
            Change::KeepAlive => {}
            Change::Complete(result) => {
                next.finish(TaskStatus::Completed, now, retention);
                next.result = Some(result.clone());
            }
            Change::Fail(error) => {
                next.finish(TaskStatus::Failed, now, retention);
                next.error = Some(error.clone());
            }
            Change::Cancel => {
                next.finish(TaskStatus::Cancelled, now, retention);
                let message = match next.cancelled_by_operator {
                    true => CANCELLED_BY_OPERATOR_MESSAGE,
                    false => CANCELLED_BY_CALLER_MESSAGE,
                };
                next.status_message = Some(message.to_owned());
            }
            Change::Resume(runner) => {
                let Some(run) = next.run.as_deref_mut().filter(|run| run.call.is_some()) else {
                    return Err(TransitionError::NotResumable);
                };
                run.runner = runner.clone();
                run.resumed = run.resumed.saturating_add(1);
                next.status_message = Some(RESUMED_MESSAGE.to_owned());
            }
            Change::HandOff(runner) => {
                let Some(run) = next.run.as_deref_mut().filter(|run| run.call.is_some()) else {
                    return Err(TransitionError::NotResumable);
                };
                run.runner = runner.clone();
                next.status_message = Some(HANDED_OFF_MESSAGE.to_owned());
            }
            Change::Expire | Change::Abandon | Change::RunnerStopped => {
                let message = match change {
                    Change::Expire => EXPIRED_MESSAGE,
                    Change::Abandon => RESTARTED_MESSAGE,
                    _ => STOPPED_MESSAGE,
                };
                next.finish(TaskStatus::Failed, now, retention);
                next.status_message = Some(message.to_owned());
                next.error = Some(serde_json::json!({"code": EXPIRED_CODE, "message": message}));
            }
        }
        if !next.status.is_terminal()
            && let Some(idle) = next.idle_ttl
        {
            next.extend_to(now.saturating_add(idle));
        }
        next.updated_at = now.max(self.updated_at);
        next.version = self
            .version
            .checked_add(1)
            .ok_or(TransitionError::VersionExhausted)?;
        Ok(Transition {
            expected: self.version,
            record: next,
        })
    }

    /// Moves a limited TTL's end to `until` if that is later, never past
    /// the maximum lifetime.
    fn extend_to(&mut self, until: UnixMillis) {
        let until = self.max_expires_at.map_or(until, |cap| until.min(cap));
        if let Ttl::Limited(ttl) = self.ttl
            && until > self.created_at.saturating_add(ttl)
        {
            self.set_expiry(until);
        }
    }

    fn set_expiry(&mut self, at: UnixMillis) {
        self.ttl = Ttl::Limited(at.saturating_since(self.created_at));
        self.expires_at = Some(at);
    }

    fn finish(&mut self, status: TaskStatus, now: UnixMillis, retention: Duration) {
        self.status = status;
        self.checkpoint = None;
        self.input_requests.clear();
        self.input_responses.clear();
        self.expires_at = Some(now.saturating_add(retention));
    }
}

/// `Option<Duration>` as a whole number of milliseconds (or `null`).
mod optional_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value
            .map(crate::task::saturating_millis)
            .serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}

/// For serde: a `false` flag is left out.
#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
fn is_false(flag: &bool) -> bool {
    !*flag
}

#[cfg(test)]
mod tests;
