//! [`PackedRecord`]: a [`TaskRecord`] as a store keeps it in memory.
//!
//! A record's result and error are JSON values; as a `serde_json::Value`
//! tree a small tool result (`{"content":[{"type":"text","text":"done"}],…}`)
//! takes about 2 KiB of heap, twenty times its text. A packed record keeps
//! them as their JSON text instead, and the rarely used input state behind
//! one pointer, so a finished task costs a few hundred bytes beyond its
//! result's own. Reading the record back ([`PackedRecord::unpack`]) parses
//! the text again; the server's `tasks/get` writes the text into its answer
//! as it is.
//!
//! Its accessors repeat [`TaskRecord`]'s on purpose: a packed record does
//! not wrap a `TaskRecord` (holding one would hold the `Value` trees this
//! type exists to drop, see docs/benchmarks-history.md, "Memory per finished task"), and
//! its fields differ in layout (a shared `Arc<str>` id, a boxed message,
//! boxed input state, JSON text), so each type reads its own fields. A
//! trait over both would add a third copy of every signature without
//! removing a body. What keeps the two from drifting apart is the test
//! below that compares every accessor on records in every state.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::keyed::KeyedCall;
use super::record::{Principal, Run, TaskRecord};
use crate::task::{TaskId, TaskStatus, Ttl, UnixMillis};

/// Values nested deeper than this stay parsed: `serde_json` refuses to read
/// text nested deeper than 128 levels back.
const MAX_TEXT_DEPTH: usize = 100;

/// A [`TaskRecord`] packed for keeping in memory: the same record, with its
/// result and error held as JSON text. [`PackedRecord::unpack`] gives back
/// a record equal to the one packed.
///
/// The [`MemoryStore`](super::MemoryStore) keeps its records packed, and so
/// can any store's cache; [`TaskStore::get_packed`](super::TaskStore::get_packed)
/// hands one out without copying it. Like the record, it holds the task id,
/// a bearer token: its `Debug` does not print it.
#[derive(Clone, PartialEq)]
pub struct PackedRecord {
    id: Arc<str>,
    owner: Principal,
    status: TaskStatus,
    status_message: Option<Box<str>>,
    created_at: UnixMillis,
    updated_at: UnixMillis,
    ttl: Ttl,
    poll_interval: Option<Duration>,
    expires_at: Option<UnixMillis>,
    idle_ttl: Option<Duration>,
    max_expires_at: Option<UnixMillis>,
    run: Option<Box<Run>>,
    tool: Option<Box<str>>,
    keyed: Option<Box<KeyedCall>>,
    version: u64,
    cancel_requested: bool,
    cancelled_by_operator: bool,
    inputs: Option<Box<Inputs>>,
    result: Option<PackedJson>,
    error: Option<PackedJson>,
    checkpoint: Option<PackedJson>,
}

/// The input state of a task, kept only when there is some.
#[derive(Debug, Clone, PartialEq, Default)]
struct Inputs {
    requests: BTreeMap<String, Value>,
    issued_keys: BTreeSet<String>,
    responses: BTreeMap<String, Value>,
}

/// A JSON value as text, or (nested too deep to read back) as it is.
#[derive(Clone, PartialEq)]
enum PackedJson {
    Text(Box<str>),
    Tree(Box<Value>),
}

static NO_INPUTS: BTreeMap<String, Value> = BTreeMap::new();

impl fmt::Debug for PackedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackedRecord")
            .field("owner", &self.owner)
            .field("status", &self.status)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl PackedJson {
    fn pack(value: Value) -> Self {
        if depth_exceeds(&value, MAX_TEXT_DEPTH) {
            return Self::Tree(Box::new(value));
        }
        // Written into its buffer directly: `Value`'s `Display` passes every
        // token through a `Formatter`, at about twice the instructions. (A
        // `Value` always serializes; kept as it is if it did not.)
        match serde_json::to_string(&value) {
            Ok(text) => Self::Text(text.into_boxed_str()),
            Err(_) => Self::Tree(Box::new(value)),
        }
    }

    fn unpack(&self) -> Value {
        match self {
            // The text was written from a value no deeper than the parser
            // reads, so it reads back; `Null` would only hide a bug.
            Self::Text(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            Self::Tree(value) => (**value).clone(),
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            Self::Tree(_) => None,
        }
    }

    fn heap_size(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            // A rough figure: the tree's text size times four.
            Self::Tree(value) => value.to_string().len() * 4,
        }
    }
}

