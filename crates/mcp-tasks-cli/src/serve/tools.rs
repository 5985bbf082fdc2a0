//! The four demo tools `mcp-tasks serve` offers, run through our
//! [`TaskRuntime`]. Each is defined once, in [`TOOLS`]: its name,
//! description and input schema, its task policy, and its body.
//!
//! | tool | task policy | needs | resumable |
//! |---|---|---|---|
//! | `long_job` | optional | | yes |
//! | `confirm_action` | required | form elicitation | yes |
//! | `failing_tool` | required | | |
//! | `sleep` | optional | | |
//!
//! Resumable: when the server running the task stops, the tool runs again
//! from its arguments ([`resume`]): on another replica of a shared store
//! (Redis), or on the same server started again on its SQLite file.
//! `long_job` keeps a checkpoint before each step (`{"done": k}`, with the
//! step's status message in the same write) and continues after the last
//! step it kept; `confirm_action` asks nothing again (its question, or its
//! answer, is kept). The other tasks fail with "the server running this
//! task stopped" (or, on SQLite, "server restarted before the task
//! finished").
//!
//! `confirm_action` checks, on the `tools/call` that would create its
//! task, that the client declared form elicitation (the MRTR rule that no
//! input request goes to a client that did not declare it, applied with
//! the capabilities of the creating call, as the Tasks extension recommends). What
//! is missing, the Tasks extension included, comes back in one -32021
//! error. Bad arguments are -32602 before any task.
//!
//! The conformance fixtures live in `crates/mcp-tasks-conformance`, in the
//! `conformance-server` binary: they are not part of the binary users install.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use mcp_tasks::server::{
    TaskContext, TaskRuntime, ToolTasks, declares_tasks, missing_client_capabilities,
};
use mcp_tasks::with_tasks_extension;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    ElicitationCapability, FormElicitationCapability, InputRequest, JsonObject, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

/// The most steps `long_job` takes, so a typo cannot start an endless job.
const MAX_STEPS: u64 = 10_000;

/// One demo tool: what `tools/list` shows of it and what `tools/call` runs.
struct DemoTool {
    name: &'static str,
    description: &'static str,
    /// Its input schema, a JSON object.
    schema: fn() -> Value,
    /// Whether a call runs as a task.
    tasks: fn() -> ToolTasks,
    /// Reads the arguments (-32602 when they are bad), checks what the
    /// client must have declared (-32021; no request when the task runs
    /// again on another replica: it was checked when the task was made),
    /// and returns the body to run.
    start: fn(&Args, Option<&RequestContext<RoleServer>>) -> Result<Body, ErrorData>,
}

