//! The task gateway's synchronous calls (a caller that did not declare the
//! extension) in front of `plain-upstream`: the upstream's requests during
//! the call go to the caller, as an MRTR round to a 2026-07-28 caller over
//! Streamable HTTP, and as a request on its own session to a 2025-11-25
//! caller over a TCP socket.

// Sampling is deprecated (SEP-2577) but an upstream may still ask.
#![allow(deprecated)]

use std::time::Duration;

use mcp_tasks::gateway::{Gateway, GatewayConfig, GatewayOptions, Upstream, UpstreamConfig};
use mcp_tasks::server::TaskRuntime;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{CallOptions, CallResponse, TasksClient};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationCapability,
    FormElicitationCapability, Implementation, InputRequiredResult, InputResponses,
    ProtocolVersion, SamplingCapability,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;

use crate::support::{completed_text, first_lines, fixture_log, serve_gateway, text};

const UPSTREAM: &str = env!("CARGO_BIN_EXE_plain-upstream");

/// A client handler that declares form elicitation and sampling (or
/// nothing), and answers them as a user would: the name "Grace", the
/// model's "hi".
#[derive(Clone)]
struct Asked {
    declare: bool,
    version: ProtocolVersion,
}

impl ClientHandler for Asked {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.declare {
            let mut elicitation = ElicitationCapability::default();
            elicitation.form = Some(FormElicitationCapability::default());
            capabilities.elicitation = Some(elicitation);
            capabilities.sampling = Some(SamplingCapability::default());
        }
        let mut config = ClientConfig::new(capabilities, Implementation::new("asked", "1.0.0"));
        config.protocol_version = self.version.clone();
        config
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        serde_json::from_value(json!({"action": "accept", "content": {"name": "Grace"}}))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        serde_json::from_value(json!({
            "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m",
        }))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}

async fn start(command: String, options: GatewayOptions) -> (Gateway, TaskRuntime) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let gateway = Gateway::start(Upstream::command(command), runtime.clone(), options)
        .await
        .expect("the gateway starts in front of plain-upstream");
    (gateway, runtime)
}

/// A 2026-07-28 client of the gateway over Streamable HTTP.
async fn over_http(gateway: Gateway, runtime: TaskRuntime, declare: bool) -> TasksClient<Asked> {
    let url = serve_gateway(gateway, runtime).await;
    client_of(&url, declare, None).await
}

/// A 2026-07-28 client of the gateway at `url`, sending `token` (its
/// principal is a hash of it: the gateway has no token list).
async fn client_of(url: &str, declare: bool, token: Option<&str>) -> TasksClient<Asked> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let handler = Asked {
        declare,
        version: ProtocolVersion::V_2026_07_28,
    };
    let running = serve_client_with_lifecycle(handler, transport, lifecycle)
        .await
        .expect("connect to the gateway");
    TasksClient::new(running)
}

fn plain() -> CallOptions {
    CallOptions::default().with_declare_tasks(false)
}

async fn round(
    client: &TasksClient<Asked>,
    tool: &str,
    options: CallOptions,
) -> InputRequiredResult {
    match client
        .call_tool(tool, (), options)
        .await
        .expect("tools/call")
    {
        CallResponse::InputRequired(round) => round,
        other => panic!("expected an MRTR round for {tool}, got {other:?}"),
    }
}

fn answer(round: &InputRequiredResult, name: &str) -> CallOptions {
    let requests = round.input_requests.clone().unwrap_or_default();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.iter().next().unwrap();
    let request = serde_json::to_value(request).unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "What is your name?");
    let mut answers = InputResponses::new();
    answers.insert(
        key.clone(),
        json!({"action": "accept", "content": {"name": name}}),
    );
    plain().with_mrtr_retry(Some(answers), round.request_state.clone())
}

