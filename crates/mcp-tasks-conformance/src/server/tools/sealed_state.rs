//! The sealed MRTR `requestState` of the diagnostic tools of
//! [`super::diagnostics`]: rmcp's [`RequestStateCodec`] (HMAC-SHA256,
//! cargo feature `request-state` of rmcp) under a per-process random key.
//!
//! The client echoes `requestState` back, so on a retry it is
//! attacker-controlled input (SEP-2322). A state is sealed with
//! [`SealOptions`]: a TTL of [`LIFETIME`], and associated data that is
//! authenticated but not stored in the state: the principal (as the task
//! runtime derives it), the tool's name and a canonical form of its
//! arguments ([`Binding`]). So a state only opens for the same caller and
//! the same call, unmodified, before it expires; states die with the
//! process.
//!
//! A state that does not open is -32602 with one message, whatever the
//! reason (tampered, forged, expired, another call), as rmcp asks of
//! applications that open its states.
//!
//! The payload is signed, not encrypted: no secrets go in it.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{JsonObject, RequestStateCodec, SealOptions};
use serde_json::Value;

/// How long a sealed state can be echoed back.
const LIFETIME: Duration = Duration::from_secs(600);

/// The length of the random key, in bytes.
const KEY_LENGTH: usize = 32;

const _: () = assert!(KEY_LENGTH >= RequestStateCodec::MIN_KEY_LENGTH);

/// Seals and opens the diagnostics' states with one random key. Clones of
/// a server share it, so it lives as long as the process serves.
#[derive(Debug)]
pub(crate) struct RequestStates {
    codec: RequestStateCodec,
    lifetime: Duration,
}

impl RequestStates {
    /// A codec with a fresh key from the operating system's randomness.
    pub(crate) fn new() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; KEY_LENGTH];
        getrandom::fill(&mut key)?;
        Ok(Self {
            // The length is checked at compile time above.
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            lifetime: LIFETIME,
        })
    }

    /// Seals `data` into a state bound to `binding` that expires after
    /// [`LIFETIME`].
    pub(crate) fn seal(&self, binding: &Binding, data: &Value) -> Result<String, ErrorData> {
        let options = SealOptions::new()
            .associated_data(&binding.0)
            .ttl(self.lifetime);
        self.codec.seal_json_with(data, &options).map_err(|error| {
            ErrorData::internal_error(format!("cannot seal the requestState: {error}"), None)
        })
    }

    /// Opens a state sealed by [`RequestStates::seal`] for `binding` and
    /// returns its data; anything else is -32602.
    pub(crate) fn open(&self, binding: &Binding, state: &str) -> Result<Value, ErrorData> {
        self.codec.open_json_with(state, &binding.0).map_err(|_| {
            ErrorData::invalid_params(
                "requestState did not verify: it was modified, forged, has expired \
                     or was issued for another call; call the tool again without it",
                None,
            )
        })
    }
}

/// What a state is bound to: the associated data of its seal.
#[derive(Debug, Clone)]
pub(crate) struct Binding(Vec<u8>);

