//! The seven fixture tools the tasks scenarios of the official
//! conformance suite call (`@modelcontextprotocol/conformance`, pinned in
//! `interop/package.json`), all run through our [`TaskRuntime`], then the eleven
//! synchronous diagnostic tools its 2026-07-28 server scenarios call
//! (`test_missing_capability`, `test_streaming_elicitation`,
//! `test_logging_tool` and the `test_input_required_result_*` family),
//! described in [`diagnostics`].
//!
//! | tool | task policy | needs |
//! |---|---|---|
//! | `greet` | forbidden (always synchronous) | |
//! | `slow_compute` | optional | |
//! | `failing_job` | required | |
//! | `protocol_error_job` | required | |
//! | `confirm_delete` | required | form elicitation |
//! | `multi_input` | required | form elicitation |
//! | `test_tool_with_task` | an MRTR round, then required | form elicitation |
//!
//! A tool that asks for input checks, on the `tools/call` that would
//! create its task, that the client declared form elicitation (the MRTR
//! rule that no input request goes to a client that did not declare it,
//! applied with the capabilities of the creating call, as the Tasks extension
//! recommends). What is missing, the Tasks extension included, comes back
//! in one -32021 error.
//!
//! Where the scenarios are silent, the fixtures follow the upstream scenario
//! sources and otherwise stay simple: `greet`'s `name` defaults to
//! `World`; `slow_compute` needs `seconds` (fractions allowed) and its
//! `label` defaults to `compute`; `confirm_delete` completes with
//! "Kept FILENAME" when declined; `multi_input` asks under the keys `name`
//! and `confirm`; `test_tool_with_task` asks under `user_name` (the key the
//! `tasks-mrtr-composition` scenario describes), sends no `requestState`
//! (nothing to carry between rounds) and asks again when the retry has no
//! accepted, non-empty name. Bad arguments are -32602 before any task.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use mcp_tasks::server::{TaskContext, TaskRuntime, ToolTasks};
use mcp_tasks::with_tasks_extension;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    ElicitationCapability, FormElicitationCapability, InputRequest, InputRequiredResult,
    JsonObject, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

mod diagnostics;
mod sealed_state;

pub(crate) use sealed_state::RequestStates;

/// The key of the MRTR input request of `test_tool_with_task`; the
/// conformance scenario's fixture contract calls it `user_name`.
const USER_NAME_KEY: &str = "user_name";

/// A tool for `tools/list`; `schema` is its input schema, a JSON object.
fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

/// The input schema of a tool without arguments.
fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// Every tool, in the order `tools/list` shows them: the task fixtures,
/// then the diagnostics.
static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    let mut tools = vec![
        tool(
            "greet",
            "Conformance fixture: always synchronous; answers \"Hello, NAME!\".",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "default": "World", "description": "Who to greet"}
            }}),
        ),
        tool(
            "slow_compute",
            "Conformance fixture: sleeps `seconds`, then completes with \
             \"LABEL: computed in SECONDS s\". A task when the client declares the \
             Tasks extension, else it runs at once.",
            json!({"type": "object", "properties": {
                "seconds": {"type": "number", "minimum": 0, "description": "How long to compute"},
                "label": {"type": "string", "default": "compute", "description": "A name for the run"}
            }, "required": ["seconds"]}),
        ),
        tool(
            "failing_job",
            "Conformance fixture: always a task (-32021 without the Tasks extension); \
             completes with a tool result that has isError: true.",
            no_arguments(),
        ),
        tool(
            "protocol_error_job",
            "Conformance fixture: always a task; ends failed with the JSON-RPC error \
             -32603 \"protocol_error_job failed on purpose\".",
            no_arguments(),
        ),
        tool(
            "confirm_delete",
            "Conformance fixture: always a task; asks once to confirm (an elicitation \
             form with a boolean `confirm`, input key \"confirm\"), then completes with \
             \"Deleted FILENAME\" or \"Kept FILENAME\".",
            json!({"type": "object", "properties": {
                "filename": {"type": "string", "description": "The file to delete"}
            }, "required": ["filename"]}),
        ),
        tool(
            "multi_input",
            "Conformance fixture: always a task; asks two questions at once (input keys \
             \"name\" and \"confirm\"), waits until both are answered, possibly in several \
             tasks/update calls, then completes with \"Hello, NAME! confirmed: BOOL\".",
            no_arguments(),
        ),
        tool(
            "test_tool_with_task",
            "Conformance fixture: first a synchronous MRTR round asking for a name \
             (input key \"user_name\"); the retry that carries the answer becomes a \
             task that completes with \"Hello, NAME!\".",
            no_arguments(),
        ),
    ];
    tools.extend(diagnostics::tools());
    tools
});