#[tokio::test]
async fn a_2026_caller_answers_an_upstream_request_in_an_mrtr_round() {
    let (gateway, runtime) = start(UPSTREAM.to_owned(), GatewayOptions::default()).await;
    let client = over_http(gateway, runtime, true).await;
    // Two calls parked at once, answered in the other order.
    let first = round(&client, "ask", plain()).await;
    let second = round(&client, "ask", plain()).await;
    assert!(first.request_state.is_some());
    assert_ne!(first.request_state, second.request_state);
    // The second retry declares the extension: a retry of a parked call
    // resumes it all the same, no task.
    for (parked, name, declare) in [(&second, "Edsger", false), (&first, "Ada", true)] {
        let options = answer(parked, name).with_declare_tasks(declare);
        let response = client.call_tool("ask", (), options).await.unwrap();
        assert_eq!(completed_text(response), format!("hello {name}"));
    }
    // A retry that answers nothing is asked again, under the same key.
    let third = round(&client, "ask", plain()).await;
    let again = round(
        &client,
        "ask",
        plain().with_mrtr_retry(Some(InputResponses::new()), third.request_state.clone()),
    )
    .await;
    assert_eq!(
        again
            .input_requests
            .as_ref()
            .map(|requests| requests.keys().collect::<Vec<_>>()),
        third
            .input_requests
            .as_ref()
            .map(|requests| requests.keys().collect::<Vec<_>>())
    );
    // Its state names another tool's call: refused, and still parked.
    let error = client
        .call_tool("sample", (), answer(&again, "x"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602), "{error}");
    let response = client
        .call_tool("ask", (), answer(&again, "Barbara"))
        .await
        .unwrap();
    assert_eq!(completed_text(response), "hello Barbara");
    // Answered already: the state names nothing any more.
    let error = client
        .call_tool("ask", (), answer(&again, "Barbara"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602), "{error}");
}

