//! The operator listener of `mcp-tasks serve --admin`: a scripted workload
//! through the binary (tasks completed, failed, cancelled, an input
//! answered, a listen stream, a refused request), then `/metrics` read
//! with a Prometheus text parser and each counter checked by value, with
//! no task id, token or principal anywhere in it; `/healthz` and `/readyz`
//! (503 once Redis is gone), the token rule, and refused `--admin` flags.

use mcp_tasks_redis::testing::RedisServer;

use crate::serving::Served;
use crate::support::{json_of, raw_http, run};

const ALICE: &str = "alice-token-0123456789abcdef";
const OPERATOR: &str = "operator-token-0123456789abcdef";

/// Starts `serve --http 127.0.0.1:0` with `extra` flags, reading the two
/// addresses it prints.
fn serve(extra: &[&str]) -> Served {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    Served::spawn(crate::support::BIN, &args, &[], None)
}

/// One plain HTTP/1.1 request to `address`: the status and the body.
fn http(address: &str, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String) {
    let answer = raw_http(address, method, path, headers, body);
    (answer.status, answer.body)
}

/// The scrape, parsed by `prometheus-parse`.
pub(crate) fn scrape(admin: &str, token: &str) -> (String, prometheus_parse::Scrape) {
    let auth = format!("Authorization: Bearer {token}");
    let (status, text) = http(admin, "GET", "/metrics", &[&auth], "");
    assert_eq!(status, 200, "{text}");
    // Chunked or not, the lines are the exposition's.
    let parsed = prometheus_parse::Scrape::parse(text.lines().map(|line| Ok(line.to_owned())))
        .expect("the Prometheus text parses");
    (text, parsed)
}

/// The value of the sample `name` whose labels include `labels`, 0 when
/// there is none (a counter never incremented is not shown).
pub(crate) fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let matching: Vec<_> = scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .filter(|sample| {
            labels
                .iter()
                .all(|(key, want)| sample.labels.get(key) == Some(*want))
        })
        .collect();
    assert!(matching.len() <= 1, "{name} {labels:?}: {matching:?}");
    matching.first().map_or(0.0, |sample| match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        ref other => panic!("{name}: not a number: {other:?}"),
    })
}

