//! The task gateway in front of an upstream that speaks both eras and
//! asks for input in each era's way: `plain-upstream --dual`, which (as
//! fastmcp) sends server-initiated requests only on a 2025-era connection
//! and answers MRTR rounds (`ask_mrtr`) only on a 2026-07-28 one. Each way
//! becomes the task's `input_required`; MRTR rounds follow one another,
//! and a task cancelled during one ends there.

use std::path::Path;
use std::time::Duration;

use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};
use mcp_tasks::server::TaskRuntime;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{CallOptions, CallResponse, TaskOutcome, TaskState, TasksClient};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationCapability, FormElicitationCapability, Implementation, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::support::{args, completed_text, fixture_log, serve_gateway, text, waiting};

const UPSTREAM: &str = env!("CARGO_BIN_EXE_plain-upstream");

/// A client that declares form elicitation and answers every form's
/// `answer` field with "pushed" (for a 2025-era session).
#[derive(Clone)]
struct Answering {
    version: ProtocolVersion,
}

impl ClientHandler for Answering {
    fn get_info(&self) -> ClientConfig {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        let mut config = ClientConfig::new(capabilities, Implementation::new("answering", "1.0.0"));
        config.protocol_version = self.version.clone();
        config
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        serde_json::from_value(json!({"action": "accept", "content": {"answer": "pushed"}}))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }
}

/// A gateway in front of `plain-upstream --dual` logging its calls to
/// `log`, and a 2026-07-28 client of it over Streamable HTTP.
async fn dual(log: &Path, options: GatewayOptions) -> (Gateway, TasksClient<Answering>) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let command = format!("{UPSTREAM} --dual --call-log {}", log.display());
    let gateway = Gateway::start(Upstream::command(command), runtime.clone(), options)
        .await
        .expect("the gateway starts in front of plain-upstream --dual");
    let url = serve_gateway(gateway.clone(), runtime).await;
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let handler = Answering {
        version: ProtocolVersion::V_2026_07_28,
    };
    let running = serve_client_with_lifecycle(handler, transport, lifecycle)
        .await
        .expect("connect to the gateway");
    (gateway, TasksClient::new(running))
}

async fn task(client: &TasksClient<Answering>, tool: &str, arguments: Value) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task for {tool}, got {other:?}"),
    }
}

