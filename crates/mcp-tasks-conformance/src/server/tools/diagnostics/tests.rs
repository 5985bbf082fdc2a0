//! In-process tests of the diagnostic tools: each MRTR round as the
//! conformance scenarios drive it, and the edges they only probe.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::{CallOptions, CallResponse, TasksClient};
use rmcp::ClientHandler;
use rmcp::model::{CallToolResult, InputRequiredResult};
use rmcp::service::{MaybeSendFuture, NotificationContext, RoleClient};
use serde_json::{Value, json};

use crate::server::tests::{Forms, accept, args, first_text, in_process};
use crate::server::tools::sealed_state::tests::rewritten;

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Declares `capabilities` on the request (instead of the client's own).
fn declaring(capabilities: Value) -> CallOptions {
    CallOptions::default().with_meta(CAPABILITIES, capabilities)
}

/// What the conformance harness declares by default.
fn everything() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// A retry declaring everything, with `responses` and an echoed `state`.
fn retry(responses: Value, state: Option<&str>) -> CallOptions {
    let responses = match responses {
        Value::Object(object) => object.into_iter().collect(),
        _ => Default::default(),
    };
    declaring(everything()).with_mrtr_retry(Some(responses), state.map(str::to_owned))
}

fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text},
        "model": "test-model", "stopReason": "endTurn"})
}

fn roots() -> Value {
    json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]})
}

async fn call<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    options: CallOptions,
) -> CallResponse {
    client
        .call_tool(tool, args(json!({})), options)
        .await
        .unwrap_or_else(|error| panic!("{tool}: {error}"))
}

/// Expects an `InputRequiredResult`; returns it and its wire form.
async fn asked<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    options: CallOptions,
) -> (InputRequiredResult, Value) {
    match call(client, tool, options).await {
        CallResponse::InputRequired(round) => {
            let wire = serde_json::to_value(&round).unwrap();
            assert_eq!(wire["resultType"], "input_required", "{wire}");
            (round, wire)
        }
        other => panic!("{tool} should ask for input: {other:?}"),
    }
}

async fn completed<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    options: CallOptions,
) -> CallToolResult {
    match call(client, tool, options).await {
        CallResponse::Complete(result) => result,
        other => panic!("{tool} should complete: {other:?}"),
    }
}

/// The JSON-RPC error of a call: its code and `data`.
async fn refused<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    options: CallOptions,
) -> (i64, Value) {
    let error = client
        .call_tool(tool, args(json!({})), options)
        .await
        .expect_err("an error");
    let data = error
        .rpc_error()
        .and_then(|error| error.data.clone())
        .unwrap_or(Value::Null);
    (error.code().expect("a JSON-RPC error"), data)
}

fn keys(wire: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = wire["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

#[test]
fn every_diagnostic_tool_is_listed_after_the_fixtures_with_a_schema() {
    let names: Vec<String> = super::tools()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "test_missing_capability",
            "test_streaming_elicitation",
            "test_logging_tool",
            "test_input_required_result_elicitation",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_tampered_state",
            "test_input_required_result_capabilities",
        ]
    );
    let all = crate::server::tools::list();
    assert_eq!(all.len(), 18);
    for tool in &all[7..] {
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()));
        assert!(crate::server::tools::find(&tool.name).is_some());
    }
}

