//! The serving recipe's limits over real HTTP on 127.0.0.1, with raw
//! sockets: every malformed request gets a JSON-RPC error of one shape,
//! bodies are bounded in size and in time, and connections that send half a
//! request (or nothing) are closed and bounded in number (one past the
//! bound, when none is idle, is answered 503 at once; `connections.rs` has
//! the idle ones).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::RuntimeServer;
use crate::support::runtime_server::serve_http_with;

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn address(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned()
}

/// One HTTP/1.1 request to `/mcp` on `host`, as its text (the connection
/// closed after it).
fn request_text(host: &str, method: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut request = format!("{method} /mcp HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    request
}

/// Sends one raw HTTP/1.1 request and reads the whole answer (the
/// connection is closed after it): the status and the body.
async fn exchange(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let host = address(url);
    let request = request_text(&host, method, headers, body);
    let mut stream = TcpStream::connect(&host).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, body.to_owned())
}

const JSON_AND_SSE: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");
const VERSION: (&str, &str) = ("MCP-Protocol-Version", "2026-07-28");

/// A malformed request and the error it must get.
struct Malformed {
    what: &'static str,
    method: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    status: u16,
    code: i64,
    id: Value,
}

#[tokio::test]
async fn every_malformed_request_gets_a_json_rpc_error() {
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| {
        recipe.with_max_body_bytes(1024)
    })
    .await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"pad":"{}"}}}}"#,
        "a".repeat(2000)
    );
    let post =
        |what, headers: &[(&'static str, &'static str)], body: &str, status, code, id| Malformed {
            what,
            method: "POST",
            headers: headers.to_vec(),
            body: body.to_owned(),
            status,
            code,
            id,
        };
    let all = [JSON, JSON_AND_SSE, VERSION];
    let cases = [
        post("not JSON", &all, "not json", 400, -32700, Value::Null),
        post("a batch", &all, "[1, 2]", 400, -32600, Value::Null),
        post(
            "no jsonrpc",
            &all,
            r#"{"id":3,"method":"x"}"#,
            400,
            -32600,
            json!(3),
        ),
        post(
            "a response",
            &all,
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
            400,
            -32600,
            json!(4),
        ),
        post(
            "text/plain",
            &[("Content-Type", "text/plain"), JSON_AND_SSE, VERSION],
            DISCOVER,
            415,
            -32600,
            Value::Null,
        ),
        post(
            "no Accept",
            &[JSON, VERSION],
            DISCOVER,
            406,
            -32600,
            Value::Null,
        ),
        Malformed {
            method: "GET",
            ..post("GET", &[JSON_AND_SSE], "", 405, -32600, Value::Null)
        },
        post("too large", &all, &big, 413, -32600, Value::Null),
        post(
            "tasks/get, not JSON",
            &[JSON, JSON_AND_SSE, VERSION, ("Mcp-Method", "tasks/get")],
            "{",
            400,
            -32700,
            Value::Null,
        ),
    ];
    let mut failures = Vec::new();
    for case in &cases {
        let (got_status, got_body) = exchange(&url, case.method, &case.headers, &case.body).await;
        let parsed: Value = serde_json::from_str(&got_body).unwrap_or(Value::Null);
        let fine = got_status == case.status
            && parsed["jsonrpc"] == "2.0"
            && parsed["error"]["code"] == case.code
            && parsed["error"]["message"].is_string()
            && parsed["id"] == case.id;
        if !fine {
            failures.push(format!("{}: HTTP {got_status} {got_body}", case.what));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // A well-formed request is served as before.
    let (status, body) = exchange(
        &url,
        "POST",
        &[
            JSON,
            JSON_AND_SSE,
            VERSION,
            ("Mcp-Method", "server/discover"),
        ],
        DISCOVER,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("io.modelcontextprotocol/tasks"), "{body}");
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_gets_408() {
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| {
        recipe.with_request_read_timeout(Duration::from_millis(300))
    })
    .await;
    let mut stream = TcpStream::connect(address(&url)).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
        address(&url)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("-32600"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn half_requests_and_silent_connections_are_closed_after_the_read_timeout() {
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| {
        recipe.with_request_read_timeout(Duration::from_millis(300))
    })
    .await;
    let mut streams = Vec::new();
    for n in 0..50 {
        let mut stream = TcpStream::connect(address(&url)).await.unwrap();
        if n % 2 == 0 {
            // Half a request line; the other half never comes.
            stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: loc")
                .await
                .unwrap();
        }
        streams.push(stream);
    }
    let started = Instant::now();
    for mut stream in streams {
        let mut buffer = [0u8; 1024];
        // Closed by the server: end of stream (after an optional 408 answer).
        loop {
            let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
                .await
                .expect("the server closes the connection within 5 s");
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_connection_past_the_bound_is_refused_at_once() {
    let server = RuntimeServer::new(
        crate::support::runtime_server::runtime_on(mcp_tasks::store::MemoryStore::new())
            .with_max_listen_streams(1)
            .build(),
    );
    let url = serve_http_with(server, |recipe| {
        recipe
            .with_max_connections(3)
            .with_request_read_timeout(Duration::from_secs(30))
    })
    .await;
    let discover = || {
        exchange(
            &url,
            "POST",
            &[
                JSON,
                JSON_AND_SSE,
                VERSION,
                ("Mcp-Method", "server/discover"),
            ],
            DISCOVER,
        )
    };
    // Three connections, each in the middle of a request (its body asked
    // for with `100 Continue`, never sent): none is idle, so none makes
    // room for another.
    let host = address(&url);
    let mut busy = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(&host).await.unwrap();
        let headers = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\n\
             Content-Length: 100\r\n\r\n"
        );
        stream.write_all(headers.as_bytes()).await.unwrap();
        let mut continued = [0u8; 25];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut continued))
            .await
            .expect("the request is read")
            .unwrap();
        assert_eq!(&continued, b"HTTP/1.1 100 Continue\r\n\r\n");
        busy.push(stream);
    }
    // A fourth is answered at once (the exchange fails after 10 s), never
    // left waiting in the backlog: 503, Retry-After, the refusal's error.
    let mut stream = TcpStream::connect(&host).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: server/discover\r\nContent-Length: {}\r\n\r\n{DISCOVER}",
        DISCOVER.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("answered, and closed, within 10 s")
        .unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    let error: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        error,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32603,
            "message": "the server has as many connections open as it may; try again shortly",
            "data": {"reason": "connections", "retryAfterMs": 1000, "maxConnections": 3}}})
    );
    // A closed connection frees its place.
    drop(busy.pop());
    let served = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (status, _) = discover().await;
            if status == 200 {
                return;
            }
            assert_eq!(status, 503);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(served.is_ok(), "served once a connection closed");
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A `tasks/*` request of `method` with `params` before the `_meta`.
fn tasks_body(method: &str, id: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params},{META}}}}}"#)
}

