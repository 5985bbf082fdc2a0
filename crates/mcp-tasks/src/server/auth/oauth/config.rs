//! What a resource server accepts: [`OAuthConfig`], and why one cannot be
//! set up ([`OAuthSetupError`]).

use std::fmt;
use std::time::Duration;

/// The clock skew allowed on `exp` and `nbf` by default.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

/// The least time between two fetches of an issuer's keys caused by tokens
/// whose key is unknown, by default: a flood of such tokens costs the
/// authorization server at most one fetch in this time.
pub const DEFAULT_KEY_REFETCH_INTERVAL: Duration = Duration::from_secs(10);

/// How old an issuer's key set may grow before it is fetched again in the
/// background (requests go on with the cached keys meanwhile), by default.
pub const DEFAULT_KEYS_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// How long one fetch from an authorization server (its metadata, its keys,
/// an introspection) may take, by default.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// What an OAuth 2.1 resource server accepts: access tokens issued for
/// `audience` by one of the issuers, carrying every required scope. Built
/// into an [`OAuthResourceServer`](super::OAuthResourceServer) by
/// [`OAuthResourceServer::discover`](super::OAuthResourceServer::discover).
///
/// ```
/// use mcp_tasks::server::oauth::OAuthConfig;
///
/// let config = OAuthConfig::new("https://tasks.example.com/mcp")
///     .with_issuer("https://login.example.com")
///     .with_scopes(["tasks"]);
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct OAuthConfig {
    pub(super) audience: String,
    pub(super) issuers: Vec<String>,
    pub(super) scopes: Vec<String>,
    pub(super) introspection: Option<(String, String)>,
    pub(super) leeway: Duration,
    pub(super) key_refetch_interval: Duration,
    pub(super) keys_max_age: Duration,
    pub(super) fetch_timeout: Duration,
    pub(super) resource_name: String,
}

impl fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("audience", &self.audience)
            .field("issuers", &self.issuers)
            .field("scopes", &self.scopes)
            .field(
                "introspection_client",
                &self.introspection.as_ref().map(|(id, _)| id),
            )
            .field("leeway", &self.leeway)
            .finish_non_exhaustive()
    }
}

impl OAuthConfig {
    /// Accepts tokens whose `aud` names `audience`: the server's canonical
    /// URI (`https://tasks.example.com/mcp`), which MCP clients send as the
    /// `resource` of their token requests (RFC 8707), and which the
    /// protected resource metadata publishes as `resource`.
    pub fn new(audience: impl Into<String>) -> Self {
        Self {
            audience: audience.into(),
            issuers: Vec::new(),
            scopes: Vec::new(),
            introspection: None,
            leeway: DEFAULT_LEEWAY,
            key_refetch_interval: DEFAULT_KEY_REFETCH_INTERVAL,
            keys_max_age: DEFAULT_KEYS_MAX_AGE,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            resource_name: "mcp-tasks".to_owned(),
        }
    }

    /// Accepts tokens of the authorization server `issuer` (its issuer
    /// identifier, `https://login.example.com`); at least one is needed.
    /// Its metadata is found per RFC 8414 or OpenID Connect Discovery.
    pub fn with_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuers.push(issuer.into());
        self
    }

    /// Requires every one of `scopes` on every request (none by default); a
    /// token without one of them gets HTTP 403 `insufficient_scope`.
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Checks tokens that are not JWTs (opaque tokens) by RFC 7662
    /// introspection at each issuer's `introspection_endpoint`, as the
    /// client `client_id` with `client_secret` (HTTP Basic). Without it,
    /// only JWT access tokens are accepted.
    pub fn with_introspection(
        mut self,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        self.introspection = Some((client_id.into(), client_secret.into()));
        self
    }

    /// The clock skew allowed on `exp` and `nbf` (default [`DEFAULT_LEEWAY`]).
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// The least time between two fetches of an issuer's keys caused by an
    /// unknown key id (default [`DEFAULT_KEY_REFETCH_INTERVAL`]).
    pub fn with_key_refetch_interval(mut self, interval: Duration) -> Self {
        self.key_refetch_interval = interval;
        self
    }

    /// How old the cached keys may grow before a background fetch (default
    /// [`DEFAULT_KEYS_MAX_AGE`]).
    pub fn with_keys_max_age(mut self, age: Duration) -> Self {
        self.keys_max_age = age;
        self
    }

    /// How long one fetch from an authorization server may take (default
    /// [`DEFAULT_FETCH_TIMEOUT`]).
    pub fn with_fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// The `resource_name` of the protected resource metadata (default
    /// `mcp-tasks`).
    pub fn with_resource_name(mut self, name: impl Into<String>) -> Self {
        self.resource_name = name.into();
        self
    }

    /// The audience tokens must name.
    pub fn audience(&self) -> &str {
        &self.audience
    }
}

/// Why an [`OAuthResourceServer`](super::OAuthResourceServer) could not be
/// set up. No message holds a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthSetupError {
    /// No issuer was given.
    #[error("no OAuth issuer is configured: give at least one")]
    NoIssuer,
    /// The audience is not an absolute `http(s)` URI.
    #[error("the OAuth audience {0:?} is not an absolute http:// or https:// URI")]
    Audience(String),
    /// An issuer is not a URL this server may use: `https://`, or
    /// `http://` on a loopback host only (OAuth 2.1 requires TLS).
    #[error(
        "the OAuth issuer {0:?} is not an https:// URL (http:// is allowed on a loopback host only)"
    )]
    Issuer(String),
    /// A required scope is empty or has a character a scope cannot have.
    #[error("the OAuth scope {0:?} is not a scope token (RFC 6749 §3.3)")]
    Scope(String),
    /// An issuer's metadata could not be fetched or read.
    #[error("cannot read the metadata of the OAuth issuer {issuer}: {reason}")]
    Metadata {
        /// The issuer.
        issuer: String,
        /// What went wrong, with every address tried.
        reason: String,
    },
    /// An issuer's key set could not be fetched or read.
    #[error("cannot read the keys of the OAuth issuer {issuer} at {url}: {reason}")]
    Keys {
        /// The issuer.
        issuer: String,
        /// Its `jwks_uri`.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// Introspection is configured but no issuer has an `introspection_endpoint`.
    #[error("OAuth introspection is configured but no issuer publishes an introspection_endpoint")]
    NoIntrospection,
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client for OAuth: {0}")]
    Client(String),
}

/// Whether `scope` is a scope token (RFC 6749 §3.3: `%x21 / %x23-5B / %x5D-7E`).
pub(super) fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// Checks that `url` is https, or http on a loopback host.
pub(super) fn check_issuer_url(url: &str) -> Result<reqwest::Url, OAuthSetupError> {
    let invalid = || OAuthSetupError::Issuer(url.to_owned());
    let parsed = reqwest::Url::parse(url).map_err(|_| invalid())?;
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if is_loopback(&parsed) => Ok(parsed),
        _ => Err(invalid()),
    }
}

/// Whether the URL's host is a loopback address or `localhost`.
pub(super) fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}
