//! A client for the official MCP conformance suite
//! (`npx conformance client --command mcp-tasks-conformance ...`), built on
//! [`mcp_tasks::TasksClient`] over rmcp's Streamable HTTP client transport.
//!
//! The harness starts a mock server, passes its URL as the last argument and
//! names the scenario in `MCP_CONFORMANCE_SCENARIO`; some scenarios add a
//! JSON context in `MCP_CONFORMANCE_CONTEXT`. The client does what the
//! scenario expects, checks the answers it gets, logs to stderr and exits 0
//! on success.
//!
//! Tool calls go through [`TasksClient::call_and_await`] (MRTR rounds,
//! answered by [`ConformanceHandler`] or a resolver). Listing tools, and the
//! resources and prompts requests of `http-standard-headers`, use rmcp's
//! `Peer` directly: the library does not wrap them.

mod form;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use mcp_tasks::form::Form;
use mcp_tasks::{AwaitOptions, CallOptions, InputMode, TaskOutcome, TasksClient};
use rmcp::model::{
    CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, GetPromptRequestParams,
    Implementation, InputResponses, JsonObject, ProtocolVersion, ReadResourceRequestParams,
};
use rmcp::service::{
    ClientLifecycleMode, RequestContext, RunningService, serve_client_with_lifecycle,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

/// The rmcp client handler: it declares form elicitation and accepts every
/// form with values taken from the requested schema (see [`form::fill`]);
/// a schema the library cannot read as a form is declined.
#[derive(Debug, Clone, Default)]
struct ConformanceHandler;

impl ClientHandler for ConformanceHandler {
    fn get_info(&self) -> ClientConfig {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-tasks-conformance", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => match Form::from_schema(&requested_schema) {
                Ok(form) => {
                    let content = form::fill(&form);
                    eprintln!("elicitation {message:?}: accepting with {content}");
                    Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
                }
                Err(error) => {
                    eprintln!("elicitation {message:?}: declining, {error}");
                    Ok(ElicitResult::new(ElicitationAction::Decline))
                }
            },
            // URL mode is not declared, so a server must not ask for it.
            _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }
}

type Client = TasksClient<ConformanceHandler>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcp-tasks-conformance: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::args()
        .skip(1)
        .last()
        .context("usage: mcp-tasks-conformance [...] SERVER_URL")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => serde_json::from_str(&text).context("MCP_CONFORMANCE_CONTEXT is not JSON")?,
        Err(_) => Value::Null,
    };
    eprintln!("scenario {scenario:?} against {url}");

    let running = Arc::new(connect(&url).await?);
    let client = TasksClient::from_arc(running.clone());
    let outcome = match scenario.as_str() {
        "tools_call" => tools_call(&client).await,
        "request-metadata" => request_metadata(&client).await,
        "http-standard-headers" => standard_headers(&client).await,
        "http-custom-headers" => custom_headers(&client, &context).await,
        "sep-2322-client-request-state" => request_state(&client).await,
        other => {
            eprintln!("unknown scenario {other:?}: listing tools and running the context's calls");
            custom_headers(&client, &context).await
        }
    };
    drop(client);
    match Arc::try_unwrap(running) {
        Ok(running) => {
            let _ = running.cancel().await;
        }
        Err(running) => running.cancellation_token().cancel(),
    }
    outcome
}

/// Connects with the 2026-07-28 lifecycle: `server/discover` first (rmcp
/// retries it once on -32022 with a version the server names), `initialize`
/// only if the server turns out to be legacy.
async fn connect(url: &str) -> anyhow::Result<RunningService<RoleClient, ConformanceHandler>> {
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let running = tokio::time::timeout(
        Duration::from_secs(30),
        serve_client_with_lifecycle(ConformanceHandler, transport, lifecycle),
    )
    .await
    .context("the server did not answer within 30 s")?
    .with_context(|| format!("cannot connect to {url}"))?;
    if let Some(info) = running.peer().peer_info() {
        eprintln!("connected: protocol {}", info.protocol_version.as_str());
    }
    Ok(running)
}

/// Lists the tools (rmcp directly: the library has no list call). Listing
/// also fills rmcp's transport cache of input schemas, from which it builds
/// the `Mcp-Param-*` headers of later calls.
async fn list_tools(client: &Client) -> anyhow::Result<Vec<String>> {
    let tools = client
        .running()
        .peer()
        .list_all_tools()
        .await
        .context("tools/list")?;
    let names: Vec<String> = tools.iter().map(|tool| tool.name.to_string()).collect();
    eprintln!("tools: {names:?}");
    Ok(names)
}

/// Calls a tool with [`TasksClient::call_and_await`] and returns its result.
/// The Tasks extension is declared only when the server advertises it.
async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
    input: InputMode,
) -> anyhow::Result<CallToolResult> {
    let arguments: Option<JsonObject> = match arguments {
        Value::Object(object) => Some(object),
        Value::Null => None,
        other => bail!("the arguments of {name} are not an object: {other}"),
    };
    let call = CallOptions::default().with_declare_tasks(client.server_supports());
    let options = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_input(input);
    let outcome = client
        .call_and_await(name, arguments, call, &options)
        .await
        .with_context(|| format!("tools/call {name}"))?;
    let TaskOutcome::Completed(result) = outcome else {
        bail!("tools/call {name} ended {}", outcome.status());
    };
    eprintln!("{name} -> {}", text_of(&result));
    ensure!(
        result.is_error != Some(true),
        "{name} returned a tool error: {}",
        text_of(&result)
    );
    Ok(result)
}