/// Polls are read straight from their bytes as the `Value` path read them
/// (a key given twice counts by its last value); a body that reading
/// leaves (an escape or a number the JSON parse refuses) gets what it got
/// before, -32700.
#[tokio::test]
async fn polls_read_from_their_bytes_answer_as_the_value_path() {
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| recipe).await;
    let post = |method: &'static str, body: String| {
        let url = url.clone();
        async move {
            let mut headers = vec![JSON, JSON_AND_SSE, VERSION, ("Mcp-Method", method)];
            if method == "tools/call" {
                headers.push(("Mcp-Name", "forever"));
            }
            let (status, body) = exchange(&url, "POST", &headers, &body).await;
            (
                status,
                serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
            )
        }
    };
    let created = tasks_body("tools/call", "1", r#""name":"forever","arguments":{}"#);
    let (status, body) = post("tools/call", created).await;
    assert_eq!(status, 200, "{body}");
    let task = body["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let get = |id: &str, params: String| tasks_body("tasks/get", id, &params);
    // The plain poll, and one with escapes in its task id and keys.
    let escaped: String = task
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    for body in [
        get("7", format!(r#""taskId":"{task}""#)),
        get(
            r#""s-7""#,
            format!(r#""task\u0049d":"{escaped}","other":[1,{{"x":null}}]"#),
        ),
    ] {
        let (status, answer) = post("tasks/get", body.clone()).await;
        assert_eq!(status, 200, "{body}: {answer}");
        assert_eq!(
            answer["result"]["taskId"],
            task.as_str(),
            "{body}: {answer}"
        );
        assert_eq!(answer["result"]["status"], "working", "{answer}");
    }
    // A key given twice: answered with the last one, as the Value path did.
    let twice = get("7", format!(r#""taskId":"none","taskId":"{task}""#));
    let (status, answer) = post("tasks/get", twice).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["taskId"], task.as_str(), "{answer}");
    // What the JSON parse refuses, in a field the poll does not read.
    for bad in [r#""x":"\ud800""#, r#""x":1e400"#] {
        let body = get("7", format!(r#""taskId":"{task}",{bad}"#));
        let (status, answer) = post("tasks/get", body).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (400, &json!(-32700)),
            "{bad}: {answer}"
        );
    }
    // An unknown task, then a cancel read from its bytes.
    let (status, answer) = post("tasks/get", get("8", r#""taskId":"nope""#.to_owned())).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (200, &json!(-32602)),
        "{answer}"
    );
    let cancel = tasks_body("tasks/cancel", "9", &format!(r#""taskId":"{task}""#));
    let (status, answer) = post("tasks/cancel", cancel).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["id"], 9, "{answer}");
    let (_, answer) = post("tasks/get", get("10", format!(r#""taskId":"{task}""#))).await;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
}

/// A `tools/call` the fast path answers gets the HTTP status rmcp gives:
/// 400 for -32602 when the request's `_meta` holds a capability set that
/// does not decode (rmcp's required-metadata check), 200 for -32602 on a
/// request whose `_meta` is fine (an unknown tool), 200 for a task.
#[tokio::test]
async fn a_tool_calls_invalid_params_is_400_only_for_its_meta() {
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| recipe).await;
    let call = |tool: &'static str, capabilities: &str| {
        let url = url.clone();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{capabilities}}}}}}}"#
        );
        async move {
            let (status, body) = exchange(&url, "POST", &call_headers(tool), &body).await;
            (
                status,
                serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
            )
        }
    };
    let tasks = r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#;
    let (status, answer) = call("forever", r#"{"extensions":5}"#).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!(-32602)),
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("clientCapabilities"), "{answer}");
    let (status, answer) = call("no_such_tool", tasks).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (200, &json!(-32602)),
        "{answer}"
    );
    let (status, answer) = call("forever", tasks).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["result"]["taskId"].is_string(), "{answer}");
}

