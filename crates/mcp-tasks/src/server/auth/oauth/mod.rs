//! MCP authorization on the server: an OAuth 2.1 resource server
//! ([`OAuthResourceServer`]) for the Streamable HTTP recipe
//! ([`StreamableHttpServer::with_oauth`]), as MCP's authorization spec
//! describes it.
//!
//! * **Discovery.** The server publishes its protected resource metadata
//!   (RFC 9728) at `/.well-known/oauth-protected-resource` and its
//!   path-suffixed form (`/.well-known/oauth-protected-resource/mcp`),
//!   naming its audience as `resource`, its issuers as
//!   `authorization_servers` and its scopes. A request without a token gets
//!   401 with `WWW-Authenticate: Bearer resource_metadata="..."`, so that a
//!   host finds how to sign its user in by itself.
//! * **Tokens.** A JWT access token (RFC 9068) is accepted when its `iss` is
//!   one of the configured issuers, its signature verifies with a key that
//!   issuer publishes in its JWKS (found through its RFC 8414 or OpenID
//!   metadata) for the token's `alg` (an asymmetric one: never `none`, never
//!   HMAC), its `aud` names this server's audience (RFC 8707: a token meant
//!   for another service is refused, and this server never passes a token
//!   on), and `exp`, `nbf` and `sub` hold, with a leeway for clock skew.
//!   With [`OAuthConfig::with_introspection`], an opaque token is checked by
//!   RFC 7662 introspection. A bad token gets 401 `error="invalid_token"`; a
//!   good one without a required scope 403 `error="insufficient_scope"`
//!   with the scopes needed.
//! * **Who.** The principal of an accepted request is `oauth:` + issuer +
//!   `#` + subject: every token the issuer gives the same user (after a
//!   refresh, on another device) reaches the same tasks, and another user's
//!   never does.
//! * **The authorization server's health.** Keys are cached: a request
//!   whose key is cached never waits on the authorization server, down or
//!   slow. An unknown key id (a rotation) fetches the keys again, at most
//!   once per [`OAuthConfig::with_key_refetch_interval`] (10 s) and one
//!   fetch at a time, so that tokens with made-up key ids cannot flood it.
//!   A JWT found good is remembered (by its SHA-256) until it expires, so
//!   that a busy caller costs one signature check, not one a request.
//!
//! Tokens are never logged, nor put in an error: refusals say what was
//! wrong with a token, never what it was.
//!
//! [`StreamableHttpServer::with_oauth`]: crate::server::transport::http::StreamableHttpServer::with_oauth

mod config;
mod discovery;
mod fetch;
mod introspect;
mod jwt;
mod keys;
mod memo;
mod refusal;
mod verified;

use std::fmt;
use std::sync::Arc;

use http::HeaderMap;

pub use config::{
    DEFAULT_FETCH_TIMEOUT, DEFAULT_KEY_REFETCH_INTERVAL, DEFAULT_KEYS_MAX_AGE, DEFAULT_LEEWAY,
    OAuthConfig, OAuthSetupError,
};
pub use refusal::OAuthRefusal;

use crate::server::auth::principal::Principal;
use config::{check_issuer_url, is_scope_token};
use introspect::Introspector;
use keys::IssuerKeys;
use memo::Memo;
use verified::{Verified, now_secs};

/// The path of the protected resource metadata (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// An OAuth 2.1 resource server: checks access tokens and publishes the
/// protected resource metadata. See the [module docs](self).
pub struct OAuthResourceServer {
    /// The audience, and the same with or without a trailing `/`.
    audiences: Vec<String>,
    scopes: Vec<String>,
    leeway: std::time::Duration,
    issuers: Vec<(String, Arc<IssuerKeys>)>,
    introspection: Option<Introspector>,
    metadata_url: String,
    metadata_paths: Vec<String>,
    metadata: serde_json::Value,
    /// Good JWTs, until they expire.
    remembered: Memo,
}

impl fmt::Debug for OAuthResourceServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthResourceServer")
            .field("audience", &self.audiences[0])
            .field(
                "issuers",
                &self
                    .issuers
                    .iter()
                    .map(|(issuer, _)| issuer)
                    .collect::<Vec<_>>(),
            )
            .field("scopes", &self.scopes)
            .field("introspection", &self.introspection.is_some())
            .finish_non_exhaustive()
    }
}

