//! The tools `mcp-tasks serve` offers: four demo tools and the seven
//! fixture tools the official conformance suite's tasks scenarios call
//! (`/work/shared/INTEROP.md` §1), all run through our [`TaskRuntime`].
//!
//! | tool | task policy | needs |
//! |---|---|---|
//! | `long_job` | optional | |
//! | `confirm_action` | required | form elicitation |
//! | `failing_tool` | required | |
//! | `sleep` | optional | |
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
//! applied with the capabilities of the creating call, as DIGEST §6.5
//! recommends). What is missing, the Tasks extension included, comes back
//! in one -32021 error.
//!
//! Where INTEROP.md is silent, the fixtures follow the upstream scenario
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

/// The most steps `long_job` takes, so a typo cannot start an endless job.
const MAX_STEPS: u64 = 10_000;

/// The key of the MRTR input request of `test_tool_with_task`; the
/// conformance scenario's fixture contract calls it `user_name`.
const USER_NAME_KEY: &str = "user_name";

/// Every tool, in the order `tools/list` shows them.
static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    let tool = |name: &'static str, description: &'static str, schema: Value| {
        let schema = match schema {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        };
        Tool::new(name, description, Arc::new(schema))
    };
    let no_arguments =
        || json!({"type": "object", "properties": {}, "additionalProperties": false});
    vec![
        tool(
            "long_job",
            "A job that reports its progress as a status message per step \
             (\"step 2 of 5\") and then completes with \"done: N steps\". \
             A task when the client declares the Tasks extension, else it runs at once.",
            json!({"type": "object", "properties": {
                "steps": {"type": "integer", "minimum": 0, "maximum": MAX_STEPS, "default": 5,
                    "description": "How many steps"},
                "step_ms": {"type": "integer", "minimum": 0, "default": 600,
                    "description": "How long each step takes, in milliseconds"}
            }}),
        ),
        tool(
            "confirm_action",
            "Asks the user to confirm an action (an elicitation form with one boolean \
             field, `confirm`, under the input key \"confirm\"), then completes with \
             \"confirmed: ACTION\" or \"not confirmed\". Always a task.",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "default": "run the demo",
                    "description": "What to confirm"}
            }}),
        ),
        tool(
            "failing_tool",
            "A task that always fails with the JSON-RPC error -32603 \
             \"the demo job failed on purpose\".",
            no_arguments(),
        ),
        tool(
            "sleep",
            "Sleeps for `ms` milliseconds, then completes with \"slept MS ms\"; \
             cancel it with tasks/cancel. A task when the client declares the Tasks extension.",
            json!({"type": "object", "properties": {
                "ms": {"type": "integer", "minimum": 0, "description": "How long to sleep, in milliseconds"}
            }, "required": ["ms"]}),
        ),
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
    ]
});

/// Every tool, for `tools/list`.
pub(crate) fn list() -> Vec<Tool> {
    TOOLS.clone()
}

/// One tool by name, for `Mcp-Param-*` header validation over HTTP.
pub(crate) fn find(name: &str) -> Option<Tool> {
    TOOLS.iter().find(|tool| tool.name == name).cloned()
}

