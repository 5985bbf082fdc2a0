//! [`TaskHasher`]: the name of a task wherever an operator looks (logs,
//! metrics, traces, the admin command's tables), which is never its id.
//!
//! A task id is a bearer token: whoever holds it may read the task's
//! result and cancel it, so writing it into a log or a span hands the task
//! to everyone who reads them. The id is random, so a plain hash of it
//! would give nothing away either; but it would be the same in every
//! deployment and anyone holding an id could find its task in a log shared
//! with them. The hash is keyed (HMAC-SHA256 under the store's
//! [`HashKey`]) so only someone with access to the store (a replica, or
//! `mcp-tasks admin hash ID`) can compute which hash an id has. The key
//! lives in the store (see [`TaskStore::hash_key`](crate::store::TaskStore::hash_key))
//! so every replica sharing it names a task the same way.
//!
//! A hash reads `th_` and 32 lowercase hex digits (128 bits of the HMAC):
//! the prefix says what it is, the fixed length lets a log be searched.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::store::HashKey;
use crate::task::TaskId;

/// What every task hash begins with.
pub const TASK_HASH_PREFIX: &str = "th_";

/// The length of a task hash, its prefix included.
pub const TASK_HASH_LEN: usize = TASK_HASH_PREFIX.len() + 32;

/// Computes the keyed hash that names a task in logs, metrics and traces.
/// Cheap to clone; its `Debug` does not print the key.
#[derive(Clone)]
pub struct TaskHasher {
    mac: Hmac<Sha256>,
}

impl fmt::Debug for TaskHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TaskHasher(..)")
    }
}

impl TaskHasher {
    /// The hasher of a store's key.
    pub fn new(key: &HashKey) -> Self {
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        Self { mac }
    }

    /// The task's hash: `th_` and 32 hex digits.
    pub fn hash(&self, id: &TaskId) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut mac = self.mac.clone();
        mac.update(id.expose().as_bytes());
        let digest = mac.finalize().into_bytes();
        let mut text = String::with_capacity(TASK_HASH_LEN);
        text.push_str(TASK_HASH_PREFIX);
        for byte in &digest[..16] {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        text
    }

    /// Whether `text` has the form of a task hash (not whether any task has it).
    pub fn is_hash(text: &str) -> bool {
        text.len() == TASK_HASH_LEN
            && text.starts_with(TASK_HASH_PREFIX)
            && text[TASK_HASH_PREFIX.len()..]
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    }
}

#[cfg(test)]
mod tests {
    use super::{TASK_HASH_LEN, TaskHasher};
    use crate::store::HashKey;
    use crate::task::TaskId;

    #[test]
    fn a_hash_is_keyed_fixed_and_hides_the_id() {
        let id = TaskId::new("0190b3c2d4e5aabbccddeeff00112233");
        let one = TaskHasher::new(&HashKey::from_bytes([1; 32]));
        let other = TaskHasher::new(&HashKey::from_bytes([2; 32]));
        let hash = one.hash(&id);
        assert_eq!(hash.len(), TASK_HASH_LEN);
        assert!(TaskHasher::is_hash(&hash), "{hash}");
        let copy = one.clone();
        assert_eq!(hash, one.hash(&id), "stable");
        assert_eq!(hash, copy.hash(&id), "a clone hashes alike");
        assert_ne!(hash, other.hash(&id), "another key, another hash");
        assert_ne!(hash, one.hash(&TaskId::new("another")));
        assert!(!hash.contains(id.expose()));
        assert_eq!(format!("{one:?}"), "TaskHasher(..)");
        assert!(!TaskHasher::is_hash("th_xyz"));
        // HMAC-SHA256 (RFC 4231 test case 2's key and data, truncated).
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let rfc = TaskHasher::new(&HashKey::from_bytes(key));
        assert_eq!(
            rfc.hash(&TaskId::new("what do ya want for nothing?")),
            "th_5bdcc146bf60754e6a042426089575c7"
        );
    }
}
