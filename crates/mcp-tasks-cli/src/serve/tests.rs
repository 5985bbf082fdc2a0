//! Test helpers (shared with the tool tests of `super::tools`) and the
//! tests of discovery, HTTP and stores.

use std::net::SocketAddr;

use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, TaskOutcome, TaskState, TaskStatus, TasksClient,
};
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, JsonObject, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

pub(crate) const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A client that declares form elicitation (`elicitation: {}`); input
/// is answered by each test, through `tasks/update` or a resolver.
#[derive(Debug, Clone, Default)]
pub(crate) struct Forms;

impl ClientHandler for Forms {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        ClientConfig::new(capabilities, Implementation::new("serve-tests", "0"))
    }
}

pub(crate) fn options(store: SharedStore) -> ServeOptions {
    ServeOptions {
        store,
        poll_interval: Duration::from_millis(20),
        ttl: None,
        max_tasks_per_caller: Some(mcp_tasks::server::DEFAULT_MAX_TASKS_PER_CALLER),
        admission: mcp_tasks::server::AdmissionLimits::default(),
        quota_by_header: false,
        rate_per_caller: None,
        lease_period: Duration::from_secs(10),
        max_lifetime: Some(mcp_tasks::server::DEFAULT_MAX_LIFETIME),
        max_listen_streams: mcp_tasks::server::DEFAULT_MAX_LISTEN_STREAMS,
        max_listen_streams_per_caller: mcp_tasks::server::DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER,
        max_result_bytes: Some(mcp_tasks::server::DEFAULT_MAX_RESULT_BYTES),
        task_tools: mcp_tasks::server::TaskTools::off(),
        observers: Vec::new(),
    }
}

pub(crate) fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

pub(crate) async fn in_process_with<H: ClientHandler>(
    server: DemoServer,
    handler: H,
) -> TasksClient<H> {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let running = serve_client_with_lifecycle(handler, client_io, lifecycle())
        .await
        .expect("connect in process");
    TasksClient::new(running)
}

pub(crate) async fn in_process<H: ClientHandler>(handler: H) -> TasksClient<H> {
    let server = DemoServer::new(&options(Arc::new(MemoryStore::new())));
    in_process_with(server, handler).await
}

pub(crate) fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

pub(crate) fn waiting() -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)))
}

pub(crate) fn undeclared() -> CallOptions {
    CallOptions::default().with_declare_tasks(false)
}

pub(crate) fn accept(content: Value) -> Value {
    let mut answer = json!({"action": "accept"});
    answer["content"] = content;
    answer
}

pub(crate) fn first_text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

pub(crate) fn completed(outcome: &TaskOutcome) -> String {
    match outcome {
        TaskOutcome::Completed(result) => first_text(result),
        other => panic!("expected completed, got {other:?}"),
    }
}

pub(crate) async fn task_of<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    arguments: Value,
) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("{tool} should be a task: {other:?}"),
    }
}

pub(crate) async fn sync_text<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    arguments: Value,
    call: CallOptions,
) -> String {
    match client
        .call_tool(tool, args(arguments), call)
        .await
        .expect("tools/call")
    {
        CallResponse::Complete(result) => first_text(&result),
        other => panic!("{tool} should run at once: {other:?}"),
    }
}

/// Polls until the task asks for `keys` inputs at once.
pub(crate) async fn input_required<H: ClientHandler>(
    client: &TasksClient<H>,
    state: &TaskState,
    keys: usize,
) -> TaskState {
    for _ in 0..500 {
        let read = client.get(&state.id).await.expect("tasks/get");
        if read.status == TaskStatus::InputRequired && read.input_requests.len() >= keys {
            return read;
        }
        assert!(!read.status.is_terminal(), "ended early: {read:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the task never asked for {keys} inputs");
}

#[tokio::test]
async fn discover_advertises_the_extension_and_lists_every_tool() {
    let client = in_process(Forms).await;
    assert!(client.server_supports());
    let info = client.running().peer_info().expect("discovered");
    let server = info.server_info.as_ref().expect("server info");
    assert_eq!(server.name, "mcp-tasks");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    assert!(info.capabilities.tools.is_some());
    let capabilities = serde_json::to_value(&info.capabilities).unwrap();
    assert_eq!(capabilities["extensions"][TASKS], json!({}));

    let tools = client.running().list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        ["long_job", "confirm_action", "failing_tool", "sleep"]
    );
    let instructions = info.instructions.as_deref().unwrap_or_default();
    assert_eq!(
        instructions,
        "Demo tools for the MCP Tasks extension: long_job, confirm_action, failing_tool, sleep. \
         Task changes are pushed as notifications/tasks on subscriptions/listen with \
         notifications.taskIds."
    );
    for tool in &tools {
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{} has a description",
            tool.name
        );
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
    }
}

/// Serves `server` over HTTP on 127.0.0.1 and returns the address.
async fn http(server: DemoServer) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(serve_http(
        server.clone(),
        server.runtime().clone(),
        listener,
        HttpAccess::default(),
        std::future::pending(),
    ));
    address
}