impl Binding {
    /// Binds to `principal` calling `tool` with `arguments` (compared in a
    /// canonical form, so the order of object keys does not matter). Each
    /// part is length-prefixed, so parts cannot run into each other.
    pub(crate) fn new(principal: &str, tool: &str, arguments: &JsonObject) -> Self {
        let mut canonical_arguments = String::new();
        canonical(&Value::Object(arguments.clone()), &mut canonical_arguments);
        let mut data = Vec::new();
        for part in [principal, tool, &canonical_arguments] {
            data.extend_from_slice(part.len().to_string().as_bytes());
            data.push(b':');
            data.extend_from_slice(part.as_bytes());
        }
        Self(data)
    }
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

#[cfg(test)]
pub(crate) mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    /// `state` with its sealed JSON payload rewritten by `edit` and its tag
    /// kept, as a client that modifies a state would send it. rmcp's `rs1`
    /// format is `rs1.BODY.TAG`, BODY being base64url of an 8-byte expiry
    /// and the payload.
    pub(crate) fn rewritten(state: &str, edit: impl Fn(&str) -> String) -> String {
        let parts: Vec<&str> = state.split('.').collect();
        assert_eq!(parts.len(), 3, "an rs1 state: {state}");
        let body = URL_SAFE_NO_PAD.decode(parts[1]).expect("base64url");
        let (expiry, payload) = body.split_at(8);
        let payload = std::str::from_utf8(payload).expect("JSON");
        let edited = edit(payload);
        assert_ne!(edited, payload, "the edit must change the payload");
        let mut body = expiry.to_vec();
        body.extend_from_slice(edited.as_bytes());
        format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(body), parts[2])
    }

    #[test]
    fn a_sealed_state_opens_for_its_binding_only() {
        let states = RequestStates::new().unwrap();
        let arguments = object(json!({"a": 1, "b": [true, {"c": "d"}]}));
        let binding = Binding::new("process", "tool", &arguments);
        let state = states
            .seal(&binding, &json!({"step": 2, "name": "Alice"}))
            .unwrap();
        assert!(state.starts_with("rs1."), "{state}");
        assert_eq!(
            states.open(&binding, &state).unwrap(),
            json!({"step": 2, "name": "Alice"})
        );
        // The same arguments in another key order are the same call.
        let reordered = object(json!({"b": [true, {"c": "d"}], "a": 1}));
        let same = Binding::new("process", "tool", &reordered);
        assert!(states.open(&same, &state).is_ok());
        // Another principal, tool or arguments: refused.
        for other in [
            Binding::new("http:anonymous", "tool", &arguments),
            Binding::new("process", "other", &arguments),
            Binding::new("process", "tool", &object(json!({"a": 2}))),
            // Length-prefixed parts do not run together.
            Binding::new("processt", "ool", &arguments),
        ] {
            let error = states.open(&other, &state).unwrap_err();
            assert_eq!(error.code.0, -32602);
        }
    }

    #[test]
    fn a_modified_or_forged_state_is_refused() {
        let states = RequestStates::new().unwrap();
        let binding = Binding::new("process", "tool", &JsonObject::new());
        let state = states.seal(&binding, &json!({"answers": {}})).unwrap();
        // Sealed by another process (another key), for the same call.
        let foreign = RequestStates::new()
            .unwrap()
            .seal(&binding, &json!({"answers": {}}))
            .unwrap();
        for bad in [
            format!("{state}-TAMPERED"),
            state.replacen("rs1", "rs2", 1),
            rewritten(&state, |payload| payload.replace("answers", "answerz")),
            rewritten(&state, |_| r#"{"answers":{"x":1}}"#.to_owned()),
            foreign,
            String::new(),
            "opaque".to_owned(),
            "rs1..".to_owned(),
        ] {
            let error = states.open(&binding, &bad).unwrap_err();
            assert_eq!(error.code.0, -32602, "{bad}");
            assert!(
                error.message.contains("did not verify"),
                "{}",
                error.message
            );
        }
    }

    #[test]
    fn an_expired_state_is_refused() {
        let binding = Binding::new("process", "tool", &JsonObject::new());
        let mut states = RequestStates::new().unwrap();
        assert_eq!(states.lifetime, Duration::from_secs(600));
        let fresh = states.seal(&binding, &json!(1)).unwrap();
        states.lifetime = Duration::from_millis(1);
        let state = states.seal(&binding, &json!(1)).unwrap();
        // rmcp stamps and checks expiry with the wall clock.
        std::thread::sleep(Duration::from_millis(20));
        let error = states.open(&binding, &state).unwrap_err();
        assert_eq!(error.code.0, -32602);
        assert_eq!(states.open(&binding, &fresh).unwrap(), json!(1));
    }
}