/// Runs one `tools/call`.
pub(crate) async fn call(
    runtime: &TaskRuntime,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let args = Args(request.arguments.clone().unwrap_or_default());
    let run = async |tasks: ToolTasks, body: Body| {
        runtime.call_tool(&request, &context, &tasks, body).await
    };
    match request.name.as_ref() {
        "long_job" => {
            let steps = args.integer("steps", Some(5))?;
            if steps > MAX_STEPS {
                return Err(invalid(format!("`steps` must be at most {MAX_STEPS}")));
            }
            let step = Duration::from_millis(args.integer("step_ms", Some(600))?);
            run(ToolTasks::optional(), long_job(steps, step)).await
        }
        "confirm_action" => {
            let action = args.string("action", Some("run the demo"))?;
            require_tasks_and_forms(&context)?;
            run(ToolTasks::required(), confirm_action(action)).await
        }
        "failing_tool" => {
            run(
                ToolTasks::required(),
                boxed(|_| async {
                    Err(ErrorData::internal_error(
                        "the demo job failed on purpose",
                        None,
                    ))
                }),
            )
            .await
        }
        "sleep" => {
            let ms = args.integer("ms", None)?;
            run(ToolTasks::optional(), sleep(ms)).await
        }
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
        other => Err(invalid(format!("no tool named {other:?}"))),
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

fn long_job(steps: u64, step: Duration) -> Body {
    boxed(move |task: TaskContext| async move {
        for done in 1..=steps {
            task.set_status_message(format!("step {done} of {steps}"))
                .await?;
            tokio::time::sleep(step).await;
        }
        Ok(text(format!("done: {steps} steps")))
    })
}

fn confirm_action(action: String) -> Body {
    boxed(move |task: TaskContext| async move {
        let request = confirm_form(&format!("Confirm: {action}?"), &action)?;
        let answer = task.request_input("confirm", request).await?;
        Ok(text(if confirmed(&answer) {
            format!("confirmed: {action}")
        } else {
            "not confirmed".to_owned()
        }))
    })
}

fn sleep(ms: u64) -> Body {
    boxed(move |task: TaskContext| async move {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text(format!("slept {ms} ms"))),
            () = task.cancelled() => Err(ErrorData::internal_error("sleep was cancelled", None)),
        }
    })
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
    // `elicitation: {}` means form only; `{url: {}}` alone means no forms.
    let forms = declared
        .elicitation
        .as_ref()
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none());
    if !forms {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        missing.elicitation = Some(elicitation);
        lacking = true;
    }
    if lacking {
        return Err(ErrorData::missing_required_client_capability(missing));
    }
    Ok(())
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

    fn integer(&self, key: &str, default: Option<u64>) -> Result<u64, ErrorData> {
        match self.present(key) {
            Some(value) => value
                .as_u64()
                .or_else(|| {
                    // 5.0 is an integer too.
                    value
                        .as_f64()
                        .filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n < 2f64.powi(53))
                        .map(|n| n as u64)
                })
                .ok_or_else(|| invalid(format!("`{key}` must be a non-negative integer"))),
            None => default.ok_or_else(|| invalid(format!("`{key}` is required"))),
        }
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
mod tests {
    use std::time::Duration;

    use mcp_tasks::{CallOptions, CallResponse, InputMode, TaskOutcome, TaskStatus};
    use serde_json::json;

    use crate::serve::tests::{
        Forms, TASKS, accept, args, completed, in_process, input_required, sync_text, task_of,
        undeclared, waiting,
    };

    #[tokio::test]
    async fn greet_is_synchronous_even_with_the_extension_declared() {
        let client = in_process(()).await;
        let declared = CallOptions::default();
        assert_eq!(
            sync_text(&client, "greet", json!({}), declared.clone()).await,
            "Hello, World!"
        );
        assert_eq!(
            sync_text(&client, "greet", json!({"name": "sep-2243"}), declared).await,
            "Hello, sep-2243!"
        );
        assert_eq!(
            sync_text(&client, "greet", json!({"name": "Ada"}), undeclared()).await,
            "Hello, Ada!"
        );
    }

