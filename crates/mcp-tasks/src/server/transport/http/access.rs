//! Who may reach the endpoint, checked once for every route before anything
//! else: the `Host` (against DNS rebinding), the browser `Origin`, and, when
//! the endpoint has [`BearerTokens`], the caller's token; then, when it is an
//! OAuth resource server (feature `oauth`), the caller's access token
//! ([`Access::authorize`]), unless a token of the file already admitted it.
//!
//! The guard runs [`Access::admit`] first; the serving recipe's fast paths
//! serve a request it admits whatever its host name, exactly as rmcp's
//! service does behind them (which is configured with the same lists, so it
//! never disagrees).
//!
//! The checks read what rmcp reads, the same way: a `Host` (or the URI's
//! authority) compared by name, case-insensitively, and by port when the
//! allowed entry has one; an `Origin` by scheme, name and port (`:*` any
//! port; no port in the entry: any port, as rmcp 3.11 still does; an
//! explicit one against the origin's, or its scheme's default); an empty
//! list of hosts allows any `Host`; an empty list of origins refuses every
//! request that carries one. No `Forwarded` or `X-Forwarded-*` header is
//! read: behind a reverse proxy, have it pass the client's `Host` on
//! (nginx: `proxy_set_header Host $host;`), and nothing else here depends
//! on the client's address or scheme.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use serde_json::Value;

use super::reply::refuse;
use crate::server::auth::principal::Authenticated;
use crate::server::auth::{BearerTokens, Unauthorized};

/// The `Host` names allowed by default: the loopback ones, any port.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// An entry of an allow-list that can never match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidAllowEntry {
    /// Not `name`, `name:port`, `[v6]` or `[v6]:port`.
    #[error("{0:?} is not a host name with an optional port")]
    Host(String),
    /// Not `scheme://host`, `scheme://host:port`, `scheme://host:*` or `null`.
    #[error("{0:?} is not an origin (scheme://host, scheme://host:port, scheme://host:* or null)")]
    Origin(String),
}

/// Checks an entry for [`with_allowed_hosts`](super::StreamableHttpServer::with_allowed_hosts).
///
/// # Errors
///
/// When the entry is not a host name with an optional port.
pub fn validate_allowed_host(entry: &str) -> Result<(), InvalidAllowEntry> {
    let entry = entry.trim();
    let valid = http::uri::Authority::try_from(entry).is_ok_and(|authority| {
        let host = authority.host();
        // What follows the name: nothing, or a port number.
        let rest = entry.get(host.len()..).unwrap_or("");
        !host.is_empty()
            && !entry.contains('@')
            && (rest.is_empty()
                || rest
                    .strip_prefix(':')
                    .is_some_and(|port| port.parse::<u16>().is_ok()))
    });
    if valid {
        Ok(())
    } else {
        Err(InvalidAllowEntry::Host(entry.to_owned()))
    }
}

/// Checks an entry for [`with_allowed_origins`](super::StreamableHttpServer::with_allowed_origins).
///
/// # Errors
///
/// When the entry is not an origin pattern.
pub fn validate_allowed_origin(entry: &str) -> Result<(), InvalidAllowEntry> {
    OriginPattern::parse(entry)
        .map(drop)
        .ok_or_else(|| InvalidAllowEntry::Origin(entry.trim().to_owned()))
}

/// Wraps `router` so that every request needs a bearer token of `tokens`:
/// one without gets HTTP 401 with a JSON-RPC error and `WWW-Authenticate:
/// Bearer`, and one with carries its [`Authenticated`] principal (which
/// [`default_principal`](crate::server::default_principal) returns). For a
/// router of your own; [`with_bearer_tokens`](super::StreamableHttpServer::with_bearer_tokens)
/// does this in the serving recipe.
///
/// ```ignore
/// let router = axum::Router::new().nest_service("/mcp", rmcp_service);
/// let router = mcp_tasks::server::http::require_bearer_tokens(router, Arc::new(tokens));
/// ```
pub fn require_bearer_tokens(router: axum::Router, tokens: Arc<BearerTokens>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(tokens, authenticate))
}

