//! The diagnostic tools the official conformance suite's 2026-07-28
//! server scenarios call (`server-stateless` and the
//! `input-required-result-*` family). All are synchronous, never tasks:
//! what they need from the client they ask for with Multi Round-Trip
//! Requests (MRTR, SEP-2322), returning an `InputRequiredResult` and reading
//! the answers from the retry's `inputResponses`.
//!
//! | tool | asks for (input key) | `requestState` |
//! |---|---|---|
//! | `test_missing_capability` | sampling (`sample`) | |
//! | `test_streaming_elicitation` | a form (`user_name`) | |
//! | `test_logging_tool` | nothing; logs only when the request sets a `logLevel` | |
//! | `test_input_required_result_elicitation` | a form (`user_name`) | |
//! | `test_input_required_result_sampling` | sampling (`capital_question`) | |
//! | `test_input_required_result_list_roots` | roots (`client_roots`) | |
//! | `test_input_required_result_request_state` | a form (`confirm`) | every round, required |
//! | `test_input_required_result_multiple_inputs` | a form, sampling and roots at once | every round |
//! | `test_input_required_result_multi_round` | a form (`step1`), then another (`step2`) | every round |
//! | `test_input_required_result_tampered_state` | a form (`confirm`) | every round, required |
//! | `test_input_required_result_capabilities` | what the client declared of the three | to keep partial answers |
//!
//! Rules shared by all of them:
//! * Only what this request's `clientCapabilities` declare is asked for:
//!   a tool that needs more fails with -32021 naming all of it
//!   (`test_input_required_result_capabilities` asks for less instead).
//! * A retry whose answers are missing or unusable (an accepted form
//!   without a required field) is asked again, for what is still missing.
//!   Answers under keys that were not asked for are ignored.
//! * An answer of the wrong shape (not an `ElicitResult`,
//!   `CreateMessageResult` or `ListRootsResult`) is -32602.
//! * A declined or cancelled form completes with a tool error
//!   (`isError: true`) instead of asking again.
//! * A `requestState` is sealed and bound to the caller, tool and
//!   arguments ([`super::sealed_state`]); one that does not open (tampered,
//!   forged, expired, for another call) is -32602. Answers already given
//!   ride in it, so a re-ask only asks for what is still missing.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    InputRequest, InputRequests, InputRequiredResult, JsonObject, RootsCapabilities,
    SamplingCapability, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use mcp_tasks::server::TaskRuntime;

use super::sealed_state::{Binding, RequestStates};
use super::{declares_forms, form, forms_capability, no_arguments, text, tool};

const MISSING_CAPABILITY: &str = "test_missing_capability";
const STREAMING_ELICITATION: &str = "test_streaming_elicitation";
const LOGGING: &str = "test_logging_tool";
const ELICITATION: &str = "test_input_required_result_elicitation";
const SAMPLING: &str = "test_input_required_result_sampling";
const LIST_ROOTS: &str = "test_input_required_result_list_roots";
const REQUEST_STATE: &str = "test_input_required_result_request_state";
const MULTIPLE_INPUTS: &str = "test_input_required_result_multiple_inputs";
const MULTI_ROUND: &str = "test_input_required_result_multi_round";
const TAMPERED_STATE: &str = "test_input_required_result_tampered_state";
const CAPABILITIES: &str = "test_input_required_result_capabilities";

/// The `_meta` key by which a request opts in to `notifications/message`.
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";

