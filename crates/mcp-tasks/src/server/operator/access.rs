//! Who may reach the operator listener: the admin tokens, presented in
//! `Authorization: Bearer` (the admin command, Prometheus, curl) or, for the
//! operator's page, through the session its sign-in form opens
//! ([`Sessions`]; the cookie [`COOKIE`], `HttpOnly`, `SameSite=Strict`,
//! `Secure` over HTTPS); without tokens, loopback only.
//!
//! The cookie carries a random session id, never the token: the token
//! stays in this process, checked against the tokens file at every request
//! (so a token taken out of the file, at a reload, ends its sessions), and
//! a session ends at sign-out or after [`SESSION_LIFETIME`], on the server.
//!
//! A request that carries the cookie must also come from the page itself:
//! an `Origin` (browsers send one on every `POST`) that is this listener's
//! own (`http://HOST` or `https://HOST` of the request's `Host`, or of the
//! `X-Forwarded-Host` a reverse proxy sets: a page of another origin
//! cannot send that header without a preflight, which the listener never
//! answers), and a `Sec-Fetch-Site` (where sent) of `same-origin` or
//! `none` (typed in the address bar). `SameSite=Strict` already keeps other sites from sending
//! the cookie; this check holds even where a browser ignores it.
//!
//! Without tokens the listener answers a loopback `Host` only (so no page
//! of another name reaches it, DNS rebinding included) and no `Origin` but
//! its own: its page on `http://localhost:PORT` works; a page of any other
//! origin, another port of localhost included, is refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::server::auth::BearerTokens;
use crate::server::auth::principal::{Authenticated, Principal};
use crate::server::transport::http::LOOPBACK_HOSTS;

/// The cookie that keeps a page's session, over plain HTTP.
pub(crate) const COOKIE: &str = "mcp_tasks_operator";

/// The same over HTTPS (`Secure`; the prefix makes browsers refuse it
/// from anything but a secure page of this very host and path `/`).
pub(crate) const SECURE_COOKIE: &str = "__Host-mcp_tasks_operator";

/// How long a page's session lasts.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The most sessions kept at once: past it, the oldest ends.
const MAX_SESSIONS: usize = 1024;

/// The signed-in pages: session id to the token it signed in with.
#[derive(Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

struct Session {
    token: String,
    until: tokio::time::Instant,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// A new session for `token` (already checked): its id, 32 random
    /// bytes in hex; `None` without randomness.
    pub(crate) fn open(&self, token: &str) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let id: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let now = tokio::time::Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, session| session.until > now);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, session)| session.until)
                .map(|(id, _)| id.clone())
        {
            open.remove(&oldest);
        }
        open.insert(
            id.clone(),
            Session {
                token: token.to_owned(),
                until: now + SESSION_LIFETIME,
            },
        );
        Some(id)
    }

    /// The token of the open session `id`.
    fn token(&self, id: &str) -> Option<String> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(id)
            .filter(|session| session.until > tokio::time::Instant::now())
            .map(|session| session.token.clone())
    }

    /// Ends the session `id`, if open.
    pub(crate) fn close(&self, id: &str) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.remove(id);
    }
}

/// Lets `request` through with a token of `tokens` (marking it
/// [`Authenticated`]), or without tokens from loopback only.
pub(crate) async fn admit(
    tokens: Option<&BearerTokens>,
    sessions: &Sessions,
    mut request: Request,
    next: Next,
) -> Response {
    match tokens {
        Some(tokens) => match authenticate(tokens, sessions, request.headers()) {
            Ok(principal) => {
                request
                    .extensions_mut()
                    .insert(Authenticated::new(principal));
            }
            Err(refusal) => return refusal,
        },
        None => {
            if let Err(refusal) = loopback_only(request.headers()) {
                return refusal;
            }
        }
    }
    next.run(request).await
}