/// Waits for the task's next input request (one), answers its form's
/// `field` with `value`, and returns the request's key and message.
async fn answer_next(
    client: &TasksClient<Answering>,
    state: &TaskState,
    field: &str,
    value: &str,
) -> (String, String) {
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(&state.id, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    assert_eq!(
        asking.input_requests.len(),
        1,
        "{:?}",
        asking.input_requests
    );
    let (key, request) = asking.input_requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let message = request["params"]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut answer = InputResponses::new();
    answer.insert(
        key.clone(),
        json!({"action": "accept", "content": {field: value}}),
    );
    client.update(&state.id, answer).await.unwrap();
    (key.clone(), message)
}

fn completed(outcome: TaskOutcome) -> String {
    match outcome {
        TaskOutcome::Completed(result) => text(&result),
        other => panic!("expected completed, got {other:?}"),
    }
}

/// The `tools/call`s the upstream saw, as `TOOL ERA answers=N` lines.
fn calls_seen(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn an_upstream_of_both_eras_asks_each_way_and_each_becomes_input_required() {
    let log = fixture_log("calls", line!());
    let (_gateway, client) = dual(&log, GatewayOptions::default()).await;

    // A server-initiated elicitation: on a 2025-era connection.
    let state = task(&client, "ask", json!({})).await;
    answer_next(&client, &state, "name", "Ada").await;
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert_eq!(completed(outcome), "hello Ada");
    assert_eq!(calls_seen(&log), ["ask 2025 answers=0"]);

    // An MRTR round: refused on the 2025-era connection (-32602), sent
    // again on a 2026-07-28 one, where its round is the task's input.
    let state = task(&client, "ask_mrtr", json!({})).await;
    let (key, message) = answer_next(&client, &state, "answer", "yes").await;
    assert!(key.starts_with("upstream-"), "{key}");
    assert_eq!(message, "Question 1 of 1?");
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert_eq!(completed(outcome), "answers: yes");
    assert_eq!(
        calls_seen(&log)[1..],
        [
            "ask_mrtr 2025 answers=0",
            "ask_mrtr 2026-07-28 answers=0",
            "ask_mrtr 2026-07-28 answers=1",
        ]
    );

    // Learned: the next call of the tool starts on 2026-07-28.
    let state = task(&client, "ask_mrtr", json!({})).await;
    answer_next(&client, &state, "answer", "again").await;
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert_eq!(completed(outcome), "answers: again");
    assert_eq!(
        calls_seen(&log)[4..],
        [
            "ask_mrtr 2026-07-28 answers=0",
            "ask_mrtr 2026-07-28 answers=1",
        ]
    );
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn several_mrtr_rounds_are_one_input_required_after_another() {
    let log = fixture_log("calls", line!());
    let (_gateway, client) = dual(&log, GatewayOptions::default()).await;
    let state = task(&client, "ask_mrtr", json!({"rounds": 3})).await;
    let mut keys = Vec::new();
    for (round, answer) in ["red", "green", "blue"].into_iter().enumerate() {
        let (key, message) = answer_next(&client, &state, "answer", answer).await;
        assert_eq!(message, format!("Question {} of 3?", round + 1));
        keys.push(key);
    }
    // The upstream's keys (q1, q2, q3) never show; the gateway's are new
    // each round.
    keys.dedup();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(
        keys.iter().all(|key| key.starts_with("upstream-")),
        "{keys:?}"
    );
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert_eq!(completed(outcome), "answers: red, green, blue");
    // Each retry carried the answers and the echoed requestState (the
    // fixture refuses a state that is not its own).
    let seen = calls_seen(&log);
    assert_eq!(
        seen.iter()
            .filter(|line| line.starts_with("ask_mrtr 2026-07-28"))
            .count(),
        4,
        "{seen:?}"
    );
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_task_cancelled_during_a_round_ends_there() {
    let log = fixture_log("calls", line!());
    let (_gateway, client) = dual(&log, GatewayOptions::default()).await;
    let state = task(&client, "ask_mrtr", json!({"rounds": 2})).await;
    answer_next(&client, &state, "answer", "first").await;
    // The second round asks; the task is cancelled instead of answered.
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(&state.id, &waiting()).await.unwrap()
    else {
        panic!("expected the second round");
    };
    let (_, request) = asking.input_requests.iter().next().unwrap();
    assert_eq!(request["params"]["message"], "Question 2 of 2?");
    client.cancel(&state.id).await.unwrap();
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    // Nothing more reaches the upstream for it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = calls_seen(&log);
    assert_eq!(
        seen,
        [
            "ask_mrtr 2025 answers=0",
            "ask_mrtr 2026-07-28 answers=0",
            "ask_mrtr 2026-07-28 answers=1",
        ]
    );
    // Its connection went back to the pool: the next call runs.
    let state = task(&client, "echo", json!({"text": "after"})).await;
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert_eq!(completed(outcome), "after");

    // The same for a server-initiated request on a 2025-era connection:
    // cancelled, not completed with the upstream's answer to a refusal.
    let state = task(&client, "ask", json!({})).await;
    let TaskOutcome::InputRequired { .. } = client.await_task(&state.id, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    client.cancel(&state.id).await.unwrap();
    let outcome = client.await_task(&state.id, &waiting()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_synchronous_2026_caller_answers_the_upstreams_rounds_as_the_gateways() {
    let log = fixture_log("calls", line!());
    let (_gateway, client) = dual(&log, GatewayOptions::default()).await;
    let plain = || CallOptions::default().with_declare_tasks(false);
    let call = |options: CallOptions| {
        let client = client.clone();
        async move {
            client
                .call_tool("ask_mrtr", args(json!({"rounds": 2})), options)
                .await
                .expect("tools/call")
        }
    };
    let round = |response: CallResponse| -> InputRequiredResult {
        match response {
            CallResponse::InputRequired(round) => round,
            other => panic!("expected an MRTR round, got {other:?}"),
        }
    };
    let mut response = call(plain()).await;
    for answer in ["one", "two"] {
        let asked = round(response);
        // A round of the gateway's own, naming its parked call.
        let state = asked.request_state.clone().unwrap_or_default();
        assert!(state.starts_with("mcp-tasks-gateway/parked/"), "{state}");
        let requests = asked.input_requests.clone().unwrap_or_default();
        let (key, _) = requests.iter().next().unwrap();
        let mut answers = InputResponses::new();
        answers.insert(
            key.clone(),
            json!({"action": "accept", "content": {"answer": answer}}),
        );
        response = call(plain().with_mrtr_retry(Some(answers), asked.request_state)).await;
    }
    assert_eq!(completed_text(response), "answers: one, two");
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_2025_session_caller_is_asked_the_upstreams_rounds_on_its_own_connection() {
    let log = fixture_log("calls", line!());
    let (gateway, _client) = dual(&log, GatewayOptions::default()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let running = gateway.serve(socket).await.expect("the session starts");
        let _ = running.waiting().await;
    });
    let socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let handler = Answering {
        version: ProtocolVersion::V_2025_11_25,
    };
    let running = serve_client_with_lifecycle(handler, socket, ClientLifecycleMode::Initialize)
        .await
        .expect("initialize with the gateway");
    let mut params = CallToolRequestParams::new("ask_mrtr");
    params.arguments = args(json!({"rounds": 2}));
    let result = running.peer().call_tool(params).await.expect("tools/call");
    assert_eq!(text(&result), "answers: pushed, pushed");
    assert_eq!(
        calls_seen(&log)
            .iter()
            .filter(|line| line.contains("2026-07-28"))
            .count(),
        3
    );
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn an_upstream_is_asked_initialize_too_only_when_it_answers_discover() {
    // Without --dual, plain-upstream refuses server/discover: a 2025-era
    // server, one process at start. With it, the discover probe's process
    // stays beside the 2025-era one.
    for (flags, processes, kind) in [("", 1, "life"), (" --dual", 2, "life-dual")] {
        let log = fixture_log(kind, line!());
        let runtime = TaskRuntime::builder(MemoryStore::new()).build();
        let command = format!("{UPSTREAM}{flags} --life-log {}", log.display());
        let gateway = Gateway::start(
            Upstream::command(command),
            runtime,
            GatewayOptions::default(),
        )
        .await
        .expect("the gateway starts");
        let started = std::fs::read_to_string(&log).unwrap_or_default();
        let starts = started
            .lines()
            .filter(|line| line.starts_with("start "))
            .count();
        assert_eq!(starts, processes, "{flags}: {started}");
        drop(gateway);
        let _ = std::fs::remove_file(&log);
    }
}