/// True when `value` nests deeper than `limit` arrays and objects.
fn depth_exceeds(value: &Value, limit: usize) -> bool {
    match value {
        Value::Array(items) => limit == 0 || items.iter().any(|v| depth_exceeds(v, limit - 1)),
        Value::Object(fields) => limit == 0 || fields.values().any(|v| depth_exceeds(v, limit - 1)),
        _ => false,
    }
}

impl PackedRecord {
    /// Packs `record`.
    pub fn pack(record: TaskRecord) -> Self {
        let id: Arc<str> = Arc::from(record.id.expose());
        Self::pack_with_id(record, id)
    }

    /// Packs `record`, whose id is `id` (shared with the store's index).
    pub(super) fn pack_with_id(record: TaskRecord, id: Arc<str>) -> Self {
        let TaskRecord {
            id: _,
            owner,
            status,
            status_message,
            created_at,
            updated_at,
            ttl,
            poll_interval,
            expires_at,
            idle_ttl,
            max_expires_at,
            input_requests,
            issued_keys,
            input_responses,
            result,
            error,
            cancel_requested,
            cancelled_by_operator,
            version,
            run,
            tool,
            checkpoint,
            keyed,
        } = record;
        let inputs =
            (!(input_requests.is_empty() && issued_keys.is_empty() && input_responses.is_empty()))
                .then(|| {
                    Box::new(Inputs {
                        requests: input_requests,
                        issued_keys,
                        responses: input_responses,
                    })
                });
        Self {
            id,
            owner,
            status,
            status_message: status_message.map(String::into_boxed_str),
            created_at,
            updated_at,
            ttl,
            poll_interval,
            expires_at,
            idle_ttl,
            max_expires_at,
            run,
            tool,
            keyed,
            version,
            cancel_requested,
            cancelled_by_operator,
            inputs,
            result: result.map(PackedJson::pack),
            error: error.map(PackedJson::pack),
            checkpoint: checkpoint.map(|state| PackedJson::pack(*state)),
        }
    }

    /// The record, as it was packed.
    pub fn unpack(&self) -> TaskRecord {
        let inputs = self.inputs.as_deref().cloned().unwrap_or_default();
        TaskRecord {
            id: TaskId::new(&*self.id),
            owner: self.owner.clone(),
            status: self.status.clone(),
            status_message: self.status_message.as_deref().map(str::to_owned),
            created_at: self.created_at,
            updated_at: self.updated_at,
            ttl: self.ttl,
            poll_interval: self.poll_interval,
            expires_at: self.expires_at,
            idle_ttl: self.idle_ttl,
            max_expires_at: self.max_expires_at,
            input_requests: inputs.requests,
            issued_keys: inputs.issued_keys,
            input_responses: inputs.responses,
            result: self.result.as_ref().map(PackedJson::unpack),
            error: self.error.as_ref().map(PackedJson::unpack),
            cancel_requested: self.cancel_requested,
            cancelled_by_operator: self.cancelled_by_operator,
            version: self.version,
            run: self.run.clone(),
            tool: self.tool.clone(),
            checkpoint: self
                .checkpoint
                .as_ref()
                .map(|state| Box::new(state.unpack())),
            keyed: self.keyed.clone(),
        }
    }

    /// The task id (a bearer token: never log it).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The task id, shared (a bearer token: never log it).
    pub fn shared_id(&self) -> &Arc<str> {
        &self.id
    }

    /// See [`TaskRecord::owner`].
    pub fn owner(&self) -> &Principal {
        &self.owner
    }

    /// See [`TaskRecord::status`].
    pub fn status(&self) -> &TaskStatus {
        &self.status
    }

    /// See [`TaskRecord::status_message`].
    pub fn status_message(&self) -> Option<&str> {
        self.status_message.as_deref()
    }

    /// See [`TaskRecord::created_at`].
    pub fn created_at(&self) -> UnixMillis {
        self.created_at
    }

    /// See [`TaskRecord::updated_at`].
    pub fn updated_at(&self) -> UnixMillis {
        self.updated_at
    }

    /// See [`TaskRecord::ttl`].
    pub fn ttl(&self) -> Ttl {
        self.ttl
    }

    /// See [`TaskRecord::poll_interval`].
    pub fn poll_interval(&self) -> Option<Duration> {
        self.poll_interval
    }

    /// See [`TaskRecord::expires_at`].
    pub fn expires_at(&self) -> Option<UnixMillis> {
        self.expires_at
    }

    /// See [`TaskRecord::idle_ttl`].
    pub fn idle_ttl(&self) -> Option<Duration> {
        self.idle_ttl
    }

