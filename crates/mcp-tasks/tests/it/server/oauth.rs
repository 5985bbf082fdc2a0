//! The serving recipe as an OAuth 2.1 resource server (feature `oauth`),
//! over real HTTP on 127.0.0.1, against an authorization server served
//! in process: metadata found from the issuer, keys from its JWKS, tokens
//! signed here with its keys (and with keys it never published). The CLI's
//! tests run the same checks against a real OpenID provider; these cover
//! what one cannot be made to do on cue: a JWKS that is slow or down, a
//! flood of made-up key ids counted at the source, `alg` attacks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::IntoResponse;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::oauth::{OAuthConfig, OAuthResourceServer};
use serde_json::{Value, json};

use crate::server::access::{Endpoint, get, refused_everywhere, served_everywhere, task};

const AUDIENCE: &str = "https://tasks.example.test/mcp";
const METADATA_URL: &str = "https://tasks.example.test/.well-known/oauth-protected-resource/mcp";

/// Two EC P-256 test keys (made for these tests, never used elsewhere):
/// the private key (PKCS #8) and the public point of each.
const KEY_A: (&str, &str, &str) = (
    "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLqrsQnGMGTaG+cxp\nba1vAJJ4xSPSsbW4batXizuDyk+hRANCAASFIadzuCLE2Fm6NexoxIP6FBLfOgCK\nc+XJEHl1xQTDtYnrEKehxC8dw1XmDLIpfIqWOXKRyrkpHfclSkFg3Udx\n-----END PRIVATE KEY-----\n",
    "hSGnc7gixNhZujXsaMSD-hQS3zoAinPlyRB5dcUEw7U",
    "iesQp6HELx3DVeYMsil8ipY5cpHKuSkd9yVKQWDdR3E",
);
const KEY_B: (&str, &str, &str) = (
    "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaKG8BYjbaSWKVp1b\nl72ZIRJXa4O7OykZax+ojWeObo+hRANCAATl3/IDsNFAxOD2Ql0Bxu04Z7AARqm3\nlGkcnXDwbtE6uuK03pjA+AD9Pf1vFgxsOzbMrquPTW76rMRf1ERWT080\n-----END PRIVATE KEY-----\n",
    "5d_yA7DRQMTg9kJdAcbtOGewAEapt5RpHJ1w8G7ROro",
    "4rTemMD4AP09_W8WDGw7Nsyuq49NbvqsxF_URFZPTzQ",
);

fn jwk(kid: &str, key: (&str, &str, &str)) -> Value {
    json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
        "kid": kid, "x": key.1, "y": key.2})
}

/// How the issuer's JWKS endpoint behaves.
#[derive(Clone, Copy, PartialEq)]
enum Jwks {
    Up,
    Slow,
    Down,
}

/// The authorization server in process.
struct IssuerState {
    issuer: String,
    keys: Mutex<Vec<Value>>,
    jwks: Mutex<Jwks>,
    jwks_fetches: AtomicU64,
    introspections: AtomicU64,
}

struct Issuer {
    state: Arc<IssuerState>,
}

const INTROSPECTOR: (&str, &str) = ("resource-server", "s3cret:with&odd=chars");
const OPAQUE_GOOD: &str = "opaque-token-of-carol-0123456789";
const OPAQUE_OTHER_AUDIENCE: &str = "opaque-token-for-elsewhere-0123";

impl Issuer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(IssuerState {
            issuer,
            keys: Mutex::new(vec![jwk("a", KEY_A)]),
            jwks: Mutex::new(Jwks::Up),
            jwks_fetches: AtomicU64::new(0),
            introspections: AtomicU64::new(0),
        });
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(metadata),
            )
            .route("/jwks", axum::routing::get(jwks))
            .route("/introspect", axum::routing::post(introspect))
            .with_state(Arc::clone(&state));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { state }
    }

    fn url(&self) -> &str {
        &self.state.issuer
    }

    fn fetches(&self) -> u64 {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    fn set_jwks(&self, mode: Jwks) {
        *self.state.jwks.lock().unwrap() = mode;
    }

    /// A token with `claims` over the defaults, signed with `key` as `kid`.
    fn token(&self, kid: &str, key: (&str, &str, &str), claims: &Value) -> String {
        let mut all = self.claims("alice");
        for (name, value) in claims.as_object().unwrap() {
            all[name] = value.clone();
        }
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        let key = EncodingKey::from_ec_pem(key.0.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &all, &key).unwrap()
    }

    fn claims(&self, sub: &str) -> Value {
        let now = now();
        json!({"iss": self.url(), "sub": sub, "aud": AUDIENCE, "scope": "tasks read",
            "iat": now, "exp": now + 300, "jti": format!("{sub}-{}", rand_suffix())})
    }

    fn of(&self, sub: &str) -> String {
        self.token("a", KEY_A, &json!({"sub": sub}))
    }
}

