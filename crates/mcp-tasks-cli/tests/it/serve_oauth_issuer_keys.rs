//! The key cache of `serve --oauth-issuer` under a provider in trouble: with
//! its JWKS endpoint down or slow, or the provider gone, requests whose key is
//! cached are answered promptly; a flood of tokens with unknown `kid`s makes
//! at most a few JWKS fetches (read from the provider's own counter); without
//! its metadata or keys at start, `serve` does not start, saying which address
//! failed.

use std::time::{Duration, Instant};

use crate::oidc::{JwksMode, Key, MACHINE_ALICE, SCOPES};
use crate::serve_oauth_issuer::{Rig, assert_invalid_token, list_tools, rig};

/// How long a request with a cached key may take while the provider is in
/// trouble (a loaded 2-core CI machine; the slow JWKS answers after 10 s).
const PROMPT: Duration = Duration::from_secs(2);

#[test]
fn cached_keys_keep_answering_while_the_jwks_is_slow_down_or_gone() {
    let rig = rig(&[]);
    let (provider, served, audience) = (&rig.provider, &rig.served, rig.audience.as_str());
    let token = provider.client_credentials_token(MACHINE_ALICE, audience, SCOPES);
    assert_eq!(
        list_tools(served.address(), Some(&token)).status,
        200,
        "the key is cached now"
    );

    for mode in [JwksMode::Slow(Duration::from_secs(10)), JwksMode::Down] {
        provider.set_jwks_mode(mode);
        // A token whose kid is unknown makes serve ask the troubled provider
        // (on a thread: it may wait); meanwhile the cached key keeps working.
        let unknown = provider.mint(
            &provider.claims("alice", audience, SCOPES, 300),
            Key::Unknown,
        );
        let asking = {
            let address = served.address().to_owned();
            std::thread::spawn(move || {
                let started = Instant::now();
                let answer = crate::support::raw_http(
                    &address,
                    "POST",
                    "/mcp",
                    &[
                        "Content-Type: application/json",
                        "Accept: application/json, text/event-stream",
                        &format!("Authorization: Bearer {unknown}"),
                    ],
                    "{}",
                );
                (answer.status, started.elapsed())
            })
        };
        for round in 0..20 {
            let started = Instant::now();
            let answer = list_tools(served.address(), Some(&token));
            let took = started.elapsed();
            assert_eq!(answer.status, 200, "{mode:?}, round {round}: {answer:?}");
            assert!(took < PROMPT, "{mode:?}, round {round}: {took:?}");
        }
        let (status, _) = asking.join().expect("the thread");
        assert_eq!(status, 401, "{mode:?}: the unknown kid is refused");
        provider.set_jwks_mode(JwksMode::Ok);
    }

    // The provider gone altogether (its process killed): the same.
    let unknown = provider.mint(
        &provider.claims("alice", audience, SCOPES, 300),
        Key::Unknown,
    );
    let Rig {
        provider, served, ..
    } = rig;
    drop(provider);
    for round in 0..20 {
        let started = Instant::now();
        let answer = list_tools(served.address(), Some(&token));
        let took = started.elapsed();
        assert_eq!(
            answer.status, 200,
            "provider gone, round {round}: {answer:?}"
        );
        assert!(took < PROMPT, "provider gone, round {round}: {took:?}");
    }
    let started = Instant::now();
    let answer = list_tools(served.address(), Some(&unknown));
    assert_invalid_token(
        served.address(),
        &answer,
        "an unknown kid, the provider gone",
    );
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
}

#[test]
fn a_flood_of_unknown_kids_makes_few_jwks_fetches() {
    let rig = rig(&[]);
    let (provider, served, audience) = (&rig.provider, &rig.served, rig.audience.as_str());
    let token = provider.client_credentials_token(MACHINE_ALICE, audience, SCOPES);
    assert_eq!(list_tools(served.address(), Some(&token)).status, 200);
    let before = provider.jwks_fetches();

    let claims = provider.claims("mallory", audience, SCOPES, 300);
    let tokens: Vec<String> = (0..200)
        .map(|n| provider.mint_with_kid(&claims, Key::Unknown, Some(&format!("flood-{n}"))))
        .collect();
    let started = Instant::now();
    let address = served.address();
    std::thread::scope(|scope| {
        for chunk in tokens.chunks(25) {
            scope.spawn(move || {
                for token in chunk {
                    assert_invalid_token(address, &list_tools(address, Some(token)), "flood");
                }
            });
        }
    });
    let took = started.elapsed();
    let fetches = provider.jwks_fetches() - before;
    // At most one refetch per 10 s per issuer: the flood lasts less than that
    // (one more if it straddles a window).
    assert!(
        fetches <= 2,
        "{fetches} JWKS fetches for 200 unknown kids in {took:?}"
    );
    // And the good token still works.
    assert_eq!(list_tools(served.address(), Some(&token)).status, 200);
}

#[test]
fn serve_does_not_start_without_an_issuers_metadata_and_keys() {
    let serve = |issuer: &str| {
        let output = crate::support::run(&[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--oauth-issuer",
            issuer,
            "--oauth-scopes",
            SCOPES,
        ]);
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // Nothing listens there: the metadata address it tried, and why.
    let closed = format!("http://127.0.0.1:{}", mcp_tasks_testkit::wait::free_port());
    let (code, stderr) = serve(&closed);
    assert_eq!(code, Some(69), "{stderr}");
    assert!(
        stderr.contains(&format!("{closed}/.well-known/")) && stderr.contains("--oauth-issuer"),
        "{stderr}"
    );

    // The provider answers its metadata but its JWKS is down: the keys' address.
    let dir = tempfile::tempdir().unwrap();
    let provider = crate::oidc::Provider::start(dir.path());
    provider.set_jwks_mode(JwksMode::Down);
    let (code, stderr) = serve(&provider.issuer);
    assert_eq!(code, Some(69), "{stderr}");
    assert!(
        stderr.contains(&format!("{}/jwks", provider.issuer)) && stderr.contains("503"),
        "{stderr}"
    );
}
