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
//! | `POST /ui/signin` | form field `token`: a token of the admin tokens opens a session (its random id in a cookie: `HttpOnly`, `SameSite=Strict`, `Secure` over HTTPS) and goes back to `/`; another answers 401 with the form |
//! | `POST /ui/signout` | ends the session and clears the cookie |
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

use super::access::{
    COOKIE, SECURE_COOKIE, SESSION_LIFETIME, Sessions, authenticate, loopback_only, same_origin,
    session_ids,
};
use super::admin::{AuditEntry, operator_label};
use crate::server::auth::BearerTokens;
use crate::server::engine::tasks::runtime::TaskRuntime;
use history::History;
pub(crate) use history::Render;

/// The page's policy: its own script, style and requests only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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
    sessions: Arc<Sessions>,
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
    sessions: Arc<Sessions>,
    render: Render,
    draining: Arc<dyn Fn() -> bool + Send + Sync>,
) -> Router {
    let history = History::new(render);
    history.start();
    let page = Page {
        tokens,
        sessions,
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
    /// Whether `headers` may see the numbers: a token (header or session)
    /// with tokens, a loopback request of no other page without. Who, as
    /// the audit names them.
    #[allow(clippy::result_large_err)]
    fn check(&self, headers: &HeaderMap) -> Result<String, Response> {
        match &self.tokens {
            Some(tokens) => authenticate(tokens, &self.sessions, headers)
                .map(|principal| operator_label(&principal)),
            None => loopback_only(headers).map(|()| "loopback".to_owned()),
        }
    }

    /// Writes the audit line of a sign-in or sign-out.
    fn audit(&self, who: &str, action: &str, outcome: Result<(), &str>) {
        AuditEntry::new(
            who,
            action,
            serde_json::json!({"via": "page"}),
            self.runtime.now(),
        )
        .with_outcome(&outcome)
        .emit();
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
    let presents_nothing =
        !headers.contains_key(header::AUTHORIZATION) && session_ids(&headers).is_empty();
    if page.tokens.is_some() && presents_nothing {
        // Not a refusal: the way in.
        return sign_in_form(StatusCode::OK, None);
    }
    match page.check(&headers) {
        Ok(_) => html(StatusCode::OK, DASHBOARD.to_owned()),
        Err(_) if page.tokens.is_some() => sign_in_form(StatusCode::OK, None),
        Err(refusal) => refusal,
    }
}

/// Whether the page was reached over HTTPS (its origin, or the reverse
/// proxy's word): its cookie is then `Secure`.
fn over_https(headers: &HeaderMap) -> bool {
    let origin = headers
        .get(header::ORIGIN)
        .is_some_and(|origin| origin.as_bytes().starts_with(b"https://"));
    let forwarded = headers
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    origin || forwarded
}

/// The `Set-Cookie` value of a page's session `id` (empty and expired to
/// end it).
fn session_cookie(headers: &HeaderMap, id: &str) -> String {
    let max_age = if id.is_empty() {
        0
    } else {
        SESSION_LIFETIME.as_secs()
    };
    let (name, secure) = if over_https(headers) {
        (SECURE_COOKIE, "; Secure")
    } else {
        (COOKIE, "")
    };
    format!("{name}={id}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}")
}

async fn sign_in(State(page): State<Page>, request: Request) -> Response {
    let headers = request.headers().clone();
    let Some(tokens) = page.tokens.clone() else {
        // Nothing to sign in to: the page is open on loopback.
        return see_other(None);
    };
    if !same_origin(&headers) {
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
    let Some(principal) = tokens.verify(&token) else {
        crate::telemetry::metrics::refused("operator_auth");
        page.audit("(unknown)", "signin", Err("not one of the admin tokens"));
        return sign_in_form(
            StatusCode::UNAUTHORIZED,
            Some("That is not one of this server's admin tokens."),
        );
    };
    let who = operator_label(&principal);
    let who = who.as_str();
    let Some(id) = page.sessions.open(&token) else {
        page.audit(who, "signin", Err("no randomness for a session"));
        return sign_in_form(
            StatusCode::SERVICE_UNAVAILABLE,
            Some("No randomness for a session: try again."),
        );
    };
    page.audit(who, "signin", Ok(()));
    see_other(Some(&session_cookie(&headers, &id)))
}

async fn sign_out(State(page): State<Page>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return from_another_page();
    }
    let who = match (&page.tokens, page.check(&headers)) {
        (None, _) => "loopback".to_owned(),
        (Some(_), Ok(label)) => label,
        (Some(_), Err(_)) => "(unknown)".to_owned(),
    };
    for id in session_ids(&headers) {
        page.sessions.close(id);
    }
    page.audit(&who, "signout", Ok(()));
    see_other(Some(&session_cookie(&headers, "")))
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
    use http::HeaderName;

    use super::*;

    #[test]
    fn over_https_the_cookie_is_secure_and_host_bound() {
        let plain = HeaderMap::from_iter([(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:9090"),
        )]);
        let cookie = session_cookie(&plain, "ab12");
        assert_eq!(
            cookie,
            "mcp_tasks_operator=ab12; Path=/; Max-Age=43200; HttpOnly; SameSite=Strict"
        );
        let proxied = HeaderMap::from_iter([(
            HeaderName::from_static("x-forwarded-proto"),
            HeaderValue::from_static("https"),
        )]);
        let cookie = session_cookie(&proxied, "ab12");
        assert!(
            cookie.starts_with("__Host-mcp_tasks_operator=ab12;"),
            "{cookie}"
        );
        assert!(cookie.ends_with("; Secure"), "{cookie}");
        assert!(session_cookie(&plain, "").contains("Max-Age=0"));
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