#[tokio::test]
async fn the_elicitation_tools_ask_for_a_name_then_greet() {
    let client = in_process(Forms).await;
    for tool in [
        "test_input_required_result_elicitation",
        "test_streaming_elicitation",
    ] {
        let (round, wire) = asked(&client, tool, declaring(everything())).await;
        assert!(round.request_state.is_none(), "{wire}");
        let request = &wire["inputRequests"]["user_name"];
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["message"], "What is your name?");
        let schema = &request["params"]["requestedSchema"];
        assert_eq!(schema["properties"]["name"]["type"], "string");
        assert_eq!(schema["required"], json!(["name"]));

        let answer = json!({"user_name": accept(json!({"name": "Alice"}))});
        let result = completed(&client, tool, retry(answer, None)).await;
        assert_eq!(first_text(&result), "Hello, Alice!");

        // Unknown keys are ignored next to the answer ...
        let answers = json!({"user_name": accept(json!({"name": "Alice"})),
            "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
            "another_unexpected": {"action": "accept", "content": {"baz": 123}}});
        let result = completed(&client, tool, retry(answers, None)).await;
        assert_eq!(first_text(&result), "Hello, Alice!");
        // ... and without it, or with an unusable one, it asks again.
        for answers in [
            json!({"wrong_key": accept(json!({"data": "wrong"}))}),
            json!({"user_name": accept(json!({"name": "  "}))}),
            json!({"user_name": {"action": "accept"}}),
        ] {
            let (_, wire) = asked(&client, tool, retry(answers, None)).await;
            assert_eq!(keys(&wire), ["user_name"]);
        }
        // A declined form is a tool error, not another question.
        let declined = json!({"user_name": {"action": "decline"}});
        let result = completed(&client, tool, retry(declined, None)).await;
        assert_eq!(result.is_error, Some(true));
        // Something that is no ElicitResult is -32602.
        for malformed in [
            json!({"user_name": 12345}),
            json!({"user_name": {"action": "maybe"}}),
            json!({"user_name": {"action": "accept", "content": "Alice"}}),
        ] {
            let (code, _) = refused(&client, tool, retry(malformed, None)).await;
            assert_eq!(code, -32602);
        }
        // Without form elicitation: -32021 naming it.
        for undeclared in [json!({}), json!({"elicitation": {"url": {}}})] {
            let (code, data) = refused(&client, tool, declaring(undeclared)).await;
            assert_eq!(code, -32021);
            assert_eq!(
                data["requiredCapabilities"],
                json!({"elicitation": {"form": {}}})
            );
        }
    }
}

#[tokio::test]
async fn sampling_and_roots_ask_their_own_method_and_need_their_capability() {
    let client = in_process(()).await;
    let tool = "test_input_required_result_sampling";
    let (_, wire) = asked(&client, tool, declaring(everything())).await;
    let request = &wire["inputRequests"]["capital_question"];
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(request["params"]["maxTokens"], 100);
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "What is the capital of France?"
    );
    let answer = json!({"capital_question": sampled("The capital of France is Paris.")});
    let result = completed(&client, tool, retry(answer, None)).await;
    assert_eq!(
        first_text(&result),
        "The model answered: The capital of France is Paris."
    );
    let malformed = json!({"capital_question": {"role": "assistant"}});
    assert_eq!(
        refused(&client, tool, retry(malformed, None)).await.0,
        -32602
    );
    let (code, data) = refused(&client, tool, declaring(json!({"elicitation": {}}))).await;
    assert_eq!(code, -32021);
    assert_eq!(data["requiredCapabilities"], json!({"sampling": {}}));

    let tool = "test_input_required_result_list_roots";
    let (_, wire) = asked(&client, tool, declaring(everything())).await;
    assert_eq!(
        wire["inputRequests"]["client_roots"]["method"],
        "roots/list"
    );
    let result = completed(&client, tool, retry(json!({"client_roots": roots()}), None)).await;
    assert_eq!(
        first_text(&result),
        "The client's roots: file:///test/root (Test Root)"
    );
    let malformed = json!({"client_roots": {"roots": [{"name": "no uri"}]}});
    assert_eq!(
        refused(&client, tool, retry(malformed, None)).await.0,
        -32602
    );
    let (code, data) = refused(&client, tool, declaring(json!({"sampling": {}}))).await;
    assert_eq!(code, -32021);
    assert_eq!(data["requiredCapabilities"], json!({"roots": {}}));
}

#[tokio::test]
async fn test_missing_capability_needs_sampling_declared_on_the_request() {
    let client = in_process(Forms).await;
    let tool = "test_missing_capability";
    let (code, data) = refused(&client, tool, declaring(json!({}))).await;
    assert_eq!(code, -32021);
    assert_eq!(data["requiredCapabilities"], json!({"sampling": {}}));
    // The client's own capabilities (forms, no sampling) do not help.
    let (code, _) = refused(&client, tool, CallOptions::default()).await;
    assert_eq!(code, -32021);

    let (_, wire) = asked(&client, tool, declaring(json!({"sampling": {}}))).await;
    assert_eq!(keys(&wire), ["sample"]);
    let result = completed(&client, tool, retry(json!({"sample": sampled("Hi")}), None)).await;
    assert_eq!(
        first_text(&result),
        "sampling was declared; the model said: Hi"
    );
}

