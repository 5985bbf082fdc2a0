//! Opaque access tokens, checked by RFC 7662 introspection at the issuers'
//! `introspection_endpoint`, as the resource server's own client (HTTP
//! Basic, RFC 6749 §2.3.1), with answers cached briefly (a good token until
//! its expiry, at most a minute; a refused one ten seconds) and keyed by
//! the token's SHA-256, so that a busy caller costs the authorization
//! server one request a minute.
//!
//! One form POST and a JSON answer: the `oauth2` crate's introspection goes
//! through its typed client and an HTTP adapter it does not ship for the
//! reqwest this crate uses, which would be more code than the request.

use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;

use super::fetch::{describe, read_json};
use super::memo::Memo;
use super::refusal::OAuthRefusal;
use super::verified::{Verified, now_secs, principal_of, scopes_of};

/// The longest a good answer is kept.
const GOOD_FOR: Duration = Duration::from_secs(60);
/// How long a refusal is kept.
const REFUSED_FOR: Duration = Duration::from_secs(10);

/// The introspection endpoints and the client that may call them.
pub(super) struct Introspector {
    /// Each issuer with its endpoint.
    endpoints: Vec<(String, String)>,
    client_id: String,
    client_secret: String,
    http: reqwest::Client,
    memo: Memo,
}

/// RFC 7662 §2.2: what an introspection answers (the fields used here).
#[derive(Deserialize)]
struct Answer {
    active: bool,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    nbf: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn contains(&self, wanted: &[String]) -> bool {
        match self {
            Self::One(aud) => wanted.contains(aud),
            Self::Many(list) => list.iter().any(|aud| wanted.contains(aud)),
        }
    }
}

impl Introspector {
    pub(super) fn new(
        endpoints: Vec<(String, String)>,
        client_id: String,
        client_secret: String,
        http: reqwest::Client,
    ) -> Self {
        Self {
            endpoints,
            client_id,
            client_secret,
            http,
            memo: Memo::default(),
        }
    }

    /// Checks `token`: cached, or asked of each issuer in turn until one
    /// says it is active.
    pub(super) async fn check(
        &self,
        token: &str,
        audiences: &[String],
        leeway: Duration,
    ) -> Result<Verified, OAuthRefusal> {
        let key = Memo::key(token);
        if let Some(answer) = self.memo.get(&key) {
            return answer;
        }
        let mut answer = Err(OAuthRefusal::InvalidToken(
            "the access token is not active at its issuer",
        ));
        for (issuer, endpoint) in &self.endpoints {
            answer = self.ask(issuer, endpoint, token, audiences, leeway).await;
            if answer.is_ok() {
                break;
            }
        }
        if !matches!(answer, Err(OAuthRefusal::Unavailable(_))) {
            let until = match &answer {
                Ok(verified) => {
                    let left = verified.expires_at.saturating_sub(now_secs());
                    Instant::now() + GOOD_FOR.min(Duration::from_secs(left))
                }
                Err(_) => Instant::now() + REFUSED_FOR,
            };
            self.memo.keep(key, answer.clone(), until);
        }
        answer
    }

    async fn ask(
        &self,
        issuer: &str,
        endpoint: &str,
        token: &str,
        audiences: &[String],
        leeway: Duration,
    ) -> Result<Verified, OAuthRefusal> {
        let unavailable = OAuthRefusal::Unavailable(
            "Service Unavailable: the access token cannot be checked now (introspection failed)",
        );
        // RFC 6749 §2.3.1: the id and secret are form-encoded, then Basic.
        let encode =
            |text: &str| form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = self
            .http
            .post(endpoint)
            .basic_auth(encode(&self.client_id), Some(encode(&self.client_secret)))
            .header(reqwest::header::ACCEPT, "application/json")
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(|error| {
                crate::telemetry::metrics::oauth_introspection(false);
                tracing::warn!(
                    endpoint,
                    reason = describe(&error).as_str(),
                    "OAuth introspection failed"
                );
                unavailable
            })?;
        let answer: Answer = read_json(response).await.map_err(|error| {
            let reason = error.reason();
            tracing::warn!(
                endpoint,
                reason = reason.as_str(),
                "OAuth introspection failed"
            );
            unavailable
        })?;
        crate::telemetry::metrics::oauth_introspection(true);
        judge(answer, issuer, audiences, leeway)
    }
}

/// What an introspection answer means for this resource server.
fn judge(
    answer: Answer,
    issuer: &str,
    audiences: &[String],
    leeway: Duration,
) -> Result<Verified, OAuthRefusal> {
    let invalid = OAuthRefusal::InvalidToken;
    if !answer.active {
        return Err(invalid("the access token is not active at its issuer"));
    }
    if answer.iss.as_deref().is_some_and(|iss| iss != issuer) {
        return Err(invalid("the access token's issuer is not trusted here"));
    }
    if !answer.aud.is_some_and(|aud| aud.contains(audiences)) {
        return Err(invalid("the access token is not for this resource (aud)"));
    }
    let now = now_secs();
    let leeway = leeway.as_secs();
    if answer.exp.is_some_and(|exp| exp + leeway < now) {
        return Err(invalid("the access token has expired"));
    }
    if answer.nbf.is_some_and(|nbf| nbf > now + leeway) {
        return Err(invalid("the access token is not valid yet (nbf)"));
    }
    let sub = answer
        .sub
        .or(answer.client_id)
        .ok_or(invalid("the introspected token names no subject"))?;
    Ok(Verified {
        principal: principal_of(issuer, &sub),
        scopes: scopes_of(answer.scope.as_deref(), None),
        expires_at: answer.exp.unwrap_or(now + GOOD_FOR.as_secs()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: serde_json::Value) -> Answer {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn answers_are_judged_by_activity_audience_and_time() {
        let aud = ["https://tasks.example.com/mcp".to_owned()];
        let leeway = Duration::from_secs(60);
        let good = judge(
            answer(serde_json::json!({
                "active": true, "sub": "alice", "aud": aud[0], "scope": "tasks read",
                "exp": now_secs() + 300,
            })),
            "https://login.example.com",
            &aud,
            leeway,
        )
        .unwrap();
        assert_eq!(
            good.principal.as_str(),
            "oauth:https://login.example.com#alice"
        );
        assert_eq!(good.scopes, ["tasks", "read"]);
        for (json, why) in [
            (serde_json::json!({"active": false}), "not active"),
            (
                serde_json::json!({"active": true, "sub": "a", "aud": "https://other/mcp"}),
                "not for this resource",
            ),
            (
                serde_json::json!({"active": true, "sub": "a"}),
                "not for this resource",
            ),
            (
                serde_json::json!({"active": true, "sub": "a", "aud": [aud[0]], "exp": 1}),
                "expired",
            ),
            (
                serde_json::json!({"active": true, "sub": "a", "aud": aud[0], "iss": "https://evil"}),
                "issuer",
            ),
            (
                serde_json::json!({"active": true, "aud": aud[0]}),
                "no subject",
            ),
        ] {
            let refused =
                judge(answer(json), "https://login.example.com", &aud, leeway).expect_err(why);
            assert!(refused.description().contains(why), "{refused:?} for {why}");
        }
    }
}