impl OAuthResourceServer {
    /// Sets up a resource server for `config`: checks it, and fetches each
    /// issuer's metadata and keys. Fails, saying which issuer and address
    /// and why, when one cannot be reached or read.
    pub async fn discover(config: OAuthConfig) -> Result<Self, OAuthSetupError> {
        let audience = reqwest::Url::parse(&config.audience)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or_else(|| OAuthSetupError::Audience(config.audience.clone()))?;
        if config.issuers.is_empty() {
            return Err(OAuthSetupError::NoIssuer);
        }
        if let Some(bad) = config.scopes.iter().find(|scope| !is_scope_token(scope)) {
            return Err(OAuthSetupError::Scope(bad.clone()));
        }
        let http = fetch::client(config.fetch_timeout).map_err(OAuthSetupError::Client)?;
        let mut issuers = Vec::new();
        let mut endpoints = Vec::new();
        for issuer in &config.issuers {
            let url = check_issuer_url(issuer)?;
            let metadata = discovery::discover(&http, issuer, &url).await?;
            if let Some(endpoint) = &metadata.introspection_endpoint {
                endpoints.push((metadata.issuer.clone(), endpoint.clone()));
            }
            match &metadata.jwks_uri {
                Some(jwks_uri) => {
                    let keys = IssuerKeys::fetch_first(
                        jwks_uri.clone(),
                        http.clone(),
                        config.key_refetch_interval,
                        config.keys_max_age,
                    )
                    .await
                    .map_err(|reason| OAuthSetupError::Keys {
                        issuer: issuer.clone(),
                        url: jwks_uri.clone(),
                        reason,
                    })?;
                    tracing::debug!(
                        issuer = metadata.issuer.as_str(),
                        keys = keys.len(),
                        "an OAuth issuer's keys"
                    );
                    issuers.push((metadata.issuer.clone(), Arc::new(keys)));
                }
                None if config.introspection.is_some() => {}
                None => {
                    return Err(OAuthSetupError::Metadata {
                        issuer: issuer.clone(),
                        reason: "it publishes no jwks_uri (configure introspection for its tokens)"
                            .to_owned(),
                    });
                }
            }
        }
        let introspection = match config.introspection {
            Some((client_id, client_secret)) => {
                if endpoints.is_empty() {
                    return Err(OAuthSetupError::NoIntrospection);
                }
                Some(Introspector::new(endpoints, client_id, client_secret, http))
            }
            None => None,
        };
        let trimmed = config.audience.trim_end_matches('/').to_owned();
        let mut audiences = vec![config.audience.clone()];
        for other in [trimmed.clone(), format!("{trimmed}/")] {
            if !audiences.contains(&other) {
                audiences.push(other);
            }
        }
        let suffix = audience.path().trim_end_matches('/');
        let origin = audience.origin().ascii_serialization();
        let metadata_url = format!("{origin}{METADATA_PATH}{suffix}");
        let mut metadata_paths = vec![format!("{METADATA_PATH}{suffix}")];
        if !suffix.is_empty() {
            metadata_paths.push(METADATA_PATH.to_owned());
        }
        let metadata = serde_json::json!({
            "resource": config.audience,
            "authorization_servers": config.issuers,
            "scopes_supported": config.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": config.resource_name,
        });
        Ok(Self {
            audiences,
            scopes: config.scopes,
            leeway: config.leeway,
            issuers,
            introspection,
            metadata_url,
            metadata_paths,
            metadata,
            remembered: Memo::default(),
        })
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> &serde_json::Value {
        &self.metadata
    }

    /// Where the metadata is published, as the challenges name it: the
    /// audience's origin, [`METADATA_PATH`], then the audience's path.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// Whether a request for `path` asks for the metadata (the
    /// path-suffixed form, or the plain one).
    pub fn is_metadata_path(&self, path: &str) -> bool {
        self.metadata_paths.iter().any(|known| known == path)
    }

    /// The scopes every request needs.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The `WWW-Authenticate` value that goes with `refusal`.
    pub fn challenge(&self, refusal: OAuthRefusal) -> String {
        refusal.challenge(&self.metadata_url, &self.scopes)
    }

    /// The principal of the request whose headers are `headers`, or why it
    /// is refused.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, OAuthRefusal> {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Err(OAuthRefusal::NoToken);
        };
        let token = bearer(value.as_bytes()).ok_or(OAuthRefusal::InvalidToken(
            "the Authorization header is not `Bearer` and an access token",
        ))?;
        self.authenticate_token(token).await
    }

    /// The principal of `token`, or why it is refused.
    pub async fn authenticate_token(&self, token: &str) -> Result<Principal, OAuthRefusal> {
        let verified = self.verify(token).await?;
        if self
            .scopes
            .iter()
            .any(|wanted| !verified.scopes.contains(wanted))
        {
            return Err(OAuthRefusal::InsufficientScope);
        }
        Ok(verified.principal)
    }

    async fn verify(&self, token: &str) -> Result<Verified, OAuthRefusal> {
        if jwt::looks_like_jwt(token) {
            let key = Memo::key(token);
            if let Some(answer) = self.remembered.get(&key) {
                return answer;
            }
            let verified = jwt::verify(token, &self.issuers, &self.audiences, self.leeway).await?;
            let left = (verified.expires_at + self.leeway.as_secs()).saturating_sub(now_secs());
            self.remembered.keep(
                key,
                Ok(verified.clone()),
                tokio::time::Instant::now() + std::time::Duration::from_secs(left),
            );
            return Ok(verified);
        }
        match &self.introspection {
            Some(introspector) => {
                introspector
                    .check(token, &self.audiences, self.leeway)
                    .await
            }
            None => Err(OAuthRefusal::InvalidToken(
                "the access token is not a JWT (and this server does not introspect tokens)",
            )),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any
/// case, RFC 6750 §2.1).
fn bearer(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}