/// Every tool, for `tools/list`.
pub(crate) fn list() -> Vec<Tool> {
    TOOLS.clone()
}

/// One tool by name, for `Mcp-Param-*` header validation over HTTP.
pub(crate) fn find(name: &str) -> Option<Tool> {
    TOOLS.iter().find(|tool| tool.name == name).cloned()
}

/// Runs one `tools/call`; the diagnostics seal their `requestState`
/// with `states`.
pub(crate) async fn call(
    runtime: &TaskRuntime,
    states: &RequestStates,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let args = Args(request.arguments.clone().unwrap_or_default());
    let run = async |tasks: ToolTasks, body: Body| {
        runtime.call_tool(&request, &context, &tasks, body).await
    };
    match request.name.as_ref() {
        "greet" => {
            let name = args.string("name", Some("World"))?;
            run(
                ToolTasks::forbidden(),
                boxed(move |_| async move { Ok(text(format!("Hello, {name}!"))) }),
            )
            .await
        }
        "slow_compute" => {
            let seconds = args.seconds("seconds")?;
            let label = args.string("label", Some("compute"))?;
            run(ToolTasks::optional(), slow_compute(seconds, label)).await
        }
        "failing_job" => {
            run(
                ToolTasks::required(),
                boxed(|_| async {
                    Ok(CallToolResult::error(vec![ContentBlock::text(
                        "failing_job failed on purpose",
                    )]))
                }),
            )
            .await
        }
        "protocol_error_job" => {
            run(
                ToolTasks::required(),
                boxed(|_| async {
                    Err(ErrorData::internal_error(
                        "protocol_error_job failed on purpose",
                        None,
                    ))
                }),
            )
            .await
        }
        "confirm_delete" => {
            let filename = args.string("filename", None)?;
            require_tasks_and_forms(&context)?;
            run(ToolTasks::required(), confirm_delete(filename)).await
        }
        "multi_input" => {
            require_tasks_and_forms(&context)?;
            run(ToolTasks::required(), boxed(multi_input)).await
        }
        "test_tool_with_task" => {
            require_tasks_and_forms(&context)?;
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(USER_NAME_KEY));
            let Some(name) = answer.and_then(answered_name) else {
                // The first round, or a retry without a usable answer: ask (again).
                let requests = BTreeMap::from([(
                    USER_NAME_KEY.to_owned(),
                    form(
                        "What is your name?",
                        json!({"name": {"type": "string", "title": "Name",
                            "description": "The name to greet"}}),
                        &["name"],
                    )?,
                )]);
                return Ok(CallToolResponse::InputRequired(
                    InputRequiredResult::from_input_requests(requests),
                ));
            };
            run(
                ToolTasks::required(),
                boxed(move |_| async move { Ok(text(format!("Hello, {name}!"))) }),
            )
            .await
        }
        other => match diagnostics::call(runtime, states, &request, &context).await {
            Some(response) => response,
            None => Err(invalid(format!("no tool named {other:?}"))),
        },
    }
}

/// What a tool body returns.
type ToolFuture = Pin<Box<dyn Future<Output = Result<CallToolResult, ErrorData>> + Send>>;

/// A tool body: the code the runtime runs, synchronously or as a task.
type Body = Box<dyn FnOnce(TaskContext) -> ToolFuture + Send>;

/// Gives every tool body the same type, so one `run` closure serves all.
fn boxed<F, Fut>(body: F) -> Body
where
    F: FnOnce(TaskContext) -> Fut + Send + 'static,
    Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
{
    Box::new(move |task| Box::pin(body(task)))
}

fn slow_compute(seconds: Duration, label: String) -> Body {
    boxed(move |task: TaskContext| async move {
        task.set_status_message(format!("computing {label}"))
            .await?;
        tokio::time::sleep(seconds).await;
        Ok(text(format!(
            "{label}: computed in {} s",
            seconds.as_secs_f64()
        )))
    })
}

fn confirm_delete(filename: String) -> Body {
    boxed(move |task: TaskContext| async move {
        let request = confirm_form(
            &format!("Delete {filename}?"),
            &format!("delete {filename}"),
        )?;
        let answer = task.request_input("confirm", request).await?;
        Ok(text(if confirmed(&answer) {
            format!("Deleted {filename}")
        } else {
            format!("Kept {filename}")
        }))
    })
}