#[tokio::test]
async fn request_state_round_trips_sealed_and_a_tampered_one_is_refused() {
    let client = in_process(()).await;
    for (tool, verified) in [
        ("test_input_required_result_request_state", "state-ok"),
        (
            "test_input_required_result_tampered_state",
            "requestState verified",
        ),
    ] {
        let (round, wire) = asked(&client, tool, declaring(everything())).await;
        let state = round.request_state.clone().expect("a requestState");
        let schema = &wire["inputRequests"]["confirm"]["params"]["requestedSchema"];
        assert_eq!(schema["properties"]["ok"]["type"], "boolean");
        assert_eq!(schema["required"], json!(["ok"]));

        let ok = || json!({"confirm": accept(json!({"ok": true}))});
        let result = completed(&client, tool, retry(ok(), Some(&state))).await;
        assert!(first_text(&result).starts_with(verified), "{result:?}");
        assert!(first_text(&result).ends_with("ok = true"), "{result:?}");

        // Without the state the answer does not count: asked again, anew.
        let (again, _) = asked(&client, tool, retry(ok(), None)).await;
        assert!(again.request_state.is_some());
        // No answer with the state: asked again, with a state.
        let (again, wire) = asked(&client, tool, retry(json!({}), Some(&state))).await;
        assert_eq!(keys(&wire), ["confirm"]);
        assert!(again.request_state.is_some());

        // Tampered, forged, or another tool's: -32602.
        let other = asked(
            &client,
            "test_input_required_result_multi_round",
            declaring(everything()),
        )
        .await
        .0
        .request_state
        .unwrap();
        for bad in [
            format!("{state}-TAMPERED"),
            rewritten(&state, |payload| payload.replace("answers", "answerz")),
            "forged".to_owned(),
            other,
        ] {
            let (code, _) = refused(&client, tool, retry(ok(), Some(&bad))).await;
            assert_eq!(code, -32602, "{bad}");
        }
        // The state is bound to the arguments too.
        let error = client
            .call_tool(tool, args(json!({"extra": 1})), retry(ok(), Some(&state)))
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32602));
    }
}

#[tokio::test]
async fn multiple_inputs_asks_three_kinds_and_keeps_partial_answers() {
    let client = in_process(()).await;
    let tool = "test_input_required_result_multiple_inputs";
    let (round, wire) = asked(&client, tool, declaring(everything())).await;
    assert_eq!(keys(&wire), ["client_roots", "greeting", "user_name"]);
    assert_eq!(
        wire["inputRequests"]["greeting"]["method"],
        "sampling/createMessage"
    );
    assert_eq!(
        wire["inputRequests"]["user_name"]["method"],
        "elicitation/create"
    );
    let state = round.request_state.expect("a requestState");

    // Only the name: the other two are asked again, the name is kept.
    let name = json!({"user_name": accept(json!({"name": "Alice"}))});
    let (round, wire) = asked(&client, tool, retry(name, Some(&state))).await;
    assert_eq!(keys(&wire), ["client_roots", "greeting"]);
    let state = round.request_state.expect("a requestState");
    let rest = json!({"greeting": sampled("Hello there!"), "client_roots": roots()});
    let result = completed(&client, tool, retry(rest, Some(&state))).await;
    assert_eq!(
        first_text(&result),
        "Hello, Alice! The model's greeting: Hello there!. \
         The client's roots: file:///test/root (Test Root)"
    );

    // All at once, as the harness answers.
    let (round, _) = asked(&client, tool, declaring(everything())).await;
    let all = json!({"user_name": accept(json!({"name": "Bob"})),
        "greeting": sampled("Hi"), "client_roots": roots()});
    let result = completed(&client, tool, retry(all, round.request_state.as_deref())).await;
    assert!(first_text(&result).starts_with("Hello, Bob!"));

    // What is not declared is named in one -32021.
    let (code, data) = refused(&client, tool, declaring(json!({"elicitation": {}}))).await;
    assert_eq!(code, -32021);
    assert_eq!(
        data["requiredCapabilities"],
        json!({"sampling": {}, "roots": {}})
    );
}

