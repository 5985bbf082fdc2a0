//! A server full of refused listen streams still answers: `mcp-tasks serve
//! --http` with its default bounds (1,024 connections, 512 listen streams,
//! 64 a caller) against 20 unauthenticated callers opening 1,100 listen
//! streams, each stream a `reqwest` client of its own (whose pool keeps a
//! refused connection for its next request, as a real client does).
//!
//! Every refused stream's connection is closed by the server, so the
//! connections held are the streams' alone: a fresh `tasks/get` is
//! answered within a second, and one more stream is refused at once.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::http_server;

const CALLERS: usize = 20;
const STREAMS_PER_CALLER: usize = 55;

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A POST of JSON-RPC `method` to `url` as caller `caller` (its own
/// `Authorization`, no tokens on the server: unauthenticated).
fn post(
    client: &reqwest::Client,
    url: &str,
    caller: usize,
    method: &str,
    name: &str,
    body: String,
) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .header("authorization", format!("Bearer caller-{caller}"))
        .body(body)
}

fn listen(id: usize, task: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{"taskIds":["{task}"]}},{META}}}}}"#
    )
}

/// An HTTP client of its own, without the system's certificates (plain
/// HTTP: loading them costs each client tens of milliseconds).
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_only([])
        .no_proxy()
        .build()
        .expect("a client")
}

/// The soft open-file limit raised to hold this test's sockets.
fn enough_open_files() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let want = 4096;
    if limit.current.is_some_and(|soft| soft < want) {
        let raised = Rlimit {
            current: Some(limit.maximum.map_or(want, |hard| hard.min(want))),
            maximum: limit.maximum,
        };
        setrlimit(Resource::Nofile, raised).expect("the soft open-file limit raised");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_full_of_refused_listen_streams_still_answers() {
    enough_open_files();
    let server = http_server();
    let url = server.url.clone();

    // Each caller: a task that runs for ten minutes, then 55 streams on it
    // at once, from its own client.
    let mut callers = Vec::new();
    for caller in 0..CALLERS {
        let client = plain_client();
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"sleep","arguments":{{"ms":600000}},{META}}}}}"#
        );
        let created: Value = post(&client, &url, caller, "tools/call", "sleep", call)
            .send()
            .await
            .expect("a creation is answered")
            .json()
            .await
            .expect("JSON");
        let task = created["result"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {created}"))
            .to_owned();
        callers.push((client, task));
    }
    let started = Instant::now();
    let mut open = Vec::new();
    let mut refused = 0;
    // Each stream a client of its own, kept to the end: a client keeps a
    // refused connection in its pool for its next request (one client's
    // concurrent requests would take each other's returned connections).
    let mut clients = Vec::new();
    for (caller, (_, task)) in callers.iter().enumerate() {
        let mut streams = Vec::new();
        for n in 0..STREAMS_PER_CALLER {
            let client = plain_client();
            let body = listen(n, task);
            streams.push(post(&client, &url, caller, "subscriptions/listen", task, body).send());
            clients.push(client);
        }
        for response in futures::future::join_all(streams).await {
            let response = response.expect("every stream is answered");
            match response.status().as_u16() {
                200 => open.push(response),
                503 => {
                    // Read to its end, as a client does before it reuses
                    // the connection.
                    let body: Value = response.json().await.expect("the refusal's JSON");
                    assert_eq!(body["error"]["data"]["reason"], "listenStreams", "{body}");
                    refused += 1;
                }
                status => panic!("stream answered {status}"),
            }
        }
    }
    let flood = started.elapsed();
    assert_eq!(open.len() + refused, CALLERS * STREAMS_PER_CALLER);
    // Unauthenticated callers share one caller's budget.
    assert_eq!(
        open.len(),
        mcp_tasks::server::DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER
    );
    // Every open stream is acknowledged (and its connection busy).
    for stream in &mut open {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
            .await
            .expect("an acknowledgement")
            .expect("readable")
            .expect("a first event");
        assert!(String::from_utf8_lossy(&chunk).contains("acknowledged"));
    }

    // A fresh tasks/get, on a connection of its own: answered within 1 s.
    let (_, task) = &callers[0];
    let get = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{{"taskId":"{task}",{META}}}}}"#
    );
    let asked = Instant::now();
    let got: Value = post(&plain_client(), &url, 0, "tasks/get", task, get)
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .expect("tasks/get answered within 1 s")
        .json()
        .await
        .expect("JSON");
    let get_took = asked.elapsed();
    assert_eq!(got["result"]["status"], "working", "{got}");

    // One more stream, from a new client: refused at once.
    let asked = Instant::now();
    let extra = post(
        &plain_client(),
        &url,
        CALLERS,
        "subscriptions/listen",
        task,
        listen(0, task),
    )
    .timeout(Duration::from_secs(1))
    .send()
    .await
    .expect("one more stream answered within 1 s");
    let extra_took = asked.elapsed();
    assert_eq!(extra.status().as_u16(), 503);
    assert_eq!(
        extra
            .headers()
            .get("connection")
            .map(|value| value.as_bytes()),
        Some(&b"close"[..])
    );
    eprintln!(
        "{} listen streams from {CALLERS} callers in {flood:?}: {} open, {refused} refused; \
         a fresh tasks/get answered in {get_took:?}, one more stream refused in {extra_took:?}",
        CALLERS * STREAMS_PER_CALLER,
        open.len()
    );
    assert!(get_took < Duration::from_secs(1));
    assert!(extra_took < Duration::from_secs(1));
    drop((open, clients));
}