/// The log levels, least severe first.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The diagnostic tools, in the order `tools/list` shows them.
pub(super) fn tools() -> Vec<Tool> {
    vec![
        tool(
            MISSING_CAPABILITY,
            "Conformance diagnostic: needs sampling. Without `sampling` in this request's \
             clientCapabilities it fails with -32021 (requiredCapabilities: {sampling: {}}); \
             with it, asks for one sampling/createMessage (input key \"sample\") and completes \
             with the sampled text.",
            no_arguments(),
        ),
        tool(
            STREAMING_ELICITATION,
            "Conformance diagnostic: where an older server would send elicitation/create as \
             a request on the response stream, returns an InputRequiredResult asking for a \
             name (form, input key \"user_name\"); the retry completes with \"Hello, NAME!\". \
             Needs form elicitation (-32021 otherwise).",
            no_arguments(),
        ),
        tool(
            LOGGING,
            "Conformance diagnostic: sends notifications/message at debug, info and warning, \
             each only when at or above the level the request sets in \
             _meta[\"io.modelcontextprotocol/logLevel\"], and none without it; completes with \
             what it logged.",
            no_arguments(),
        ),
        tool(
            ELICITATION,
            "Conformance diagnostic (MRTR): asks for a name (form, input key \"user_name\"), \
             then completes with \"Hello, NAME!\". Needs form elicitation.",
            no_arguments(),
        ),
        tool(
            SAMPLING,
            "Conformance diagnostic (MRTR): asks the client's model \"What is the capital of \
             France?\" (sampling/createMessage, input key \"capital_question\"), then completes \
             with the answer. Needs sampling.",
            no_arguments(),
        ),
        tool(
            LIST_ROOTS,
            "Conformance diagnostic (MRTR): asks for the client's roots (roots/list, input key \
             \"client_roots\"), then completes listing them. Needs roots.",
            no_arguments(),
        ),
        tool(
            REQUEST_STATE,
            "Conformance diagnostic (MRTR): asks for a confirmation (form with a boolean `ok`, \
             input key \"confirm\") with a sealed requestState; the retry that echoes the state \
             intact completes with \"state-ok\"; a retry without it is asked again; a modified \
             state is -32602.",
            no_arguments(),
        ),
        tool(
            MULTIPLE_INPUTS,
            "Conformance diagnostic (MRTR): asks at once for a name (form, \"user_name\"), a \
             greeting from the client's model (sampling, \"greeting\") and the client's roots \
             (\"client_roots\"), with a sealed requestState that keeps partial answers; \
             completes once all three are answered. Needs form elicitation, sampling and roots.",
            no_arguments(),
        ),
        tool(
            MULTI_ROUND,
            "Conformance diagnostic (MRTR): asks for a name (form, \"step1\"), then, in a second \
             round with a new sealed requestState carrying it, for a favourite colour (form, \
             \"step2\"); completes with both. Needs form elicitation.",
            no_arguments(),
        ),
        tool(
            TAMPERED_STATE,
            "Conformance diagnostic (MRTR): like test_input_required_result_request_state, an \
             integrity-protected requestState with a confirmation (form with a boolean `ok`, \
             input key \"confirm\"); a modified or forged requestState is -32602.",
            no_arguments(),
        ),
        tool(
            CAPABILITIES,
            "Conformance diagnostic (MRTR): asks only for what this request's clientCapabilities \
             declare of a name (form elicitation, \"user_name\"), a sampled answer (sampling, \
             \"capital_question\") and the roots (roots, \"client_roots\"); completes with the \
             answers, or at once when none of the three is declared.",
            no_arguments(),
        ),
    ]
}

/// Runs one diagnostic tool; `None` when `request` names none of them.
pub(super) async fn call(
    runtime: &TaskRuntime,
    states: &RequestStates,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    use Kind::{Form, Roots, Sampling};
    let (needs, run): (&[Kind], Handler) = match request.name.as_ref() {
        LOGGING => return Some(logging(context).await),
        MISSING_CAPABILITY => (&[Sampling], |_, call| missing_capability(call)),
        STREAMING_ELICITATION | ELICITATION => (&[Form], |_, call| greeting(call)),
        SAMPLING => (&[Sampling], |_, call| sampling(call)),
        LIST_ROOTS => (&[Roots], |_, call| list_roots(call)),
        REQUEST_STATE => (&[Form], |_, call| confirm_with_state(call, "state-ok")),
        TAMPERED_STATE => (&[Form], |_, call| {
            confirm_with_state(call, "requestState verified")
        }),
        MULTIPLE_INPUTS => (&[Form, Sampling, Roots], |_, call| multiple_inputs(call)),
        MULTI_ROUND => (&[Form], |_, call| multi_round(call)),
        CAPABILITIES => (&[], capabilities),
        _ => return None,
    };
    // What the client did not declare comes first, then the state.
    let declared = Declared::of(context);
    Some(declared.require(needs).and_then(|()| {
        let call = Call::new(runtime, states, request, context)?;
        run(&declared, &call)
    }))
}

type Outcome = Result<CallToolResponse, ErrorData>;

