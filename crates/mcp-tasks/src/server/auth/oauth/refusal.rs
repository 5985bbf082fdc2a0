//! Why a request was not authorized ([`OAuthRefusal`]), and what a
//! refusal answers: its HTTP status and its `WWW-Authenticate` challenge
//! (RFC 6750 §3, with RFC 9728's `resource_metadata`).

use http::StatusCode;

/// Why a request was refused. Its description never holds the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OAuthRefusal {
    /// No `Authorization: Bearer` header: 401, with no error code (RFC 6750
    /// §3.1), so that a client discovers how to sign in.
    NoToken,
    /// A token this server does not accept (malformed, signed by a key its
    /// issuer does not publish, for another audience, expired...): 401
    /// `invalid_token`.
    InvalidToken(&'static str),
    /// A valid token without a required scope: 403 `insufficient_scope`.
    InsufficientScope,
    /// The token could not be checked now (its issuer's introspection
    /// endpoint did not answer): 503, to be tried again.
    Unavailable(&'static str),
}

impl OAuthRefusal {
    /// The HTTP status of the answer.
    pub fn status(self) -> StatusCode {
        match self {
            Self::NoToken | Self::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            Self::InsufficientScope => StatusCode::FORBIDDEN,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// What went wrong, for a person.
    pub fn description(self) -> &'static str {
        match self {
            Self::NoToken => "Unauthorized: this server needs an OAuth access token",
            Self::InvalidToken(why) | Self::Unavailable(why) => why,
            Self::InsufficientScope => "Forbidden: the access token lacks a required scope",
        }
    }

    /// The `WWW-Authenticate` value: `Bearer` with the error (if any), the
    /// scopes required, and where the protected resource metadata is.
    pub fn challenge(self, metadata_url: &str, scopes: &[String]) -> String {
        let mut value = String::from("Bearer ");
        let error = match self {
            Self::NoToken | Self::Unavailable(_) => None,
            Self::InvalidToken(_) => Some("invalid_token"),
            Self::InsufficientScope => Some("insufficient_scope"),
        };
        if let Some(error) = error {
            value.push_str("error=\"");
            value.push_str(error);
            value.push_str("\", error_description=\"");
            // Our descriptions are static text; keep the header's quoting
            // sound whatever they say.
            value.extend(
                self.description()
                    .chars()
                    .filter(|c| *c != '"' && *c != '\\' && !c.is_control()),
            );
            value.push_str("\", ");
        }
        if !scopes.is_empty() {
            value.push_str("scope=\"");
            value.push_str(&scopes.join(" "));
            value.push_str("\", ");
        }
        value.push_str("resource_metadata=\"");
        value.push_str(metadata_url);
        value.push('"');
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_follow_rfc_6750_and_9728() {
        let url = "https://tasks.example.com/.well-known/oauth-protected-resource/mcp";
        let scopes = ["tasks".to_owned(), "read".to_owned()];
        assert_eq!(
            OAuthRefusal::NoToken.challenge(url, &scopes),
            format!("Bearer scope=\"tasks read\", resource_metadata=\"{url}\"")
        );
        assert_eq!(
            OAuthRefusal::InvalidToken("the token \"has\" expired").challenge(url, &[]),
            format!(
                "Bearer error=\"invalid_token\", error_description=\"the token has expired\", resource_metadata=\"{url}\""
            )
        );
        assert!(
            OAuthRefusal::InsufficientScope
                .challenge(url, &scopes)
                .starts_with("Bearer error=\"insufficient_scope\"")
        );
        assert_eq!(OAuthRefusal::InsufficientScope.status(), 403);
        assert_eq!(OAuthRefusal::InvalidToken("x").status(), 401);
    }
}
