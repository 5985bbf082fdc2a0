//! Who may reach the serving recipe, over real HTTP on 127.0.0.1: allowed
//! hosts, allowed origins and bearer tokens apply alike to rmcp's routes,
//! the `tasks/*` fast path and listen streams; and the guard's host and
//! origin checks agree with rmcp's own, value for value.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::http::{LOOPBACK_HOSTS, LOOPBACK_ORIGINS, StreamableHttpServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::RuntimeServer;
use crate::support::listening::listen_request;
use crate::support::runtime_server::serve_http_with;

/// The public name the endpoints are reached by.
const NAME: &str = "tasks.example.test";
/// A name no endpoint allows.
const OTHER: &str = "other.example.test";
const ALICE: &str = "alice-token-0123456789abcdef";
const ALICE_ROTATED: &str = "alice-token-fedcba9876543210";
const BOB: &str = "bob-token-0123456789abcdef01";

/// An endpoint, and a client that reaches 127.0.0.1 for [`NAME`] and
/// [`OTHER`] (so `Host` carries those names).
pub(crate) struct Endpoint {
    client: reqwest::Client,
    port: u16,
}

impl Endpoint {
    pub(crate) async fn new(
        configure: impl FnOnce(
            StreamableHttpServer<RuntimeServer>,
        ) -> StreamableHttpServer<RuntimeServer>,
    ) -> Self {
        let url = serve_http_with(RuntimeServer::in_memory(), configure).await;
        let address: SocketAddr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap();
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let client = reqwest::Client::builder()
            .resolve(NAME, loopback)
            .resolve(OTHER, loopback)
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        Self {
            client,
            port: address.port(),
        }
    }

    pub(crate) fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/mcp", self.port)
    }

    /// POSTs `message` for `host` with `extra` headers: status, headers and
    /// the body (a JSON-RPC message, or for a listen its first event).
    pub(crate) async fn post(
        &self,
        host: &str,
        message: &Value,
        extra: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let method = message["method"].as_str().unwrap();
        let mut request = self
            .client
            .post(self.url(host))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(message.to_string());
        if method == "tools/call" {
            request = request.header("mcp-name", message["params"]["name"].as_str().unwrap());
        }
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let mut response = request.send().await.expect("an answer");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut text = String::new();
        // A listen stream stays open: its first event is enough.
        let read = async {
            while let Some(chunk) = response.chunk().await.expect("the body") {
                text.push_str(&String::from_utf8_lossy(&chunk));
                if headers["content-type"] == "text/event-stream" && text.contains("\n\n") {
                    break;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("a body within 10 s");
        let body = match text.lines().find_map(|line| line.strip_prefix("data:")) {
            Some(data) => serde_json::from_str(data.trim()).unwrap(),
            None => serde_json::from_str(&text).unwrap_or(Value::Null),
        };
        (status, headers, body)
    }
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
}

fn call() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "forever", "arguments": {}, "_meta": meta()}})
}

/// A `tasks/get` (sent without `Mcp-Name`, which rmcp refuses and the fast
/// path tolerates: an answer with the task came from the fast path).
pub(crate) fn get(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
        "params": {"taskId": id, "_meta": meta()}})
}

fn list() -> Value {
    json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta()}})
}

pub(crate) fn listen(id: &str) -> Value {
    listen_request(json!("l-1"), &[id], true)
}

/// Makes a task for `host` (with `extra` headers) and returns its id.
pub(crate) async fn task(endpoint: &Endpoint, host: &str, extra: &[(&str, &str)]) -> String {
    let (status, _, body) = endpoint.post(host, &call(), extra).await;
    assert_eq!(status, 200, "{body}");
    body["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {body}"))
        .to_owned()
}

/// Asserts that `id` is served on every route for `host` with `extra`:
/// rmcp's (`tools/list`), the fast path and the listen path.
pub(crate) async fn served_everywhere(
    endpoint: &Endpoint,
    host: &str,
    id: &str,
    extra: &[(&str, &str)],
) {
    let (status, _, body) = endpoint.post(host, &list(), extra).await;
    assert_eq!(status, 200, "tools/list for {host}: {body}");
    assert!(body["result"]["tools"].is_array(), "{body}");
    let (status, _, body) = endpoint.post(host, &get(id), extra).await;
    assert_eq!(status, 200, "tasks/get for {host}: {body}");
    assert_eq!(body["result"]["status"], "working", "the fast path: {body}");
    let (status, headers, body) = endpoint.post(host, &listen(id), extra).await;
    assert_eq!(status, 200, "listen for {host}: {body}");
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(
        body["params"]["notifications"]["taskIds"],
        json!([id]),
        "the listen path acknowledged the task: {body}"
    );
}

