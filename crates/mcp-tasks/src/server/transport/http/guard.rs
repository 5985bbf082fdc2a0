//! The first thing every request meets: who may reach the endpoint
//! ([`access`](super::access): `Host`, `Origin`, bearer token), the
//! endpoint's limits, and the shape of a malformed request's answer.
//!
//! A request is first admitted or refused by [`Access`]: HTTP 400 for an
//! unreadable `Host`, 403 for a host or origin not allowed, 401 (with
//! `WWW-Authenticate`) without a known bearer token, each with a JSON-RPC
//! error (-32600) as its body. Then a request that is not a JSON-RPC
//! message over POST gets a JSON-RPC error as its body, whatever is wrong with it (rmcp answers several of these
//! with a plain-text line; the `GET` and `DELETE` of an initialize-era
//! session, and the answers its client POSTs to the server's requests, go
//! to rmcp): the body is not JSON, -32700 with HTTP 400; it is
//! JSON but not one JSON-RPC request or notification, -32600 with 400; the
//! wrong `Content-Type`, 415; an `Accept` without both JSON and SSE, 406;
//! another HTTP method, 405; a body past the limit, 413; a body that does
//! not arrive in time, 408. The `id` is the request's when it can be read,
//! else `null`. A request that passes goes on with its body read once (see
//! [`front`](super::front)).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;

use super::access::Access;
use super::reply::refuse;

/// What the guard enforces.
#[derive(Debug, Clone)]
pub(super) struct Guard {
    pub(super) access: Arc<Access>,
    pub(super) max_body_bytes: usize,
    pub(super) body_timeout: Duration,
}

/// What the guard admitted.
pub(super) enum Admitted {
    /// A POST, its body read.
    Post(Parts, Bytes),
    /// A `GET` (the session's stream) or `DELETE` (its end) of an
    /// initialize-era session: rmcp's own business, with no body to read.
    Session(Request),
}

/// The `Mcp-Session-Id` header: only initialize-era clients (2025-11-25
/// and before) have sessions.
pub(super) const SESSION_ID: &str = "mcp-session-id";

/// Admits `request` or refuses it (see the [module docs](self)), and reads
/// its body.
pub(super) async fn read(guard: &Guard, mut request: Request) -> Result<Admitted, Response> {
    #[cfg(feature = "oauth")]
    if let Some(metadata) = guard.access.metadata(&request) {
        return Err(metadata);
    }
    if let Err(refusal) = guard.access.admit(&mut request) {
        return Err(refusal.response());
    }
    #[cfg(feature = "oauth")]
    guard.access.authorize(&mut request).await?;
    if matches!(*request.method(), Method::GET | Method::DELETE)
        && request.headers().contains_key(SESSION_ID)
    {
        return Ok(Admitted::Session(request));
    }
    if request.method() != Method::POST {
        return Err(refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            -32600,
            "Invalid Request: the MCP endpoint takes POST only",
            &Value::Null,
        ));
    }
    let headers = request.headers();
    if !is_json(headers) {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32600,
            "Invalid Request: Content-Type must be application/json",
            &Value::Null,
        ));
    }
    if !accepts_json_and_sse(headers) {
        return Err(refuse(
            StatusCode::NOT_ACCEPTABLE,
            -32600,
            "Invalid Request: Accept must list both application/json and text/event-stream",
            &Value::Null,
        ));
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, guard.max_body_bytes);
    match tokio::time::timeout(guard.body_timeout, limited.collect()).await {
        Ok(Ok(collected)) => Ok(Admitted::Post(parts, collected.to_bytes())),
        Err(_) => Err({
            crate::telemetry::metrics::refused("body_timeout");
            refuse(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                &format!(
                    "Invalid Request: the request body did not arrive within {} s",
                    guard.body_timeout.as_secs_f64()
                ),
                &Value::Null,
            )
        }),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err({
            crate::telemetry::metrics::refused("body_size");
            refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                &format!(
                    "Invalid Request: the request body exceeds {} bytes",
                    guard.max_body_bytes
                ),
                &Value::Null,
            )
        }),
        Ok(Err(_)) => Err(refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            "Invalid Request: the request body could not be read",
            &Value::Null,
        )),
    }
}