/// The headers of a `tools/call` of `tool` that takes the fast path.
fn call_headers(tool: &str) -> [(&str, &str); 5] {
    [
        JSON,
        JSON_AND_SSE,
        VERSION,
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ]
}

/// A `tools/call` body for `tool` with `arguments`, that takes the fast path.
fn fast_call(tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"extensions":{{"io.modelcontextprotocol/tasks":{{}}}}}}}}}}}}"#
    )
}

/// A `tools/call` whose client goes away before the answer still runs its
/// handler to its end: the task the handler was about to create is
/// created, and its tool runs. (The handler is awaited in the request's own
/// future, which hyper drops when the client goes away.)
#[tokio::test]
async fn a_tool_call_whose_client_goes_away_runs_to_its_end() {
    let server = RuntimeServer::in_memory();
    let events = server.events.clone();
    let url = serve_http_with(server, |recipe| recipe).await;
    let host = address(&url);
    let body = fast_call("slow_start", r#"{"ms":1000}"#);
    let request = request_text(&host, "POST", &call_headers("slow_start"), &body);
    let mut stream = TcpStream::connect(&host).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    // Gone while the handler works, before its task exists.
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(stream);
    assert!(
        !events.lock().unwrap().iter().any(|e| e == "slow_start ran"),
        "the tool ran before its handler's pause ended"
    );
    let started = Instant::now();
    while !events.lock().unwrap().iter().any(|e| e == "slow_start ran") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the handler stopped when its client went away: its task's tool never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `tools/call` handler that panics is answered 500 with rmcp's message,
/// and the server answers the next call as before.
#[tokio::test]
async fn a_tool_call_handler_that_panics_is_answered_500() {
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| recipe).await;
    let call = |tool: &'static str| {
        let url = url.clone();
        async move { exchange(&url, "POST", &call_headers(tool), &fast_call(tool, "{}")).await }
    };
    let (status, body) = call("handler_panics").await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("no response message received from handler"),
        "{body}"
    );
    let (status, body) = call("required_job").await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(answer["result"]["taskId"].is_string(), "{answer}");
}

#[tokio::test]
async fn a_listen_budget_without_a_reserve_of_connections_does_not_start() {
    let server = RuntimeServer::in_memory();
    let runtime = server.runtime.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // The default budget, 512 streams, in 512 connections: none left.
    let error = mcp_tasks::server::http::StreamableHttpServer::new(server, runtime)
        .with_max_connections(512)
        .serve(listener)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    let message = error.to_string();
    assert!(
        message.contains("a listen budget of 512 streams leaves no reserve within 512 connections"),
        "{message}"
    );
}