async fn authenticate(
    State(tokens): State<Arc<BearerTokens>>,
    mut request: Request,
    next: Next,
) -> Response {
    match tokens.authenticate(request.headers()) {
        Ok(principal) => {
            request
                .extensions_mut()
                .insert(Authenticated::new(principal));
            next.run(request).await
        }
        Err(why) => unauthorized(why),
    }
}

/// Wraps `router` so that it is an OAuth 2.1 resource server (see
/// [`oauth`](crate::server::auth::oauth)): a `GET` of the protected resource
/// metadata's path is answered with it, and every other request needs an
/// access token `oauth` accepts (401 or 403 with the challenge otherwise);
/// an accepted one carries its [`Authenticated`] principal. For a router of
/// your own; [`with_oauth`](super::StreamableHttpServer::with_oauth) does
/// this in the serving recipe.
///
/// ```ignore
/// let oauth = OAuthResourceServer::discover(OAuthConfig::new(audience).with_issuer(issuer)).await?;
/// let router = mcp_tasks::server::http::require_oauth(router, Arc::new(oauth));
/// ```
#[cfg(feature = "oauth")]
pub fn require_oauth(
    router: axum::Router,
    oauth: Arc<crate::server::auth::oauth::OAuthResourceServer>,
) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(oauth, authorize_oauth))
}

#[cfg(feature = "oauth")]
async fn authorize_oauth(
    State(oauth): State<Arc<crate::server::auth::oauth::OAuthResourceServer>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(metadata) = oauth_metadata(&oauth, &request) {
        return metadata;
    }
    match oauth_admit(&oauth, &mut request).await {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal,
    }
}

/// The protected resource metadata, for a `GET` of its path.
#[cfg(feature = "oauth")]
fn oauth_metadata(
    oauth: &crate::server::auth::oauth::OAuthResourceServer,
    request: &Request,
) -> Option<Response> {
    (request.method() == http::Method::GET && oauth.is_metadata_path(request.uri().path()))
        .then(|| super::reply::plain(StatusCode::OK, oauth.metadata()))
}

/// Checks the request's access token with `oauth` and marks it
/// [`Authenticated`], or answers the refusal.
#[cfg(feature = "oauth")]
async fn oauth_admit(
    oauth: &crate::server::auth::oauth::OAuthResourceServer,
    request: &mut Request,
) -> Result<(), Response> {
    let principal = oauth
        .authenticate(request.headers())
        .await
        .map_err(|refusal| oauth_refused(oauth, refusal))?;
    request
        .extensions_mut()
        .insert(Authenticated::new(principal));
    Ok(())
}