    /// See [`TaskRecord::max_expires_at`].
    pub fn max_expires_at(&self) -> Option<UnixMillis> {
        self.max_expires_at
    }

    /// See [`TaskRecord::is_due`].
    pub fn is_due(&self, now: UnixMillis) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// See [`TaskRecord::input_requests`].
    pub fn input_requests(&self) -> &BTreeMap<String, Value> {
        self.inputs
            .as_deref()
            .map_or(&NO_INPUTS, |inputs| &inputs.requests)
    }

    /// See [`TaskRecord::cancel_requested`].
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested
    }

    /// See [`TaskRecord::cancelled_by_operator`].
    pub fn cancelled_by_operator(&self) -> bool {
        self.cancelled_by_operator
    }

    /// See [`TaskRecord::version`].
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The result (`completed`), parsed.
    pub fn result_value(&self) -> Option<Value> {
        self.result.as_ref().map(PackedJson::unpack)
    }

    /// The JSON-RPC error (`failed`), parsed.
    pub fn error_value(&self) -> Option<Value> {
        self.error.as_ref().map(PackedJson::unpack)
    }

    /// The result (`completed`) as JSON text, when it is kept as text.
    pub fn result_text(&self) -> Option<&str> {
        self.result.as_ref().and_then(PackedJson::text)
    }

    /// The JSON-RPC error (`failed`) as JSON text, when it is kept as text.
    pub fn error_text(&self) -> Option<&str> {
        self.error.as_ref().and_then(PackedJson::text)
    }

    /// The name of the tool the task runs, when the record says.
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// See [`TaskRecord::idempotency_slot`].
    pub fn idempotency_slot(&self) -> Option<&str> {
        self.keyed.as_deref().map(|keyed| keyed.slot.as_str())
    }

    /// See [`TaskRecord::call_fingerprint`].
    pub fn call_fingerprint(&self) -> Option<&str> {
        self.keyed
            .as_deref()
            .map(|keyed| keyed.fingerprint.as_str())
    }

    /// See [`TaskRecord::ran_synchronously`].
    pub fn ran_synchronously(&self) -> bool {
        self.keyed.as_deref().is_some_and(|keyed| keyed.synchronous)
    }

    /// Roughly how many bytes of heap the record holds, for bounding caches.
    pub fn heap_size(&self) -> usize {
        let tool = self.tool.as_deref().map_or(0, str::len);
        let text = |json: &Option<PackedJson>| json.as_ref().map_or(0, PackedJson::heap_size);
        let inputs = self.inputs.as_deref().map_or(0, |inputs| {
            let values = |map: &BTreeMap<String, Value>| -> usize {
                map.iter()
                    .map(|(key, value)| key.len() + value.to_string().len() * 4)
                    .sum()
            };
            values(&inputs.requests)
                + values(&inputs.responses)
                + inputs
                    .issued_keys
                    .iter()
                    .map(|key| key.len() + 32)
                    .sum::<usize>()
        });
        std::mem::size_of::<Self>()
            + self.id.len()
            + self.owner.as_str().len()
            + self.status_message.as_deref().map_or(0, str::len)
            + text(&self.result)
            + text(&self.error)
            + text(&self.checkpoint)
            + inputs
            + tool
            + self.keyed.as_deref().map_or(0, |keyed| {
                std::mem::size_of::<KeyedCall>() + keyed.slot.len() + keyed.fingerprint.len()
            })
    }
}

