//! `mcp-tasks serve --oauth-issuer`: the MCP server as an OAuth 2.1 resource
//! server in front of a real OpenID provider (`oidc.rs`): a host discovers it
//! from a 401 with rmcp's own client auth and calls a task; every refusal has
//! its status and `WWW-Authenticate`; a rotated key is picked up; callers'
//! tasks stay apart; opaque tokens are introspected; the tokens file and the
//! gateway work beside it. The key cache's reliability: `serve_oauth_issuer_keys.rs`.

use std::time::{Duration, Instant};

use mcp_tasks::{TaskId, TasksClient};
use rmcp::transport::auth::{
    AuthClient, AuthorizationManager, AuthorizationMetadataSource, ClientCredentialsConfig,
};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::oidc::{
    INTROSPECTION_CLIENT, Key, MACHINE_ALICE, MACHINE_BOB, Provider, SCOPES, claims_of, now,
    secret_of,
};
use crate::serving::{Forms, Served, client_of, returned, start, text_of};
use crate::support::raw_http;
use mcp_tasks_testkit::wait::free_port;

/// A provider and `serve` trusting it, requiring [`SCOPES`].
pub(crate) struct Rig {
    pub(crate) provider: Provider,
    pub(crate) served: Served,
    /// What serve expects in `aud`: its default, `http://127.0.0.1:PORT/mcp`.
    pub(crate) audience: String,
    _dir: TempDir,
}

/// [`Rig`] with the further `serve` flags `extra`.
pub(crate) fn rig(extra: &[&str]) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(&dir.path().join("idp"));
    let served = serve(&provider, extra);
    let audience = served.url.clone();
    Rig {
        provider,
        served,
        audience,
        _dir: dir,
    }
}

/// `serve --http 127.0.0.1:PORT` (a port given, so the default audience
/// names it) on memory, trusting `provider`, requiring [`SCOPES`].
pub(crate) fn serve(provider: &Provider, extra: &[&str]) -> Served {
    let address = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "--http",
        &address,
        "--store",
        "memory",
        "--poll-interval",
        "50",
        "--oauth-issuer",
        &provider.issuer,
        "--oauth-scopes",
        SCOPES,
    ];
    args.extend_from_slice(extra);
    Served::spawn(crate::support::BIN, &args, &[], None)
}

/// What one request to the MCP endpoint got back.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// `WWW-Authenticate`, if any.
    pub(crate) challenge: Option<String>,
    pub(crate) body: Value,
}

/// A stateless `tools/list` (2026-07-28) with `token` as bearer, if any.
/// `address` is serve's `host:port`.
pub(crate) fn list_tools(address: &str, token: Option<&str>) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
    .to_string();
    let auth = token.map(|token| format!("Authorization: Bearer {token}"));
    let mut headers = vec![
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Mcp-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/list",
    ];
    headers.extend(auth.as_deref());
    let answer = raw_http(address, "POST", "/mcp", &headers, &body);
    Answer {
        status: answer.status,
        challenge: answer.header("www-authenticate").map(str::to_owned),
        body: serde_json::from_str(&answer.body).unwrap_or(Value::Null),
    }
}

/// The value of `name` in a `Bearer` challenge (`name="value"`).
pub(crate) fn param(challenge: &str, name: &str) -> Option<String> {
    let rest = challenge.strip_prefix("Bearer ")?;
    let at = rest.find(&format!("{name}=\""))?;
    let value = &rest[at + name.len() + 2..];
    Some(value[..value.find('"')?].to_owned())
}

/// The resource metadata URL every challenge of `served` names.
fn metadata_url(address: &str) -> String {
    format!("http://{address}/.well-known/oauth-protected-resource/mcp")
}