async fn metadata(State(state): State<Arc<IssuerState>>) -> axum::response::Response {
    json_response(&json!({
        "issuer": state.issuer,
        "jwks_uri": format!("{}/jwks", state.issuer),
        "introspection_endpoint": format!("{}/introspect", state.issuer),
        "token_endpoint": format!("{}/token", state.issuer),
    }))
}

async fn jwks(State(state): State<Arc<IssuerState>>) -> axum::response::Response {
    state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let mode = *state.jwks.lock().unwrap();
    match mode {
        Jwks::Down => http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Jwks::Slow => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            http::StatusCode::GATEWAY_TIMEOUT.into_response()
        }
        Jwks::Up => {
            let keys = state.keys.lock().unwrap().clone();
            json_response(&json!({ "keys": keys }))
        }
    }
}

async fn introspect(
    State(state): State<Arc<IssuerState>>,
    headers: http::HeaderMap,
    body: String,
) -> axum::response::Response {
    state.introspections.fetch_add(1, Ordering::SeqCst);
    // RFC 6749 §2.3.1: Basic of the form-encoded id and secret.
    let expected = format!(
        "Basic {}",
        base64_encode(format!("{}:{}", form(INTROSPECTOR.0), form(INTROSPECTOR.1)).as_bytes())
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return http::StatusCode::UNAUTHORIZED.into_response();
    }
    let token = body
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
        .unwrap_or("");
    let now = now();
    let answer = match token {
        OPAQUE_GOOD => json!({"active": true, "sub": "carol", "aud": [AUDIENCE],
            "scope": "tasks read", "exp": now + 300, "iss": state.issuer}),
        OPAQUE_OTHER_AUDIENCE => json!({"active": true, "sub": "carol",
            "aud": "https://elsewhere.example.test/mcp", "scope": "tasks read", "exp": now + 300}),
        _ => json!({"active": false}),
    };
    json_response(&answer)
}