#[tokio::test]
async fn multi_round_asks_twice_with_evolving_state() {
    let client = in_process(()).await;
    let tool = "test_input_required_result_multi_round";
    let (first, wire) = asked(&client, tool, declaring(everything())).await;
    assert_eq!(keys(&wire), ["step1"]);
    let state1 = first.request_state.expect("state 1");

    // A retry without the step 1 answer asks for it again.
    let (again, wire) = asked(&client, tool, retry(json!({}), Some(&state1))).await;
    assert_eq!(keys(&wire), ["step1"]);
    assert!(again.request_state.is_some());

    let name = json!({"step1": accept(json!({"name": "Alice"}))});
    let (second, wire) = asked(&client, tool, retry(name, Some(&state1))).await;
    assert_eq!(keys(&wire), ["step2"]);
    assert_eq!(
        wire["inputRequests"]["step2"]["params"]["requestedSchema"]["properties"]["color"]["type"],
        "string"
    );
    let state2 = second.request_state.expect("state 2");
    assert_ne!(state1, state2);

    let color = || json!({"step2": accept(json!({"color": "blue"}))});
    let result = completed(&client, tool, retry(color(), Some(&state2))).await;
    assert_eq!(first_text(&result), "Alice's favorite color is blue.");
    // The name only comes from a state that opens.
    let forged = rewritten(&state2, |payload| payload.replace("Alice", "Mallory"));
    assert_eq!(
        refused(&client, tool, retry(color(), Some(&forged)))
            .await
            .0,
        -32602
    );
}

#[tokio::test]
async fn capabilities_asks_only_what_the_request_declares() {
    let client = in_process(Forms).await;
    let tool = "test_input_required_result_capabilities";
    // The conformance probe: sampling only.
    let (round, wire) = asked(&client, tool, declaring(json!({"sampling": {}}))).await;
    assert_eq!(keys(&wire), ["capital_question"]);
    assert!(round.request_state.is_none());
    let answer = json!({"capital_question": sampled("Paris")});
    let options = declaring(json!({"sampling": {}})).with_mrtr_retry(
        Some(answer.as_object().unwrap().clone().into_iter().collect()),
        None,
    );
    let result = completed(&client, tool, options).await;
    assert_eq!(
        first_text(&result),
        "Asked only what was declared. model: Paris"
    );
    // Nothing declared: nothing to ask.
    let result = completed(&client, tool, declaring(json!({}))).await;
    assert!(first_text(&result).starts_with("Nothing to ask"));
    // Everything: three questions; a partial answer is kept in the state.
    let (_, wire) = asked(&client, tool, declaring(everything())).await;
    assert_eq!(
        keys(&wire),
        ["capital_question", "client_roots", "user_name"]
    );
    let name = json!({"user_name": accept(json!({"name": "Ada"}))});
    let (round, wire) = asked(&client, tool, retry(name, None)).await;
    assert_eq!(keys(&wire), ["capital_question", "client_roots"]);
    let rest = json!({"capital_question": sampled("Paris"), "client_roots": roots()});
    let result = completed(&client, tool, retry(rest, round.request_state.as_deref())).await;
    assert_eq!(
        first_text(&result),
        "Asked only what was declared. name: Ada; model: Paris; \
         roots: file:///test/root (Test Root)"
    );
}

/// A client that records the log messages it receives.
#[derive(Debug, Clone, Default)]
struct Logs(Arc<Mutex<Vec<(Value, Value)>>>);

impl ClientHandler for Logs {
    #[allow(deprecated)]
    fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let level = serde_json::to_value(params.level).unwrap_or_default();
        if let Ok(mut logs) = self.0.lock() {
            logs.push((level, params.data));
        }
        std::future::ready(())
    }
}

impl Logs {
    fn levels(&self) -> Vec<Value> {
        self.0
            .lock()
            .map(|logs| logs.iter().map(|(level, _)| level.clone()).collect())
            .unwrap_or_default()
    }
}

#[tokio::test]
async fn test_logging_tool_logs_only_at_the_requested_level() {
    let logs = Logs::default();
    let client = in_process(logs.clone()).await;
    let tool = "test_logging_tool";
    let result = completed(&client, tool, CallOptions::default()).await;
    assert!(
        first_text(&result).starts_with("Logged nothing"),
        "{result:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(logs.levels().is_empty());

    let level = "io.modelcontextprotocol/logLevel";
    let options = CallOptions::default().with_meta(level, json!("info"));
    let result = completed(&client, tool, options).await;
    assert_eq!(
        first_text(&result),
        "Logged 2 message(s) at or above info: info, warning"
    );
    for _ in 0..200 {
        if logs.levels().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(logs.levels(), [json!("info"), json!("warning")]);

    let options = CallOptions::default().with_meta(level, json!("loud"));
    assert_eq!(refused(&client, tool, options).await.0, -32602);
}
