//! Sealed MRTR `requestState` for the diagnostic tools of
//! [`super::diagnostics`].
//!
//! The client echoes `requestState` back, so on a retry it is
//! attacker-controlled input (DIGEST §1.7). A sealed state is
//! `mcp-tasks-rs1.TAG.PAYLOAD`: `PAYLOAD` is the JSON `{"exp": MS, "data":
//! ...}` and `TAG` a 128-bit MAC over the payload and a binding that is not
//! stored in the state: the principal (as the task runtime derives it), the
//! tool's name and its arguments. So a state only opens for the same caller
//! and the same call, unmodified, before it expires (10 minutes).
//!
//! The MAC is SipHash keyed with the per-process random key of std's
//! [`RandomState`] (two domain-separated 64-bit outputs): a keyed PRF made
//! for short inputs, with no dependency beyond std. States die with the
//! process. rmcp's `RequestStateCodec` (HMAC-SHA256, behind its
//! `request-state` feature) could replace this module the day the crate
//! enables that feature.
//!
//! The payload is signed, not encrypted: no secrets go in it.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData;
use rmcp::model::JsonObject;
use serde_json::{Value, json};

/// The prefix of every sealed state, naming the format.
const PREFIX: &str = "mcp-tasks-rs1";

/// How long a sealed state can be echoed back.
const LIFETIME: Duration = Duration::from_secs(600);

/// The per-process MAC key: std draws it from the OS's randomness.
static KEY: LazyLock<RandomState> = LazyLock::new(RandomState::new);

/// What a state is bound to, besides its own payload.
#[derive(Debug, Clone)]
pub(super) struct Binding {
    context: String,
}

impl Binding {
    /// Binds to `principal` calling `tool` with `arguments` (compared in a
    /// canonical form, so the order of object keys does not matter).
    pub(super) fn new(principal: &str, tool: &str, arguments: &JsonObject) -> Self {
        let mut context = String::new();
        for part in [principal, tool] {
            context.push_str(&part.len().to_string());
            context.push(':');
            context.push_str(part);
        }
        canonical(&Value::Object(arguments.clone()), &mut context);
        Self { context }
    }

    /// Seals `data` into a state that expires after [`LIFETIME`].
    pub(super) fn seal(&self, data: &Value) -> String {
        self.seal_at(data, now_ms().saturating_add(millis(LIFETIME)))
    }

    fn seal_at(&self, data: &Value, expires_ms: u64) -> String {
        let payload = json!({"exp": expires_ms, "data": data}).to_string();
        format!("{PREFIX}.{}.{payload}", self.tag(&payload))
    }

    /// Opens a state sealed by [`Binding::seal`] for this binding and
    /// returns its data; anything forged, modified, sealed for another
    /// binding or expired is -32602.
    pub(super) fn open(&self, state: &str) -> Result<Value, ErrorData> {
        let tampered = || {
            ErrorData::invalid_params(
                "requestState failed its integrity check: it was modified, forged \
                 or issued for another call",
                None,
            )
        };
        let mut parts = state.splitn(3, '.');
        let (Some(PREFIX), Some(tag), Some(payload)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(tampered());
        };
        if !same(tag.as_bytes(), self.tag(payload).as_bytes()) {
            return Err(tampered());
        }
        // Authentic from here on: it is our own JSON.
        let mut payload: Value = serde_json::from_str(payload).map_err(|_| tampered())?;
        let expires = payload.get("exp").and_then(Value::as_u64).unwrap_or(0);
        if now_ms() > expires {
            return Err(ErrorData::invalid_params(
                "requestState has expired: call the tool again without it",
                None,
            ));
        }
        Ok(payload
            .get_mut("data")
            .map(Value::take)
            .unwrap_or(Value::Null))
    }

    fn tag(&self, payload: &str) -> String {
        let first = KEY.hash_one((1u8, &self.context, payload));
        let second = KEY.hash_one((2u8, &self.context, payload));
        format!("{first:016x}{second:016x}")
    }
}

/// Compares two tags in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Writes `value` as JSON with object keys sorted, whatever the map's order.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&object[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(millis)
        .unwrap_or(0)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    #[test]
    fn a_sealed_state_opens_for_its_binding_only() {
        let arguments = object(json!({"a": 1, "b": [true, {"c": "d"}]}));
        let binding = Binding::new("process", "tool", &arguments);
        let state = binding.seal(&json!({"step": 2, "name": "Alice"}));
        assert!(state.starts_with("mcp-tasks-rs1."), "{state}");
        assert_eq!(
            binding.open(&state).unwrap(),
            json!({"step": 2, "name": "Alice"})
        );
        // The same arguments in another key order are the same call.
        let reordered = object(json!({"b": [true, {"c": "d"}], "a": 1}));
        assert!(
            Binding::new("process", "tool", &reordered)
                .open(&state)
                .is_ok()
        );
        // Another principal, tool or arguments: refused.
        for other in [
            Binding::new("http:anonymous", "tool", &arguments),
            Binding::new("process", "other", &arguments),
            Binding::new("process", "tool", &object(json!({"a": 2}))),
            // Length-prefixed parts do not run together.
            Binding::new("processt", "ool", &arguments),
        ] {
            let error = other.open(&state).unwrap_err();
            assert_eq!(error.code.0, -32602);
        }
    }

    #[test]
    fn a_modified_or_forged_state_is_refused() {
        let binding = Binding::new("process", "tool", &JsonObject::new());
        let state = binding.seal(&json!({"answers": {}}));
        let forged_payload = {
            let (head, _) = state.rsplit_once('.').unwrap();
            format!(
                "{head}.{}",
                json!({"exp": u64::MAX, "data": {"answers": {"x": 1}}})
            )
        };
        for bad in [
            format!("{state}-TAMPERED"),
            state.replacen("mcp-tasks-rs1", "mcp-tasks-rs2", 1),
            state.replace("answers", "answerz"),
            forged_payload,
            String::new(),
            "opaque".to_owned(),
            "mcp-tasks-rs1..{}".to_owned(),
        ] {
            let error = binding.open(&bad).unwrap_err();
            assert_eq!(error.code.0, -32602, "{bad}");
            assert!(error.message.contains("integrity"), "{}", error.message);
        }
    }

    #[test]
    fn an_expired_state_is_refused() {
        let binding = Binding::new("process", "tool", &JsonObject::new());
        let state = binding.seal_at(&json!(1), now_ms() - 1);
        let error = binding.open(&state).unwrap_err();
        assert_eq!(error.code.0, -32602);
        assert!(error.message.contains("expired"), "{}", error.message);
        let fresh = binding.seal_at(&json!(1), now_ms() + 60_000);
        assert_eq!(binding.open(&fresh).unwrap(), json!(1));
    }
}