    #[tokio::test]
    async fn slow_compute_is_a_task_when_declared_and_synchronous_otherwise() {
        let client = in_process(()).await;
        let arguments = json!({"seconds": 0.05, "label": "lifecycle"});
        let state = task_of(&client, "slow_compute", arguments.clone()).await;
        assert_eq!(state.status, TaskStatus::Working);
        assert_eq!(state.poll_interval, Some(Duration::from_millis(20)));
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "lifecycle: computed in 0.05 s");
        assert_eq!(
            sync_text(&client, "slow_compute", arguments, undeclared()).await,
            "lifecycle: computed in 0.05 s"
        );
        // A long one can be cancelled.
        let state = task_of(&client, "slow_compute", json!({"seconds": 60})).await;
        client.cancel(&state.id).await.unwrap();
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
        // Bad arguments are -32602.
        for bad in [json!({}), json!({"seconds": -1}), json!({"seconds": "1"})] {
            let error = client
                .call_tool("slow_compute", args(bad), CallOptions::default())
                .await
                .unwrap_err();
            assert_eq!(error.code(), Some(-32602), "{error}");
        }
    }

    #[tokio::test]
    async fn failing_job_needs_the_extension_and_completes_with_is_error() {
        let client = in_process(()).await;
        let error = client
            .call_tool("failing_job", None, undeclared())
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32021));
        assert!(error.requires_tasks_extension(), "{error}");
        let state = task_of(&client, "failing_job", json!({})).await;
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        let TaskOutcome::Completed(result) = outcome else {
            panic!("a tool error is a completed task: {outcome:?}");
        };
        assert_eq!(result.is_error, Some(true));
        assert!(!result.content.is_empty());
    }

    #[tokio::test]
    async fn protocol_error_job_ends_failed_with_a_json_rpc_error() {
        let client = in_process(()).await;
        let state = task_of(&client, "protocol_error_job", json!({})).await;
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        let TaskOutcome::Failed(failure) = outcome else {
            panic!("expected failed: {outcome:?}");
        };
        assert_eq!(failure.error.code, -32603);
        assert_eq!(
            failure.error.message,
            "protocol_error_job failed on purpose"
        );
        assert!(failure.state.result.is_none());
    }

    #[tokio::test]
    async fn confirm_delete_asks_once_then_completes_after_tasks_update() {
        let client = in_process(Forms).await;
        let state = task_of(&client, "confirm_delete", json!({"filename": "a.txt"})).await;
        let asked = input_required(&client, &state, 1).await;
        assert_eq!(asked.input_requests.keys().collect::<Vec<_>>(), ["confirm"]);
        let request = &asked.input_requests["confirm"];
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(request["params"]["mode"], "form");
        let schema = &request["params"]["requestedSchema"];
        assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
        assert!(schema["properties"]["confirm"]["title"].is_string());
        assert_eq!(schema["required"], json!(["confirm"]));
        // An unknown key is acknowledged and ignored.
        client
            .update(
                &state.id,
                [("unknown-key".to_owned(), json!({"ignored": true}))].into(),
            )
            .await
            .unwrap();
        assert_eq!(
            client.get(&state.id).await.unwrap().status,
            TaskStatus::InputRequired
        );
        client
            .update(
                &state.id,
                [("confirm".to_owned(), accept(json!({"confirm": true})))].into(),
            )
            .await
            .unwrap();
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "Deleted a.txt");

        // Declined: it completes and keeps the file.
        let state = task_of(&client, "confirm_delete", json!({"filename": "b.txt"})).await;
        input_required(&client, &state, 1).await;
        client
            .update(
                &state.id,
                [("confirm".to_owned(), json!({"action": "decline"}))].into(),
            )
            .await
            .unwrap();
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "Kept b.txt");
    }

    #[tokio::test]
    async fn multi_input_keeps_the_unanswered_key_after_a_partial_update() {
        let client = in_process(Forms).await;
        let state = task_of(&client, "multi_input", json!({})).await;
        let asked = input_required(&client, &state, 2).await;
        assert_eq!(
            asked.input_requests.keys().collect::<Vec<_>>(),
            ["confirm", "name"]
        );
        // The conformance harness answers each key with both fields.
        client
            .update(
                &state.id,
                [(
                    "confirm".to_owned(),
                    accept(json!({"name": "partial-1", "confirm": true})),
                )]
                .into(),
            )
            .await
            .unwrap();
        let after = client.get(&state.id).await.unwrap();
        assert_eq!(after.status, TaskStatus::InputRequired);
        assert_eq!(after.input_requests.keys().collect::<Vec<_>>(), ["name"]);
        client
            .update(
                &state.id,
                [(
                    "name".to_owned(),
                    accept(json!({"name": "partial-2", "confirm": true})),
                )]
                .into(),
            )
            .await
            .unwrap();
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "Hello, partial-2! confirmed: true");
    }

    #[tokio::test]
    async fn test_tool_with_task_runs_an_mrtr_round_then_becomes_a_task() {
        let client = in_process(Forms).await;
        let CallResponse::InputRequired(round) = client
            .call_tool(
                "test_tool_with_task",
                args(json!({})),
                CallOptions::default(),
            )
            .await
            .unwrap()
        else {
            panic!("round 1 must be an InputRequiredResult");
        };
        let wire = serde_json::to_value(&round).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert!(wire.get("taskId").is_none());
        let requests = round.input_requests.as_ref().expect("inputRequests");
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["user_name"]);
        let request = serde_json::to_value(&requests["user_name"]).unwrap();
        assert_eq!(request["method"], "elicitation/create");
        assert_eq!(
            request["params"]["requestedSchema"]["properties"]["name"]["type"],
            "string"
        );

        // A retry without a usable answer is asked again.
        let declined = [("user_name".to_owned(), json!({"action": "decline"}))].into();
        let again = client
            .call_tool(
                "test_tool_with_task",
                args(json!({})),
                CallOptions::default().with_mrtr_retry(Some(declined), round.request_state.clone()),
            )
            .await
            .unwrap();
        assert!(matches!(again, CallResponse::InputRequired(_)), "{again:?}");

        // The retry with the answer becomes a task that greets it.
        let answered = [("user_name".to_owned(), accept(json!({"name": "Alice"})))].into();
        let CallResponse::Task(state) = client
            .call_tool(
                "test_tool_with_task",
                args(json!({})),
                CallOptions::default().with_mrtr_retry(Some(answered), round.request_state.clone()),
            )
            .await
            .unwrap()
        else {
            panic!("round 2 must create a task");
        };
        assert!(state.raw.get("requestState").is_none());
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "Hello, Alice!");

        // All in one, the MRTR round answered by a resolver.
        let resolver = InputMode::resolver(|requests| async move {
            requests
                .into_keys()
                .map(|key| (key, accept(json!({"name": "Bob"}))))
                .collect()
        });
        let outcome = client
            .call_and_await(
                "test_tool_with_task",
                None,
                CallOptions::default(),
                &waiting().with_input(resolver),
            )
            .await
            .unwrap();
        assert_eq!(completed(&outcome), "Hello, Bob!");
    }

    #[tokio::test]
    async fn input_tools_name_every_capability_the_client_did_not_declare() {
        let client = in_process(()).await;
        for tool in [
            "test_tool_with_task",
            "confirm_delete",
            "multi_input",
            "confirm_action",
        ] {
            let error = client
                .call_tool(tool, args(json!({"filename": "x"})), CallOptions::default())
                .await
                .unwrap_err();
            assert_eq!(error.code(), Some(-32021), "{tool}: {error}");
            let data = error.rpc_error().and_then(|e| e.data.clone()).unwrap();
            assert_eq!(
                data["requiredCapabilities"]["elicitation"],
                json!({"form": {}})
            );
            assert!(data["requiredCapabilities"].get("extensions").is_none());
        }
        let error = client
            .call_tool("test_tool_with_task", None, undeclared())
            .await
            .unwrap_err();
        let data = error.rpc_error().and_then(|e| e.data.clone()).unwrap();
        assert_eq!(data["requiredCapabilities"]["extensions"][TASKS], json!({}));
        assert!(data["requiredCapabilities"]["elicitation"].is_object());
    }

    #[tokio::test]
    async fn demo_tools_report_steps_confirm_fail_and_sleep() {
        let client = in_process(Forms).await;
        // long_job: a status message per step, then the count.
        let state = task_of(&client, "long_job", json!({"steps": 3, "step_ms": 100})).await;
        let mut seen = Vec::new();
        loop {
            let read = client.get(&state.id).await.unwrap();
            if let Some(message) = read.status_message.clone()
                && seen.last() != Some(&message)
            {
                seen.push(message);
            }
            if read.status.is_terminal() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(seen.contains(&"step 2 of 3".to_owned()), "{seen:?}");
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "done: 3 steps");
        assert_eq!(
            sync_text(
                &client,
                "long_job",
                json!({"steps": 2, "step_ms": 1}),
                undeclared()
            )
            .await,
            "done: 2 steps"
        );

        // confirm_action: one boolean field under "confirm".
        let state = task_of(&client, "confirm_action", json!({"action": "deploy"})).await;
        let asked = input_required(&client, &state, 1).await;
        let schema = &asked.input_requests["confirm"]["params"]["requestedSchema"];
        assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
        assert_eq!(schema["required"], json!(["confirm"]));
        client
            .update(
                &state.id,
                [("confirm".to_owned(), accept(json!({"confirm": true})))].into(),
            )
            .await
            .unwrap();
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "confirmed: deploy");
        for answer in [
            json!({"action": "decline"}),
            accept(json!({"confirm": false})),
        ] {
            let state = task_of(&client, "confirm_action", json!({})).await;
            input_required(&client, &state, 1).await;
            client
                .update(&state.id, [("confirm".to_owned(), answer)].into())
                .await
                .unwrap();
            let outcome = client.await_task(&state, &waiting()).await.unwrap();
            assert_eq!(completed(&outcome), "not confirmed");
        }

        // failing_tool: a failed task.
        let state = task_of(&client, "failing_tool", json!({})).await;
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        let TaskOutcome::Failed(failure) = outcome else {
            panic!("expected failed: {outcome:?}");
        };
        assert_eq!(failure.error.code, -32603);
        assert_eq!(failure.error.message, "the demo job failed on purpose");

        // sleep: completes, or is cancelled.
        let state = task_of(&client, "sleep", json!({"ms": 10})).await;
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert_eq!(completed(&outcome), "slept 10 ms");
        let state = task_of(&client, "sleep", json!({"ms": 600_000})).await;
        client.cancel(&state.id).await.unwrap();
        let outcome = client.await_task(&state, &waiting()).await.unwrap();
        assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
        let error = client
            .call_tool("sleep", None, CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32602));
        let error = client
            .call_tool("no_such_tool", None, CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32602));
    }
}
