//! Who may reach the operator listener: the admin tokens, presented in
//! `Authorization: Bearer` (the admin command, Prometheus, curl) or, for the
//! operator's page, in the cookie its sign-in form sets ([`COOKIE`]:
//! `HttpOnly`, `SameSite=Strict`); without tokens, loopback only.
//!
//! A request that carries the cookie must also come from the page itself:
//! an `Origin` (browsers send one on every `POST`) that is this listener's
//! own (`http://HOST` or `https://HOST` of the request's `Host`), and a
//! `Sec-Fetch-Site` (where sent) of `same-origin` or `none` (typed in the
//! address bar). `SameSite=Strict` already keeps other sites from sending
//! the cookie; this check holds even where a browser ignores it.
//!
//! Without tokens the listener answers a loopback `Host` only (so no page
//! of another name reaches it, DNS rebinding included) and no `Origin` but
//! its own: its page on `http://localhost:PORT` works; a page of any other
//! origin, another port of localhost included, is refused.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::server::auth::BearerTokens;
use crate::server::auth::principal::{Authenticated, Principal};
use crate::server::transport::http::LOOPBACK_HOSTS;

/// The cookie that keeps the admin token of a page signed in.
pub(crate) const COOKIE: &str = "mcp_tasks_operator";

/// Lets `request` through with a token of `tokens` (marking it
/// [`Authenticated`]), or without tokens from loopback only.
pub(crate) async fn admit(
    tokens: Option<&BearerTokens>,
    mut request: Request,
    next: Next,
) -> Response {
    match tokens {
        Some(tokens) => match authenticate(tokens, request.headers()) {
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
/// `Authorization` header, else by the page's cookie from the page itself;
/// 401 (counted as `operator_auth`) or 403 otherwise.
#[allow(clippy::result_large_err)]
pub(crate) fn authenticate(
    tokens: &BearerTokens,
    headers: &HeaderMap,
) -> Result<Principal, Response> {
    if !headers.contains_key(header::AUTHORIZATION)
        && let Some(token) = cookie(headers, COOKIE)
    {
        if !same_origin(headers) {
            crate::telemetry::metrics::refused("operator_host");
            return Err(forbidden("the admin cookie came from another origin"));
        }
        return tokens.verify(token).ok_or_else(|| {
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
            let host = host(headers);
            origin.to_str().is_ok_and(|origin| {
                !host.is_empty()
                    && (origin.strip_prefix("http://") == Some(host)
                        || origin.strip_prefix("https://") == Some(host))
            })
        }
    };
    site_ok && origin_ok
}

/// The value of the cookie `name`, if the request carries it.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
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
    fn the_cookie_is_found_among_others() {
        let map = headers(&[("cookie", "a=1; mcp_tasks_operator=tok-en; b=2")]);
        assert_eq!(cookie(&map, COOKIE), Some("tok-en"));
        assert_eq!(
            cookie(&headers(&[("cookie", "mcp_tasks_operator=")]), COOKIE),
            None
        );
        assert_eq!(
            cookie(&headers(&[("cookie", "x_mcp_tasks_operator=1")]), COOKIE),
            None
        );
    }

    #[test]
    fn a_cookie_from_another_origin_is_refused_and_a_bad_one_is_401() {
        let tokens = BearerTokens::parse(b"s3cret-operator-token-0123 ops\n").unwrap();
        let good = headers(&[
            ("host", "127.0.0.1:9090"),
            ("cookie", "mcp_tasks_operator=s3cret-operator-token-0123"),
        ]);
        assert_eq!(authenticate(&tokens, &good).unwrap().as_str(), "ops");
        let elsewhere = headers(&[
            ("host", "127.0.0.1:9090"),
            ("origin", "http://127.0.0.1:3000"),
            ("cookie", "mcp_tasks_operator=s3cret-operator-token-0123"),
        ]);
        assert_eq!(
            authenticate(&tokens, &elsewhere).unwrap_err().status(),
            StatusCode::FORBIDDEN
        );
        let wrong = headers(&[("host", "h"), ("cookie", "mcp_tasks_operator=nope")]);
        assert_eq!(
            authenticate(&tokens, &wrong).unwrap_err().status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            authenticate(&tokens, &headers(&[("host", "h")]))
                .unwrap_err()
                .status(),
            StatusCode::UNAUTHORIZED
        );
    }
}
