//! Who a request comes from: the [`Principal`] every task is bound to, and
//! how the runtime finds it ([`PrincipalExtractor`], [`default_principal`]).

use std::sync::Arc;

use rmcp::model::Extensions;
use sha2::Digest;

pub use crate::store::Principal;

/// Finds the principal (the authorization context) of a request from its
/// extensions (over HTTP they hold the request's `http::request::Parts`).
pub type PrincipalExtractor = Arc<dyn Fn(&Extensions) -> Principal + Send + Sync>;

/// The default principal: over HTTP a hash of the `Authorization` header
/// (`http:anonymous` without one); elsewhere (stdio) the process itself.
/// Callers are kept apart by what they send, never refused.
pub fn default_principal(extensions: &Extensions) -> Principal {
    match extensions.get::<::http::request::Parts>() {
        Some(parts) => match parts.headers.get(::http::header::AUTHORIZATION) {
            Some(value) => {
                let digest = sha2::Sha256::digest(value.as_bytes());
                let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
                Principal::new(format!("authorization:{hex}"))
            }
            None => Principal::new("http:anonymous"),
        },
        None => Principal::new("process"),
    }
}