/// Asserts that every route answers `status` with a JSON-RPC error.
pub(crate) async fn refused_everywhere(
    endpoint: &Endpoint,
    host: &str,
    id: &str,
    extra: &[(&str, &str)],
    status: u16,
) -> Vec<reqwest::header::HeaderMap> {
    let mut all = Vec::new();
    for message in [list(), call(), get(id), listen(id)] {
        let (got, headers, body) = endpoint.post(host, &message, extra).await;
        assert_eq!(got, status, "{} for {host}: {body}", message["method"]);
        assert_eq!(body["jsonrpc"], "2.0", "{body}");
        assert_eq!(body["error"]["code"], -32600, "{body}");
        assert!(body.get("result").is_none(), "{body}");
        all.push(headers);
    }
    all
}

#[tokio::test]
async fn allowed_hosts_are_served_on_every_route_and_others_on_none() {
    let public = Endpoint::new(|recipe| {
        recipe.with_allowed_hosts(LOOPBACK_HOSTS.iter().copied().chain([NAME]))
    })
    .await;
    let id = task(&public, NAME, &[]).await;
    served_everywhere(&public, NAME, &id, &[]).await;
    served_everywhere(&public, "127.0.0.1", &id, &[]).await;
    refused_everywhere(&public, OTHER, &id, &[], 403).await;

    // The default: loopback names only, on every route.
    let local = Endpoint::new(|recipe| recipe).await;
    let id = task(&local, "127.0.0.1", &[]).await;
    served_everywhere(&local, "localhost", &id, &[]).await;
    refused_everywhere(&local, NAME, &id, &[], 403).await;
}

#[tokio::test]
async fn allowed_origins_are_served_on_every_route_and_others_on_none() {
    let app = "https://app.example.test";
    let endpoint = Endpoint::new(|recipe| recipe.with_allowed_origins([app])).await;
    let id = task(&endpoint, "127.0.0.1", &[]).await;
    served_everywhere(&endpoint, "127.0.0.1", &id, &[("origin", app)]).await;
    // The list replaced the loopback origins.
    for origin in ["http://localhost:3000", "https://evil.example.test", "null"] {
        refused_everywhere(&endpoint, "127.0.0.1", &id, &[("origin", origin)], 403).await;
    }
}

#[tokio::test]
async fn bearer_tokens_are_required_on_every_route_and_name_the_caller() {
    let file = format!("{ALICE} alice\n{ALICE_ROTATED} alice\n{BOB} bob\n");
    let tokens = BearerTokens::parse(file.as_bytes()).unwrap();
    let endpoint = Endpoint::new(|recipe| recipe.with_bearer_tokens(tokens)).await;
    let bearer = |token: &str| format!("Bearer {token}");
    let (alice, rotated, bob) = (bearer(ALICE), bearer(ALICE_ROTATED), bearer(BOB));
    let id = task(&endpoint, "127.0.0.1", &[("authorization", &alice)]).await;

    for headers in refused_everywhere(&endpoint, "127.0.0.1", &id, &[], 401).await {
        assert_eq!(headers["www-authenticate"], "Bearer realm=\"mcp-tasks\"");
    }
    let unknown = bearer("nobody-0123456789abcdef0123");
    let extra = [("authorization", unknown.as_str())];
    for headers in refused_everywhere(&endpoint, "127.0.0.1", &id, &extra, 401).await {
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    }
    let basic = [("authorization", "Basic YWxpY2U6c2VjcmV0")];
    refused_everywhere(&endpoint, "127.0.0.1", &id, &basic, 401).await;

    // The task was made on rmcp's route under the label, and the rotated
    // token of the same label reaches it on every route.
    served_everywhere(&endpoint, "127.0.0.1", &id, &[("authorization", &alice)]).await;
    served_everywhere(&endpoint, "127.0.0.1", &id, &[("authorization", &rotated)]).await;
    // Another caller sees no such task.
    let extra = [("authorization", bob.as_str())];
    let (status, _, body) = endpoint.post("127.0.0.1", &get(&id), &extra).await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let (_, _, body) = endpoint.post("127.0.0.1", &listen(&id), &extra).await;
    assert_eq!(
        body["params"]["notifications"]["taskIds"],
        json!([]),
        "{body}"
    );
}