/// The answer to a request OAuth refused: its status, a JSON-RPC error
/// (-32600, or -32603 when the token could not be checked now) and the
/// challenge.
#[cfg(feature = "oauth")]
fn oauth_refused(
    oauth: &crate::server::auth::oauth::OAuthResourceServer,
    refusal: crate::server::auth::oauth::OAuthRefusal,
) -> Response {
    crate::telemetry::metrics::refused("auth");
    let unavailable = refusal.status() == StatusCode::SERVICE_UNAVAILABLE;
    let mut response = refuse(
        refusal.status(),
        if unavailable { -32603 } else { -32600 },
        refusal.description(),
        &Value::Null,
    );
    if let Ok(value) = HeaderValue::try_from(oauth.challenge(refusal)) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    if unavailable {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// The answer to a request that is not authenticated.
pub(super) fn unauthorized(why: Unauthorized) -> Response {
    let mut response = refuse(
        StatusCode::UNAUTHORIZED,
        -32600,
        why.message(),
        &Value::Null,
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(why.challenge()),
    );
    response
}

/// What the guard checks first.
#[derive(Debug, Clone)]
pub(super) struct Access {
    /// Empty: any host.
    hosts: Vec<Authority>,
    /// Empty: no `Origin` at all.
    origins: Vec<OriginPattern>,
    tokens: Option<Arc<BearerTokens>>,
    #[cfg(feature = "oauth")]
    oauth: Option<Arc<crate::server::auth::oauth::OAuthResourceServer>>,
}

impl Access {
    /// Entries that cannot match are left out, with a warning.
    pub(super) fn new(
        hosts: &[String],
        origins: &[String],
        tokens: Option<Arc<BearerTokens>>,
    ) -> Self {
        let hosts = hosts
            .iter()
            .filter_map(|entry| {
                let parsed = Authority::allowed(entry);
                if parsed.is_none() {
                    tracing::warn!(entry = entry.as_str(), "an allowed host that is empty");
                }
                parsed
            })
            .collect();
        let origins = origins
            .iter()
            .filter_map(|entry| {
                let parsed = OriginPattern::parse(entry);
                if parsed.is_none() {
                    tracing::warn!(
                        entry = entry.as_str(),
                        "an allowed origin that cannot match"
                    );
                }
                parsed
            })
            .collect();
        Self {
            hosts,
            origins,
            tokens,
            #[cfg(feature = "oauth")]
            oauth: None,
        }
    }

    /// Also checks OAuth access tokens with `oauth`.
    #[cfg(feature = "oauth")]
    pub(super) fn with_oauth(
        mut self,
        oauth: Option<Arc<crate::server::auth::oauth::OAuthResourceServer>>,
    ) -> Self {
        self.oauth = oauth;
        self
    }

    /// The protected resource metadata, for a `GET` of its path on an
    /// OAuth resource server (after the host and origin checks, without a
    /// token); `None` for every other request.
    #[cfg(feature = "oauth")]
    pub(super) fn metadata(&self, request: &Request) -> Option<Response> {
        let metadata = oauth_metadata(self.oauth.as_ref()?, request)?;
        Some(match self.check_host_and_origin(request) {
            Ok(()) => metadata,
            Err(refusal) => refusal.response(),
        })
    }

    /// On an OAuth resource server, checks the access token of a request
    /// that no token of the file admitted, and marks it [`Authenticated`];
    /// or answers 401, 403 or 503 with the challenge.
    #[cfg(feature = "oauth")]
    pub(super) async fn authorize(&self, request: &mut Request) -> Result<(), Response> {
        let Some(oauth) = &self.oauth else {
            return Ok(());
        };
        if request.extensions().get::<Authenticated>().is_some() {
            return Ok(());
        }
        oauth_admit(oauth, request).await
    }

    /// Whether OAuth decides on requests no token of the file admitted.
    fn oauth_decides(&self) -> bool {
        #[cfg(feature = "oauth")]
        {
            self.oauth.is_some()
        }
        #[cfg(not(feature = "oauth"))]
        {
            false
        }
    }

    /// Admits `request` (marking it [`Authenticated`] when there are
    /// tokens) or says why not.
    pub(super) fn admit(&self, request: &mut Request) -> Result<(), Refusal> {
        self.check_host_and_origin(request)?;
        if let Some(tokens) = &self.tokens {
            match tokens.authenticate(request.headers()) {
                Ok(principal) => {
                    request
                        .extensions_mut()
                        .insert(Authenticated::new(principal));
                }
                // Not a token of the file: OAuth's to decide, if there.
                Err(_) if self.oauth_decides() => {}
                Err(why) => return Err(Refusal::Unauthorized(why)),
            }
        }
        Ok(())
    }

    fn check_host_and_origin(&self, request: &Request) -> Result<(), Refusal> {
        if !self.admits_plain_host(request.headers()) {
            let host = Authority::of_request(request.uri(), request.headers())
                .map_err(Refusal::BadHost)?;
            if !self.hosts.is_empty() && !self.hosts.iter().any(|allowed| allowed.admits(&host)) {
                tracing::debug!(host = host.name, "refused a request for a host not allowed");
                return Err(Refusal::Forbidden(
                    "Forbidden: the Host header is not allowed",
                ));
            }
        }
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let origin = origin
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .ok_or(Refusal::Forbidden(
                    "Forbidden: the Origin header is not valid",
                ))?;
            if !self.origins.iter().any(|allowed| allowed.admits(&origin)) {
                tracing::debug!("refused a request from an origin not allowed");
                return Err(Refusal::Forbidden(
                    "Forbidden: the Origin header is not allowed",
                ));
            }
        }
        Ok(())
    }

    /// Whether the request's `Host` is of the plainest form (see
    /// [`plain_host`]) and allowed: read without the copy of the header and
    /// the lowercased name that [`Authority::of_request`] makes. `false`
    /// decides nothing: the full reading then admits or refuses.
    fn admits_plain_host(&self, headers: &HeaderMap) -> bool {
        let Some((name, port)) = headers
            .get(header::HOST)
            .and_then(|host| plain_host(host.as_bytes()))
        else {
            return false;
        };
        self.hosts.is_empty()
            || self.hosts.iter().any(|allowed| {
                allowed.name.as_bytes().eq_ignore_ascii_case(name)
                    && allowed.port.is_none_or(|allowed| port == Some(allowed))
            })
    }
}

/// `host` split into its name and port when it is `name` or `name:port`
/// with a name of at most 255 ASCII letters, digits, `.` and `-` and a port of at most
/// five digits that fits a `u16`: a value that `http`'s authority parser,
/// which [`Authority::of_request`] uses, reads as that very name and port.
/// Anything else (`[v6]`, an empty name or port, another character) is
/// `None`, left to [`Authority::of_request`].
fn plain_host(host: &[u8]) -> Option<(&[u8], Option<u16>)> {
    let (name, port) = match host.iter().position(|&byte| byte == b':') {
        Some(colon) => (&host[..colon], Some(&host[colon + 1..])),
        None => (host, None),
    };
    let name_byte = |byte: &u8| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-');
    if name.is_empty() || name.len() > 255 || !name.iter().all(name_byte) {
        return None;
    }
    let port = match port {
        None => None,
        Some(digits)
            if (1..=5).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) =>
        {
            Some(std::str::from_utf8(digits).ok()?.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    Some((name, port))
}

/// Why [`Access::admit`] refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// An unreadable `Host`: 400.
    BadHost(&'static str),
    /// A host or origin not allowed: 403.
    Forbidden(&'static str),
    /// No known bearer token: 401.
    Unauthorized(Unauthorized),
}

impl Refusal {
    /// The `cause` label of the refusal in the metrics.
    fn cause(self) -> &'static str {
        match self {
            Self::BadHost(_) => "host",
            Self::Forbidden(message) if message.contains("Origin") => "origin",
            Self::Forbidden(_) => "host",
            Self::Unauthorized(_) => "auth",
        }
    }

    /// The answer: the status, a JSON-RPC error, and for 401 the challenge.
    pub(super) fn response(self) -> Response {
        crate::telemetry::metrics::refused(self.cause());
        match self {
            Self::BadHost(message) => {
                refuse(StatusCode::BAD_REQUEST, -32600, message, &Value::Null)
            }
            Self::Forbidden(message) => {
                refuse(StatusCode::FORBIDDEN, -32600, message, &Value::Null)
            }
            Self::Unauthorized(why) => unauthorized(why),
        }
    }
}

/// A host name, lower case without IPv6 brackets, and its port if given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    name: String,
    port: Option<u16>,
}

impl Authority {
    fn new(name: &str, port: Option<u16>) -> Self {
        Self {
            name: name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase(),
            port,
        }
    }

    /// An allow-list entry: an authority, or else the text as a name.
    fn allowed(entry: &str) -> Option<Self> {
        let entry = entry.trim();
        if entry.is_empty() {
            return None;
        }
        Some(match http::uri::Authority::try_from(entry) {
            Ok(authority) => Self::new(authority.host(), authority.port_u16()),
            Err(_) => Self::new(entry, None),
        })
    }

    /// The request's `Host`, or its URI's authority without one.
    fn of_request(uri: &Uri, headers: &HeaderMap) -> Result<Self, &'static str> {
        let Some(host) = headers.get(header::HOST) else {
            return uri
                .authority()
                .map(|authority| Self::new(authority.host(), authority.port_u16()))
                .ok_or("Bad Request: missing Host header");
        };
        let host = host
            .to_str()
            .map_err(|_| "Bad Request: the Host header is not ASCII")?;
        let authority = http::uri::Authority::try_from(host)
            .map_err(|_| "Bad Request: the Host header is not a host name")?;
        Ok(Self::new(authority.host(), authority.port_u16()))
    }

    /// Whether this allowed entry admits `host`.
    fn admits(&self, host: &Authority) -> bool {
        self.name == host.name && self.port.is_none_or(|port| host.port == Some(port))
    }
}

/// A browser origin as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Null,
    Tuple { scheme: String, host: Authority },
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("null") {
            return Some(Self::Null);
        }
        let uri = Uri::try_from(text).ok()?;
        let authority = uri.authority()?;
        Some(Self::Tuple {
            scheme: uri.scheme_str()?.to_ascii_lowercase(),
            host: Authority::new(authority.host(), authority.port_u16()),
        })
    }
}

