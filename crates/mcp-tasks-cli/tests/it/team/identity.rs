//! Identity to the upstream: an upstream that checks `Authorization`
//! (`serve --http --auth-tokens`, which records each task's caller) sees
//! each caller's own token (`identity = "passthrough"`) or the header
//! mapped from its label (`identity = "label"`), never another's, under
//! concurrent calls of two callers; a token the upstream refuses fails
//! the call and makes nothing there, and does not shut the others out.

use serde_json::Value;

use super::{ALICE, BOB, Folder, call, completed, gateway, path_str, quoted, refused, tools};
use crate::serving::Served;
use crate::support::run;

const CAROL: &str = "carol-token-0123456789abcdef";
const DAVE: &str = "dave-token-0123456789abcdef";
/// Known to the gateway, not to the upstream.
const EVE: &str = "eve-token-0123456789abcdef";
/// The gateway's own, for its own connection (it lists the tools).
const GATEWAY: &str = "gateway-token-0123456789abcdef";

/// The `headers` key of the gateway's own connection.
fn own_headers() -> String {
    format!(
        "headers = {{ Authorization = {} }}\n",
        quoted(&format!("Bearer {GATEWAY}"))
    )
}

/// Our server on HTTP, in memory, checking the tokens of alice, bob, carol,
/// dave and the gateway, with an operator listener.
fn upstream(folder: &Folder) -> Served {
    let tokens = folder.tokens(
        "upstream-tokens.txt",
        &[
            (ALICE, "alice"),
            (BOB, "bob"),
            (CAROL, "carol"),
            (DAVE, "dave"),
            (GATEWAY, "gateway"),
        ],
    );
    Served::spawn(
        crate::support::BIN,
        &[
            "--http",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--poll-interval",
            "50",
            "--auth-tokens",
            path_str(&tokens),
            "--admin",
            "127.0.0.1:0",
        ],
        &[],
        None,
    )
}

/// `admin ARGS --json` against the upstream's operator listener.
fn admin(upstream: &Served, args: &[&str]) -> Value {
    let server = format!("http://{}", upstream.admin);
    let mut all = vec!["admin", args[0], "--server", &server, "--json"];
    all.extend_from_slice(&args[1..]);
    let output = run(&all);
    assert!(
        output.status.success(),
        "admin {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON value")
}