/// The text blocks of a result, joined.
fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|content| content.as_text().map(|text| text.text.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `tools_call`: list the tools and call `add_numbers` with two numbers.
async fn tools_call(client: &Client) -> anyhow::Result<()> {
    let tools = list_tools(client).await?;
    ensure!(
        tools.iter().any(|name| name == "add_numbers"),
        "the server lists no add_numbers tool"
    );
    let result = call(
        client,
        "add_numbers",
        json!({"a": 5, "b": 3}),
        InputMode::Handlers,
    )
    .await?;
    let text = text_of(&result);
    ensure!(text.contains('8'), "add_numbers(5, 3) answered {text:?}");
    Ok(())
}

/// `request-metadata`: the server rejects the first request (the discover)
/// with -32022; the lifecycle retries it. Then requests carrying the
/// `_meta` envelope and the version header: list the tools and call each.
async fn request_metadata(client: &Client) -> anyhow::Result<()> {
    for name in list_tools(client).await? {
        call(client, &name, json!({}), InputMode::Handlers).await?;
    }
    Ok(())
}

/// `http-standard-headers`: one request of each method the scenario checks
/// for `Mcp-Method` and `Mcp-Name`. The tool calls go through the library;
/// resources and prompts through rmcp, which sets the same headers.
async fn standard_headers(client: &Client) -> anyhow::Result<()> {
    for name in list_tools(client).await? {
        call(client, &name, json!({}), InputMode::Handlers).await?;
    }
    let peer = client.running().peer();
    let resources = peer.list_resources(None).await.context("resources/list")?;
    for resource in &resources.resources {
        peer.read_resource(ReadResourceRequestParams::new(resource.uri.clone()))
            .await
            .with_context(|| format!("resources/read {}", resource.uri))?;
        eprintln!("read {}", resource.uri);
    }
    let prompts = peer.list_prompts(None).await.context("prompts/list")?;
    for prompt in &prompts.prompts {
        peer.get_prompt(GetPromptRequestParams::new(prompt.name.clone()))
            .await
            .with_context(|| format!("prompts/get {}", prompt.name))?;
        eprintln!("got prompt {}", prompt.name);
    }
    Ok(())
}

/// `http-custom-headers`: list the tools, then make the calls the context
/// names (`toolCalls: [{name, arguments}]`), as given; rmcp mirrors the
/// `x-mcp-header` arguments into `Mcp-Param-*` headers.
async fn custom_headers(client: &Client, context: &Value) -> anyhow::Result<()> {
    let tools = list_tools(client).await?;
    let calls = context
        .get("toolCalls")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for entry in calls {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .context("a toolCalls entry has no name")?;
        ensure!(
            tools.iter().any(|tool| tool == name),
            "the server lists no {name} tool"
        );
        let arguments = entry.get("arguments").cloned().unwrap_or(json!({}));
        call(client, name, arguments, InputMode::Handlers).await?;
    }
    Ok(())
}

/// `sep-2322-client-request-state`: MRTR rounds through `call_and_await`.
///
/// * `test_mrtr_echo_state`: the handler answers the elicitation; the retry
///   echoes `requestState` as given, with a new JSON-RPC id.
/// * `test_mrtr_no_state`: answered by a resolver that first calls
///   `test_mrtr_unrelated`, so that call falls between the two rounds and
///   must carry neither `inputResponses` nor `requestState`; the retry
///   carries no `requestState` because none was given.
/// * `test_mrtr_no_result_type`: a result without `resultType` is complete.
async fn request_state(client: &Client) -> anyhow::Result<()> {
    list_tools(client).await?;

    let echoed = call(
        client,
        "test_mrtr_echo_state",
        json!({}),
        InputMode::Handlers,
    )
    .await?;
    ensure!(
        text_of(&echoed) == "echo-state-ok",
        "echo state: {}",
        text_of(&echoed)
    );

    let between = client.clone();
    let resolver = InputMode::resolver(move |requests| {
        let client = between.clone();
        async move {
            match call(&client, "test_mrtr_unrelated", json!({}), InputMode::Return).await {
                Ok(result) => eprintln!("between rounds: {}", text_of(&result)),
                Err(error) => eprintln!("between rounds: {error:#}"),
            }
            let mut responses = InputResponses::new();
            for (key, request) in requests {
                if request.get("method").and_then(Value::as_str) == Some("elicitation/create") {
                    let schema = request
                        .pointer("/params/requestedSchema")
                        .unwrap_or(&Value::Null);
                    match Form::from_value(schema) {
                        Ok(form) => {
                            responses.insert(
                                key,
                                json!({"action": "accept", "content": form::fill(&form)}),
                            );
                        }
                        Err(error) => eprintln!("input request {key:?} left unanswered: {error}"),
                    }
                }
            }
            Ok(responses)
        }
    });
    let no_state = call(client, "test_mrtr_no_state", json!({}), resolver).await?;
    ensure!(
        text_of(&no_state) == "no-state-ok",
        "no state: {}",
        text_of(&no_state)
    );

    let no_type = call(
        client,
        "test_mrtr_no_result_type",
        json!({}),
        InputMode::Handlers,
    )
    .await?;
    ensure!(
        text_of(&no_type) == "no-result-type-test-ok",
        "no result type: {}",
        text_of(&no_type)
    );
    Ok(())
}
