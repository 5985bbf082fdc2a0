//! An issuer's signing keys (its JWKS), cached: a request whose key is
//! cached never waits on the authorization server; an unknown key id
//! fetches the set again, at most once per refetch interval and one fetch
//! at a time, so that a flood of tokens with made-up key ids costs the
//! authorization server one request per interval; a set older than its
//! maximum age is fetched again in the background.
//!
//! The keys are read with jsonwebtoken's [`Jwk`] and [`DecodingKey`]; a key
//! that it cannot read, an encryption key (`use: enc`) and a symmetric key
//! (`kty: oct`, which a public key set must never hold) are left out.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use tokio::time::Instant;

use super::fetch::get_json;

/// One signing key and the algorithms it may verify.
pub(super) struct Key {
    pub(super) kid: Option<String>,
    pub(super) algorithms: Vec<Algorithm>,
    pub(super) decoding: DecodingKey,
}

/// The keys of one fetch.
struct KeySet {
    keys: Vec<Arc<Key>>,
    fetched: Instant,
}

/// An issuer's cached keys.
pub(super) struct IssuerKeys {
    jwks_uri: String,
    client: reqwest::Client,
    refetch_interval: Duration,
    max_age: Duration,
    set: RwLock<Arc<KeySet>>,
    /// Held while fetching (one fetch at a time); holds when the last fetch
    /// since the first was tried.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

/// The JSON of a key set, each key read on its own (one key that
/// jsonwebtoken cannot read does not hide the others).
#[derive(Deserialize)]
struct RawSet {
    keys: Vec<serde_json::Value>,
}

impl IssuerKeys {
    /// Fetches the keys at `jwks_uri` once, or says why not.
    pub(super) async fn fetch_first(
        jwks_uri: String,
        client: reqwest::Client,
        refetch_interval: Duration,
        max_age: Duration,
    ) -> Result<Self, String> {
        let keys = fetch(&client, &jwks_uri).await?;
        let now = Instant::now();
        Ok(Self {
            jwks_uri,
            client,
            refetch_interval,
            max_age,
            set: RwLock::new(Arc::new(KeySet { keys, fetched: now })),
            // The first unknown key id may fetch at once: a rotation just
            // after start is not refused for a refetch interval.
            fetching: tokio::sync::Mutex::new(None),
        })
    }

    /// How many keys are cached.
    pub(super) fn len(&self) -> usize {
        self.current().keys.len()
    }

    fn current(&self) -> Arc<KeySet> {
        Arc::clone(&self.set.read().unwrap_or_else(|poison| poison.into_inner()))
    }

