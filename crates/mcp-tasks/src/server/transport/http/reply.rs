//! The JSON answers the HTTP endpoint writes itself, one floor below
//! everything that writes them: the guard's refusals ([`guard`](super::guard),
//! [`access`](super::access)), the fast paths' answers and errors
//! ([`fast`](super::fast)) and the front middleware's.
//!
//! Each is a body with `Content-Type: application/json` and the HTTP status
//! given; nothing else is set here (a `Retry-After` or `WWW-Authenticate` is
//! added by the caller that knows it).

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use rmcp::ErrorData;
use serde_json::{Value, json};

/// A JSON answer with `status`, its body as written.
pub(super) fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A JSON answer with `status`: `body` serialized.
pub(super) fn plain(status: StatusCode, body: &Value) -> Response {
    json_body(status, body.to_string().into_bytes())
}

/// The JSON-RPC error answer `{"jsonrpc":"2.0","id":…,"error":…}` to the
/// request `id` with `status`.
pub(super) fn error(status: StatusCode, id: &Value, error: &ErrorData) -> Response {
    plain(status, &json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// A JSON-RPC error answer with `status`, built from its `code` and
/// `message` (no `data`): the guard's refusals.
pub(super) fn refuse(status: StatusCode, code: i64, message: &str, id: &Value) -> Response {
    plain(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}