/// The principal of a request to a listener with `tokens`: by its
/// `Authorization` header, else by the page's session from the page itself;
/// 401 (counted as `operator_auth`) or 403 otherwise.
#[allow(clippy::result_large_err)]
pub(crate) fn authenticate(
    tokens: &BearerTokens,
    sessions: &Sessions,
    headers: &HeaderMap,
) -> Result<Principal, Response> {
    let ids = session_ids(headers);
    if !headers.contains_key(header::AUTHORIZATION) && !ids.is_empty() {
        if !same_origin(headers) {
            crate::telemetry::metrics::refused("operator_host");
            return Err(forbidden("the admin cookie came from another origin"));
        }
        // Any of them: another service of this host name may set a cookie
        // of the same name (cookies know no ports).
        let principal = ids
            .iter()
            .filter_map(|id| sessions.token(id))
            .find_map(|token| tokens.verify(&token));
        return principal.ok_or_else(|| {
            crate::telemetry::metrics::refused("operator_auth");
            (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: the page's admin token is no longer valid: sign in again\n",
            )
                .into_response()
        });
    }
    tokens.authenticate(headers).map_err(|why| {
        crate::telemetry::metrics::refused("operator_auth");
        let mut response =
            (StatusCode::UNAUTHORIZED, format!("{}\n", why.message())).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(why.challenge()),
        );
        response
    })
}

/// Without tokens: a `Host` that is a loopback name, and no `Origin` but
/// the listener's own.
#[allow(clippy::result_large_err)]
pub(crate) fn loopback_only(headers: &HeaderMap) -> Result<(), Response> {
    let name = host_name(host(headers));
    let loopback = LOOPBACK_HOSTS
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(name));
    if !loopback || !same_origin(headers) {
        crate::telemetry::metrics::refused("operator_host");
        return Err(forbidden(
            "without tokens the operator listener answers loopback names only, and no other web page",
        ));
    }
    Ok(())
}

/// Whether a request comes from no page or from the listener's own: no
/// `Origin`, or one naming the request's own `Host` (or `null` with
/// `Sec-Fetch-Site: same-origin`); and no `Sec-Fetch-Site` but
/// `same-origin` or `none`.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let site_ok = headers
        .get("sec-fetch-site")
        .is_none_or(|site| site == "same-origin" || site == "none");
    let same_site = headers
        .get("sec-fetch-site")
        .is_some_and(|site| site == "same-origin");
    let origin_ok = match headers.get(header::ORIGIN) {
        None => true,
        // A browser hides the origin of a page whose referrer policy says
        // so; it still says the request is the page's own.
        Some(origin) if origin == "null" => same_site,
        Some(origin) => {
            let forwarded = headers
                .get("x-forwarded-host")
                .and_then(|host| host.to_str().ok());
            origin.to_str().is_ok_and(|origin| {
                let named = origin
                    .strip_prefix("http://")
                    .or_else(|| origin.strip_prefix("https://"));
                [Some(host(headers)), forwarded]
                    .into_iter()
                    .flatten()
                    .any(|host| !host.is_empty() && named == Some(host))
            })
        }
    };
    site_ok && origin_ok
}

/// The session ids the request's cookies carry ([`COOKIE`] and
/// [`SECURE_COOKIE`]), every one of them.
pub(crate) fn session_ids(headers: &HeaderMap) -> Vec<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(key, value)| (*key == COOKIE || *key == SECURE_COOKIE) && !value.is_empty())
        .map(|(_, value)| value)
        .collect()
}

/// The request's `Host`, as sent ("" without one).
fn host(headers: &HeaderMap) -> &str {
    headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("")
}

/// `host` without its port.
fn host_name(host: &str) -> &str {
    match host.rfind(':') {
        Some(colon) if !host.ends_with(']') => &host[..colon],
        _ => host,
    }
}

