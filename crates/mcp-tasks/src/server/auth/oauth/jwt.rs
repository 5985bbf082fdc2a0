//! Checking a JWT access token (RFC 9068) with jsonwebtoken: the issuer
//! named by its `iss` must be one this server trusts, its key one that
//! issuer publishes for its `alg` (so `alg` is pinned to the key: never
//! `none`, never a symmetric one), and `aud`, `exp`, `nbf` and `sub` hold
//! (with the leeway).

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::keys::IssuerKeys;
use super::refusal::OAuthRefusal;
use super::verified::{Verified, principal_of, scopes_of};

/// The claims read from a token that passed.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    exp: u64,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Vec<String>>,
}

/// The one claim read before the signature is checked: which issuer's
/// keys to check it with.
#[derive(Deserialize)]
struct IssuerOnly {
    iss: Option<String>,
}

/// Whether `token` has the shape of a JWS (three parts).
pub(super) fn looks_like_jwt(token: &str) -> bool {
    token.bytes().filter(|&b| b == b'.').count() == 2
}

/// Checks `token` against `issuers` (each with its issuer identifier).
pub(super) async fn verify(
    token: &str,
    issuers: &[(String, Arc<IssuerKeys>)],
    audiences: &[String],
    leeway: Duration,
) -> Result<Verified, OAuthRefusal> {
    let invalid = OAuthRefusal::InvalidToken;
    // `alg: none` and unknown algorithms fail here: jsonwebtoken's header
    // has no such algorithm.
    let header = jsonwebtoken::decode_header(token).map_err(|_| {
        invalid("the access token is not a JWT signed with an algorithm accepted here")
    })?;
    if matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(invalid(
            "the access token is signed with a symmetric algorithm",
        ));
    }
    let unverified: IssuerOnly = jsonwebtoken::dangerous::insecure_decode_claims(token)
        .map_err(|_| invalid("the access token's claims cannot be read"))?;
    let iss = unverified
        .iss
        .ok_or(invalid("the access token has no issuer (iss)"))?;
    let (issuer, keys) = issuers
        .iter()
        .find(|(issuer, _)| *issuer == iss)
        .ok_or(invalid("the access token's issuer is not trusted here"))?;
    let candidates = keys.candidates(header.kid.as_deref(), header.alg).await;
    if candidates.is_empty() {
        return Err(invalid(
            "the access token is signed with a key its issuer does not publish",
        ));
    }
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.leeway = leeway.as_secs();
    validation.validate_nbf = true;
    validation.set_audience(audiences);
    validation.set_issuer(&[issuer]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let mut last = ErrorKind::InvalidSignature;
    for key in candidates {
        match jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation) {
            Ok(data) => {
                let claims = data.claims;
                return Ok(Verified {
                    principal: principal_of(&claims.iss, &claims.sub),
                    scopes: scopes_of(claims.scope.as_deref(), claims.scp.as_deref()),
                    expires_at: claims.exp,
                });
            }
            Err(error) => last = error.into_kind(),
        }
    }
    Err(invalid(match last {
        ErrorKind::ExpiredSignature => "the access token has expired",
        ErrorKind::ImmatureSignature => "the access token is not valid yet (nbf)",
        ErrorKind::InvalidAudience => "the access token is not for this resource (aud)",
        ErrorKind::InvalidIssuer => "the access token's issuer is not trusted here",
        ErrorKind::InvalidSignature => "the access token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => {
            "the access token lacks a required claim (exp, iss, aud or sub)"
        }
        _ => "the access token is not valid",
    }))
}
