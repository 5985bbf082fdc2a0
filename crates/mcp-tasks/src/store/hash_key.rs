//! [`HashKey`]: the secret that names tasks in logs, metrics, traces and
//! the admin command, kept in the store (see [`TaskStore::hash_key`](super::TaskStore::hash_key)).
//!
//! A task id is a bearer token: whoever holds it may read and cancel the
//! task, so it never appears where operators look. They see the task's
//! keyed hash instead (`mcp_tasks::server::TaskHasher`), HMAC-SHA256 of the
//! id under this key. The key is what stops anyone matching hashes across
//! deployments or testing a guessed id against a log; it lives in the store
//! so that every replica sharing the store, and `mcp-tasks admin` opening
//! it, compute the same hash for the same task.

use std::fmt;
use std::sync::OnceLock;

use super::StoreError;

/// The length of a [`HashKey`], in bytes.
pub const HASH_KEY_LEN: usize = 32;

/// The secret key of a store's task hashes. Its `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct HashKey([u8; HASH_KEY_LEN]);

impl fmt::Debug for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HashKey(..)")
    }
}

impl HashKey {
    /// A new random key, from the operating system's generator.
    ///
    /// # Errors
    ///
    /// The generator failed.
    pub fn random() -> Result<Self, StoreError> {
        let mut bytes = [0; HASH_KEY_LEN];
        getrandom::fill(&mut bytes)
            .map_err(|err| StoreError::msg(format!("cannot make a task hash key: {err}")))?;
        Ok(Self(bytes))
    }

    /// The key of these bytes.
    pub fn from_bytes(bytes: [u8; HASH_KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; HASH_KEY_LEN] {
        &self.0
    }

    /// The key as lowercase hex, as a store keeps it in text.
    pub fn to_hex(&self) -> String {
        let mut text = String::with_capacity(HASH_KEY_LEN * 2);
        for byte in self.0 {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        text
    }

    /// The key from [`HashKey::to_hex`]'s text.
    ///
    /// # Errors
    ///
    /// The text is not 64 hex digits (a corrupt store).
    pub fn from_hex(text: &str) -> Result<Self, StoreError> {
        let bad = || StoreError::msg("the stored task hash key is not 64 hex digits");
        let text = text.as_bytes();
        if text.len() != HASH_KEY_LEN * 2 {
            return Err(bad());
        }
        let mut bytes = [0; HASH_KEY_LEN];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            let high = digit(pair[0]).ok_or_else(bad)?;
            let low = digit(pair[1]).ok_or_else(bad)?;
            *byte = (high << 4) | low;
        }
        Ok(Self(bytes))
    }

    /// This process's key, made at its first use: the key of a store that
    /// lives only as long as the process (the [`MemoryStore`](super::MemoryStore)).
    ///
    /// # Errors
    ///
    /// The generator failed.
    pub fn per_process() -> Result<Self, StoreError> {
        static KEY: OnceLock<HashKey> = OnceLock::new();
        if let Some(key) = KEY.get() {
            return Ok(key.clone());
        }
        let key = Self::random()?;
        Ok(KEY.get_or_init(|| key).clone())
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::HashKey;

    #[test]
    fn hex_round_trips_and_debug_hides_the_key() {
        let key = HashKey::random().expect("random");
        assert_eq!(HashKey::from_hex(&key.to_hex()).expect("hex"), key);
        assert_eq!(format!("{key:?}"), "HashKey(..)");
        assert!(HashKey::from_hex("zz").is_err());
        assert!(HashKey::from_hex(&"g".repeat(64)).is_err());
        assert_eq!(
            HashKey::per_process().expect("key"),
            HashKey::per_process().expect("key"),
            "one key per process"
        );
    }
}
