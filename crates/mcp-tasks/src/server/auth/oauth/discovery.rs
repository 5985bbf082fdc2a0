//! Finding an authorization server's metadata from its issuer identifier:
//! RFC 8414 first, then OpenID Connect Discovery, in the order MCP's
//! authorization spec gives clients (path insertion for an issuer with a
//! path, then OpenID's appended form).
//!
//! Three fields of one JSON document: the `openidconnect` crate's discovery
//! reads OpenID's document only (not RFC 8414's) into its own typed client,
//! which this server has no use for, so the fetch is done here.

use serde::Deserialize;

use super::config::OAuthSetupError;
use super::fetch::{FetchError, get_json};

/// What the resource server needs of an authorization server's metadata.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Metadata {
    /// The issuer identifier, exactly as tokens carry it in `iss`.
    pub(super) issuer: String,
    /// Where its public keys are.
    pub(super) jwks_uri: Option<String>,
    /// Where tokens are introspected (RFC 7662), if it does that.
    pub(super) introspection_endpoint: Option<String>,
}

/// The addresses of `issuer`'s metadata, in the order they are tried.
pub(super) fn metadata_urls(issuer: &reqwest::Url) -> Vec<String> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Fetches `issuer`'s metadata and checks that it names the same issuer
/// (RFC 8414 §3.3; a trailing `/` aside).
pub(super) async fn discover(
    client: &reqwest::Client,
    issuer: &str,
    url: &reqwest::Url,
) -> Result<Metadata, OAuthSetupError> {
    let failed = |reason: String| OAuthSetupError::Metadata {
        issuer: issuer.to_owned(),
        reason,
    };
    let mut tried = Vec::new();
    for address in metadata_urls(url) {
        match get_json::<Metadata>(client, &address).await {
            Ok(metadata) => {
                if metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
                    return Err(failed(format!(
                        "{address} names the issuer {:?}, not this one",
                        metadata.issuer
                    )));
                }
                return Ok(metadata);
            }
            Err(FetchError::NotFound) => tried.push(format!("{address}: HTTP 404")),
            Err(error) => {
                tried.push(format!("{address}: {}", error.reason()));
                // The first address unreachable or broken: the others
                // are on the same host, and would only repeat it.
                if tried.len() == 1 {
                    break;
                }
            }
        }
    }
    Err(failed(tried.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_follow_rfc_8414_then_openid() {
        let root = reqwest::Url::parse("https://login.example.com").unwrap();
        assert_eq!(
            metadata_urls(&root),
            [
                "https://login.example.com/.well-known/oauth-authorization-server",
                "https://login.example.com/.well-known/openid-configuration",
            ]
        );
        let tenant = reqwest::Url::parse("https://login.example.com/tenant/").unwrap();
        assert_eq!(
            metadata_urls(&tenant),
            [
                "https://login.example.com/.well-known/oauth-authorization-server/tenant",
                "https://login.example.com/.well-known/openid-configuration/tenant",
                "https://login.example.com/tenant/.well-known/openid-configuration",
            ]
        );
    }
}