/// The `_count` of histogram `name` with `labels`.
fn count(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> u64 {
    let found: Vec<_> = scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .filter(|sample| {
            labels
                .iter()
                .all(|(key, want)| sample.labels.get(key) == Some(*want))
        })
        .filter_map(|sample| match &sample.value {
            prometheus_parse::Value::Histogram(buckets) => buckets
                .iter()
                .find(|bucket| bucket.less_than.is_infinite())
                .map(|b| b.count as u64),
            _ => None,
        })
        .collect();
    found.iter().sum()
}

#[test]
fn metrics_count_a_scripted_workload_by_value_and_name_no_task() {
    let dir = tempfile::tempdir().unwrap();
    let (callers, operators) = (dir.path().join("callers"), dir.path().join("operators"));
    std::fs::write(&callers, format!("{ALICE} alice\n")).unwrap();
    std::fs::write(&operators, format!("{OPERATOR} ops\n")).unwrap();
    let server = serve(&[
        "--store",
        "memory",
        "--poll-interval",
        "50",
        "--auth-tokens",
        callers.to_str().unwrap(),
        "--admin",
        "127.0.0.1:0",
        "--admin-tokens",
        operators.to_str().unwrap(),
    ]);
    let auth = format!("Authorization: Bearer {ALICE}");
    let call = |rest: &[&str]| {
        let mut args = vec!["call", "--url", &server.url, "--header", &auth, "--json"];
        args.extend_from_slice(rest);
        json_of(&run(&args))
    };
    let mut ids = Vec::new();
    // Completed, heard on a listen stream.
    let (exit, done) = call(&[
        "long_job",
        "--arg",
        "steps=1",
        "--arg",
        "step_ms=10",
        "--listen",
    ]);
    assert_eq!(
        (exit, done["status"].as_str()),
        (0, Some("completed")),
        "{done}"
    );
    ids.push(done["taskId"].as_str().unwrap().to_owned());
    // Failed.
    let (_, failed) = call(&["failing_tool"]);
    assert_eq!(failed["status"], "failed", "{failed}");
    ids.push(failed["taskId"].as_str().unwrap().to_owned());
    // Input answered, then completed.
    let (exit, confirmed) = call(&["confirm_action", "--answer", "confirm=true"]);
    assert_eq!(
        (exit, confirmed["status"].as_str()),
        (0, Some("completed")),
        "{confirmed}"
    );
    ids.push(confirmed["taskId"].as_str().unwrap().to_owned());
    // Cancelled.
    let (_, started) = call(&["sleep", "--arg", "ms=60000", "--no-wait"]);
    let id = started["taskId"].as_str().expect("a task id").to_owned();
    let cancelled = run(&[
        "cancel",
        "--url",
        &server.url,
        "--header",
        &auth,
        &id,
        "--json",
    ]);
    let (_, cancelled) = json_of(&cancelled);
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    ids.push(id);
    // Refused: no token.
    let mcp_address = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let (status, _) = http(
        &mcp_address,
        "POST",
        "/mcp",
        &[
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            "Mcp-Method: tasks/get",
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}"#,
    );
    assert_eq!(status, 401);

    let (text, metrics) = scrape(&server.admin, OPERATOR);
    let created = "mcp_tasks_tasks_created_total";
    let ended = "mcp_tasks_tasks_ended_total";
    for tool in ["long_job", "failing_tool", "confirm_action", "sleep"] {
        assert_eq!(
            value(&metrics, created, &[("tool", tool)]),
            1.0,
            "{tool}\n{text}"
        );
    }
    for (tool, outcome) in [
        ("long_job", "completed"),
        ("failing_tool", "failed"),
        ("confirm_action", "completed"),
        ("sleep", "cancelled"),
    ] {
        let labels = [("tool", tool), ("outcome", outcome)];
        assert_eq!(
            value(&metrics, ended, &labels),
            1.0,
            "{tool} {outcome}\n{text}"
        );
    }
    assert_eq!(
        value(&metrics, ended, &[("outcome", "expired")]),
        0.0,
        "{text}"
    );
    for tool in ["long_job", "failing_tool", "confirm_action", "sleep"] {
        let labels = [("tool", tool)];
        assert_eq!(
            count(&metrics, "mcp_tasks_task_duration_seconds", &labels),
            1,
            "{tool}"
        );
        assert_eq!(
            count(&metrics, "mcp_tasks_task_input_required_seconds", &labels),
            1
        );
    }
    assert_eq!(
        value(&metrics, "mcp_tasks_tasks_live", &[("status", "working")]),
        0.0
    );
    assert_eq!(
        value(
            &metrics,
            "mcp_tasks_tasks_live",
            &[("status", "input_required")]
        ),
        0.0
    );
    assert_eq!(value(&metrics, "mcp_tasks_listen_streams_open", &[]), 0.0);
    let requests = "mcp_tasks_requests_total";
    let http_ok = |method| [("transport", "http"), ("method", method), ("code", "ok")];
    assert_eq!(
        value(&metrics, requests, &http_ok("tools/call")),
        4.0,
        "{text}"
    );
    assert_eq!(
        value(&metrics, requests, &http_ok("tasks/cancel")),
        1.0,
        "{text}"
    );
    assert!(
        value(&metrics, requests, &http_ok("tasks/get")) >= 1.0,
        "{text}"
    );
    assert!(
        value(&metrics, requests, &http_ok("tasks/update")) >= 1.0,
        "{text}"
    );
    let stream = [("method", "subscriptions/listen"), ("code", "stream")];
    assert!(value(&metrics, requests, &stream) >= 1.0, "{text}");
    let refused = [("method", "tasks/get"), ("code", "-32600")];
    assert_eq!(value(&metrics, requests, &refused), 1.0, "{text}");
    assert_eq!(
        value(&metrics, "mcp_tasks_refusals_total", &[("cause", "auth")]),
        1.0,
        "{text}"
    );
    let creates = [("store", "memory"), ("operation", "create")];
    assert_eq!(
        count(
            &metrics,
            "mcp_tasks_store_operation_duration_seconds",
            &creates
        ),
        4
    );
    assert_eq!(
        value(&metrics, "mcp_tasks_store_errors_total", &[]),
        0.0,
        "{text}"
    );
    // Nothing that names a task or a caller.
    for secret in ids
        .iter()
        .map(String::as_str)
        .chain([ALICE, OPERATOR, "alice", "ops"])
    {
        assert!(
            !text.contains(secret),
            "{secret:?} is in the scrape:\n{text}"
        );
    }

    // The token rule: everything but /healthz and /readyz needs one.
    assert_eq!(http(&server.admin, "GET", "/metrics", &[], "").0, 401);
    let wrong = format!("Authorization: Bearer {ALICE}");
    assert_eq!(http(&server.admin, "GET", "/metrics", &[&wrong], "").0, 401);
    assert_eq!(
        http(&server.admin, "GET", "/healthz", &[], ""),
        (200, "ok\n".into())
    );
    assert_eq!(
        http(&server.admin, "GET", "/readyz", &[], ""),
        (200, "ready\n".into())
    );
    let (_, after) = scrape(&server.admin, OPERATOR);
    assert_eq!(
        value(
            &after,
            "mcp_tasks_refusals_total",
            &[("cause", "operator_auth")]
        ),
        2.0
    );
}

#[test]
fn readyz_fails_once_redis_is_gone() {
    let mut redis = RedisServer::start();
    let server = serve(&["--store", &redis.url(), "--admin", "127.0.0.1:0"]);
    assert_eq!(
        http(&server.admin, "GET", "/readyz", &[], ""),
        (200, "ready\n".into())
    );
    redis.kill();
    let (status, body) = http(&server.admin, "GET", "/readyz", &[], "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("task store"), "{body}");
    assert_eq!(http(&server.admin, "GET", "/healthz", &[], "").0, 200);
    // Without tokens: loopback names only, and no browser.
    let origin = "Origin: http://evil.example.test";
    assert_eq!(http(&server.admin, "GET", "/metrics", &[origin], "").0, 403);
    assert_eq!(http(&server.admin, "GET", "/metrics", &[], "").0, 200);
}

#[test]
fn bad_admin_flags_are_refused_with_exit_64() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{OPERATOR} ops\n")).unwrap();
    let refused = |extra: &[&str], expected: &str| {
        let mut args = vec!["serve", "--http", "127.0.0.1:0", "--store", "memory"];
        args.extend_from_slice(extra);
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    };
    refused(
        &["--admin", "0.0.0.0:0"],
        "open to the network without tokens",
    );
    refused(
        &["--admin", "localhost:9090"],
        "is not an IP address and port",
    );
    refused(&["--admin", "127.0.0.1"], "is not an IP address and port");
    refused(
        &["--admin-tokens", tokens.to_str().unwrap()],
        "--admin-tokens applies to --admin only",
    );
    // With tokens, any address is served; a wrong token still gets 401.
    let served = serve(&[
        "--store",
        "memory",
        "--admin",
        "0.0.0.0:0",
        "--admin-tokens",
        tokens.to_str().unwrap(),
    ]);
    let port = served.admin.rsplit(':').next().unwrap();
    let address = format!("127.0.0.1:{port}");
    assert_eq!(http(&address, "GET", "/metrics", &[], "").0, 401);
    let auth = format!("Authorization: Bearer {OPERATOR}");
    assert_eq!(http(&address, "GET", "/metrics", &[&auth], "").0, 200);
}