/// A diagnostic tool's body, run once its capabilities are declared and
/// its state (if any) verified.
type Handler = fn(&Declared, &Call<'_>) -> Outcome;

fn missing_capability(call: &Call) -> Outcome {
    let ask = sampling_ask("sample", "Say hello in one word.", 20)?;
    match call.gather(vec![ask])? {
        Gathered::Missing { requests, .. } => Ok(input_required(requests, None)),
        Gathered::All(answers) => Ok(complete(format!(
            "sampling was declared; the model said: {}",
            sampled_text(&answers["sample"])
        ))),
    }
}

/// `test_streaming_elicitation` and `test_input_required_result_elicitation`.
fn greeting(call: &Call) -> Outcome {
    let ask = form_ask("user_name", "What is your name?", "name", "string")?;
    match call.gather(vec![ask])? {
        Gathered::Missing { requests, .. } => Ok(input_required(requests, None)),
        Gathered::All(answers) => Ok(refusal(&answers).unwrap_or_else(|| {
            complete(format!(
                "Hello, {}!",
                field_text(&answers["user_name"], "name")
            ))
        })),
    }
}

fn sampling(call: &Call) -> Outcome {
    let ask = sampling_ask("capital_question", "What is the capital of France?", 100)?;
    match call.gather(vec![ask])? {
        Gathered::Missing { requests, .. } => Ok(input_required(requests, None)),
        Gathered::All(answers) => Ok(complete(format!(
            "The model answered: {}",
            sampled_text(&answers["capital_question"])
        ))),
    }
}

fn list_roots(call: &Call) -> Outcome {
    match call.gather(vec![roots_ask("client_roots")?])? {
        Gathered::Missing { requests, .. } => Ok(input_required(requests, None)),
        Gathered::All(answers) => Ok(complete(format!(
            "The client's roots: {}",
            roots_summary(&answers["client_roots"])
        ))),
    }
}

/// `test_input_required_result_request_state` and `..._tampered_state`:
/// the answer only counts with the sealed state of an earlier round.
fn confirm_with_state(call: &Call, verified: &str) -> Outcome {
    let ask = form_ask("confirm", "Please confirm", "ok", "boolean")?;
    if call.state.is_none() {
        // A first round, or a retry that dropped the state: start over.
        let requests = InputRequests::from([(ask.key.to_owned(), ask.request)]);
        return Ok(input_required(
            requests,
            Some(call.seal(&json!({"answers": {}}))?),
        ));
    }
    match call.gather(vec![ask])? {
        Gathered::Missing { requests, answers } => Ok(input_required(
            requests,
            Some(call.seal(&json!({"answers": answers}))?),
        )),
        Gathered::All(answers) => Ok(refusal(&answers).unwrap_or_else(|| {
            complete(format!(
                "{verified}: the requestState came back intact; ok = {}",
                field_text(&answers["confirm"], "ok")
            ))
        })),
    }
}

fn multiple_inputs(call: &Call) -> Outcome {
    let asks = vec![
        form_ask("user_name", "What is your name?", "name", "string")?,
        sampling_ask("greeting", "Generate a greeting", 50)?,
        roots_ask("client_roots")?,
    ];
    match call.gather(asks)? {
        Gathered::Missing { requests, answers } => Ok(input_required(
            requests,
            Some(call.seal(&json!({"answers": answers}))?),
        )),
        Gathered::All(answers) => Ok(refusal(&answers).unwrap_or_else(|| {
            complete(format!(
                "Hello, {}! The model's greeting: {}. The client's roots: {}",
                field_text(&answers["user_name"], "name"),
                sampled_text(&answers["greeting"]),
                roots_summary(&answers["client_roots"])
            ))
        })),
    }
}

fn multi_round(call: &Call) -> Outcome {
    let step2 = || {
        form_ask(
            "step2",
            "Step 2: What is your favorite color?",
            "color",
            "string",
        )
    };
    let name = call
        .state
        .as_ref()
        .and_then(|state| state.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(name) = name else {
        // Step 1: the name.
        let ask = form_ask("step1", "Step 1: What is your name?", "name", "string")?;
        return match call.gather(vec![ask])? {
            Gathered::Missing { requests, .. } => Ok(input_required(
                requests,
                Some(call.seal(&json!({"step": 1}))?),
            )),
            Gathered::All(answers) => match refusal(&answers) {
                Some(refused) => Ok(refused),
                None => {
                    let name = field_text(&answers["step1"], "name");
                    let next = step2()?;
                    Ok(input_required(
                        InputRequests::from([(next.key.to_owned(), next.request)]),
                        Some(call.seal(&json!({"step": 2, "name": name}))?),
                    ))
                }
            },
        };
    };
    // Step 2: the colour, with the name from the sealed state.
    match call.gather(vec![step2()?])? {
        Gathered::Missing { requests, .. } => Ok(input_required(
            requests,
            Some(call.seal(&json!({"step": 2, "name": name}))?),
        )),
        Gathered::All(answers) => Ok(refusal(&answers).unwrap_or_else(|| {
            complete(format!(
                "{name}'s favorite color is {}.",
                field_text(&answers["step2"], "color")
            ))
        })),
    }
}

fn capabilities(declared: &Declared, call: &Call) -> Outcome {
    let asks: Vec<Ask> = [
        form_ask("user_name", "What is your name?", "name", "string")?,
        sampling_ask("capital_question", "What is the capital of France?", 100)?,
        roots_ask("client_roots")?,
    ]
    .into_iter()
    .filter(|ask| declared.allows(ask.kind))
    .collect();
    if asks.is_empty() {
        return Ok(complete(
            "Nothing to ask: this request declares none of form elicitation, sampling and roots.",
        ));
    }
    match call.gather(asks)? {
        Gathered::Missing { requests, answers } => {
            let state = (!answers.is_empty())
                .then(|| call.seal(&json!({"answers": answers})))
                .transpose()?;
            Ok(input_required(requests, state))
        }
        Gathered::All(answers) => Ok(refusal(&answers).unwrap_or_else(|| {
            let mut parts = Vec::new();
            if let Some(answer) = answers.get("user_name") {
                parts.push(format!("name: {}", field_text(answer, "name")));
            }
            if let Some(answer) = answers.get("capital_question") {
                parts.push(format!("model: {}", sampled_text(answer)));
            }
            if let Some(answer) = answers.get("client_roots") {
                parts.push(format!("roots: {}", roots_summary(answer)));
            }
            complete(format!(
                "Asked only what was declared. {}",
                parts.join("; ")
            ))
        })),
    }
}

/// `test_logging_tool`: logs only what the request's `logLevel` lets through.
async fn logging(context: &RequestContext<RoleServer>) -> Outcome {
    let threshold = match context.meta.get(LOG_LEVEL_KEY) {
        None | Some(Value::Null) => None,
        Some(level) => Some(
            level
                .as_str()
                .and_then(|level| LOG_LEVELS.iter().position(|known| *known == level))
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("`_meta[\"{LOG_LEVEL_KEY}\"]` must be one of {LOG_LEVELS:?}"),
                        None,
                    )
                })?,
        ),
    };
    let Some(threshold) = threshold else {
        return Ok(complete(format!(
            "Logged nothing: the request did not set _meta[\"{LOG_LEVEL_KEY}\"]."
        )));
    };
    let mut logged = Vec::new();
    for (level, message) in [
        ("debug", "test_logging_tool: starting"),
        ("info", "test_logging_tool: working"),
        ("warning", "test_logging_tool: a warning, on purpose"),
    ] {
        if LOG_LEVELS.iter().position(|known| *known == level) >= Some(threshold) {
            log(context, level, message).await;
            logged.push(level);
        }
    }
    Ok(complete(format!(
        "Logged {} message(s) at or above {}: {}",
        logged.len(),
        LOG_LEVELS[threshold],
        logged.join(", ")
    )))
}

