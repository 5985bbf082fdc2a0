//! What a store keeps for idempotent creation (see
//! [`crate::idempotency`]): each keyed record holds its *slot* (a hash of
//! its owner and its idempotency key, the name of its entry in the store's
//! key index) and the *fingerprint* of its call (a hash of the tool's name
//! and arguments), so that the runtime tells the same call sent again from
//! another call under the same key. Neither the key nor the arguments are
//! kept in plain sight: a store keys its index by the slot.
//!
//! (A floor below `record.rs`, which keeps a [`KeyedCall`].)
//!
//! [`TaskStore::create_keyed`](super::TaskStore::create_keyed) creates a
//! record unless a record of the same owner holds its slot, atomically;
//! [`TaskStore::find_keyed`](super::TaskStore::find_keyed) reads that
//! record. The index entry lives as long as the record.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::idempotency::IdempotencyKey;

/// The idempotency of one record: its slot and its call's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct KeyedCall {
    pub(super) slot: String,
    pub(super) fingerprint: String,
    /// The call ran synchronously (no task was made of it): the record
    /// keeps its answer for the same call sent again, which gets it as a
    /// result, never as a task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) synchronous: bool,
}

/// The slot of `key` for the owner named `owner`: see
/// [`idempotency_slot`](super::idempotency_slot).
pub(super) fn slot(owner: &str, key: &IdempotencyKey) -> String {
    let mut hash = Sha256::new();
    hash.update(b"mcp-tasks idempotency slot\0");
    hash.update(owner.len().to_be_bytes());
    hash.update(owner.as_bytes());
    hash.update(key.as_str().as_bytes());
    hex(&hash.finalize())
}

/// The fingerprint of a `tools/call`: the hex SHA-256 of the tool's name and
/// arguments as canonical JSON (object keys sorted), so the same call sent
/// again has the same fingerprint whatever the order of its keys.
pub fn call_fingerprint(name: &str, arguments: Option<&serde_json::Map<String, Value>>) -> String {
    let mut hash = Sha256::new();
    hash.update(b"mcp-tasks call fingerprint\0");
    canonical(&mut hash, &Value::String(name.to_owned()));
    match arguments {
        Some(arguments) => canonical_object(&mut hash, arguments),
        None => hash.update(b"null"),
    }
    hex(&hash.finalize())
}

fn canonical(hash: &mut Sha256, value: &Value) {
    match value {
        Value::Object(object) => canonical_object(hash, object),
        Value::Array(items) => {
            hash.update(b"[");
            for item in items {
                canonical(hash, item);
                hash.update(b",");
            }
            hash.update(b"]");
        }
        // Scalars as serde_json writes them (strings escaped): unambiguous.
        scalar => hash.update(scalar.to_string().as_bytes()),
    }
}

fn canonical_object(hash: &mut Sha256, object: &serde_json::Map<String, Value>) {
    let mut fields: Vec<_> = object.iter().collect();
    fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
    hash.update(b"{");
    for (name, value) in fields {
        canonical(hash, &Value::String(name.clone()));
        hash.update(b":");
        canonical(hash, value);
        hash.update(b",");
    }
    hash.update(b"}");
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> serde_json::Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn fingerprints_ignore_key_order_and_tell_calls_apart() {
        let one = object(json!({"a": 1, "b": {"x": [1, "two"], "y": null}}));
        let mut reordered = serde_json::Map::new();
        reordered.insert("b".into(), json!({"y": null, "x": [1, "two"]}));
        reordered.insert("a".into(), json!(1));
        assert_eq!(
            call_fingerprint("t", Some(&one)),
            call_fingerprint("t", Some(&reordered))
        );
        assert_ne!(
            call_fingerprint("t", Some(&one)),
            call_fingerprint("u", Some(&one))
        );
        assert_ne!(
            call_fingerprint("t", Some(&one)),
            call_fingerprint(
                "t",
                Some(&object(json!({"a": 2, "b": {"x": [1, "two"], "y": null}})))
            )
        );
        assert_ne!(
            call_fingerprint("t", None),
            call_fingerprint("t", Some(&serde_json::Map::new()))
        );
        assert_eq!(call_fingerprint("t", None).len(), 64);
    }

    #[test]
    fn slots_hide_and_separate_owner_and_key() {
        let key = IdempotencyKey::new("k-1").expect("key");
        let alice = slot("alice", &key);
        assert_eq!(alice.len(), 64);
        assert!(!alice.contains("alice") && !alice.contains("k-1"));
        assert_ne!(alice, slot("bob", &key));
        // The owner's length is hashed too: "ab" + "c" is not "a" + "bc".
        assert_ne!(
            slot("ab", &IdempotencyKey::new("c").expect("key")),
            slot("a", &IdempotencyKey::new("bc").expect("key"))
        );
    }
}
