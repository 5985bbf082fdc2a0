//! The task gateway in front of a plain 2025-11-25 server over Streamable
//! HTTP (rmcp's, in legacy session mode, with no tasks): each call in
//! flight gets an upstream session of its own, so the server's requests on
//! a session are that call's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};
use mcp_tasks::server::TaskRuntime;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, InputMode, TaskOutcome, TaskState, TasksClient,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientResult, ContentBlock, DiscoverResult,
    ElicitRequest, ElicitRequestParams, Implementation, InputResponses, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use crate::support::calls::text;
use crate::support::runtime_server::serve_recipe as serve_gateway;

/// A task-less 2025-11-25 server with one tool, `ask`, that asks its
/// client for a name and answers `hello NAME`.
#[derive(Clone)]
struct Asking;

impl ServerHandler for Asking {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("asking", "1.0.0"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    // No `server/discover`: the gateway falls back to `initialize`, as
    // with a server of the 2025 era.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
            None,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool: Tool = serde_json::from_value(json!({
            "name": "ask", "description": "Asks for a name",
            "inputSchema": {"type": "object", "properties": {}},
        }))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form",
            "message": "What is your name?",
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        }))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let answer = context
            .peer
            .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let name = match answer {
            ClientResult::ElicitResult(result) => result
                .content
                .as_ref()
                .and_then(|content| content.get("name"))
                .and_then(|name| name.as_str())
                .unwrap_or("?")
                .to_owned(),
            other => format!("unexpected {other:?}"),
        };
        Ok(rmcp::model::CallToolResponse::Complete(
            CallToolResult::success(vec![ContentBlock::text(format!("hello {name}"))]),
        ))
    }
}

/// Serves [`Asking`] over Streamable HTTP with sessions; the count is of
/// the server instances made (one a session, and one for a request
/// outside any).
async fn asking_upstream() -> (String, Arc<AtomicUsize>) {
    let sessions = Arc::new(AtomicUsize::new(0));
    let counted = sessions.clone();
    let service: StreamableHttpService<Asking, LocalSessionManager> = StreamableHttpService::new(
        move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(Asking)
        },
        Arc::default(),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{address}/mcp"), sessions)
}

#[tokio::test]
async fn concurrent_calls_to_an_http_upstream_each_get_a_session_of_their_own() {
    let (upstream, sessions) = asking_upstream().await;
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let gateway = Gateway::start(
        Upstream::url(upstream),
        runtime.clone(),
        GatewayOptions::default(),
    )
    .await
    .expect("the gateway starts in front of the HTTP upstream");
    // What one connection makes: the gateway's own session, and the
    // instance that answered its `server/discover` probe.
    let per_connection = sessions.load(Ordering::SeqCst);
    assert!(per_connection >= 1);
    let url = serve_gateway(gateway, runtime).await;
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = TasksClient::new(
        serve_client_with_lifecycle((), transport, lifecycle)
            .await
            .expect("connect to the gateway"),
    );
    let waiting = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_input(InputMode::Return);
    let mut asking: Vec<(String, TaskState)> = Vec::new();
    for _ in 0..3 {
        let state = match client
            .call_tool("ask", (), CallOptions::default())
            .await
            .expect("tools/call")
        {
            CallResponse::Task(state) => state,
            other => panic!("expected a task, got {other:?}"),
        };
        let TaskOutcome::InputRequired { state: asked, .. } =
            client.await_task(state, &waiting).await.unwrap()
        else {
            panic!("expected input_required");
        };
        let key = asked
            .input_requests
            .keys()
            .next()
            .expect("a request")
            .clone();
        asking.push((key, asked));
    }
    // Three calls in flight, each on its own session: the gateway's own
    // and two more.
    assert_eq!(sessions.load(Ordering::SeqCst), 3 * per_connection);
    let names = ["Ada", "Grace", "Edsger"];
    for ((key, state), name) in asking.iter().zip(names).rev() {
        let mut answer = InputResponses::new();
        answer.insert(
            key.clone(),
            json!({"action": "accept", "content": {"name": name}}),
        );
        client.update(&state.id, answer).await.unwrap();
    }
    for ((_, state), name) in asking.iter().zip(names) {
        match client.await_task(&state.id, &waiting).await.unwrap() {
            TaskOutcome::Completed(result) => assert_eq!(text(&result), format!("hello {name}")),
            other => panic!("expected completed, got {other:?}"),
        }
    }
    // Idle sessions are used again: no new one.
    let state = match client
        .call_tool("ask", (), CallOptions::default())
        .await
        .unwrap()
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task, got {other:?}"),
    };
    let TaskOutcome::InputRequired { .. } = client.await_task(state, &waiting).await.unwrap()
    else {
        panic!("expected input_required");
    };
    assert_eq!(sessions.load(Ordering::SeqCst), 3 * per_connection);
}