    /// The keys that may have signed a token with key id `kid` and `alg`:
    /// from the cache when it has any; else after fetching the set again
    /// if the refetch interval allows.
    pub(super) async fn candidates(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Vec<Arc<Key>> {
        let set = self.current();
        let found = matching(&set.keys, kid, alg);
        if !found.is_empty() {
            if set.fetched.elapsed() >= self.max_age {
                self.refresh_in_background();
            }
            return found;
        }
        self.refetch_after(&set).await;
        matching(&self.current().keys, kid, alg)
    }

    /// Fetches the set again unless another fetch replaced `seen` meanwhile,
    /// or the last fetch was less than the refetch interval ago.
    async fn refetch_after(&self, seen: &Arc<KeySet>) {
        let mut last = self.fetching.lock().await;
        if !Arc::ptr_eq(seen, &self.current()) {
            return;
        }
        if last.is_some_and(|at| at.elapsed() < self.refetch_interval) {
            return;
        }
        *last = Some(Instant::now());
        self.fetch_and_store().await;
    }

    fn refresh_in_background(self: &Arc<Self>) {
        let keys = Arc::clone(self);
        tokio::spawn(async move {
            // Someone fetching already: nothing to do.
            let Ok(mut last) = keys.fetching.try_lock() else {
                return;
            };
            if last.is_some_and(|at| at.elapsed() < keys.refetch_interval) {
                return;
            }
            *last = Some(Instant::now());
            keys.fetch_and_store().await;
        });
    }

    async fn fetch_and_store(&self) {
        let fetched = fetch(&self.client, &self.jwks_uri).await;
        crate::telemetry::metrics::oauth_key_fetch(fetched.is_ok());
        match fetched {
            Ok(keys) => {
                tracing::debug!(keys = keys.len(), "fetched an OAuth issuer's keys");
                *self
                    .set
                    .write()
                    .unwrap_or_else(|poison| poison.into_inner()) = Arc::new(KeySet {
                    keys,
                    fetched: Instant::now(),
                });
            }
            Err(reason) => {
                // The cached keys stay: a provider down for a while does not
                // refuse tokens signed with keys it published before.
                tracing::warn!(
                    jwks_uri = self.jwks_uri.as_str(),
                    reason = reason.as_str(),
                    "cannot fetch an OAuth issuer's keys; the cached ones stay"
                );
            }
        }
    }
}

/// The cached keys for `kid` (any key when the token names none) that may
/// verify `alg`.
fn matching(keys: &[Arc<Key>], kid: Option<&str>, alg: Algorithm) -> Vec<Arc<Key>> {
    keys.iter()
        .filter(|key| kid.is_none() || key.kid.as_deref() == kid)
        .filter(|key| key.algorithms.contains(&alg))
        .cloned()
        .collect()
}

/// Fetches and reads the key set at `url`.
async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<Arc<Key>>, String> {
    let raw: RawSet = get_json(client, url)
        .await
        .map_err(|error| error.reason())?;
    Ok(raw.keys.iter().filter_map(read_key).map(Arc::new).collect())
}

/// One key of a set, if it is a public signing key jsonwebtoken can use.
fn read_key(value: &serde_json::Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(value.clone()).ok()?;
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let by_type = algorithms_of(&jwk.algorithm);
    let algorithms = match jwk.common.key_algorithm {
        Some(declared) => {
            let declared = signing_algorithm(declared)?;
            by_type.contains(&declared).then(|| vec![declared])?
        }
        None => by_type,
    };
    if algorithms.is_empty() {
        return None;
    }
    let decoding = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id,
        algorithms,
        decoding,
    })
}

/// The asymmetric algorithms a key of this type may verify.
fn algorithms_of(parameters: &AlgorithmParameters) -> Vec<Algorithm> {
    match parameters {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => Vec::new(),
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            _ => Vec::new(),
        },
        // Symmetric keys never verify a token here; others are unknown.
        _ => Vec::new(),
    }
}

/// The signature algorithm a key's `alg` names, if it is an asymmetric one.
fn signing_algorithm(declared: KeyAlgorithm) -> Option<Algorithm> {
    Some(match declared {
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_signing_keys_are_kept() {
        let ec = serde_json::json!({
            "kty": "EC", "crv": "P-256", "kid": "a", "use": "sig",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
        });
        let key = read_key(&ec).expect("an EC P-256 signing key");
        assert_eq!(key.kid.as_deref(), Some("a"));
        assert_eq!(key.algorithms, [Algorithm::ES256]);
        let mut enc = ec.clone();
        enc["use"] = "enc".into();
        assert!(read_key(&enc).is_none(), "an encryption key");
        let mut mismatched = ec;
        mismatched["alg"] = "RS256".into();
        assert!(read_key(&mismatched).is_none(), "alg RS256 on an EC key");
        let oct = serde_json::json!({"kty": "oct", "k": "c2VjcmV0", "kid": "s"});
        assert!(read_key(&oct).is_none(), "a symmetric key");
        let oct_hs = serde_json::json!({"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"});
        assert!(
            read_key(&oct_hs).is_none(),
            "a symmetric key with alg HS256"
        );
        assert!(read_key(&serde_json::json!({"kty": "nope"})).is_none());
    }
}