/// Every demo tool, in the order `tools/list` shows them.
const TOOLS: [DemoTool; 4] = [
    DemoTool {
        name: "long_job",
        description: "A job that reports its progress as a status message per step \
             (\"step 2 of 5\") and then completes with \"done: N steps\". \
             A task when the client declares the Tasks extension, else it runs at once.",
        schema: || {
            json!({"type": "object", "properties": {
                "steps": {"type": "integer", "minimum": 0, "maximum": MAX_STEPS, "default": 5,
                    "description": "How many steps"},
                "step_ms": {"type": "integer", "minimum": 0, "default": 600,
                    "description": "How long each step takes, in milliseconds"}
            }})
        },
        tasks: || ToolTasks::optional().with_resumable(true),
        start: |args, _| {
            let steps = args.integer("steps", Some(5))?;
            if steps > MAX_STEPS {
                return Err(invalid(format!("`steps` must be at most {MAX_STEPS}")));
            }
            let step = Duration::from_millis(args.integer("step_ms", Some(600))?);
            Ok(boxed(move |task: TaskContext| async move {
                // A resumed run continues after the last step it kept.
                let from = task.resumed::<Progress>()?.map_or(0, |kept| kept.done);
                for done in from.min(steps)..steps {
                    // The steps done so far and the message of the next, in one write.
                    task.checkpoint_with_message(
                        &Progress { done },
                        format!("step {} of {steps}", done + 1),
                    )
                    .await?;
                    // Each step run, by the task's hash: a test counts them.
                    if let Some(hash) = task.task_hash().await {
                        tracing::debug!(task = %hash, step = done + 1, steps, "long_job step");
                    }
                    tokio::time::sleep(step).await;
                }
                Ok(text(format!("done: {steps} steps")))
            }))
        },
    },
    DemoTool {
        name: "confirm_action",
        description: "Asks the user to confirm an action (an elicitation form with one boolean \
             field, `confirm`, under the input key \"confirm\"), then completes with \
             \"confirmed: ACTION\" or \"not confirmed\". Always a task.",
        schema: || {
            json!({"type": "object", "properties": {
                "action": {"type": "string", "default": "run the demo",
                    "description": "What to confirm"}
            }})
        },
        tasks: || ToolTasks::required().with_resumable(true),
        start: |args, context| {
            let action = args.string("action", Some("run the demo"))?;
            if let Some(context) = context {
                require_tasks_and_forms(context)?;
            }
            Ok(boxed(move |task: TaskContext| async move {
                let request = confirm_form(&format!("Confirm: {action}?"), &action)?;
                let answer = task.request_input("confirm", request).await?;
                Ok(text(if confirmed(&answer) {
                    format!("confirmed: {action}")
                } else {
                    "not confirmed".to_owned()
                }))
            }))
        },
    },
    DemoTool {
        name: "failing_tool",
        description: "A task that always fails with the JSON-RPC error -32603 \
             \"the demo job failed on purpose\".",
        schema: || json!({"type": "object", "properties": {}, "additionalProperties": false}),
        tasks: ToolTasks::required,
        start: |_, _| {
            Ok(boxed(|_| async {
                Err(ErrorData::internal_error(
                    "the demo job failed on purpose",
                    None,
                ))
            }))
        },
    },
    DemoTool {
        name: "sleep",
        description: "Sleeps for `ms` milliseconds, then completes with \"slept MS ms\"; \
             cancel it with tasks/cancel. A task when the client declares the Tasks extension.",
        schema: || {
            json!({"type": "object", "properties": {
                "ms": {"type": "integer", "minimum": 0, "description": "How long to sleep, in milliseconds"}
            }, "required": ["ms"]})
        },
        tasks: ToolTasks::optional,
        start: |args, _| {
            let ms = args.integer("ms", None)?;
            Ok(boxed(move |task: TaskContext| async move {
                // `ms` 0 answers in the call's first step, without the
                // timer (which rounds a sleep up to its next 1 ms tick): a
                // task of it is stored already completed.
                if ms == 0 {
                    return Ok(text("slept 0 ms"));
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => {
                        Ok(text(format!("slept {ms} ms")))
                    }
                    () = task.cancelled() => {
                        Err(ErrorData::internal_error("sleep was cancelled", None))
                    }
                }
            }))
        },
    },
];

impl DemoTool {
    /// The tool as `tools/list` shows it.
    fn tool(&self) -> Tool {
        let schema = match (self.schema)() {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        };
        Tool::new(self.name, self.description, Arc::new(schema))
    }
}

/// [`TOOLS`] as `tools/list` shows them, built once.
static LISTED: LazyLock<Vec<Tool>> = LazyLock::new(|| TOOLS.iter().map(DemoTool::tool).collect());

/// Every demo tool, for `tools/list`.
pub(crate) fn list() -> Vec<Tool> {
    LISTED.clone()
}

/// One tool by name, for `Mcp-Param-*` header validation over HTTP.
pub(crate) fn find(name: &str) -> Option<Tool> {
    LISTED.iter().find(|tool| tool.name == name).cloned()
}

/// The names of the demo tools, in `tools/list` order.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    TOOLS.iter().map(|tool| tool.name)
}

