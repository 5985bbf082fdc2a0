//! The operator listener of `mcp-tasks serve --admin`: a scripted workload
//! through the binary (tasks completed, failed, cancelled, an input
//! answered, a listen stream, a refused request), then `/metrics` read
//! with a Prometheus text parser and each counter checked by value, with
//! no task id, token or principal anywhere in it; `/healthz` and `/readyz`
//! (503 once Redis is gone), the token rule, and refused `--admin` flags.

use mcp_tasks_redis::testing::RedisServer;

use crate::serving::{Logs, Served};
use crate::support::{json_of, raw_http, run};

pub(crate) const ALICE: &str = "alice-token-0123456789abcdef";
const OPERATOR: &str = "operator-token-0123456789abcdef";

/// Starts `serve --http 127.0.0.1:0` with `extra` flags, reading the two
/// addresses it prints, keeping its stderr.
fn serve(extra: &[&str]) -> Served {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    Served::spawn(crate::support::BIN, &args, &[], Some(&Logs::default()))
}

/// `serve` in memory (polled every 50 ms) for one caller, `ALICE`
/// (labelled alice), with an operator listener for `operator` (labelled
/// ops), its token files in `dir`.
pub(crate) fn serve_alice_and_ops(dir: &std::path::Path, operator: &str) -> Served {
    let (callers, operators) = (dir.join("callers"), dir.join("operators"));
    std::fs::write(&callers, format!("{ALICE} alice\n")).unwrap();
    std::fs::write(&operators, format!("{operator} ops\n")).unwrap();
    serve(&[
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
    ])
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
    let server = serve_alice_and_ops(dir.path(), OPERATOR);
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

/// The operator's page (`/`), by plain HTTP as a browser would send it:
/// nothing but the sign-in without a token, a cookie (`HttpOnly`,
/// `SameSite=Strict`) for a token of the admin tokens, refused from
/// another origin, a policy with no inline script, and `/ui/state` giving
/// the numbers `/metrics` gives. The page itself runs in Chromium in
/// `operator_page.rs`.
#[test]
fn the_page_signs_in_by_cookie_from_itself_only_and_shows_the_scraped_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let operators = dir.path().join("operators");
    std::fs::write(&operators, format!("{OPERATOR} ops\n")).unwrap();
    let server = serve(&[
        "--store",
        "memory",
        "--max-running",
        "1",
        "--admin",
        "127.0.0.1:0",
        "--admin-tokens",
        operators.to_str().unwrap(),
    ]);
    // One task runs, one waits for the slot: both stay while the test reads.
    let ids: Vec<String> = (0..2)
        .map(|_| {
            let out = run(&[
                "call",
                "--url",
                &server.url,
                "long_job",
                r#"{"steps": 600, "step_ms": 100}"#,
                "--no-wait",
            ]);
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        })
        .collect();
    let admin = server.admin.as_str();
    let own = format!("Origin: http://{admin}");

    let signin = raw_http(admin, "GET", "/", &[], "");
    assert_eq!(signin.status, 200);
    assert!(signin.body.contains("id=\"signin\""), "{}", signin.body);
    assert!(!signin.body.contains("id=\"working\""), "{}", signin.body);
    let policy = signin.header("content-security-policy").expect("a policy");
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    assert_eq!(raw_http(admin, "GET", "/ui/state", &[], "").status, 401);

    let wrong = raw_http(
        admin,
        "POST",
        "/ui/signin",
        &[&own],
        "token=not-a-token-of-the-file",
    );
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("id=\"signin-error\""), "{}", wrong.body);
    assert!(wrong.header("set-cookie").is_none());
    let elsewhere = "Origin: http://evil.example";
    let form = format!("token={OPERATOR}");
    assert_eq!(
        raw_http(admin, "POST", "/ui/signin", &[elsewhere], &form).status,
        403
    );

    let signed = raw_http(admin, "POST", "/ui/signin", &[&own], &form);
    assert_eq!(signed.status, 303, "{}", signed.body);
    let cookie = signed.header("set-cookie").expect("a cookie").to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let jar = format!("Cookie: {}", cookie.split(';').next().unwrap());
    let page = raw_http(admin, "GET", "/", &[&jar], "");
    assert!(page.body.contains("id=\"working\""), "{}", page.body);
    // The cookie from another page: refused, even where SameSite is not kept.
    assert_eq!(
        raw_http(admin, "GET", "/ui/state", &[&jar, elsewhere], "").status,
        403
    );
    let cross = "Sec-Fetch-Site: cross-site";
    let listed = r#"{"filter": {"status": "unfinished"}, "page": true}"#;
    assert_eq!(
        raw_http(admin, "POST", "/admin/tasks/list", &[&jar, cross], listed).status,
        403
    );

    // The numbers: those of a scrape, read around the same moment.
    let (_, metrics) = scrape(admin, OPERATOR);
    let state = raw_http(admin, "GET", "/ui/state", &[&jar, &own], "");
    assert_eq!(state.status, 200, "{}", state.body);
    let state: serde_json::Value = serde_json::from_str(&state.body).unwrap();
    let gauge = |name: &str, labels: &[(&str, &str)]| value(&metrics, name, labels);
    assert_eq!(
        state["tasks"]["working"],
        gauge("mcp_tasks_tasks_live", &[("status", "working")])
    );
    assert_eq!(state["tasks"]["working"], 2.0, "{state}");
    assert_eq!(state["admission"]["running"], 1.0, "{state}");
    assert_eq!(
        state["admission"]["queued"],
        gauge("mcp_tasks_tasks_queued", &[])
    );
    assert_eq!(state["admission"]["queued"], 1.0, "{state}");
    assert_eq!(
        state["admission"]["runningLimit"],
        gauge("mcp_tasks_tools_running_limit", &[])
    );
    assert_eq!(
        state["listen"]["limit"],
        gauge("mcp_tasks_listen_streams_limit", &[])
    );
    assert_eq!(state["runningByTool"]["long_job"], 1, "{state}");
    let created = gauge("mcp_tasks_tasks_created_total", &[("tool", "long_job")]);
    assert_eq!(state["tools"][0]["tool"], "long_job", "{state}");
    assert_eq!(state["tools"][0]["created"], created);
    assert_eq!(
        state["refusals"]["operator_auth"],
        gauge("mcp_tasks_refusals_total", &[("cause", "operator_auth")])
    );
    assert!(
        state["admission"]["oldestQueuedSecs"].as_f64().unwrap() > 0.0,
        "{state}"
    );

    // The table's listing: both tasks by hash, no id unless asked.
    let listing = raw_http(admin, "POST", "/admin/tasks/list", &[&jar, &own], listed);
    assert_eq!(listing.status, 200, "{}", listing.body);
    let tasks: serde_json::Value = serde_json::from_str(&listing.body).unwrap();
    assert_eq!(tasks["tasks"].as_array().unwrap().len(), 2, "{tasks}");
    for id in &ids {
        assert!(
            !listing.body.contains(id.as_str()),
            "an id listed without being asked"
        );
    }

    let forced = raw_http(admin, "POST", "/ui/signout", &[&jar, elsewhere], "");
    assert_eq!(forced.status, 403, "another page signs the operator out");
    let out = raw_http(admin, "POST", "/ui/signout", &[&jar, &own], "");
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    // The session ended on the server: its cookie, kept, opens nothing.
    assert_eq!(raw_http(admin, "GET", "/ui/state", &[&jar], "").status, 401);
    assert!(
        !cookie.contains(OPERATOR),
        "the cookie holds the token: {cookie}"
    );
    // Audited: the refused sign-in, the sign-in, the page's listing (a
    // count, no hashes), the sign-out.
    let within = std::time::Duration::from_secs(10);
    let refused = server.stderr_line(r#""action":"signin""#, within);
    assert!(refused.contains(r#""who":"(unknown)""#), "{refused}");
    // The sign-out's line is the last: written before its answer, but read
    // from the child's stderr by another thread, so maybe not read yet.
    server.stderr_line(r#""who":"ops","action":"signout""#, within);
    let audited = server.stderr().join("\n");
    assert!(
        audited.contains(r#""who":"ops","action":"signin""#),
        "{audited}"
    );
    assert!(
        audited.contains(r#""who":"ops","action":"signout""#),
        "{audited}"
    );
    for id in ids {
        run(&["cancel", "--url", &server.url, &id]);
    }
}

/// A gateway's upstream on the page: its breaker, opened by calls to an
/// upstream that went away, shown as `/metrics` shows it; and, on a
/// listener without tokens, the page open to loopback with no sign-in.
#[test]
fn the_page_shows_an_upstreams_open_breaker_as_the_metrics_do() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = serve(&["--store", "memory"]);
    let config = dir.path().join("gw.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"memory\"\npoll-interval = 50\n\n[[upstream]]\nname = \"up\"\nurl = \"{}\"\n\
             breaker-failures = 2\nbreaker-cool-down = 600\n",
            upstream.url
        ),
    )
    .unwrap();
    let gateway = crate::team::gateway(&config, &["--admin", "127.0.0.1:0"]);
    let admin = gateway.admin.as_str();
    let page = raw_http(admin, "GET", "/", &[], "");
    assert!(
        page.body.contains("id=\"working\""),
        "no sign-in without tokens: {}",
        page.body
    );
    let signin = raw_http(admin, "POST", "/ui/signin", &[], "token=whatever");
    assert_eq!(signin.status, 303, "nothing to sign in to: {}", signin.body);
    assert!(signin.header("set-cookie").is_none(), "{}", signin.head);
    drop(upstream);
    let breaker = |state: &serde_json::Value| state["upstreams"][0]["breakerOpen"] == true;
    let mut state = serde_json::Value::Null;
    for _ in 0..20 {
        run(&[
            "call",
            "--url",
            &gateway.url,
            "up__sleep",
            "--arg",
            "ms=10",
            "--json",
        ]);
        let answer = raw_http(admin, "GET", "/ui/state", &[], "");
        assert_eq!(answer.status, 200, "{}", answer.body);
        state = serde_json::from_str(&answer.body).unwrap();
        if breaker(&state) {
            break;
        }
    }
    assert!(breaker(&state), "the breaker never opened: {state}");
    let upstream = &state["upstreams"][0];
    assert_eq!(upstream["upstream"], "up", "{state}");
    let metrics = raw_http(admin, "GET", "/metrics", &[], "").body;
    let metrics =
        prometheus_parse::Scrape::parse(metrics.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let up = [("upstream", "up")];
    assert_eq!(
        value(&metrics, "mcp_tasks_gateway_upstream_breaker_open", &up),
        1.0
    );
    let errors = value(
        &metrics,
        "mcp_tasks_gateway_upstream_calls_total",
        &[("upstream", "up"), ("outcome", "error")],
    );
    assert!(errors >= 2.0, "{errors}");
    assert_eq!(upstream["errors"], errors, "{state}");
    // Refused from another page, even without tokens.
    let elsewhere = raw_http(
        admin,
        "GET",
        "/ui/state",
        &["Origin: http://localhost:3000"],
        "",
    );
    assert_eq!(elsewhere.status, 403);
}