impl From<TaskRecord> for PackedRecord {
    fn from(record: TaskRecord) -> Self {
        Self::pack(record)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::Change;

    fn record() -> TaskRecord {
        TaskRecord::new(
            TaskId::new("t-1"),
            Principal::new("owner"),
            UnixMillis::new(1_000),
            Ttl::from_millis(60_000),
            Some(Duration::from_millis(500)),
        )
        .with_lifetime(Some(Duration::from_secs(3_600)), true)
    }

    fn after(record: &TaskRecord, change: &Change) -> TaskRecord {
        record
            .apply(change, UnixMillis::new(2_000), Duration::from_secs(60))
            .expect("applies")
            .into_record()
    }

    /// Every accessor of `packed` reads as `record`'s does.
    fn accessors_agree(packed: &PackedRecord, record: &TaskRecord) {
        assert_eq!(packed.id(), record.id().expose());
        assert_eq!(packed.shared_id().as_ref(), record.id().expose());
        assert_eq!(packed.owner(), record.owner());
        assert_eq!(packed.status(), record.status());
        assert_eq!(packed.status_message(), record.status_message());
        assert_eq!(packed.created_at(), record.created_at());
        assert_eq!(packed.updated_at(), record.updated_at());
        assert_eq!(packed.ttl(), record.ttl());
        assert_eq!(packed.poll_interval(), record.poll_interval());
        assert_eq!(packed.expires_at(), record.expires_at());
        assert_eq!(packed.idle_ttl(), record.idle_ttl());
        assert_eq!(packed.max_expires_at(), record.max_expires_at());
        for at in [0, 1_000, 2_000, 61_999, 62_000, 3_700_000, u64::MAX] {
            let at = UnixMillis::new(at);
            assert_eq!(packed.is_due(at), record.is_due(at), "{at:?}");
        }
        assert_eq!(packed.input_requests(), record.input_requests());
        assert_eq!(packed.cancel_requested(), record.cancel_requested());
        assert_eq!(
            packed.cancelled_by_operator(),
            record.cancelled_by_operator()
        );
        assert_eq!(packed.version(), record.version());
        assert_eq!(packed.result_value().as_ref(), record.result());
        assert_eq!(packed.error_value().as_ref(), record.error());
        assert_eq!(packed.tool(), record.tool());
        assert_eq!(packed.idempotency_slot(), record.idempotency_slot());
        assert_eq!(packed.call_fingerprint(), record.call_fingerprint());
        assert_eq!(packed.ran_synchronously(), record.ran_synchronously());
    }

    #[test]
    fn unpacking_gives_back_the_record() {
        let asked = after(
            &after(&record(), &Change::StatusMessage("héllo ✓".into())),
            &Change::RequestInput {
                key: "k".into(),
                request: json!({"method": "elicitation/create", "params": {"n": 1.5}}),
            },
        );
        let answered = after(
            &asked,
            &Change::ProvideInput([("k".to_owned(), json!({"action": "accept"}))].into()),
        );
        let result = json!({"content": [{"type": "text", "text": "done \"quoted\""}],
            "isError": false, "n": -0.0, "big": u64::MAX, "neg": i64::MIN, "f": 1e300});
        let done = after(&answered, &Change::Complete(result.clone()));
        let failed = after(
            &record(),
            &Change::Fail(json!({"code": -32603, "message": "x"})),
        );
        let run = record().with_runner(
            crate::store::RunnerId::new("replica-1"),
            Some(json!({"name": "slow", "arguments": {"n": 1}})),
        );
        assert!(run.runner().is_some());
        assert!(record().idle_ttl().is_some() && record().max_expires_at().is_some());
        let cancelling = after(&record(), &Change::RequestCancel);
        assert!(cancelling.cancel_requested());
        let by_operator = after(&record(), &Change::RequestCancelByOperator);
        assert!(by_operator.cancel_requested() && by_operator.cancelled_by_operator());
        let named = record().with_tool("slow");
        assert_eq!(named.tool(), Some("slow"));
        let keyed = record().with_idempotency(
            &crate::IdempotencyKey::new("k").expect("key"),
            crate::store::call_fingerprint("slow", None),
        );
        assert!(keyed.idempotency_slot().is_some() && keyed.call_fingerprint().is_some());
        let synchronous = record().for_synchronous_call(
            &crate::IdempotencyKey::new("k").expect("key"),
            crate::store::call_fingerprint("slow", None),
        );
        assert!(synchronous.ran_synchronously() && !keyed.ran_synchronously());
        for original in [
            keyed,
            synchronous,
            record(),
            asked,
            answered,
            done.clone(),
            failed,
            run,
            cancelling,
            by_operator,
            named,
        ] {
            let packed = PackedRecord::pack(original.clone());
            assert_eq!(packed.unpack(), original);
            assert_eq!(packed.id(), "t-1");
            assert_eq!(packed.version(), original.version());
            assert_eq!(packed.status(), original.status());
            accessors_agree(&packed, &original);
        }
        let packed = PackedRecord::pack(done);
        assert_eq!(
            packed
                .result_text()
                .map(|text| serde_json::from_str::<Value>(text).unwrap()),
            Some(result)
        );
        assert!(
            !format!("{packed:?}").contains("t-1"),
            "the id is not printed"
        );
    }

    #[test]
    fn values_too_deep_to_read_back_stay_parsed() {
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let done = after(&record(), &Change::Complete(json!({"deep": deep})));
        let packed = PackedRecord::pack(done.clone());
        assert_eq!(packed.result_text(), None);
        assert_eq!(packed.unpack(), done);
    }
}