fn forbidden(why: &str) -> Response {
    (StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn only_the_listeners_own_origin_is_same_origin() {
        let host = ("host", "127.0.0.1:9090");
        assert!(same_origin(&headers(&[host])));
        assert!(same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:9090")
        ])));
        assert!(same_origin(&headers(&[
            host,
            ("origin", "https://127.0.0.1:9090")
        ])));
        assert!(!same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:3000")
        ])));
        assert!(!same_origin(&headers(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[host, ("origin", "null")])));
        let hidden = [host, ("origin", "null"), ("sec-fetch-site", "same-origin")];
        assert!(same_origin(&headers(&hidden)));
        let hidden_elsewhere = [host, ("origin", "null"), ("sec-fetch-site", "cross-site")];
        assert!(!same_origin(&headers(&hidden_elsewhere)));
        assert!(!same_origin(&headers(&[("origin", "http://")])));
        assert!(!same_origin(&headers(&[
            host,
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(!same_origin(&headers(&[
            host,
            ("sec-fetch-site", "same-site")
        ])));
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "none")])));
    }

    #[test]
    fn loopback_only_refuses_other_names_and_other_pages() {
        assert!(loopback_only(&headers(&[("host", "localhost:9090")])).is_ok());
        assert!(
            loopback_only(&headers(&[
                ("host", "localhost:9090"),
                ("origin", "http://localhost:9090")
            ]))
            .is_ok()
        );
        assert!(loopback_only(&headers(&[("host", "rebound.example:9090")])).is_err());
        assert!(
            loopback_only(&headers(&[
                ("host", "localhost:9090"),
                ("origin", "http://localhost:8080")
            ]))
            .is_err()
        );
        assert!(loopback_only(&headers(&[])).is_err());
    }

    #[test]
    fn every_session_cookie_is_found_among_others() {
        let map = headers(&[(
            "cookie",
            "a=1; mcp_tasks_operator=s1; b=2; __Host-mcp_tasks_operator=s2",
        )]);
        assert_eq!(session_ids(&map), vec!["s1", "s2"]);
        let empty = headers(&[("cookie", "mcp_tasks_operator=; x_mcp_tasks_operator=1")]);
        assert!(session_ids(&empty).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_stands_for_its_token_until_it_ends() {
        let tokens = BearerTokens::parse(b"s3cret-operator-token-0123 ops\n").unwrap();
        let sessions = Sessions::default();
        let id = sessions.open("s3cret-operator-token-0123").unwrap();
        assert_eq!(id.len(), 64);
        assert!(!id.contains("s3cret"));
        let cookie = format!("mcp_tasks_operator=stale; mcp_tasks_operator={id}");
        let good = HeaderMap::from_iter([
            (header::HOST, HeaderValue::from_static("127.0.0.1:9090")),
            (header::COOKIE, HeaderValue::from_str(&cookie).unwrap()),
        ]);
        assert_eq!(
            authenticate(&tokens, &sessions, &good).unwrap().as_str(),
            "ops"
        );
        let mut elsewhere = good.clone();
        elsewhere.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:3000"),
        );
        assert_eq!(
            authenticate(&tokens, &sessions, &elsewhere)
                .unwrap_err()
                .status(),
            StatusCode::FORBIDDEN
        );
        // The token as a cookie is no session.
        let raw = headers(&[
            ("host", "h"),
            ("cookie", "mcp_tasks_operator=s3cret-operator-token-0123"),
        ]);
        assert_eq!(
            authenticate(&tokens, &sessions, &raw).unwrap_err().status(),
            StatusCode::UNAUTHORIZED
        );
        // Its token taken out of the file ends it.
        let rotated = BearerTokens::parse(b"another-operator-token-0123 ops\n").unwrap();
        assert!(authenticate(&rotated, &sessions, &good).is_err());
        // So does its lifetime, and a sign-out.
        tokio::time::advance(SESSION_LIFETIME).await;
        assert!(authenticate(&tokens, &sessions, &good).is_err());
        let id = sessions.open("s3cret-operator-token-0123").unwrap();
        let cookie = format!("mcp_tasks_operator={id}");
        let fresh =
            HeaderMap::from_iter([(header::COOKIE, HeaderValue::from_str(&cookie).unwrap())]);
        assert!(authenticate(&tokens, &sessions, &fresh).is_ok());
        sessions.close(&id);
        assert!(authenticate(&tokens, &sessions, &fresh).is_err());
        assert_eq!(
            authenticate(&tokens, &sessions, &headers(&[("host", "h")]))
                .unwrap_err()
                .status(),
            StatusCode::UNAUTHORIZED
        );
    }

    #[test]
    fn a_proxys_forwarded_host_is_the_listeners_own_origin() {
        let proxied = [
            ("host", "127.0.0.1:9090"),
            ("x-forwarded-host", "ops.example.com"),
            ("origin", "https://ops.example.com"),
        ];
        assert!(same_origin(&headers(&proxied)));
        let other = [
            ("host", "127.0.0.1:9090"),
            ("x-forwarded-host", "ops.example.com"),
            ("origin", "https://evil.example"),
        ];
        assert!(!same_origin(&headers(&other)));
    }
}
