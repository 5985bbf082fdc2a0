//! Idempotent creation on the server side (see [`crate::idempotency`]): a
//! call's idempotency key and fingerprint ([`Idempotent`]), read from its
//! `_meta` where the call comes in, and the answer to a call whose key a
//! task of the same caller already holds.
//!
//! The runtime looks the key up first thing in `start_task`, before any
//! admission and before the tool's first step runs; the store's atomic
//! `create_keyed` settles two creations racing with one key.

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CreateTaskResult, RequestMetaObject};

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
            key,
            fingerprint: call_fingerprint(&request.name, request.arguments.as_ref()),
        }))
    }

    /// The answer to this call when `existing`, a task of the same caller,
    /// holds its key: that task, as it is now, when it was made by the same
    /// call; -32602 when the key was used for another call.
    pub(crate) fn answer(&self, existing: &PackedRecord) -> Result<CallToolResponse, ErrorData> {
        if existing.call_fingerprint() != Some(self.fingerprint.as_str()) {
            return Err(ErrorData::invalid_params(
                format!(
                    "the idempotency key (_meta \"{IDEMPOTENCY_KEY_META}\") was already used for \
                     another call (another tool or other arguments); use a new key for a new call"
                ),
                None,
            ));
        }
        Ok(CallToolResponse::Task(CreateTaskResult::new(
            wire_task_packed(existing),
        )))
    }
}