/// Every task the upstream holds: its caller's label and its result's
/// text, sorted.
fn owners(upstream: &Served) -> Vec<(String, String)> {
    let listed = admin(upstream, &["ls"]);
    let mut owners: Vec<(String, String)> = listed
        .as_array()
        .expect("an array")
        .iter()
        .map(|task| {
            let hash = task["task"].as_str().expect("a hash");
            let shown = admin(upstream, &["show", hash, "--show-results"]);
            (
                shown["principal"].as_str().expect("a label").to_owned(),
                shown["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    owners.sort();
    owners
}

/// Four calls of `up__sleep` by each of `callers` (token, base) at once,
/// sleeping base+1..=base+4 ms; each must complete with its own result.
fn concurrently(url: &str, callers: &[(&'static str, u64)]) {
    let calls: Vec<_> = callers
        .iter()
        .flat_map(|&(token, base)| (1..=4).map(move |n| (token, base + n)))
        .map(|(token, ms)| {
            let url = url.to_owned();
            std::thread::spawn(move || {
                let argument = format!("ms={ms}");
                let text = completed(&url, Some(token), "up__sleep", &[&argument]);
                assert_eq!(text, format!("slept {ms} ms"));
            })
        })
        .collect();
    for call in calls {
        call.join().expect("a call completed");
    }
}

/// What each of `label` (base) ran: (label, "slept base+n ms"), n = 1..=4.
fn expected(owners: &[(&str, u64)]) -> Vec<(String, String)> {
    let mut expected: Vec<(String, String)> = owners
        .iter()
        .flat_map(|&(label, base)| {
            (1..=4).map(move |n| (label.to_owned(), format!("slept {} ms", base + n)))
        })
        .collect();
    expected.sort();
    expected
}

#[test]
fn each_caller_reaches_the_upstream_as_itself_or_as_its_mapped_header() {
    let folder = Folder::new();
    let upstream = upstream(&folder);
    folder.tokens(
        "gateway-tokens.txt",
        &[(ALICE, "alice"), (BOB, "bob"), (EVE, "eve")],
    );
    let passthrough = folder.write(
        "passthrough.toml",
        &format!(
            "store = \"memory\"\npoll-interval = 50\nauth-tokens = \"gateway-tokens.txt\"\n\n\
             [[upstream]]\nname = \"up\"\nurl = {url}\nidentity = \"passthrough\"\n{headers}",
            url = quoted(&upstream.url),
            headers = own_headers(),
        ),
    );
    let served = gateway(&passthrough, &[]);
    concurrently(&served.url, &[(ALICE, 300), (BOB, 400)]);
    assert_eq!(owners(&upstream), expected(&[("alice", 300), ("bob", 400)]));
    drop(served);

    let mapped = folder.write(
        "label.toml",
        &format!(
            "store = \"memory\"\npoll-interval = 50\nauth-tokens = \"gateway-tokens.txt\"\n\n\
             [[upstream]]\nname = \"up\"\nurl = {url}\nidentity = \"label\"\n\
             identity-header = \"Authorization\"\n\
             identity-values = {{ alice = {carol}, bob = {dave} }}\n{headers}",
            url = quoted(&upstream.url),
            headers = own_headers(),
            carol = quoted(&format!("Bearer {CAROL}")),
            dave = quoted(&format!("Bearer {DAVE}")),
        ),
    );
    let served = gateway(&mapped, &[]);
    concurrently(&served.url, &[(ALICE, 500), (BOB, 600)]);
    let mut all = expected(&[("alice", 300), ("bob", 400), ("carol", 500), ("dave", 600)]);
    all.sort();
    assert_eq!(owners(&upstream), all);
    // Eve has no mapped value: the upstream is not hers to list or call.
    assert_eq!(tools(&served.url, Some(EVE)), Vec::<String>::new());
    assert_eq!(
        refused(&served.url, Some(EVE), "up__sleep"),
        refused(&served.url, Some(EVE), "up__no_such_tool")
    );
}

/// A gateway passing the caller's token on to `upstream`, with
/// `breaker-failures = 2`.
fn passthrough(folder: &Folder, upstream: &Served) -> Served {
    folder.tokens("gateway-tokens.txt", &[(ALICE, "alice"), (EVE, "eve")]);
    let file = folder.write(
        "gw.toml",
        &format!(
            "store = \"memory\"\npoll-interval = 50\nauth-tokens = \"gateway-tokens.txt\"\n\n\
             [[upstream]]\nname = \"up\"\nurl = {url}\nidentity = \"passthrough\"\n\
             breaker-failures = 2\nbreaker-cool-down = 60\n{headers}",
            url = quoted(&upstream.url),
            headers = own_headers(),
        ),
    );
    gateway(&file, &[])
}

#[test]
fn a_token_the_upstream_refuses_fails_the_call_and_makes_nothing_there() {
    let folder = Folder::new();
    let upstream = upstream(&folder);
    let served = passthrough(&folder, &upstream);
    let (code, value) = call(&served.url, Some(EVE), "up__sleep", &["ms=10"]);
    assert_ne!(code, 0, "{value}");
    let message = value["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!message.is_empty(), "an error saying why: {value}");
    assert_eq!(owners(&upstream), Vec::<(String, String)>::new());
    // Alice is not refused.
    assert_eq!(
        completed(&served.url, Some(ALICE), "up__sleep", &["ms=10"]),
        "slept 10 ms"
    );
    // It names the upstream and why it refused (a clear message, as the
    // timeout's and the breaker's are).
    let lower = message.to_lowercase();
    assert!(
        message.contains("the upstream up")
            && ["401", "authoriz", "auth required", "token"]
                .iter()
                .any(|word| lower.contains(word)),
        "not clear which upstream refused what: {message:?}"
    );
}

/// A connection of a caller's identity whose handshake the upstream
/// refuses (HTTP 401) is no outage: it does not count on the upstream's
/// breaker, or any admitted caller could make the upstream unavailable to
/// every other for the cool-down.
#[test]
fn one_callers_refused_token_does_not_shut_the_others_out() {
    let folder = Folder::new();
    let upstream = upstream(&folder);
    let served = passthrough(&folder, &upstream);
    // More refusals in a row than the breaker's bound.
    for _ in 0..4 {
        let (code, value) = call(&served.url, Some(EVE), "up__sleep", &["ms=10"]);
        assert_ne!(code, 0, "{value}");
    }
    // The upstream is up: alice's call goes through.
    let (code, value) = call(&served.url, Some(ALICE), "up__sleep", &["ms=10"]);
    assert_eq!(
        (code, &value["status"]),
        (0, &serde_json::json!("completed")),
        "a caller whose token the upstream refuses opened the upstream's circuit breaker for \
         every caller: {value}"
    );
}
