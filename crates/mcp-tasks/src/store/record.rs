//! One task as a store keeps it ([`TaskRecord`]), who it belongs to
//! ([`Principal`]), and the one transition function every change goes
//! through ([`TaskRecord::apply`], which makes the only [`Transition`] a
//! store can swap in).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::task::{TaskId, TaskStatus, Ttl, UnixMillis};

/// The JSON-RPC error code of a task that ran past its TTL, or whose server
/// stopped before it finished.
pub const EXPIRED_CODE: i64 = -32603;
/// The message of a task that ran past its TTL.
pub const EXPIRED_MESSAGE: &str = "task expired";
/// The status message of tasks a restarted server found unfinished.
pub const RESTARTED_MESSAGE: &str = "server restarted before the task finished";

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
    pub(super) version: u64,
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
    /// Ask for input under a key never used before in this task.
    RequestInput {
        /// The key.
        key: String,
        /// The `{method, params}` request.
        request: Value,
    },
    /// Answers from `tasks/update`: keys that are not outstanding are ignored.
    ProvideInput(BTreeMap<String, Value>),
    /// `tasks/cancel` was received.
    RequestCancel,
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
    /// The task was cancelled.
    Cancel,
    /// The TTL passed: an unfinished task fails with "task expired".
    Expire,
    /// The process that ran the task is gone.
    Abandon,
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
            version: 0,
        }
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

    /// Whether `tasks/cancel` was received.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested
    }

    /// Bumped on every change; compare-and-set compares it.
    pub fn version(&self) -> u64 {
        self.version
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
            Change::Cancel => next.finish(TaskStatus::Cancelled, now, retention),
            Change::Expire | Change::Abandon => {
                let message = if matches!(change, Change::Expire) {
                    EXPIRED_MESSAGE
                } else {
                    RESTARTED_MESSAGE
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record() -> TaskRecord {
        TaskRecord::new(
            TaskId::new("t"),
            Principal::new("o"),
            UnixMillis::new(1_000),
            Ttl::from_millis(10_000),
            Some(Duration::from_millis(100)),
        )
    }

    fn at(ms: u64) -> UnixMillis {
        UnixMillis::new(ms)
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn after(record: &TaskRecord, change: &Change, now: u64, retention: u64) -> TaskRecord {
        record
            .apply(change, at(now), ms(retention))
            .expect("applies")
            .into_record()
    }

    #[test]
    fn terminal_states_never_change() {
        let done = after(&record(), &Change::Complete(json!({})), 2_000, 500);
        assert_eq!(done.status(), &TaskStatus::Completed);
        assert_eq!(done.expires_at(), Some(at(2_500)));
        for change in [
            Change::Cancel,
            Change::Expire,
            Change::Fail(json!({})),
            Change::StatusMessage("x".into()),
            Change::RequestCancel,
        ] {
            assert_eq!(
                done.apply(&change, at(3_000), ms(500)),
                Err(TransitionError::Terminal(TaskStatus::Completed))
            );
        }
    }

    #[test]
    fn a_transition_expects_the_version_it_was_computed_from() {
        let one = record()
            .apply(&Change::StatusMessage("a".into()), at(1_100), ms(0))
            .unwrap();
        assert_eq!((one.expected_version(), one.record().version()), (0, 1));
        let two = one
            .record()
            .apply(&Change::StatusMessage("b".into()), at(1_000), ms(0))
            .unwrap();
        assert_eq!((two.expected_version(), two.record().version()), (1, 2));
        assert_eq!(
            two.record().updated_at(),
            at(1_100),
            "a change never moves lastUpdatedAt back"
        );
    }

    #[test]
    fn input_keys_are_unique_and_partial_answers_keep_waiting() {
        let ask = |r: &TaskRecord, key: &str| {
            r.apply(
                &Change::RequestInput {
                    key: key.into(),
                    request: json!({"method": "roots/list"}),
                },
                at(1_500),
                ms(0),
            )
            .map(Transition::into_record)
        };
        let one = ask(&record(), "a").unwrap();
        let two = ask(&one, "b").unwrap();
        assert_eq!(two.status(), &TaskStatus::InputRequired);
        let partial = after(
            &two,
            &Change::ProvideInput([("a".into(), json!(1)), ("zzz".into(), json!(2))].into()),
            1_600,
            0,
        );
        assert_eq!(partial.status(), &TaskStatus::InputRequired);
        assert_eq!(partial.input_requests().keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(partial.input_responses().keys().collect::<Vec<_>>(), ["a"]);
        let all = after(
            &partial,
            &Change::ProvideInput([("b".into(), json!(3))].into()),
            1_700,
            0,
        );
        assert_eq!(all.status(), &TaskStatus::Working);
        assert_eq!(
            ask(&all, "a"),
            Err(TransitionError::DuplicateKey("a".into()))
        );
        assert_eq!(all.version(), 4);
    }

    #[test]
    fn expiry_and_heartbeat() {
        let alive = after(&record(), &Change::ExtendTtl(ms(20_000)), 5_000, 0);
        assert_eq!(
            (alive.ttl(), alive.expires_at()),
            (Ttl::from_millis(24_000), Some(at(25_000)))
        );
        let shorter = after(&alive, &Change::ExtendTtl(ms(1)), 6_000, 0);
        assert_eq!(shorter.expires_at(), Some(at(25_000)));
        assert!(!shorter.is_due(at(24_999)) && shorter.is_due(at(25_000)));
        let expired = after(&alive, &Change::Expire, 30_000, 60_000);
        assert_eq!(expired.status(), &TaskStatus::Failed);
        assert_eq!(
            expired.error(),
            Some(&json!({"code": -32603, "message": "task expired"}))
        );
        assert_eq!(expired.expires_at(), Some(at(90_000)));
    }

    #[test]
    fn a_record_at_the_last_version_refuses_to_change_rather_than_overflow() {
        let mut value = serde_json::to_value(record()).unwrap();
        value["version"] = json!(u64::MAX);
        let last: TaskRecord = serde_json::from_value(value).unwrap();
        assert_eq!(
            last.apply(&Change::RequestCancel, at(2_000), ms(0)),
            Err(TransitionError::VersionExhausted)
        );
    }

    #[test]
    fn the_stored_form_keeps_its_field_names() {
        let value = serde_json::to_value(record()).unwrap();
        assert_eq!(value["id"], "t");
        assert_eq!(value["owner"], "o");
        assert_eq!(value["created_at_ms"], 1_000);
        assert_eq!(value["ttl_ms"], 10_000);
        assert_eq!(value["poll_interval_ms"], 100);
        assert_eq!(value["expires_at_ms"], 11_000);
        let unlimited = TaskRecord::new(
            TaskId::new("u"),
            Principal::new("o"),
            at(1),
            Ttl::Unlimited,
            None,
        );
        let value = serde_json::to_value(&unlimited).unwrap();
        assert_eq!(
            (&value["ttl_ms"], &value["expires_at_ms"]),
            (&json!(null), &json!(null))
        );
        let back: TaskRecord = serde_json::from_value(value).unwrap();
        assert_eq!(back, unlimited);
    }

    #[test]
    fn a_task_that_follows_activity_lives_its_idle_ttl_past_each_change() {
        // Created at 1 s with a 10 s TTL, at most 30 s of life.
        let live = record().with_lifetime(Some(ms(30_000)), true);
        assert_eq!(live.idle_ttl(), Some(ms(10_000)));
        assert_eq!(live.max_expires_at(), Some(at(31_000)));
        assert_eq!(live.expires_at(), Some(at(11_000)));
        // A keep-alive at 8 s: alive until 18 s, and ttlMs says so.
        let kept = after(&live, &Change::KeepAlive, 8_000, 0);
        assert_eq!(kept.expires_at(), Some(at(18_000)));
        assert_eq!(kept.ttl(), Ttl::Limited(ms(17_000)));
        // Any change is activity; asking for input at 9 s moves it to 19 s,
        // and then keep-alives are refused: only changes keep it alive.
        let asking = after(
            &kept,
            &Change::RequestInput {
                key: "k".into(),
                request: json!({}),
            },
            9_000,
            0,
        );
        assert_eq!(asking.expires_at(), Some(at(19_000)));
        assert_eq!(
            asking
                .apply(&Change::KeepAlive, at(12_000), ms(0))
                .unwrap_err(),
            TransitionError::NotWorking
        );
        // The maximum lifetime bounds keep-alives and explicit extensions.
        let late = after(&kept, &Change::KeepAlive, 25_000, 0);
        assert_eq!(late.expires_at(), Some(at(31_000)));
        let extended = after(&kept, &Change::ExtendTtl(ms(3_600_000)), 20_000, 0);
        assert_eq!(extended.expires_at(), Some(at(31_000)));
        // Never earlier than it was.
        let early = after(&late, &Change::StatusMessage("m".into()), 2_000, 0);
        assert_eq!(early.expires_at(), Some(at(31_000)));
    }

    #[test]
    fn following_activity_keeps_unlimited_ttls_and_caps_long_ones() {
        let unlimited = TaskRecord::new(
            TaskId::new("u"),
            Principal::new("o"),
            at(0),
            Ttl::Unlimited,
            None,
        )
        .with_lifetime(Some(ms(5_000)), true);
        assert_eq!(unlimited.expires_at(), None);
        assert_eq!(
            after(&unlimited, &Change::KeepAlive, 9_000, 0).expires_at(),
            None
        );
        let capped = record().with_lifetime(Some(ms(4_000)), true);
        assert_eq!(capped.expires_at(), Some(at(5_000)));
        assert_eq!(capped.ttl(), Ttl::Limited(ms(4_000)));
        // Bounded, without following activity: changes do not extend it,
        // heartbeats do, up to the bound.
        let fixed = record().with_lifetime(Some(ms(20_000)), false);
        assert_eq!(fixed.idle_ttl(), None);
        let message = after(&fixed, &Change::StatusMessage("m".into()), 9_000, 0);
        assert_eq!(message.expires_at(), Some(at(11_000)));
        let beat = after(&fixed, &Change::ExtendTtl(ms(60_000)), 9_000, 0);
        assert_eq!(beat.expires_at(), Some(at(21_000)));
        // A record of an older build (no idle TTL) reads as before.
        let mut value = serde_json::to_value(record()).unwrap();
        let fields = value.as_object_mut().unwrap();
        fields.remove("idle_ttl_ms");
        fields.remove("max_expires_at_ms");
        let old: TaskRecord = serde_json::from_value(value).unwrap();
        assert_eq!(old.idle_ttl(), None);
        assert_eq!(
            after(&old, &Change::KeepAlive, 8_000, 0).expires_at(),
            Some(at(11_000))
        );
    }
}