/// POSTs a `server/discover` with raw HTTP/1.1; returns the status and body.
async fn discover_raw(address: SocketAddr, host: &str, origin: Option<&str>) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: server/discover\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(origin) = origin {
        request.push_str(&format!("Origin: {origin}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, response)
}

#[tokio::test]
async fn http_refuses_foreign_origins_and_hosts() {
    let address = http(DemoServer::new(&options(Arc::new(MemoryStore::new())))).await;
    let host = address.to_string();
    let (status, body) = discover_raw(address, &host, None).await;
    assert_eq!(status, 200, "no Origin passes: {body}");
    assert!(body.contains(TASKS), "{body}");
    for origin in [
        "http://localhost:3000",
        "http://localhost",
        "https://localhost:8443",
        "http://127.0.0.1:9",
        "https://[::1]:1234",
        "HTTP://LOCALHOST:3000",
    ] {
        let (status, body) = discover_raw(address, &host, Some(origin)).await;
        assert_eq!(status, 200, "{origin} passes: {body}");
    }
    for origin in [
        "http://evil.example",
        "http://evil.example.com",
        "https://localhost.evil.example",
        "http://127.0.0.2:80",
        "null",
        "not a url",
    ] {
        let (status, _) = discover_raw(address, &host, Some(origin)).await;
        assert_eq!(status, 403, "{origin} is refused");
    }
    // DNS rebinding: a foreign Host is refused too.
    let (status, _) = discover_raw(address, "evil.example", None).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn over_http_a_task_asks_for_input_and_completes() {
    let address = http(DemoServer::new(&options(Arc::new(MemoryStore::new())))).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"));
    let transport = StreamableHttpClientTransport::from_config(config);
    let running = serve_client_with_lifecycle(Forms, transport, lifecycle())
        .await
        .expect("connect over HTTP");
    let client = TasksClient::new(running);
    assert!(client.server_supports());
    let state = task_of(&client, "confirm_action", json!({"action": "ship"})).await;
    input_required(&client, &state, 1).await;
    client
        .update(
            &state.id,
            [("confirm".to_owned(), accept(json!({"confirm": true})))].into(),
        )
        .await
        .unwrap();
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "confirmed: ship");
    assert_eq!(
        sync_text(&client, "sleep", json!({"ms": 1}), undeclared()).await,
        "slept 1 ms"
    );
}

#[test]
fn store_choices_parse() {
    assert_eq!(StoreChoice::parse("memory").unwrap(), StoreChoice::Memory);
    assert_eq!(
        StoreChoice::parse("sqlite:/tmp/x.db").unwrap(),
        StoreChoice::Sqlite(PathBuf::from("/tmp/x.db"))
    );
    assert_eq!(
        StoreChoice::parse("sqlite:C:\\tasks.db").unwrap(),
        StoreChoice::Sqlite(PathBuf::from("C:\\tasks.db"))
    );
    for url in ["redis://127.0.0.1:6379/0", "rediss://user:pw@cache:6380/2"] {
        assert_eq!(
            StoreChoice::parse(url).unwrap(),
            StoreChoice::Redis(url.to_owned())
        );
    }
    for url in [
        "postgres://app:pw@db:5432/tasks",
        "postgresql://db/tasks?sslmode=require",
        "postgres://",
    ] {
        assert_eq!(
            StoreChoice::parse(url).unwrap(),
            StoreChoice::Postgres(url.to_owned())
        );
    }
    for bad in [
        "",
        "sqlite:",
        "sqlite",
        "redis:",
        "redis://",
        "redis:host",
        "Memory",
        "postgres:db",
        "postgresql:",
    ] {
        assert!(StoreChoice::parse(bad).is_err(), "{bad:?}");
    }
    let unknown = StoreChoice::parse("mysql://user:secret@db/x").unwrap_err();
    assert!(!unknown.to_string().contains("secret"), "{unknown}");
}

#[test]
fn passwords_in_urls_are_redacted() {
    assert_eq!(
        redacted("rediss://user:secret@cache:6380/2"),
        "rediss://***@cache:6380/2"
    );
    assert_eq!(
        redacted("redis://127.0.0.1:6379/0"),
        "redis://127.0.0.1:6379/0"
    );
    assert_eq!(redacted("redis://h/0?x=a@b"), "redis://h/0?x=a@b");
    assert_eq!(
        redacted("postgres://app:secret@db/tasks?sslmode=require&password=other"),
        "postgres://***@db/tasks?sslmode=require&password=***"
    );
    assert_eq!(
        redacted("postgresql://app:secret@db?password=x"),
        "postgresql://***@db?password=***"
    );
}

#[tokio::test]
async fn a_sqlite_store_in_the_data_folder_keeps_tasks() {
    let data = tempfile::tempdir().unwrap();
    let choice = StoreChoice::sqlite_in(data.path()).unwrap();
    let StoreChoice::Sqlite(path) = &choice else {
        panic!("sqlite expected");
    };
    assert_eq!(path, &data.path().join("mcp-tasks").join("tasks.db"));
    assert!(data.path().join("mcp-tasks").is_dir());
    let mut options = options(
        choice
            .open(Namespace::default(), mcp_tasks_sqlite::SqliteSync::Normal)
            .await
            .unwrap(),
    );
    options.ttl = Some(Duration::from_secs(120));
    let client = in_process_with(DemoServer::new(&options), ()).await;
    let state = task_of(&client, "sleep", json!({"ms": 0})).await;
    assert_eq!(
        state.ttl,
        Some(mcp_tasks::Ttl::Limited(Duration::from_secs(120)))
    );
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "slept 0 ms");
    // The file holds the finished task (read with SQLite itself: a second
    // store on a file the server holds is refused).
    let status: String =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
            .query_row(
                "SELECT status FROM tasks WHERE id = ?1",
                [state.id.expose()],
                |row| row.get(0),
            )
            .unwrap();
    assert_eq!(status, "completed");
    let Err(held) = choice
        .open(Namespace::default(), mcp_tasks_sqlite::SqliteSync::Normal)
        .await
    else {
        panic!("a second store on a file the server holds");
    };
    assert!(
        format!("{held:#}").contains("another process holds")
            && format!("{held:#}").contains("--store memory"),
        "{held:#}"
    );
    assert!(
        StoreChoice::Memory
            .open(Namespace::default(), mcp_tasks_sqlite::SqliteSync::Full)
            .await
            .is_ok()
    );
}
