//! The operator's page, on the operator listener at `/`: the tasks at a
//! glance (counts by status, the queue and its oldest wait, tools running,
//! listen streams against their bound, refusals, the store, the gateway's
//! upstreams), per tool the last hour in small charts, and the unfinished
//! tasks with a cancel button. Everything it shows is read from `/metrics`
//! ([`state`]) and the admin API; its script and style are in the binary
//! (`assets/`), nothing is fetched from elsewhere.
//!
//! | Route | What |
//! |---|---|
//! | `GET /` | the page, or the sign-in form when the listener has tokens and the request none |
//! | `POST /ui/signin` | form field `token`: a token of the admin tokens sets the cookie (`HttpOnly`, `SameSite=Strict`) and goes back to `/`; another answers 401 with the form |
//! | `POST /ui/signout` | clears the cookie |
//! | `GET /ui/state` | the numbers, as JSON ([`state`]) |
//! | `GET /ui/app.js`, `/ui/app.css` | the page's script and style |
//!
//! The table reads `POST /admin/tasks/list` (unfinished tasks, by hash;
//! ids only once the operator ticks "show task ids", as `admin ls
//! --show-ids`) and cancels with `POST /admin/tasks/cancel`: each an action
//! of the admin API, audited as such. Who may do what is the listener's
//! rule ([`access`](super::access)); every answer here carries a
//! Content-Security-Policy that allows no inline script, no other origin,
//! no framing.

mod expo;
mod history;
mod state;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::access::{COOKIE, authenticate, loopback_only, same_origin};
use crate::server::auth::BearerTokens;
use crate::server::engine::tasks::runtime::TaskRuntime;
use history::History;
pub(crate) use history::Render;

/// The page's policy: its own script, style and requests only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// How long a sign-in lasts, in seconds (the cookie's `Max-Age`).
const SIGNED_IN_SECS: u32 = 12 * 3600;

/// The largest sign-in form read.
const MAX_FORM: usize = 4096;

const DASHBOARD: &str = include_str!("assets/index.html");
const SIGNIN: &str = include_str!("assets/signin.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// Where the page is placed in the sign-in form when a sign-in failed.
const ERROR_SLOT: &str = "<!--error-->";

/// What the page's routes share.
#[derive(Clone)]
struct Page {
    tokens: Option<Arc<BearerTokens>>,
    runtime: TaskRuntime,
    history: Arc<History>,
    draining: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// The page's routes (see the module docs), reading the metrics through
/// `render` (as `/metrics` renders them) and asking `draining` whether the
/// server drains. They check who asks themselves: mount them beside the
/// listener's checked routes, not behind them.
pub(crate) fn routes(
    runtime: TaskRuntime,
    tokens: Option<Arc<BearerTokens>>,
    render: Render,
    draining: Arc<dyn Fn() -> bool + Send + Sync>,
) -> Router {
    let history = History::new(render);
    history.start();
    let page = Page {
        tokens,
        runtime,
        history,
        draining,
    };
    Router::new()
        .route("/", get(index))
        .route("/ui/signin", post(sign_in))
        .route("/ui/signout", post(sign_out))
        .route("/ui/state", get(numbers))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript", SCRIPT) }),
        )
        .route("/ui/app.css", get(|| async { asset("text/css", STYLE) }))
        .layer(axum::middleware::map_response(guarded))
        .with_state(page)
}

impl Page {
    /// Whether `headers` may see the numbers: a token (header or cookie)
    /// with tokens, a loopback request of no other page without.
    #[allow(clippy::result_large_err)]
    fn check(&self, headers: &HeaderMap) -> Result<(), Response> {
        match &self.tokens {
            Some(tokens) => authenticate(tokens, headers).map(|_| ()),
            None => loopback_only(headers),
        }
    }
}

/// Every answer of the page: its policy, never cached, never framed.
async fn guarded(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
        body,
    )
        .into_response()
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// The sign-in form, saying `error` (fixed text, never the request's) when
/// given.
fn sign_in_form(status: StatusCode, error: Option<&str>) -> Response {
    let slot = error.map_or(String::new(), |error| {
        format!("<p id=\"signin-error\" class=\"error\">{error}</p>")
    });
    html(status, SIGNIN.replacen(ERROR_SLOT, &slot, 1))
}

/// Back to the page, setting `cookie` if given.
fn see_other(cookie: Option<&str>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Some(Ok(cookie)) = cookie.map(HeaderValue::from_str) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

fn from_another_page() -> Response {
    crate::telemetry::metrics::refused("operator_host");
    (
        StatusCode::FORBIDDEN,
        "Forbidden: a request of another page\n",
    )
        .into_response()
}

async fn index(State(page): State<Page>, headers: HeaderMap) -> Response {
    let presents_nothing = !headers.contains_key(header::AUTHORIZATION)
        && super::access::cookie(&headers, COOKIE).is_none();
    if page.tokens.is_some() && presents_nothing {
        // Not a refusal: the way in.
        return sign_in_form(StatusCode::OK, None);
    }
    match page.check(&headers) {
        Ok(()) => html(StatusCode::OK, DASHBOARD.to_owned()),
        Err(_) if page.tokens.is_some() => sign_in_form(StatusCode::OK, None),
        Err(refusal) => refusal,
    }
}

/// Whether `token` can travel in a cookie as it is (RFC 6265's
/// cookie-octets): a token of other characters signs in by header only.
fn cookie_safe(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E))
}