/// Sends one `notifications/message` on this request's response stream.
/// Logging is deprecated (SEP-2577) but still part of 2026-07-28 as a
/// per-request opt-in, hence the `allow`. Delivery is best-effort.
#[allow(deprecated)]
async fn log(context: &RequestContext<RoleServer>, level: &str, message: &str) {
    let Ok(level) = serde_json::from_value::<rmcp::model::LoggingLevel>(json!(level)) else {
        return;
    };
    let mut params = rmcp::model::LoggingMessageNotificationParam::new(level, json!(message));
    params.logger = Some(LOGGING.to_owned());
    if let Err(error) = context.peer.notify_logging_message(params).await {
        tracing::debug!(%error, "cannot send a log message");
    }
}

/// What kind of input a tool asks for, by the capability it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `elicitation/create` in form mode.
    Form,
    /// `sampling/createMessage`.
    Sampling,
    /// `roots/list`.
    Roots,
}

/// One input a tool asks for.
#[derive(Debug)]
struct Ask {
    key: &'static str,
    kind: Kind,
    /// For a form: the field the answer must fill.
    field: Option<&'static str>,
    request: InputRequest,
}

/// A form with one required field of a JSON-schema primitive `kind`.
fn form_ask(
    key: &'static str,
    message: &str,
    field: &'static str,
    kind: &str,
) -> Result<Ask, ErrorData> {
    let mut properties = JsonObject::new();
    properties.insert(field.to_owned(), json!({"type": kind}));
    Ok(Ask {
        key,
        kind: Kind::Form,
        field: Some(field),
        request: form(message, Value::Object(properties), &[field])?,
    })
}