#[tokio::test]
async fn a_parked_call_left_unanswered_is_cancelled_upstream() {
    let log = fixture_log("cancel", line!());
    let command = format!("{UPSTREAM} --cancel-log {}", log.display());
    let options = GatewayOptions::default().with_input_timeout(Duration::from_millis(300));
    let (gateway, runtime) = start(command, options).await;
    let client = over_http(gateway, runtime, true).await;
    let parked = round(&client, "ask", plain()).await;
    let heard = first_lines(&log).await;
    assert_eq!(
        heard.lines().count(),
        1,
        "no notifications/cancelled: {heard:?}"
    );
    let error = client
        .call_tool("ask", (), answer(&parked, "late"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602), "{error}");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_caller_that_declared_no_elicitation_is_not_asked() {
    let (gateway, runtime) = start(UPSTREAM.to_owned(), GatewayOptions::default()).await;
    let client = over_http(gateway, runtime, false).await;
    // The upstream is told the caller cannot be asked, and answers so.
    match client.call_tool("ask", (), plain()).await.unwrap() {
        CallResponse::Complete(result) => {
            let said = text(&result);
            assert!(said.starts_with("no answer"), "{said}");
            assert!(said.contains("did not declare"), "{said}");
        }
        other => panic!("expected the upstream's result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_2025_session_caller_is_asked_on_its_own_connection() {
    let (gateway, _runtime) = start(UPSTREAM.to_owned(), GatewayOptions::default()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let running = gateway.serve(socket).await.expect("the session starts");
        let _ = running.waiting().await;
    });
    let socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let handler = Asked {
        declare: true,
        version: ProtocolVersion::V_2025_11_25,
    };
    let running = serve_client_with_lifecycle(handler, socket, ClientLifecycleMode::Initialize)
        .await
        .expect("initialize with the gateway");
    let call = |tool: &str| {
        let peer = running.peer().clone();
        let params = CallToolRequestParams::new(tool.to_owned());
        async move { peer.call_tool(params).await.expect("tools/call") }
    };
    let (asked, sampled) = tokio::join!(call("ask"), call("sample"));
    assert_eq!(text(&asked), "hello Grace");
    assert_eq!(text(&sampled), "the model said: hi");
}

#[tokio::test]
async fn a_2025_caller_over_http_is_asked_on_its_session() {
    let (gateway, runtime) = start(UPSTREAM.to_owned(), GatewayOptions::default()).await;
    let url = serve_gateway(gateway, runtime).await;
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let handler = Asked {
        declare: true,
        version: ProtocolVersion::V_2025_11_25,
    };
    let running = serve_client_with_lifecycle(handler, transport, ClientLifecycleMode::Initialize)
        .await
        .expect("initialize with the gateway");
    // An initialize-era client has a session over HTTP: it is asked there.
    let call = running.peer().call_tool(CallToolRequestParams::new("ask"));
    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("answered, not hung")
        .expect("tools/call");
    assert_eq!(text(&result), "hello Grace");
}

#[tokio::test]
async fn a_parked_call_is_resumed_only_by_its_own_caller() {
    let (gateway, runtime) = start(UPSTREAM.to_owned(), GatewayOptions::default()).await;
    let url = serve_gateway(gateway, runtime).await;
    let alice = client_of(&url, true, Some("alice")).await;
    let mallory = client_of(&url, true, Some("mallory")).await;
    let parked = round(&alice, "ask", plain()).await;
    let error = mallory
        .call_tool("ask", (), answer(&parked, "Mallory"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602), "{error}");
    let response = alice
        .call_tool("ask", (), answer(&parked, "Alice"))
        .await
        .unwrap();
    assert_eq!(completed_text(response), "hello Alice");
}

/// A gateway for a team in front of plain-upstream as `name`, called
/// with the call timeout `timeout` (so a change of it replaces the route).
fn team(names: &[(&str, u64)]) -> GatewayConfig {
    names
        .iter()
        .fold(GatewayConfig::default(), |config, (name, timeout)| {
            config.with_upstream(
                UpstreamConfig::new(*name, Upstream::command(UPSTREAM))
                    .with_call_timeout(Some(Duration::from_secs(*timeout))),
            )
        })
}

#[tokio::test]
async fn a_call_parked_for_input_outlives_the_reload_that_removes_or_replaces_its_upstream() {
    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let gateway = Gateway::start_many(runtime.clone(), team(&[("p", 60), ("q", 60)]))
        .await
        .expect("the gateway starts in front of two plain-upstreams");
    let client = over_http(gateway.clone(), runtime, true).await;
    let on_p = round(&client, "p__ask", plain()).await;
    let on_q = round(&client, "q__ask", plain()).await;
    // p is removed, q replaced (another call timeout), r added.
    let report = gateway
        .reload(team(&[("q", 61), ("r", 60)]))
        .await
        .expect("the reload");
    assert_eq!(
        (report.added, report.removed, report.replaced),
        (
            vec!["r".to_owned()],
            vec!["p".to_owned()],
            vec!["q".to_owned()]
        )
    );
    // New calls of p are refused as an unknown tool's.
    let error = client.call_tool("p__ask", (), plain()).await.unwrap_err();
    assert_eq!(error.code(), Some(-32602), "{error}");
    // The parked calls end as they would have: answered, on their upstream.
    for (parked, tool, name) in [(&on_p, "p__ask", "Ada"), (&on_q, "q__ask", "Edsger")] {
        let response = client.call_tool(tool, (), answer(parked, name)).await;
        assert_eq!(completed_text(response.unwrap()), format!("hello {name}"));
    }
    // And the new q takes new calls.
    let fresh = round(&client, "q__ask", plain()).await;
    let response = client
        .call_tool("q__ask", (), answer(&fresh, "Grace"))
        .await;
    assert_eq!(completed_text(response.unwrap()), "hello Grace");
}

/// A synchronous call through the gateway sent again under its idempotency
/// key (its answer lost, say) gets the first call's answer: the upstream
/// runs it once. The gateway declares that it honours keys, so our client
/// would send such a call again.
#[tokio::test]
async fn a_synchronous_call_sent_again_under_its_key_reaches_the_upstream_once() {
    let log = fixture_log("calls", line!());
    let command = format!("{UPSTREAM} --call-log {}", log.display());
    let (gateway, runtime) = start(command, GatewayOptions::default()).await;
    let client = over_http(gateway, runtime, false).await;
    assert!(client.server_honours_idempotency());
    let key = mcp_tasks::IdempotencyKey::new("pay-once").expect("a key");
    let call = || {
        let arguments = crate::support::args(json!({"text": "paid"}));
        client.call_tool("echo", arguments, plain().with_idempotency_key(&key))
    };
    let first = completed_text(call().await.expect("the first send"));
    let again = completed_text(call().await.expect("the second send"));
    assert_eq!((first.as_str(), again.as_str()), ("paid", "paid"));
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        seen.lines()
            .filter(|line| line.starts_with("echo "))
            .count(),
        1,
        "{seen}"
    );
    let _ = std::fs::remove_file(&log);
}
