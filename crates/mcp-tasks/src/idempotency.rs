//! Idempotent task creation, an extension of this project (not of MCP): a
//! `tools/call` may carry a key in `_meta` under [`IDEMPOTENCY_KEY_META`],
//! and a server of this library that sees the same key again from the same
//! principal, for the same tool and arguments, answers with the task the
//! first call made instead of running the tool again. A server that does
//! not know the key ignores it, as MCP lets it ignore any `_meta` key.
//!
//! The key is chosen by the client (ours makes a fresh random one for each
//! call, see `IdempotencyKey::random`, features `client` or `store`). It is not a secret: it finds
//! a task only for the principal that made it, never anyone else's.
//!
//! A server says it honours the key by declaring [`IDEMPOTENCY_EXTENSION`]
//! among its capabilities' `extensions` (in its `server/discover` or
//! `initialize` answer): every `tools/call` it is sent with a key runs at
//! most once, whether it becomes a task or runs synchronously, and the same
//! call sent again gets the first one's task or result. Our client sends a
//! call whose answer was lost again only to such a server (or when the
//! call provably never left: the connection was refused).

use std::fmt;

use serde_json::Value;

/// The `_meta` key of a `tools/call` that carries its idempotency key
/// (see the [module docs](self) and INTEROP.md).
pub const IDEMPOTENCY_KEY_META: &str = "io.github.mcp-tasks/idempotency-key";

/// The extension a server declares (in its capabilities' `extensions`,
/// with an empty settings object) when it honours [`IDEMPOTENCY_KEY_META`]
/// on every `tools/call`: see the [module docs](self) and INTEROP.md.
pub const IDEMPOTENCY_EXTENSION: &str = "io.github.mcp-tasks/idempotency";

/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// An idempotency key: 1 to 255 printable ASCII characters (space to `~`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

/// Why a value is not an [`IdempotencyKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the idempotency key (_meta \"{IDEMPOTENCY_KEY_META}\") must be a string of 1 to {MAX_IDEMPOTENCY_KEY_LEN} printable ASCII characters"
)]
pub struct InvalidIdempotencyKey(());

impl IdempotencyKey {
    /// The key `key`, if it is 1 to 255 printable ASCII characters.
    ///
    /// # Errors
    ///
    /// It is empty, too long, or holds another character.
    pub fn new(key: impl Into<String>) -> Result<Self, InvalidIdempotencyKey> {
        let key = key.into();
        let printable = key.bytes().all(|byte| (b' '..=b'~').contains(&byte));
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN || !printable {
            return Err(InvalidIdempotencyKey(()));
        }
        Ok(Self(key))
    }

    /// A fresh key: 128 random bits from the operating system, as 32 hex
    /// digits.
    ///
    /// # Errors
    ///
    /// The operating system has no randomness to give.
    #[cfg(any(feature = "client", feature = "store"))]
    pub fn random() -> Result<Self, getrandom::Error> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)?;
        let mut key = String::with_capacity(32);
        for byte in bytes {
            key.push(char::from(HEX[usize::from(byte >> 4)]));
            key.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Ok(Self(key))
    }

    /// The key found in a request's `_meta` under [`IDEMPOTENCY_KEY_META`]:
    /// `Ok(None)` when there is none.
    ///
    /// # Errors
    ///
    /// The value there is not a valid key.
    pub fn from_meta(
        meta: &serde_json::Map<String, Value>,
    ) -> Result<Option<Self>, InvalidIdempotencyKey> {
        match meta.get(IDEMPOTENCY_KEY_META) {
            None => Ok(None),
            Some(Value::String(key)) => Self::new(key.as_str()).map(Some),
            Some(_) => Err(InvalidIdempotencyKey(())),
        }
    }

    /// The key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for IdempotencyKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for IdempotencyKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        Self::new(key).map_err(serde::de::Error::custom)
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey({:?})", self.0)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_printable_ascii_of_1_to_255_bytes() {
        assert!(IdempotencyKey::new("a").is_ok());
        assert!(IdempotencyKey::new(" ~").is_ok());
        assert!(IdempotencyKey::new("k".repeat(255)).is_ok());
        assert!(IdempotencyKey::new("").is_err());
        assert!(IdempotencyKey::new("k".repeat(256)).is_err());
        assert!(IdempotencyKey::new("tab\there").is_err());
        assert!(IdempotencyKey::new("é").is_err());
        let meta = |value: Value| {
            let Value::Object(map) = json!({ IDEMPOTENCY_KEY_META: value }) else {
                unreachable!()
            };
            map
        };
        assert_eq!(
            IdempotencyKey::from_meta(&meta(json!("k1"))).expect("valid"),
            Some(IdempotencyKey::new("k1").expect("valid"))
        );
        assert!(IdempotencyKey::from_meta(&meta(json!(7))).is_err());
        assert_eq!(
            IdempotencyKey::from_meta(&serde_json::Map::new()).expect("none"),
            None
        );
        let message = InvalidIdempotencyKey(()).to_string();
        assert!(message.contains(IDEMPOTENCY_KEY_META), "{message}");
    }

    #[cfg(any(feature = "client", feature = "store"))]
    #[test]
    fn random_keys_differ_and_are_valid() {
        let one = IdempotencyKey::random().expect("random");
        let two = IdempotencyKey::random().expect("random");
        assert_ne!(one, two);
        assert_eq!(one.as_str().len(), 32);
        assert!(IdempotencyKey::new(one.as_str()).is_ok());
    }
}