fn sampling_ask(key: &'static str, prompt: &str, max_tokens: u32) -> Result<Ask, ErrorData> {
    Ok(Ask {
        key,
        kind: Kind::Sampling,
        field: None,
        request: input_request(json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens
        }}))?,
    })
}

fn roots_ask(key: &'static str) -> Result<Ask, ErrorData> {
    Ok(Ask {
        key,
        kind: Kind::Roots,
        field: None,
        request: input_request(json!({"method": "roots/list"}))?,
    })
}

fn input_request(request: Value) -> Result<InputRequest, ErrorData> {
    serde_json::from_value(request).map_err(|error| {
        ErrorData::internal_error(format!("building an input request: {error}"), None)
    })
}

/// What the client declared on this request, of what MRTR can ask.
#[derive(Debug)]
struct Declared {
    forms: bool,
    sampling: bool,
    roots: bool,
}

impl Declared {
    fn of(context: &RequestContext<RoleServer>) -> Self {
        let declared = context.client_capabilities().unwrap_or_default();
        Self {
            forms: declares_forms(&declared),
            sampling: declared.sampling.is_some(),
            roots: declared.roots.is_some(),
        }
    }

    fn allows(&self, kind: Kind) -> bool {
        match kind {
            Kind::Form => self.forms,
            Kind::Sampling => self.sampling,
            Kind::Roots => self.roots,
        }
    }

    /// -32021 naming every capability of `kinds` the client did not declare.
    fn require(&self, kinds: &[Kind]) -> Result<(), ErrorData> {
        let mut missing = ClientCapabilities::default();
        let mut lacking = false;
        for &kind in kinds.iter().filter(|&&kind| !self.allows(kind)) {
            lacking = true;
            match kind {
                Kind::Form => missing.elicitation = Some(forms_capability()),
                Kind::Sampling => missing.sampling = Some(SamplingCapability::default()),
                Kind::Roots => missing.roots = Some(RootsCapabilities::default()),
            }
        }
        if lacking {
            return Err(ErrorData::missing_required_client_capability(missing));
        }
        Ok(())
    }
}

/// One `tools/call` of a diagnostic tool: its answers and verified state.
#[derive(Debug)]
struct Call<'a> {
    responses: Option<&'a rmcp::model::InputResponses>,
    states: &'a RequestStates,
    binding: Binding,
    /// The data of the retry's `requestState`, verified; `None` when the
    /// call carries none.
    state: Option<Value>,
}

/// What a tool has of the inputs it asked for.
#[derive(Debug)]
enum Gathered {
    /// Every input has a usable answer, by key.
    All(JsonObject),
    /// Some are missing: ask for `requests`; `answers` holds the rest.
    Missing {
        requests: InputRequests,
        answers: JsonObject,
    },
}

impl<'a> Call<'a> {
    /// Opens the call's `requestState`, if any: -32602 when it fails.
    fn new(
        runtime: &TaskRuntime,
        states: &'a RequestStates,
        request: &'a CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Self, ErrorData> {
        let binding = Binding::new(
            runtime.principal_of(&context.extensions).as_str(),
            &request.name,
            &request.arguments.clone().unwrap_or_default(),
        );
        let state = request
            .request_state
            .as_deref()
            .map(|state| states.open(&binding, state))
            .transpose()?;
        Ok(Self {
            responses: request.input_responses.as_ref(),
            states,
            binding,
            state,
        })
    }

    fn seal(&self, data: &Value) -> Result<String, ErrorData> {
        self.states.seal(&self.binding, data)
    }

