//! Idempotent creation on the server side (see [`crate::idempotency`]): a
//! call's idempotency key and fingerprint ([`Idempotent`]), read from its
//! `_meta` where the call comes in, and the answer to a call whose key a
//! task of the same caller already holds.
//!
//! The engine looks the key up at its first gate
//! (`engine/calls/gates/idempotency.rs`), before any admission and before the
//! tool's first step runs; the store's atomic
//! `create_keyed` settles two creations racing with one key. A call that
//! runs synchronously is kept under its key too (`once.rs`).

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CreateTaskResult, RequestMetaObject};
use serde_json::Value;

use super::wire::wire_task_packed;
use crate::idempotency::{IDEMPOTENCY_KEY_META, IdempotencyKey};
use crate::store::{PackedRecord, call_fingerprint};

/// The idempotency of one `tools/call`: its key, and the fingerprint of its
/// tool and arguments.
#[derive(Debug, Clone)]
pub(crate) struct Idempotent {
    pub(crate) key: IdempotencyKey,
    pub(crate) fingerprint: String,
}

impl Idempotent {
    /// The idempotency of `request`, whose `_meta` rmcp moved into the
    /// request context's `meta` (a request built in process may still
    /// carry its own): `None` without a key, -32602 for a key that is not
    /// one.
    pub(crate) fn of(
        meta: &RequestMetaObject,
        request: &CallToolRequestParams,
    ) -> Result<Option<Self>, ErrorData> {
        let found = match request.meta.as_ref() {
            Some(own) if own.0.0.contains_key(IDEMPOTENCY_KEY_META) => {
                IdempotencyKey::from_meta(&own.0.0)
            }
            _ => IdempotencyKey::from_meta(&meta.0.0),
        };
        let key = found.map_err(|invalid| ErrorData::invalid_params(invalid.to_string(), None))?;
        Ok(key.map(|key| Self {
            key: round_key(key, request),
            fingerprint: call_fingerprint(&request.name, request.arguments.as_ref()),
        }))
    }

    /// Ok when a record whose call had `fingerprint` was made by this call;
    /// -32602 when the key was used for another call.
    pub(crate) fn same_call(&self, fingerprint: Option<&str>) -> Result<(), ErrorData> {
        if fingerprint == Some(self.fingerprint.as_str()) {
            return Ok(());
        }
        Err(ErrorData::invalid_params(
            format!(
                "the idempotency key (_meta \"{IDEMPOTENCY_KEY_META}\") was already used for \
                 another call (another tool or other arguments); use a new key for a new call"
            ),
            None,
        ))
    }

    /// The answer to this call when `existing`, a task of the same caller,
    /// holds its key: that task, as it is now, when it was made by the same
    /// call; -32602 when the key was used for another call.
    pub(crate) fn answer(&self, existing: &PackedRecord) -> Result<CallToolResponse, ErrorData> {
        self.same_call(existing.call_fingerprint())?;
        Ok(CallToolResponse::Task(CreateTaskResult::new(
            wire_task_packed(existing),
        )))
    }
}

/// The key a call's round goes by: the key the caller sent for its first
/// round; for an MRTR retry (with `inputResponses` or a `requestState`),
/// a key of that round's own, derived from the key and what the retry
/// carries. Each round is a request of its own, which may run the tool: a
/// retry sent again finds its own round's record, and a client that keeps
/// one key for every round of a call (ours does) is not told the key was
/// used before.
fn round_key(key: IdempotencyKey, request: &CallToolRequestParams) -> IdempotencyKey {
    if request.input_responses.is_none() && request.request_state.is_none() {
        return key;
    }
    let mut round = serde_json::Map::new();
    round.insert("key".into(), Value::String(key.as_str().to_owned()));
    if let Some(responses) = &request.input_responses {
        round.insert(
            "inputResponses".into(),
            serde_json::to_value(responses).unwrap_or(Value::Null),
        );
    }
    if let Some(state) = &request.request_state {
        round.insert("requestState".into(), Value::String(state.clone()));
    }
    // 64 hex digits: always a valid key.
    IdempotencyKey::new(call_fingerprint("mcp-tasks MRTR round", Some(&round))).unwrap_or(key)
}