/// One raw request to `address` with this `Host` (`None`: no Host line)
/// and `Origin`: the status.
async fn status_of(address: SocketAddr, host: Option<&str>, origin: Option<&str>) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let mut request = "POST /mcp HTTP/1.1\r\nConnection: close\r\n".to_owned();
    if let Some(host) = host {
        request.push_str(&format!("Host: {host}\r\n"));
    }
    if let Some(origin) = origin {
        request.push_str(&format!("Origin: {origin}\r\n"));
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn the_guard_admits_exactly_what_rmcp_admits() {
    let hosts: Vec<String> = LOOPBACK_HOSTS
        .iter()
        .copied()
        .chain([NAME, "10.0.0.5:8080"])
        .map(str::to_owned)
        .collect();
    let origins: Vec<String> = LOOPBACK_ORIGINS
        .iter()
        .copied()
        .chain(["https://app.example.test", "http://ui.example.test:8080"])
        .map(str::to_owned)
        .collect();
    // rmcp's service alone, configured as the recipe configures it.
    let server = RuntimeServer::in_memory();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins.clone())
        .enforce_origin_validation();
    let rmcp_alone: StreamableHttpService<RuntimeServer, LocalSessionManager> = {
        let server = server.clone();
        StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config)
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rmcp_address = listener.local_addr().unwrap();
    let router = axum::Router::new().nest_service("/mcp", rmcp_alone);
    tokio::spawn(async move { axum::serve(listener, router).await });
    // The recipe, whose guard answers before rmcp sees the request.
    let ours = serve_http_with(server, |recipe| {
        recipe
            .with_allowed_hosts(hosts.clone())
            .with_allowed_origins(origins.clone())
    })
    .await;
    let ours: SocketAddr = ours
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();

    let host_cases = [
        "127.0.0.1:1",
        "localhost",
        "LocalHost:80",
        "[::1]:9",
        "[::1]",
        NAME,
        "TASKS.Example.Test:8443",
        OTHER,
        "tasks.example.test.evil",
        "10.0.0.5:8080",
        "10.0.0.5:8081",
        "10.0.0.5",
        "127.0.0.2",
        "a b",
        "",
    ];
    let origin_cases = [
        "http://localhost:3000",
        "HTTPS://[::1]",
        "https://app.example.test",
        "https://app.example.test:8443",
        "http://app.example.test",
        "http://ui.example.test:8080",
        "http://ui.example.test",
        "http://ui.example.test:8081",
        "null",
        "not a url",
        "ftp://localhost:1",
        "",
    ];
    let mut cases: Vec<(Option<&str>, Option<&str>)> =
        host_cases.iter().map(|&host| (Some(host), None)).collect();
    cases.extend(
        origin_cases
            .iter()
            .map(|&origin| (Some("localhost"), Some(origin))),
    );
    cases.push((None, None));
    let mut disagreements = Vec::new();
    let mut admitted = 0;
    for (host, origin) in cases {
        let theirs = status_of(rmcp_address, host, origin).await;
        let mine = status_of(ours, host, origin).await;
        if theirs != mine {
            disagreements.push(format!(
                "Host {host:?} Origin {origin:?}: rmcp {theirs}, ours {mine}"
            ));
        }
        admitted += usize::from(mine == 200);
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    assert!(admitted >= 10, "the table admits some: {admitted}");
}

#[tokio::test]
async fn the_token_layer_serves_a_router_of_ones_own() {
    use mcp_tasks::server::http::require_bearer_tokens;
    let file = format!("{ALICE} alice\n{BOB} bob\n");
    let tokens = Arc::new(BearerTokens::parse(file.as_bytes()).unwrap());
    let server = RuntimeServer::in_memory();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true);
    let service: StreamableHttpService<RuntimeServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let router = require_bearer_tokens(router, tokens);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(mcp_tasks::server::http::serve(listener, router));
    let endpoint = Endpoint {
        client: reqwest::Client::new(),
        port,
    };
    let alice = format!("Bearer {ALICE}");
    let id = task(&endpoint, "127.0.0.1", &[("authorization", &alice)]).await;
    // rmcp's service alone, which wants the task's `Mcp-Name` on a poll.
    let name = ("mcp-name", id.as_str());
    let (status, headers, body) = endpoint.post("127.0.0.1", &get(&id), &[name]).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(headers["www-authenticate"], "Bearer realm=\"mcp-tasks\"");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let (_, _, body) = endpoint
        .post("127.0.0.1", &get(&id), &[("authorization", &alice), name])
        .await;
    assert_eq!(body["result"]["status"], "working", "{body}");
    let bob = format!("Bearer {BOB}");
    let (_, _, body) = endpoint
        .post("127.0.0.1", &get(&id), &[("authorization", &bob), name])
        .await;
    assert_eq!(
        body["error"]["code"], -32602,
        "bob sees no such task: {body}"
    );
}