/// An allowed origin.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OriginPattern {
    Null,
    Tuple {
        scheme: String,
        name: String,
        port: PortPattern,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortPattern {
    /// `:*`, or no port in the entry (as rmcp 3.11 reads it).
    Any,
    Exact(u16),
}

impl OriginPattern {
    fn parse(entry: &str) -> Option<Self> {
        let entry = entry.trim();
        let (base, any_port) = match entry.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (entry, false),
        };
        match Origin::parse(base)? {
            Origin::Null if !any_port => Some(Self::Null),
            Origin::Null => None,
            Origin::Tuple { scheme, host } => {
                let port = match (host.port, any_port) {
                    (Some(_), true) => return None,
                    (Some(port), false) => PortPattern::Exact(port),
                    (None, _) => PortPattern::Any,
                };
                Some(Self::Tuple {
                    scheme,
                    name: host.name,
                    port,
                })
            }
        }
    }

    fn admits(&self, origin: &Origin) -> bool {
        match (self, origin) {
            (Self::Null, Origin::Null) => true,
            (Self::Tuple { scheme, name, port }, Origin::Tuple { scheme: sent, host }) => {
                let default = match sent.as_str() {
                    "http" => Some(80),
                    "https" => Some(443),
                    _ => None,
                };
                scheme == sent
                    && *name == host.name
                    && match port {
                        PortPattern::Any => true,
                        PortPattern::Exact(port) => host.port.or(default) == Some(*port),
                    }
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(hosts: &[&str], origins: &[&str]) -> Access {
        let strings = |list: &[&str]| list.iter().map(|&s| s.to_owned()).collect::<Vec<_>>();
        Access::new(&strings(hosts), &strings(origins), None)
    }

    fn status(access: &Access, host: Option<&str>, origin: Option<&str>) -> u16 {
        let mut builder = http::Request::builder().uri("/mcp");
        if let Some(host) = host {
            builder = builder.header("host", host);
        }
        if let Some(origin) = origin {
            builder = builder.header("origin", origin);
        }
        let mut request = builder.body(axum::body::Body::empty()).unwrap();
        match access.admit(&mut request) {
            Ok(()) => 200,
            Err(refusal) => refusal.response().status().as_u16(),
        }
    }

    #[test]
    fn hosts_by_name_and_port() {
        let default = access(&LOOPBACK_HOSTS, &[]);
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:1",
            "[::1]:443",
            "[::1]",
        ] {
            assert_eq!(status(&default, Some(host), None), 200, "{host}");
        }
        for host in [
            "tasks.example.test",
            "127.0.0.2",
            "localhost.evil",
            "10.0.0.5:8080",
        ] {
            assert_eq!(status(&default, Some(host), None), 403, "{host}");
        }
        assert_eq!(status(&default, Some("a b"), None), 400);
        assert_eq!(status(&default, None, None), 400, "no Host, no authority");
        let public = access(&["localhost", "tasks.example.test", "10.0.0.5:8080"], &[]);
        assert_eq!(status(&public, Some("Tasks.Example.Test:443"), None), 200);
        assert_eq!(status(&public, Some("10.0.0.5:8080"), None), 200);
        assert_eq!(status(&public, Some("10.0.0.5:8081"), None), 403, "port");
        assert_eq!(status(&public, Some("10.0.0.5"), None), 403, "no port");
        assert_eq!(status(&access(&[], &[]), Some("anything"), None), 200);
    }

    #[test]
    fn a_plain_host_reads_as_the_full_reading_reads_it() {
        let long = "a".repeat(256);
        for host in [
            "localhost",
            "LocalHost:8080",
            "127.0.0.1:1",
            "127.0.0.1:65535",
            "a-b.c:080",
            "x:0",
            "...",
            "[::1]",
            "[::1]:443",
            "host:",
            ":80",
            "host:65536",
            "host:123456",
            "host:8a",
            "a b",
            "a_b",
            "h:1:2",
            "user@host",
            "é.test",
            long.as_str(),
        ] {
            let headers = {
                let mut headers = HeaderMap::new();
                headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
                headers
            };
            let full = Authority::of_request(&Uri::from_static("/mcp"), &headers);
            match plain_host(host.as_bytes()) {
                Some((name, port)) => {
                    let full = full.unwrap_or_else(|why| panic!("{host}: {why}"));
                    assert_eq!(full.name.as_bytes(), name.to_ascii_lowercase(), "{host}");
                    assert_eq!(full.port, port, "{host}");
                }
                // Left to the full reading, which decides alone.
                None => assert!(
                    ![
                        "localhost",
                        "LocalHost:8080",
                        "127.0.0.1:65535",
                        "x:0",
                        "..."
                    ]
                    .contains(&host),
                    "{host} is plain"
                ),
            }
        }
        // Decided by the plain reading and by the full one alike.
        let public = access(&["localhost", "tasks.example.test", "10.0.0.5:8080"], &[]);
        for (host, expected) in [
            ("TASKS.example.test", 200),
            ("10.0.0.5:8080", 200),
            ("10.0.0.5:8081", 403),
            ("10.0.0.5", 403),
            ("localhost.evil", 403),
            ("host:99999", 403),
        ] {
            assert_eq!(status(&public, Some(host), None), expected, "{host}");
        }
    }

    #[test]
    fn origins_by_scheme_name_and_port() {
        let default = access(&LOOPBACK_HOSTS, &super::super::LOOPBACK_ORIGINS);
        let host = Some("localhost");
        for origin in [
            "http://localhost:3000",
            "HTTPS://[::1]:1",
            "http://127.0.0.1",
        ] {
            assert_eq!(status(&default, host, Some(origin)), 200, "{origin}");
        }
        for origin in [
            "http://evil.example",
            "null",
            "not a url",
            "ftp://localhost:1",
            "",
        ] {
            assert_eq!(status(&default, host, Some(origin)), 403, "{origin}");
        }
        let app = access(
            &LOOPBACK_HOSTS,
            &[
                "https://app.example.test",
                "http://ui.example.test:8080",
                "null",
            ],
        );
        for origin in [
            "https://app.example.test",
            "https://app.example.test:8443",
            "http://ui.example.test:8080",
            "null",
        ] {
            assert_eq!(status(&app, host, Some(origin)), 200, "{origin}");
        }
        for origin in [
            "http://app.example.test",
            "http://ui.example.test",
            "https://ui.example.test:8080",
        ] {
            assert_eq!(status(&app, host, Some(origin)), 403, "{origin}");
        }
        let exact = access(&LOOPBACK_HOSTS, &["https://app.example.test:443"]);
        assert_eq!(
            status(&exact, host, Some("https://app.example.test")),
            200,
            "default port"
        );
        assert_eq!(
            status(&access(&LOOPBACK_HOSTS, &[]), host, Some("null")),
            403
        );
        assert_eq!(status(&access(&LOOPBACK_HOSTS, &[]), host, None), 200);
    }

    #[test]
    fn entries_are_validated() {
        for good in [
            "tasks.example.test",
            "tasks.example.test:8443",
            "[::1]",
            "10.0.0.5:80",
        ] {
            assert_eq!(validate_allowed_host(good), Ok(()), "{good}");
        }
        for bad in ["", "a b", "host:port", "user@host", "http://host"] {
            assert!(validate_allowed_host(bad).is_err(), "{bad}");
        }
        for good in [
            "https://app.example.test",
            "http://localhost:*",
            "http://[::1]:8080",
            "null",
        ] {
            assert_eq!(validate_allowed_origin(good), Ok(()), "{good}");
        }
        for bad in [
            "app.example.test",
            "https://app.example.test:443:*",
            "null:*",
            "",
            "*",
        ] {
            assert!(validate_allowed_origin(bad).is_err(), "{bad}");
        }
    }
}
