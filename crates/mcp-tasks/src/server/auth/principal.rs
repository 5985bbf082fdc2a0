//! Who a request comes from: the [`Principal`] every task is bound to, and
//! how the runtime finds it ([`PrincipalExtractor`], [`default_principal`],
//! and [`Authenticated`], what an authenticating layer leaves on a request).

use std::sync::Arc;

use rmcp::model::Extensions;
use sha2::Digest;

pub use crate::store::Principal;

/// Finds the principal (the authorization context) of a request from its
/// extensions (over HTTP they hold the request's `http::request::Parts`).
pub type PrincipalExtractor = Arc<dyn Fn(&Extensions) -> Principal + Send + Sync>;

/// The principal an authenticating layer in front of the server established
/// for an HTTP request, in the request's extensions (so in its
/// `http::request::Parts`). [`require_bearer_tokens`] and the serving
/// recipe with [`with_bearer_tokens`] insert it; [`default_principal`] and
/// [`authenticated_principal`] read it; a layer of your own (one that checks
/// a client certificate, or a header set by a proxy that authenticates) can
/// insert it too.
///
/// [`require_bearer_tokens`]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/fn.require_bearer_tokens.html
/// [`with_bearer_tokens`]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/struct.StreamableHttpServer.html#method.with_bearer_tokens
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated(Principal);

impl Authenticated {
    /// The mark for a request from `principal`.
    pub fn new(principal: Principal) -> Self {
        Self(principal)
    }

    /// Who the request is from.
    pub fn principal(&self) -> &Principal {
        &self.0
    }
}

/// The [`Authenticated`] principal of a request, if a layer established one.
pub fn authenticated_principal(extensions: &Extensions) -> Option<Principal> {
    extensions
        .get::<::http::request::Parts>()?
        .extensions
        .get::<Authenticated>()
        .map(|mark| mark.0.clone())
}

/// The default principal: over HTTP the [`Authenticated`] one when a layer
/// authenticated the request, else a hash of the `Authorization` header
/// (`http:anonymous` without one); elsewhere (stdio) the process itself.
/// Without an authenticating layer, callers are kept apart by what they
/// send, never refused (their caps and rates count together, unless
/// [`TaskRuntimeBuilder::with_quota_by_header`](crate::server::TaskRuntimeBuilder::with_quota_by_header)).
pub fn default_principal(extensions: &Extensions) -> Principal {
    match extensions.get::<::http::request::Parts>() {
        Some(parts) => principal_of_parts(parts),
        None => Principal::new("process"),
    }
}

/// [`default_principal`] of an HTTP request's parts.
pub(crate) fn principal_of_parts(parts: &::http::request::Parts) -> Principal {
    if let Some(mark) = parts.extensions.get::<Authenticated>() {
        return mark.0.clone();
    }
    match parts.headers.get(::http::header::AUTHORIZATION) {
        Some(value) => {
            let digest = sha2::Sha256::digest(value.as_bytes());
            let mut name = String::with_capacity(14 + 64);
            name.push_str("authorization:");
            push_hex(&mut name, &digest);
            Principal::new(name)
        }
        None => Principal::new("http:anonymous"),
    }
}

/// Appends `bytes` to `text` in lower-case hex.
pub(crate) fn push_hex(text: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_hash_is_lower_case_hex_of_sha_256() {
        let (parts, ()) = ::http::Request::builder()
            .header("authorization", "Bearer abc")
            .body(())
            .unwrap()
            .into_parts();
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        let expected: String = sha2::Sha256::digest(b"Bearer abc")
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(
            default_principal(&extensions).as_str(),
            format!("authorization:{expected}")
        );
    }
}