    /// The answers to `asks`: those the sealed state carries from earlier
    /// rounds, then those of this retry.
    fn gather(&self, asks: Vec<Ask>) -> Result<Gathered, ErrorData> {
        let mut answers = self
            .state
            .as_ref()
            .and_then(|state| state.get("answers"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        answers.retain(|key, _| asks.iter().any(|ask| ask.key == key));
        for ask in &asks {
            let given = self.responses.and_then(|responses| responses.get(ask.key));
            if let Some(answer) = given
                && usable(ask, answer)?
            {
                answers.insert(ask.key.to_owned(), answer.clone());
            }
        }
        let requests: InputRequests = asks
            .into_iter()
            .filter(|ask| !answers.contains_key(ask.key))
            .map(|ask| (ask.key.to_owned(), ask.request))
            .collect();
        Ok(if requests.is_empty() {
            Gathered::All(answers)
        } else {
            Gathered::Missing { requests, answers }
        })
    }
}

/// Whether `answer` answers `ask`: `false` when it must be asked again,
/// -32602 when it is not a result of the kind asked for.
fn usable(ask: &Ask, answer: &Value) -> Result<bool, ErrorData> {
    let malformed = |what: &str| {
        ErrorData::invalid_params(
            format!("inputResponses[\"{}\"] is not {what}", ask.key),
            None,
        )
    };
    match ask.kind {
        Kind::Form => match answer.get("action").and_then(Value::as_str) {
            Some("decline" | "cancel") => Ok(true),
            Some("accept") => match answer.get("content") {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Object(content)) => {
                    Ok(ask.field.is_none_or(|field| match content.get(field) {
                        Some(Value::String(text)) => !text.trim().is_empty(),
                        Some(Value::Null) | None => false,
                        Some(_) => true,
                    }))
                }
                Some(_) => Err(malformed("an ElicitResult: its content must be an object")),
            },
            _ => Err(malformed(
                "an ElicitResult (an object whose action is accept, decline or cancel)",
            )),
        },
        Kind::Sampling => match answer.get("content") {
            Some(Value::Object(_) | Value::Array(_)) => Ok(true),
            _ => Err(malformed("a CreateMessageResult (an object with content)")),
        },
        Kind::Roots => {
            let roots = answer.get("roots").and_then(Value::as_array);
            let valid = roots.is_some_and(|roots| {
                roots
                    .iter()
                    .all(|root| root.get("uri").is_some_and(Value::is_string))
            });
            if valid {
                Ok(true)
            } else {
                Err(malformed(
                    "a ListRootsResult (an object with roots, each with a uri)",
                ))
            }
        }
    }
}

/// A tool error when any form among `answers` was declined or cancelled.
fn refusal(answers: &JsonObject) -> Option<CallToolResponse> {
    answers.iter().find_map(|(key, answer)| {
        let action = answer.get("action").and_then(Value::as_str)?;
        (action != "accept").then(|| {
            CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(format!(
                "The user chose {action} for \"{key}\": nothing done."
            ))]))
        })
    })
}

/// A form answer's `field`, as text.
fn field_text(answer: &Value, field: &str) -> String {
    match answer.get("content").and_then(|content| content.get(field)) {
        Some(Value::String(text)) => text.trim().to_owned(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// The text of a sampling answer, whose content is one block or several.
fn sampled_text(answer: &Value) -> String {
    let blocks = match answer.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().collect(),
        Some(block) => vec![block],
        None => Vec::new(),
    };
    let texts: Vec<&str> = blocks
        .into_iter()
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        "(no text)".to_owned()
    } else {
        texts.join(" ")
    }
}

/// The roots of a roots answer, as `URI (NAME)`.
fn roots_summary(answer: &Value) -> String {
    let roots: Vec<String> = answer
        .get("roots")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|root| {
            let uri = root.get("uri").and_then(Value::as_str)?;
            Some(match root.get("name").and_then(Value::as_str) {
                Some(name) => format!("{uri} ({name})"),
                None => uri.to_owned(),
            })
        })
        .collect();
    if roots.is_empty() {
        "none".to_owned()
    } else {
        roots.join(", ")
    }
}

fn input_required(requests: InputRequests, state: Option<String>) -> CallToolResponse {
    CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), state))
}

fn complete(message: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(text(message))
}

#[cfg(test)]
mod tests;
