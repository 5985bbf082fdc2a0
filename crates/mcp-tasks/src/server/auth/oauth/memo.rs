//! Answers about tokens kept for a while ([`Memo`]): a good JWT until it
//! expires, an introspection's answer up to a minute. Keyed by the token's
//! SHA-256 (the token itself is never kept), bounded: past
//! [`MAX_KEPT`] answers the memo starts again empty.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::Digest;
use tokio::time::Instant;

use super::refusal::OAuthRefusal;
use super::verified::Verified;

/// The most answers one memo keeps.
pub(super) const MAX_KEPT: usize = 10_000;

/// What a check answered.
pub(super) type Answer = Result<Verified, OAuthRefusal>;

/// Answers kept until a moment each.
#[derive(Default)]
pub(super) struct Memo {
    kept: Mutex<HashMap<[u8; 32], (Answer, Instant)>>,
}

impl Memo {
    /// The key of `token`.
    pub(super) fn key(token: &str) -> [u8; 32] {
        sha2::Sha256::digest(token.as_bytes()).into()
    }

    /// The answer kept for `key`, if it is not past its moment.
    pub(super) fn get(&self, key: &[u8; 32]) -> Option<Answer> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let (answer, until) = kept.get(key)?;
        (Instant::now() < *until).then(|| answer.clone())
    }

    /// Keeps `answer` for `key` until `until`.
    pub(super) fn keep(&self, key: [u8; 32], answer: Answer, until: Instant) {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(key, (answer, until));
    }
}