fn json_response(value: &Value) -> axum::response::Response {
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn form(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._*".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn rand_suffix() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

async fn resource_server(config: OAuthConfig) -> Arc<OAuthResourceServer> {
    Arc::new(OAuthResourceServer::discover(config).await.unwrap())
}

fn config(issuer: &Issuer) -> OAuthConfig {
    OAuthConfig::new(AUDIENCE)
        .with_issuer(issuer.url())
        .with_scopes(["tasks"])
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn access_tokens_are_required_on_every_route_and_name_the_user() {
    let issuer = Issuer::start().await;
    let oauth = resource_server(config(&issuer)).await;
    let endpoint = Endpoint::new(|recipe| recipe.with_oauth(oauth)).await;
    let alice = bearer(&issuer.of("alice"));
    let id = task(&endpoint, "127.0.0.1", &[("authorization", &alice)]).await;

    // No token: 401 with where to find how to sign in, and no error code.
    for headers in refused_everywhere(&endpoint, "127.0.0.1", &id, &[], 401).await {
        assert_eq!(
            headers["www-authenticate"],
            format!("Bearer scope=\"tasks\", resource_metadata=\"{METADATA_URL}\"").as_str()
        );
    }
    // The metadata, at the suffixed path and the plain one, without a token.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let url = endpoint.url("127.0.0.1").replace("/mcp", path);
        let response = reqwest::get(&url).await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let document: Value = response.json().await.unwrap();
        assert_eq!(
            document,
            json!({"resource": AUDIENCE, "authorization_servers": [issuer.url()],
                "scopes_supported": ["tasks"], "bearer_methods_supported": ["header"],
                "resource_name": "mcp-tasks"})
        );
    }

    // Another token of alice's (a refresh, another device) reaches her task
    // on every route; bob's does not see it.
    let again = bearer(&issuer.of("alice"));
    assert_ne!(again, alice);
    served_everywhere(&endpoint, "127.0.0.1", &id, &[("authorization", &again)]).await;
    let bob = bearer(&issuer.of("bob"));
    let (status, _, body) = endpoint
        .post("127.0.0.1", &get(&id), &[("authorization", &bob)])
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

#[tokio::test]
async fn bad_tokens_are_refused_with_what_is_wrong() {
    let issuer = Issuer::start().await;
    let oauth = resource_server(config(&issuer)).await;
    let endpoint = Endpoint::new(|recipe| recipe.with_oauth(oauth)).await;
    let id = task(
        &endpoint,
        "127.0.0.1",
        &[("authorization", &bearer(&issuer.of("alice")))],
    )
    .await;
    let now = now();
    let unsigned = format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        base64url(issuer.claims("alice").to_string().as_bytes())
    );
    // The classic confusion: HMAC keyed with the issuer's public key.
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("a".to_owned());
    let confused = jsonwebtoken::encode(
        &hs,
        &issuer.claims("alice"),
        &EncodingKey::from_secret(KEY_A.1.as_bytes()).unwrap(),
    )
    .unwrap();
    let cases = [
        (
            issuer.token(
                "a",
                KEY_A,
                &json!({"aud": "https://elsewhere.example.test/mcp"}),
            ),
            "not for this resource",
        ),
        (
            issuer.token("a", KEY_A, &json!({"exp": now - 3600})),
            "expired",
        ),
        (
            issuer.token("a", KEY_A, &json!({"nbf": now + 3600})),
            "not valid yet",
        ),
        (issuer.token("b", KEY_B, &json!({})), "does not publish"),
        (issuer.token("a", KEY_B, &json!({})), "signature"),
        (
            issuer.token("a", KEY_A, &json!({"iss": "https://evil.example.test"})),
            "issuer is not trusted",
        ),
        (unsigned, "not a JWT signed with an algorithm accepted"),
        (confused, "symmetric"),
        ("not-a-jwt-at-all".to_owned(), "not a JWT"),
    ];
    for (token, why) in cases {
        let extra = [("authorization", bearer(&token))];
        let extra: Vec<(&str, &str)> = extra.iter().map(|(n, v)| (*n, v.as_str())).collect();
        for headers in refused_everywhere(&endpoint, "127.0.0.1", &id, &extra, 401).await {
            let challenge = headers["www-authenticate"].to_str().unwrap();
            assert!(
                challenge.starts_with("Bearer error=\"invalid_token\", error_description=\"")
                    && challenge.contains(why)
                    && challenge.ends_with(&format!("resource_metadata=\"{METADATA_URL}\"")),
                "{why}: {challenge}"
            );
            assert!(
                !challenge.contains(&token[..token.len().min(20)]),
                "no token in {challenge}"
            );
        }
    }
    // A good token without the scope the server requires: 403.
    let narrow = issuer.token("a", KEY_A, &json!({"scope": "read"}));
    let extra = [("authorization", bearer(&narrow))];
    let extra: Vec<(&str, &str)> = extra.iter().map(|(n, v)| (*n, v.as_str())).collect();
    for headers in refused_everywhere(&endpoint, "127.0.0.1", &id, &extra, 403).await {
        assert!(
            headers["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer error=\"insufficient_scope\""),
        );
        assert!(
            headers["www-authenticate"]
                .to_str()
                .unwrap()
                .contains("scope=\"tasks\"")
        );
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_made_up_key_ids_do_not_flood_the_issuer() {
    let issuer = Issuer::start().await;
    let oauth = resource_server(config(&issuer)).await;
    assert_eq!(issuer.fetches(), 1, "the keys are fetched once at start");
    // The issuer rotates to key b: a token signed with it is accepted after
    // one fetch.
    issuer.state.keys.lock().unwrap().push(jwk("b", KEY_B));
    let rotated = issuer.token("b", KEY_B, &json!({}));
    let principal = oauth.authenticate_token(&rotated).await.unwrap();
    assert_eq!(principal.as_str(), format!("oauth:{}#alice", issuer.url()));
    assert_eq!(issuer.fetches(), 2);
    // Two hundred tokens with key ids nobody published, at once: refused,
    // and the issuer is asked at most once more.
    let forged: Vec<String> = (0..200)
        .map(|n| issuer.token(&format!("made-up-{n}"), KEY_A, &json!({})))
        .collect();
    let refusals =
        futures::future::join_all(forged.iter().map(|token| oauth.authenticate_token(token))).await;
    assert!(refusals.iter().all(Result::is_err));
    assert!(
        issuer.fetches() <= 3,
        "{} fetches for 200 unknown key ids",
        issuer.fetches()
    );
}

#[tokio::test]
async fn cached_keys_serve_while_the_issuer_is_slow_or_down() {
    let issuer = Issuer::start().await;
    let oauth = resource_server(config(&issuer).with_fetch_timeout(Duration::from_secs(1))).await;
    for mode in [Jwks::Slow, Jwks::Down] {
        issuer.set_jwks(mode);
        // Fresh tokens (not remembered), signed with the cached key.
        let start = Instant::now();
        for _ in 0..20 {
            oauth.authenticate_token(&issuer.of("alice")).await.unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "20 checks with a cached key took {:?}",
            start.elapsed()
        );
    }
    // An unknown key while the issuer is slow: refused within the fetch
    // timeout, not the issuer's 30 s.
    issuer.set_jwks(Jwks::Slow);
    let start = Instant::now();
    let refused = oauth
        .authenticate_token(&issuer.token("b", KEY_B, &json!({})))
        .await;
    assert!(refused.is_err());
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn opaque_tokens_are_introspected_and_cached() {
    let issuer = Issuer::start().await;
    let oauth =
        resource_server(config(&issuer).with_introspection(INTROSPECTOR.0, INTROSPECTOR.1)).await;
    for _ in 0..3 {
        let principal = oauth.authenticate_token(OPAQUE_GOOD).await.unwrap();
        assert_eq!(principal.as_str(), format!("oauth:{}#carol", issuer.url()));
    }
    assert_eq!(
        issuer.state.introspections.load(Ordering::SeqCst),
        1,
        "one introspection for three requests"
    );
    let refused = oauth
        .authenticate_token(OPAQUE_OTHER_AUDIENCE)
        .await
        .unwrap_err();
    assert!(
        refused.description().contains("not for this resource"),
        "{refused:?}"
    );
    let refused = oauth
        .authenticate_token("opaque-unknown-0123456789")
        .await
        .unwrap_err();
    assert!(refused.description().contains("not active"), "{refused:?}");
    // Without introspection configured, an opaque token is refused at once.
    let jwt_only = resource_server(config(&issuer)).await;
    let refused = jwt_only.authenticate_token(OPAQUE_GOOD).await.unwrap_err();
    assert!(refused.description().contains("not a JWT"), "{refused:?}");
}

#[tokio::test]
async fn the_tokens_file_keeps_working_beside_oauth() {
    let issuer = Issuer::start().await;
    let oauth = resource_server(config(&issuer)).await;
    let tokens = BearerTokens::parse(b"ci-token-0123456789abcdef ci\n").unwrap();
    let endpoint =
        Endpoint::new(|recipe| recipe.with_oauth(oauth).with_bearer_tokens(tokens)).await;
    let ci = bearer("ci-token-0123456789abcdef");
    let id = task(&endpoint, "127.0.0.1", &[("authorization", &ci)]).await;
    served_everywhere(&endpoint, "127.0.0.1", &id, &[("authorization", &ci)]).await;
    // An OAuth user does not see the CI token's task; an unknown token gets
    // OAuth's challenge.
    let alice = bearer(&issuer.of("alice"));
    let (_, _, body) = endpoint
        .post("127.0.0.1", &get(&id), &[("authorization", &alice)])
        .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let unknown = bearer("unknown-token-0123456789abcdef");
    for headers in refused_everywhere(
        &endpoint,
        "127.0.0.1",
        &id,
        &[("authorization", &unknown)],
        401,
    )
    .await
    {
        assert!(
            headers["www-authenticate"]
                .to_str()
                .unwrap()
                .contains("resource_metadata=")
        );
    }
}

#[tokio::test]
async fn setup_fails_clearly() {
    let issuer = Issuer::start().await;
    let error = OAuthResourceServer::discover(OAuthConfig::new(AUDIENCE))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no OAuth issuer"), "{error}");
    let error = OAuthResourceServer::discover(
        OAuthConfig::new(AUDIENCE).with_issuer("http://login.example.test"),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("https://"), "{error}");
    let error =
        OAuthResourceServer::discover(OAuthConfig::new("not a url").with_issuer(issuer.url()))
            .await
            .unwrap_err();
    assert!(error.to_string().contains("audience"), "{error}");
    let error =
        OAuthResourceServer::discover(OAuthConfig::new(AUDIENCE).with_issuer("http://127.0.0.1:9"))
            .await
            .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("http://127.0.0.1:9/.well-known/oauth-authorization-server"),
        "{error}"
    );
    let error = OAuthResourceServer::discover(config(&issuer).with_scopes(["bad scope\""]))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("scope"), "{error}");
}

#[tokio::test]
async fn a_router_of_your_own_is_protected_by_the_layer() {
    use mcp_tasks::server::Authenticated;
    let issuer = Issuer::start().await;
    let oauth = resource_server(config(&issuer)).await;
    let router = axum::Router::new().route(
        "/whoami",
        axum::routing::get(|request: axum::extract::Request| async move {
            request
                .extensions()
                .get::<Authenticated>()
                .map_or("nobody".to_owned(), |mark| {
                    mark.principal().as_str().to_owned()
                })
        }),
    );
    let router = mcp_tasks::server::http::require_oauth(router, oauth);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let client = reqwest::Client::new();
    let response = client.get(format!("{base}/whoami")).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains(METADATA_URL)
    );
    let response = client
        .get(format!("{base}/whoami"))
        .header("authorization", bearer(&issuer.of("alice")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        format!("oauth:{}#alice", issuer.url())
    );
    let metadata: Value = client
        .get(format!("{base}/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], AUDIENCE);
}
