//! `serve --rate-per-caller`: a real server process on 127.0.0.1 with a
//! tokens file, asked over raw HTTP (to see the status and `Retry-After`)
//! and by `mcp-tasks call` (to see what a user is told).

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::serve_logged;
use crate::support::{json_of, raw_http, run};

pub(crate) const ALICE: &str = "alice-0123456789abcdef0123456789";
const BOB: &str = "bob-0123456789abcdef0123456789ab";

/// An HTTP answer: status, `Retry-After` if any, and the JSON body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<u64>,
    pub(crate) body: Value,
}

/// Posts a 2026-07-28 `tools/call` of `sleep` (a minute) to `url` with
/// `token`, over a connection of its own.
pub(crate) fn post_call(url: &str, token: &str) -> Answer {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (address, path) = rest.split_at(rest.find('/').expect("a path"));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"ms": 60000},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
    .to_string();
    let auth = format!("Authorization: Bearer {token}");
    let headers = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Mcp-Protocol-Version: 2026-07-28",
        "Mcp-Method: tools/call",
        "Mcp-Name: sleep",
        &auth,
    ];
    let answer = raw_http(address, "POST", path, &headers, &body);
    let (status, body) = (answer.status, answer.body.as_str());
    let retry_after = answer
        .header("retry-after")
        .map(|value| value.parse().expect("whole seconds"));
    let body =
        serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {}", answer.body));
    Answer {
        status,
        retry_after,
        body,
    }
}

/// The `data` of a refusal for rate, checked.
fn rate_refusal(error: &Value) -> &Value {
    assert_eq!(error["code"], -32603, "{error}");
    let data = &error["data"];
    assert_eq!(data["reason"], "rateLimited", "{error}");
    assert_eq!(data["ratePerCaller"], "10/min", "{error}");
    assert_eq!(data["rateBurst"], 2, "{error}");
    data
}

#[test]
fn a_caller_past_its_rate_gets_503_with_retry_after_and_is_told_why() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ALICE} alice\n{BOB} bob\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    // 10 a minute: a creation every 6 s past the burst, so the refusals
    // below hold however slow the machine.
    let (mut server, url) = serve_logged(
        &[
            "--rate-per-caller",
            "10/min",
            "--rate-burst",
            "2",
            "--auth-tokens",
            tokens.to_str().unwrap(),
        ],
        &[],
    );
    for _ in 0..2 {
        let created = post_call(&url, ALICE);
        assert_eq!(created.status, 200, "{}", created.body);
    }
    let refused = post_call(&url, ALICE);
    assert_eq!(refused.status, 503, "{}", refused.body);
    let retry_after_ms = rate_refusal(&refused.body["error"])["retryAfterMs"]
        .as_u64()
        .expect("a hint");
    assert!((1..=6000).contains(&retry_after_ms), "{}", refused.body);
    assert_eq!(refused.retry_after, Some(retry_after_ms.div_ceil(1000)));

    // `mcp-tasks call` says what the server said, in JSON and in words.
    let call = |token: &str, json: bool| {
        let header = format!("Authorization: Bearer {token}");
        let mut args = vec![
            "call",
            "--url",
            &url,
            "sleep",
            "--arg",
            "ms=60000",
            "--no-wait",
            "--header",
            &header,
        ];
        if json {
            args.push("--json");
        }
        run(&args)
    };
    let (exit, value) = json_of(&call(ALICE, true));
    assert_eq!(exit, 2, "{value}");
    rate_refusal(&value["error"]);
    let told = call(ALICE, false);
    let stderr = String::from_utf8_lossy(&told.stderr);
    assert_eq!(told.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error -32603: this caller creates tasks faster than 10/min"),
        "{stderr}"
    );
    assert!(stderr.contains("\"reason\":\"rateLimited\""), "{stderr}");

    // Another caller has its own rate.
    let (exit, value) = json_of(&call(BOB, true));
    assert_eq!((exit, &value["status"]), (0, &json!("working")), "{value}");

    // Once the hint has passed, the caller is served again.
    let last = post_call(&url, ALICE);
    if last.status == 503 {
        let wait = rate_refusal(&last.body["error"])["retryAfterMs"]
            .as_u64()
            .unwrap();
        std::thread::sleep(Duration::from_millis(wait));
    }
    let served = post_call(&url, ALICE);
    assert_eq!(served.status, 200, "{}", served.body);
    assert_eq!(
        served.body["result"]["status"], "working",
        "{}",
        served.body
    );
    server.kill_9();
}

#[test]
fn bad_rate_flags_are_refused_with_what_is_wrong() {
    for (flags, expected) in [
        (&["--rate-per-caller", "10"][..], "write N/s, N/min or N/h"),
        (&["--rate-per-caller", "0/s"], "from 1 to"),
        (&["--rate-per-caller", "10/day"], "use s, min or h"),
        (
            &["--rate-per-caller", "1/s", "--rate-burst", "0"],
            "from 1 to",
        ),
        (&["--rate-burst", "5"], "--rate-per-caller"),
    ] {
        let mut args = vec!["serve", "--http", "127.0.0.1:0", "--store", "memory"];
        args.extend_from_slice(flags);
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{flags:?}: usage: {stderr}");
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
    }
}