/// Asserts a 401 `invalid_token` refusal, as MCP's authorization says.
#[track_caller]
pub(crate) fn assert_invalid_token(address: &str, answer: &Answer, case: &str) {
    assert_eq!(answer.status, 401, "{case}: {answer:?}");
    let challenge = answer.challenge.as_deref().unwrap_or_default();
    assert_eq!(
        param(challenge, "error").as_deref(),
        Some("invalid_token"),
        "{case}: {challenge}"
    );
    assert_eq!(
        param(challenge, "resource_metadata"),
        Some(metadata_url(address)),
        "{case}: {challenge}"
    );
    assert_eq!(answer.body["error"]["code"], -32600, "{case}: {answer:?}");
}

/// A client of the MCP endpoint at `url` over `http` (e.g. rmcp's AuthClient).
async fn connect<C>(url: &str, http: C) -> TasksClient<Forms>
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient + Send + Sync + 'static,
{
    mcp_tasks_testkit::serve::polling_client_over(url, http).await
}

fn get_json(url: &str) -> (u16, Value) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (address, path) = rest.split_at(rest.find('/').expect("a path"));
    let answer = raw_http(address, "GET", path, &[], "");
    (
        answer.status,
        serde_json::from_str(&answer.body).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_discovers_the_server_from_a_401_and_calls_a_task_with_its_token() {
    let rig = rig(&[]);
    let issuer = rig.provider.issuer.clone();

    // A host's first request carries no token: 401 and where to look.
    let answer = list_tools(rig.served.address(), None);
    assert_eq!(answer.status, 401, "{answer:?}");
    let challenge = answer.challenge.expect("WWW-Authenticate");
    assert_eq!(
        param(&challenge, "error"),
        None,
        "no token is no error: {challenge}"
    );
    assert_eq!(param(&challenge, "scope").as_deref(), Some(SCOPES));
    let metadata = param(&challenge, "resource_metadata").expect("resource_metadata");
    assert_eq!(metadata, metadata_url(rig.served.address()));

    // The protected resource metadata (RFC 9728), at both addresses, without a token.
    for url in [
        metadata.clone(),
        format!(
            "http://{}/.well-known/oauth-protected-resource",
            rig.served.address()
        ),
    ] {
        let (status, document) = get_json(&url);
        assert_eq!(status, 200, "{url}: {document}");
        assert_eq!(
            document,
            json!({"resource": rig.audience, "authorization_servers": [issuer],
                "scopes_supported": ["tasks:read", "tasks:write"],
                "bearer_methods_supported": ["header"], "resource_name": "mcp-tasks"}),
            "{url}"
        );
    }

    // rmcp's client auth follows the challenge to the provider's metadata.
    let mut manager = AuthorizationManager::new(rig.served.url.as_str())
        .await
        .expect("a manager");
    let resolution = manager
        .resolve_metadata_from_challenge(Some(&challenge))
        .await
        .expect("discovery");
    assert_eq!(
        resolution.source,
        AuthorizationMetadataSource::ProtectedResourceMetadata
    );
    assert_eq!(
        resolution.metadata.token_endpoint,
        format!("{issuer}/token")
    );
    manager.set_metadata(resolution.metadata);
    // Client credentials for the resource the metadata names (RFC 8707).
    let config = ClientCredentialsConfig::ClientSecret {
        client_id: MACHINE_ALICE.into(),
        client_secret: secret_of(MACHINE_ALICE),
        scopes: SCOPES.split(' ').map(str::to_owned).collect(),
        resource: Some(rig.audience.clone()),
    };
    manager
        .validate_client_credentials_metadata(&config)
        .expect("the provider supports it");
    manager
        .configure_client_credentials(&config)
        .expect("configured");
    manager
        .exchange_client_credentials(&config)
        .await
        .expect("a token");
    let token = manager.get_access_token().await.expect("the token");
    let claims = claims_of(&token);
    assert_eq!(
        (&claims["aud"], &claims["sub"]),
        (&json!(rig.audience), &json!(MACHINE_ALICE))
    );

    // The host calls a task with it, to completion.
    let client = connect(
        &rig.served.url,
        AuthClient::new(reqwest::Client::new(), manager),
    )
    .await;
    let task = start(&client, "long_job", json!({"steps": 2, "step_ms": 10})).await;
    let outcome = client.await_task(&task, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 2 steps");
}

#[test]
fn every_bad_token_is_refused_with_its_status_and_challenge() {
    let rig = rig(&[]);
    let (provider, served, audience) = (&rig.provider, &rig.served, rig.audience.as_str());
    let claims = |change: &dyn Fn(&mut Value)| {
        let mut claims = provider.claims("alice", audience, SCOPES, 300);
        change(&mut claims);
        claims
    };

    // Good ones first: the provider's, minted with its RS256 or ES256 key,
    // and one expired 30 s ago (within the 60 s leeway).
    let good = [
        (
            "from the provider",
            provider.client_credentials_token(MACHINE_ALICE, audience, SCOPES),
        ),
        ("RS256", provider.mint(&claims(&|_| {}), Key::Provider)),
        ("ES256", provider.mint(&claims(&|_| {}), Key::ProviderEs256)),
        (
            "expired within the leeway",
            provider.mint(&claims(&|c| c["exp"] = json!(now() - 30)), Key::Provider),
        ),
        (
            "an audience list with this one",
            provider.mint(
                &claims(&|c| c["aud"] = json!(["urn:other", audience])),
                Key::Provider,
            ),
        ),
    ];
    for (case, token) in &good {
        let answer = list_tools(served.address(), Some(token));
        assert_eq!(answer.status, 200, "{case}: {answer:?}");
        assert!(
            answer.body["result"]["tools"].is_array(),
            "{case}: {answer:?}"
        );
    }

    let other_audience =
        provider.client_credentials_token(MACHINE_ALICE, "http://127.0.0.1:9/mcp", SCOPES);
    let bad = [
        ("for another audience", other_audience),
        (
            "expired",
            provider.mint(&claims(&|c| c["exp"] = json!(now() - 120)), Key::Provider),
        ),
        (
            "not yet valid",
            provider.mint(&claims(&|c| c["nbf"] = json!(now() + 300)), Key::Provider),
        ),
        (
            "without exp",
            provider.mint(
                &claims(&|c| {
                    c.as_object_mut().unwrap().remove("exp");
                }),
                Key::Provider,
            ),
        ),
        (
            "from another issuer",
            provider.mint(
                &claims(&|c| c["iss"] = json!("http://127.0.0.1:9")),
                Key::Provider,
            ),
        ),
        (
            "signed by an unknown key",
            provider.mint(&claims(&|_| {}), Key::Unknown),
        ),
        (
            "an unknown key under the provider's kid",
            provider.mint(&claims(&|_| {}), Key::UnknownUnderProviderKid),
        ),
        ("alg none", provider.mint(&claims(&|_| {}), Key::None)),
        (
            "HS256 keyed with the public key",
            provider.mint(&claims(&|_| {}), Key::Hs256KeyedWithPublicPem),
        ),
        ("not a JWT", "not-a-token-0123456789".to_owned()),
    ];
    for (case, token) in &bad {
        assert_invalid_token(
            served.address(),
            &list_tools(served.address(), Some(token)),
            case,
        );
    }

    // A good token without every required scope: 403, naming them.
    for scope in ["tasks:read", ""] {
        let token = provider.client_credentials_token(MACHINE_ALICE, audience, scope);
        let answer = list_tools(served.address(), Some(&token));
        assert_eq!(answer.status, 403, "scope {scope:?}: {answer:?}");
        let challenge = answer.challenge.as_deref().unwrap_or_default();
        assert_eq!(
            param(challenge, "error").as_deref(),
            Some("insufficient_scope"),
            "{challenge}"
        );
        assert_eq!(
            param(challenge, "scope").as_deref(),
            Some(SCOPES),
            "{challenge}"
        );
        assert_eq!(
            param(challenge, "resource_metadata"),
            Some(metadata_url(served.address()))
        );
        assert_eq!(answer.body["error"]["code"], -32600, "{answer:?}");
    }
}

#[test]
fn a_key_rotated_at_the_provider_is_picked_up_without_restarting_serve() {
    let rig = rig(&[]);
    let (provider, served, audience) = (&rig.provider, &rig.served, rig.audience.as_str());
    let before = provider.client_credentials_token(MACHINE_ALICE, audience, SCOPES);
    assert_eq!(list_tools(served.address(), Some(&before)).status, 200);

    let kid = provider.rotate();
    let after = provider.client_credentials_token(MACHINE_ALICE, audience, SCOPES);
    assert_eq!(
        jsonwebtoken::decode_header(&after).unwrap().kid.as_deref(),
        Some(kid.as_str())
    );
    assert_eq!(
        list_tools(served.address(), Some(&after)).status,
        200,
        "the new key"
    );
    assert_eq!(
        list_tools(served.address(), Some(&before)).status,
        200,
        "the old key, still published"
    );

    // Once more at once, the old keys retired: serve refetches an issuer's
    // keys at most once per 10 s, so the newest key is refused until that
    // window has passed, then accepted (polled, within a bound).
    let newest = provider.rotate_retiring();
    let token = provider.client_credentials_token(MACHINE_BOB, audience, SCOPES);
    assert_eq!(
        jsonwebtoken::decode_header(&token).unwrap().kid.as_deref(),
        Some(newest.as_str())
    );
    let rotated = Instant::now();
    loop {
        let answer = list_tools(served.address(), Some(&token));
        if answer.status == 200 {
            break;
        }
        assert_invalid_token(served.address(), &answer, "the newest key, not fetched yet");
        assert!(
            rotated.elapsed() < Duration::from_secs(15),
            "the newest key was not picked up within 15 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_tasks_stay_apart_and_a_refreshed_token_keeps_them() {
    let rig = rig(&[]);
    let (provider, url, audience) = (
        &rig.provider,
        rig.served.url.as_str(),
        rig.audience.as_str(),
    );
    let alice_signed_in = provider.sign_in("alice", audience, SCOPES);
    let bob_signed_in = provider.sign_in("bob", audience, SCOPES);
    let token = |answer: &Value| answer["access_token"].as_str().expect("a token").to_owned();

    let alice = client_of(url, Some(&token(&alice_signed_in))).await;
    let task = start(&alice, "sleep", json!({"ms": 60_000})).await;

    // Bob, signed in on the same client, and a machine: no such task for either,
    // the same error as an id nobody has.
    let bob = client_of(url, Some(&token(&bob_signed_in))).await;
    let machine = client_of(
        url,
        Some(&provider.client_credentials_token(MACHINE_BOB, audience, SCOPES)),
    )
    .await;
    let unknown = alice
        .get(&TaskId::new("an-id-nobody-has-0123456789abcdef0123456789a"))
        .await
        .expect_err("unknown");
    for (who, other) in [("bob", &bob), ("machine-bob", &machine)] {
        let error = other.get(&task.id).await.expect_err("not theirs");
        assert_eq!(error.code(), unknown.code(), "{who} get: {error}");
        assert_eq!(error.code(), Some(-32602), "{who} get: {error}");
        let error = other.cancel(&task.id).await.expect_err("not theirs");
        assert_eq!(error.code(), Some(-32602), "{who} cancel: {error}");
    }

    // Alice's refreshed token (another access token, same sub) still sees it,
    // and so does a second sign-in of hers (another session, another device),
    // and one through another client (another app of hers, registered itself).
    let refreshed = provider.refresh(alice_signed_in["refresh_token"].as_str().unwrap());
    assert_ne!(token(&refreshed), token(&alice_signed_in));
    let again = provider.sign_in("alice", audience, SCOPES);
    let other_app = provider.register_public_client();
    let through_other_app = provider.sign_in_with(&other_app, "alice", audience, SCOPES);
    assert_eq!(
        claims_of(&token(&through_other_app))["client_id"],
        other_app
    );
    for answer in [&refreshed, &again, &through_other_app] {
        let alice = client_of(url, Some(&token(answer))).await;
        let state = alice.get(&task.id).await.expect("hers");
        assert_eq!(state.id, task.id);
    }
    let alice = client_of(url, Some(&token(&again))).await;
    alice.cancel(&task.id).await.expect("she cancels it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_introspected_with_the_servers_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(&dir.path().join("idp"));
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{}\n", INTROSPECTION_CLIENT.1)).unwrap();
    let served = serve(
        &provider,
        &[
            "--oauth-client-id",
            INTROSPECTION_CLIENT.0,
            "--oauth-client-secret-file",
            secret.to_str().unwrap(),
        ],
    );
    let audience = served.url.clone();
    provider.set_resource(&audience, json!({"format": "opaque"}));
    provider.set_resource("urn:another-resource", json!({"format": "opaque"}));

    let opaque = provider.client_credentials_token(MACHINE_ALICE, &audience, SCOPES);
    assert_eq!(opaque.split('.').count(), 1, "an opaque token");
    let introspections = provider.stats()["introspection"].as_u64().unwrap();
    assert_eq!(list_tools(served.address(), Some(&opaque)).status, 200);
    assert!(
        provider.stats()["introspection"].as_u64().unwrap() > introspections,
        "serve asked the provider"
    );
    // It serves tasks to that caller, and keeps them theirs.
    let alice = client_of(&served.url, Some(&opaque)).await;
    let task = start(&alice, "long_job", json!({"steps": 1, "step_ms": 10})).await;
    let outcome = alice.await_task(&task, &returned()).await.expect("ends");
    assert_eq!(text_of(&outcome), "done: 1 steps");
    let bob = client_of(
        &served.url,
        Some(&provider.client_credentials_token(MACHINE_BOB, &audience, SCOPES)),
    )
    .await;
    assert_eq!(
        bob.get(&task.id).await.expect_err("not bob's").code(),
        Some(-32602)
    );

    // Inactive (the provider never issued it), for another resource, without the scopes.
    let other = provider.client_credentials_token(MACHINE_ALICE, "urn:another-resource", SCOPES);
    for (case, token) in [
        (
            "inactive",
            "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG".to_owned(),
        ),
        ("for another resource", other),
    ] {
        assert_invalid_token(
            served.address(),
            &list_tools(served.address(), Some(&token)),
            case,
        );
    }
    let narrow = provider.client_credentials_token(MACHINE_ALICE, &audience, "tasks:read");
    assert_eq!(list_tools(served.address(), Some(&narrow)).status, 403);
}

#[test]
fn the_tokens_file_still_works_beside_oauth() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(&dir.path().join("idp"));
    let tokens = dir.path().join("tokens");
    let static_token = "carol-0123456789abcdef0123456789";
    std::fs::write(&tokens, format!("{static_token} carol\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let served = serve(&provider, &["--auth-tokens", tokens.to_str().unwrap()]);
    let oauth = provider.client_credentials_token(MACHINE_ALICE, &served.url, SCOPES);
    assert_eq!(
        list_tools(served.address(), Some(static_token)).status,
        200,
        "the file's token"
    );
    assert_eq!(
        list_tools(served.address(), Some(&oauth)).status,
        200,
        "an OAuth token"
    );
    assert_invalid_token(
        served.address(),
        &list_tools(served.address(), Some("carol-0123456789abcdef012345678X")),
        "neither",
    );
    let answer = list_tools(served.address(), None);
    assert_eq!(answer.status, 401);
    assert!(answer.challenge.unwrap().contains("resource_metadata="));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_binds_its_tasks_to_oauth_principals() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(&dir.path().join("idp"));
    let upstream = crate::support::http_server();
    let gateway = serve(&provider, &["--upstream-url", &upstream.url]);
    let audience = gateway.url.clone();
    let alice = client_of(
        &gateway.url,
        Some(&provider.client_credentials_token(MACHINE_ALICE, &audience, SCOPES)),
    )
    .await;
    let bob = client_of(
        &gateway.url,
        Some(&provider.client_credentials_token(MACHINE_BOB, &audience, SCOPES)),
    )
    .await;
    let task = start(&alice, "sleep", json!({"ms": 60_000})).await;
    assert_eq!(
        bob.get(&task.id).await.expect_err("not bob's").code(),
        Some(-32602)
    );
    assert_eq!(alice.get(&task.id).await.expect("hers").id, task.id);
    // Without a token the gateway refuses like any server.
    assert_eq!(list_tools(gateway.address(), None).status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_issuers_are_trusted_and_the_same_subject_at_each_is_another_caller() {
    let dir = tempfile::tempdir().unwrap();
    let first = Provider::start(&dir.path().join("first"));
    let second = Provider::start(&dir.path().join("second"));
    let served = serve(&first, &["--oauth-issuer", &second.issuer]);
    let audience = served.url.clone();

    let (status, document) = get_json(&metadata_url(served.address()));
    assert_eq!(status, 200);
    assert_eq!(
        document["authorization_servers"],
        json!([first.issuer, second.issuer])
    );

    // alice signs in at each: both tokens are good, but they are two callers.
    let token = |provider: &Provider| {
        provider.sign_in("alice", &audience, SCOPES)["access_token"]
            .as_str()
            .expect("a token")
            .to_owned()
    };
    let at_first = client_of(&served.url, Some(&token(&first))).await;
    let at_second = client_of(&served.url, Some(&token(&second))).await;
    let task = start(&at_first, "sleep", json!({"ms": 60_000})).await;
    assert_eq!(
        at_second
            .get(&task.id)
            .await
            .expect_err("another issuer's alice")
            .code(),
        Some(-32602)
    );
    assert_eq!(at_first.get(&task.id).await.expect("hers").id, task.id);

    // A token of the second issuer signed with the first one's key is not good.
    let forged = first.mint(
        &second.claims("alice", &audience, SCOPES, 300),
        Key::Provider,
    );
    assert_invalid_token(
        served.address(),
        &list_tools(served.address(), Some(&forged)),
        "the second issuer's claims, the first one's key",
    );
}

#[test]
fn an_explicit_audience_is_the_resource_and_names_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(&dir.path().join("idp"));
    // The public URL a reverse proxy serves it at, not the address it listens on.
    let public = "https://tasks.example.test/mcp";
    let served = serve(&provider, &["--oauth-audience", public]);

    let answer = list_tools(served.address(), None);
    assert_eq!(answer.status, 401);
    let challenge = answer.challenge.expect("a challenge");
    assert_eq!(
        param(&challenge, "resource_metadata").as_deref(),
        Some("https://tasks.example.test/.well-known/oauth-protected-resource/mcp"),
        "{challenge}"
    );
    let (status, document) = get_json(&metadata_url(served.address()));
    assert_eq!((status, &document["resource"]), (200, &json!(public)));

    let good = provider.client_credentials_token(MACHINE_ALICE, public, SCOPES);
    assert_eq!(list_tools(served.address(), Some(&good)).status, 200);
    // A token for the address it listens on is for another resource.
    let local = provider.client_credentials_token(MACHINE_ALICE, &served.url, SCOPES);
    let answer = list_tools(served.address(), Some(&local));
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(
        param(answer.challenge.as_deref().unwrap_or_default(), "error").as_deref(),
        Some("invalid_token")
    );
}