async fn multi_input(task: TaskContext) -> Result<CallToolResult, ErrorData> {
    {
        let requests = BTreeMap::from([
            (
                "name".to_owned(),
                form(
                    "What is your name?",
                    json!({"name": {"type": "string", "title": "Name"}}),
                    &["name"],
                )?,
            ),
            ("confirm".to_owned(), confirm_form("Go ahead?", "go ahead")?),
        ]);
        let answers = task.request_inputs(requests).await?;
        let name = answers
            .get("name")
            .and_then(answered_name)
            .unwrap_or_else(|| "stranger".to_owned());
        let confirm = answers.get("confirm").is_some_and(confirmed);
        Ok(text(format!("Hello, {name}! confirmed: {confirm}")))
    }
}

/// For the tools that ask for input in a task: fails with -32021 naming
/// what the client did not declare on this request, the Tasks extension,
/// form elicitation, or both.
fn require_tasks_and_forms(context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    let declared = context.client_capabilities().unwrap_or_default();
    let mut missing = ClientCapabilities::default();
    let mut lacking = false;
    if !declared.supports_tasks() {
        missing = with_tasks_extension(missing);
        lacking = true;
    }
    if !declares_forms(&declared) {
        missing.elicitation = Some(forms_capability());
        lacking = true;
    }
    if lacking {
        return Err(ErrorData::missing_required_client_capability(missing));
    }
    Ok(())
}

/// Whether `declared` includes form elicitation: `elicitation: {}` means
/// form only; `{url: {}}` alone means no forms.
fn declares_forms(declared: &ClientCapabilities) -> bool {
    declared
        .elicitation
        .as_ref()
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// `elicitation: {form: {}}`, for a -32021 that names it.
fn forms_capability() -> ElicitationCapability {
    let mut elicitation = ElicitationCapability::default();
    elicitation.form = Some(FormElicitationCapability::default());
    elicitation
}

/// An `elicitation/create` form request.
fn form(message: &str, properties: Value, required: &[&str]) -> Result<InputRequest, ErrorData> {
    let mut request = json!({"method": "elicitation/create", "params": {
        "mode": "form", "message": message,
        "requestedSchema": {"type": "object", "required": required}
    }});
    request["params"]["requestedSchema"]["properties"] = properties;
    serde_json::from_value(request)
        .map_err(|error| ErrorData::internal_error(format!("building a form: {error}"), None))
}

/// A form with one required boolean field, `confirm`.
fn confirm_form(message: &str, what: &str) -> Result<InputRequest, ErrorData> {
    form(
        message,
        json!({"confirm": {"type": "boolean", "title": "Confirm",
            "description": format!("Check to {what}")}}),
        &["confirm"],
    )
}

/// The accepted form content of an elicitation answer; `None` when it was
/// declined, cancelled or is malformed.
fn accepted(answer: &Value) -> Option<&JsonObject> {
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer.get("content").and_then(Value::as_object)
}

/// True when the answer accepted with `confirm: true`.
fn confirmed(answer: &Value) -> bool {
    accepted(answer).and_then(|content| content.get("confirm")) == Some(&Value::Bool(true))
}

/// The non-empty `name` an answer accepted with.
fn answered_name(answer: &Value) -> Option<String> {
    accepted(answer)
        .and_then(|content| content.get("name"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn invalid(message: String) -> ErrorData {
    ErrorData::invalid_params(message, None)
}

/// A call's arguments, read with defaults; a wrong type is -32602.
struct Args(JsonObject);

impl Args {
    fn present(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|value| !value.is_null())
    }

    fn string(&self, key: &str, default: Option<&str>) -> Result<String, ErrorData> {
        match self.present(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(invalid(format!("`{key}` must be a string"))),
            None => default
                .map(str::to_owned)
                .ok_or_else(|| invalid(format!("`{key}` is required"))),
        }
    }

    fn seconds(&self, key: &str) -> Result<Duration, ErrorData> {
        let value = self
            .present(key)
            .ok_or_else(|| invalid(format!("`{key}` is required")))?;
        value
            .as_f64()
            .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
            .ok_or_else(|| invalid(format!("`{key}` must be a non-negative number of seconds")))
    }
}

#[cfg(test)]
mod tests;