/// The body's JSON-RPC message, or the refusal of a body that is not one.
#[expect(
    clippy::result_large_err,
    reason = "the refusal is the answer, built once per refused request"
)]
pub(super) fn message(body: &[u8], session: bool) -> Result<Value, Response> {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            -32700,
            "Parse error: the request body is not JSON",
            &Value::Null,
        ));
    };
    // In a session the client answers the server's requests with POSTs.
    let answer = |message: &Value| {
        session
            && message.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
            && message.get("method").is_none()
            && (message.get("result").is_some() || message.get("error").is_some())
    };
    if let Some(why) = not_a_message(&message).filter(|_| !answer(&message)) {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            -32600,
            &format!("Invalid Request: {why}"),
            &id,
        ));
    }
    Ok(message)
}

/// Why `message` is not one JSON-RPC request or notification, if it is not.
pub(crate) fn not_a_message(message: &Value) -> Option<&'static str> {
    let Value::Object(fields) = message else {
        return Some(
            "the body must be one JSON-RPC message (an object; batches are not supported)",
        );
    };
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some("\"jsonrpc\" must be \"2.0\"");
    }
    match fields.get("id") {
        None | Some(Value::String(_) | Value::Number(_)) => {}
        Some(_) => return Some("\"id\" must be a string or a number"),
    }
    match fields.get("method") {
        Some(Value::String(_)) => None,
        // A response or an error from the client: it never POSTs those.
        None if fields.contains_key("result") || fields.contains_key("error") => {
            Some("a client does not send responses to the server's endpoint")
        }
        _ => Some("\"method\" must be a string"),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let value = headers.get(header::CONTENT_TYPE);
    // What clients send, compared as bytes before it is read as text.
    if value.is_some_and(|value| value.as_bytes() == b"application/json") {
        return true;
    }
    value
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether `Accept` lists both media types the transport needs, as rmcp's
/// service reads it (a range of weight zero is left out; no wildcards).
pub(crate) fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    // What the clients of the SDKs send, compared as bytes first: a value
    // that lists both is enough whatever other `Accept` values say.
    if headers.get(header::ACCEPT).is_some_and(|value| {
        matches!(
            value.as_bytes(),
            b"application/json, text/event-stream" | b"text/event-stream, application/json"
        )
    }) {
        return true;
    }
    let mut json = false;
    let mut sse = false;
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for entry in value.split(',') {
            let mut parts = entry.split(';');
            let media = parts.next().unwrap_or("").trim();
            // "q=0", "q=0.0", ...: explicitly not acceptable.
            let excluded = parts.any(|parameter| {
                parameter.split_once('=').is_some_and(|(name, weight)| {
                    let weight = weight.trim();
                    name.trim().eq_ignore_ascii_case("q")
                        && weight.starts_with('0')
                        && weight.chars().all(|c| c == '0' || c == '.')
                })
            });
            if !excluded {
                json |= media.eq_ignore_ascii_case("application/json");
                sse |= media.eq_ignore_ascii_case("text/event-stream");
            }
        }
    }
    json && sse
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_json_rpc_messages_pass() {
        assert_eq!(
            not_a_message(&json!({"jsonrpc": "2.0", "id": 1, "method": "x"})),
            None
        );
        assert_eq!(
            not_a_message(&json!({"jsonrpc": "2.0", "method": "notifications/x"})),
            None
        );
        for bad in [
            json!([{"jsonrpc": "2.0", "id": 1, "method": "x"}]),
            json!("text"),
            json!({"id": 1, "method": "x"}),
            json!({"jsonrpc": "1.0", "id": 1, "method": "x"}),
            json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "x"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1}),
        ] {
            assert!(not_a_message(&bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn content_type_and_accept() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, HeaderValue::from_static(value));
            }
            map
        };
        assert!(is_json(&headers(&[("content-type", "application/json")])));
        assert!(is_json(&headers(&[(
            "content-type",
            "Application/JSON; charset=utf-8"
        )])));
        assert!(!is_json(&headers(&[("content-type", "text/plain")])));
        assert!(!is_json(&headers(&[("content-type", "application/jsonx")])));
        assert!(!is_json(&HeaderMap::new()));
        assert!(accepts_json_and_sse(&headers(&[(
            "accept",
            "application/json, text/event-stream"
        )])));
        assert!(accepts_json_and_sse(&headers(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream;q=0.9")
        ])));
        assert!(!accepts_json_and_sse(&headers(&[("accept", "*/*")])));
        assert!(!accepts_json_and_sse(&headers(&[(
            "accept",
            "application/json, text/event-stream;q=0"
        )])));
        assert!(accepts_json_and_sse(&headers(&[(
            "accept",
            "application/json;q=0.5, text/event-stream;q=0.001"
        )])));
        assert!(!accepts_json_and_sse(&headers(&[(
            "accept",
            "application/json"
        )])));
        assert!(!accepts_json_and_sse(&HeaderMap::new()));
    }
}