async fn sign_in(State(page): State<Page>, request: Request) -> Response {
    let Some(tokens) = page.tokens.clone() else {
        // Nothing to sign in to: the page is open on loopback.
        return see_other(None);
    };
    if !same_origin(request.headers()) {
        return from_another_page();
    }
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_FORM).await else {
        return sign_in_form(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("The form is too large."),
        );
    };
    let token = form_urlencoded::parse(&body)
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    if tokens.verify(&token).is_none() {
        crate::telemetry::metrics::refused("operator_auth");
        return sign_in_form(
            StatusCode::UNAUTHORIZED,
            Some("That is not one of this server's admin tokens."),
        );
    }
    if !cookie_safe(&token) {
        return sign_in_form(
            StatusCode::BAD_REQUEST,
            Some(
                "This token has characters a cookie cannot keep (spaces, quotes, commas, \
                 semicolons or backslashes): give the page a token without them.",
            ),
        );
    }
    see_other(Some(&format!(
        "{COOKIE}={token}; Path=/; Max-Age={SIGNED_IN_SECS}; HttpOnly; SameSite=Strict"
    )))
}

async fn sign_out(headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return from_another_page();
    }
    see_other(Some(&format!(
        "{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"
    )))
}

async fn numbers(State(page): State<Page>, headers: HeaderMap) -> Response {
    if let Err(refusal) = page.check(&headers) {
        return refusal;
    }
    let now = page.history.read_now();
    let body = state::state(
        &now,
        &page.history.readings(),
        page.runtime.running_by_tool(),
        (page.draining)(),
    );
    let mut response = Response::new(Body::from(body.to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cookie_octets_make_a_cookie() {
        assert!(cookie_safe("s3cret-Token_1.x~"));
        for bad in ["", "a b", "a;b", "a,b", "a\"b", "a\\b", "é"] {
            assert!(!cookie_safe(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_assets_keep_no_inline_script_and_the_slots_they_need() {
        assert!(SIGNIN.contains(ERROR_SLOT));
        for page in [DASHBOARD, SIGNIN] {
            assert!(!page.contains("<script>"), "an inline script");
            for handler in [
                " onclick=",
                " onload=",
                " onsubmit=",
                " onerror=",
                " onchange=",
            ] {
                assert!(!page.contains(handler), "an inline handler: {handler}");
            }
            assert!(!page.contains("style="), "an inline style");
            assert!(!page.contains("http://") && !page.contains("https://"));
        }
        assert!(DASHBOARD.contains("src=\"/ui/app.js\""));
    }
}