/// Tells `runtime` each tool's policy, for 2025-11-25 clients (which read
/// it in `tools/list`).
pub(crate) fn advertise(runtime: &TaskRuntime) {
    for tool in &TOOLS {
        runtime.advertise_tool(tool.name, (tool.tasks)().policy);
    }
}

/// What `long_job` keeps as its checkpoint before each step: how many
/// steps are done.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Progress {
    done: u64,
}

/// Runs one `tools/call`.
pub(crate) async fn call(
    runtime: &TaskRuntime,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if let Some(answered) = runtime.call_task_tool(&request, &context).await {
        return answered.map(CallToolResponse::from);
    }
    let Some(tool) = TOOLS.iter().find(|tool| tool.name == request.name) else {
        return Err(invalid(format!("no tool named {:?}", request.name)));
    };
    let args = Args(request.arguments.clone().unwrap_or_default());
    let tasks = (tool.tasks)();
    // A caller that gets a handle answers its task's input through the
    // task tools: what it declared does not matter.
    let handed = !declares_tasks(&context) && runtime.hands_out(&request.name, tasks.policy);
    let body = (tool.start)(&args, (!handed).then_some(&context))?;
    runtime.call_tool(&request, &context, &tasks, body).await
}

/// Runs a resumable tool's task again, from its name and arguments, on this
/// replica after the replica running it stopped (the runtime's resume hook).
pub(crate) fn resume(call: CallToolRequestParams, task: TaskContext) -> ToolFuture {
    let Some(tool) = TOOLS.iter().find(|tool| tool.name == call.name) else {
        let error = invalid(format!("no tool named {:?}", call.name));
        return Box::pin(async move { Err(error) });
    };
    let args = Args(call.arguments.unwrap_or_default());
    match (tool.start)(&args, None) {
        Ok(body) => body(task),
        Err(error) => Box::pin(async move { Err(error) }),
    }
}

/// What a tool body returns.
pub(crate) type ToolFuture =
    Pin<Box<dyn Future<Output = Result<CallToolResult, ErrorData>> + Send>>;

/// A tool body: the code the runtime runs, synchronously or as a task.
type Body = Box<dyn FnOnce(TaskContext) -> ToolFuture + Send>;

/// Gives every tool body the same type.
fn boxed<F, Fut>(body: F) -> Body
where
    F: FnOnce(TaskContext) -> Fut + Send + 'static,
    Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
{
    Box::new(move |task| Box::pin(body(task)))
}

/// For a tool that asks for input in a task: fails with -32021 naming
/// what the client did not declare on this request, the Tasks extension,
/// form elicitation, or both. On an initialize-era session (2025-11-25)
/// the task is the runtime's business (-32601 for a call that did not ask
/// for one) and missing forms are that era's -32600.
fn require_tasks_and_forms(context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    let declared = context.client_capabilities().unwrap_or_default();
    let mut missing = ClientCapabilities::default();
    let mut lacking = false;
    if !declares_tasks(context) {
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
        return Err(missing_client_capabilities(context, missing));
    }
    Ok(())
}

/// An `elicitation/create` form with one required boolean field, `confirm`.
fn confirm_form(message: &str, what: &str) -> Result<InputRequest, ErrorData> {
    let request = json!({"method": "elicitation/create", "params": {
        "mode": "form", "message": message,
        "requestedSchema": {"type": "object", "required": ["confirm"], "properties": {
            "confirm": {"type": "boolean", "title": "Confirm",
                "description": format!("Check to {what}")}
        }}
    }});
    serde_json::from_value(request)
        .map_err(|error| ErrorData::internal_error(format!("building a form: {error}"), None))
}

/// True when the elicitation answer accepted with `confirm: true`.
fn confirmed(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer.pointer("/content/confirm") == Some(&Value::Bool(true))
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
}

#[cfg(test)]
mod tests;
