//! Replicas for the tests: a task runtime on its own `RedisStore` (its own
//! connections and subscription) with a few tools, served to a client over
//! an in-process duplex. Several replicas on one `redis-server` behave as
//! several server processes do, short of dying (see `pause.rs` for that).

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::server::{AdmissionLimits, TaskContext, TaskRuntime, ToolTasks};
use mcp_tasks::store::{Principal, SharedStore};
use mcp_tasks::{CallOptions, CallResponse, TaskId, TasksClient};
use mcp_tasks_redis::testing::RedisServer;
use mcp_tasks_redis::{RedisOptions, RedisStore};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequest,
    JsonObject, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, RoleServer, serve_client_with_lifecycle};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// The principal of in-process clients (no HTTP request to hash).
pub(crate) fn process() -> Principal {
    Principal::new("process")
}

/// A store on `url` under `prefix`.
pub(crate) async fn store(url: &str, prefix: &str) -> SharedStore {
    let options = RedisOptions::default().with_key_prefix(prefix);
    Arc::new(
        RedisStore::connect_with(url, options)
            .await
            .expect("connect to the test's redis-server"),
    )
}

/// The tools of a replica named `name` (results say which replica ran them).
#[derive(Clone)]
pub(crate) struct Tools {
    pub(crate) runtime: TaskRuntime,
    name: &'static str,
}

/// What the resumable `steps` tool does, here or run again elsewhere.
pub(crate) async fn steps(
    replica: &'static str,
    arguments: Option<JsonObject>,
    task: TaskContext,
) -> Result<CallToolResult, ErrorData> {
    let count = arguments
        .as_ref()
        .and_then(|a| a.get("steps"))
        .and_then(Value::as_u64)
        .unwrap_or(3);
    let ms = arguments
        .as_ref()
        .and_then(|a| a.get("ms"))
        .and_then(Value::as_u64)
        .unwrap_or(100);
    for step in 1..=count {
        task.set_status_message(format!("{replica}: step {step} of {count}"))
            .await?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let answer = task.request_input("confirm", form("Go on?")).await?;
    Ok(text(format!(
        "{replica} finished after {}",
        answer["content"]["v"].as_str().unwrap_or("nothing")
    )))
}

/// What the resumable `counted` tool does, here or run again elsewhere:
/// `steps` steps of `ms`, a checkpoint of the steps done (and the next
/// step's message) before each; a resumed run continues after the last
/// one kept. Its result says where each run started.
pub(crate) async fn counted(
    replica: &'static str,
    arguments: Option<JsonObject>,
    task: TaskContext,
) -> Result<CallToolResult, ErrorData> {
    let number = |key: &str, default: u64| {
        arguments
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(default)
    };
    let (count, ms) = (number("steps", 5), number("ms", 100));
    let from = task
        .resumed::<Value>()?
        .and_then(|kept| kept["done"].as_u64())
        .unwrap_or(0);
    for done in from..count {
        task.checkpoint_with_message(
            &json!({"done": done}),
            format!("{replica}: step {} of {count}", done + 1),
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    Ok(text(format!("{replica} ran steps {} to {count}", from + 1)))
}

/// A replica: its runtime, on its own store, with a lease period of `period`.
pub(crate) async fn replica(
    url: &str,
    prefix: &str,
    name: &'static str,
    period: Duration,
) -> Tools {
    let runtime = TaskRuntime::builder(store(url, prefix).await)
        .with_poll_interval(Duration::from_millis(20))
        .with_lease_period(period)
        .with_resume(move |call: CallToolRequestParams, task| {
            Box::pin(async move {
                match call.name.as_ref() {
                    "counted" => counted(name, call.arguments, task).await,
                    _ => steps(name, call.arguments, task).await,
                }
            })
        })
        .build();
    Tools { runtime, name }
}

/// [`replica`] whose runtime caps each caller's unfinished tasks, so its
/// creations take seats in the store (`Replicas::create_seated`).
pub(crate) async fn capped_replica(url: &str, prefix: &str, name: &'static str) -> Tools {
    bounded_replica(url, prefix, name, AdmissionLimits::default(), Some(50)).await
}

/// [`replica`] under admission `limits` and per-caller `cap`, so that its
/// tasks take the seats those bound (or none when nothing but the queue
/// is bounded and no task waits).
pub(crate) async fn bounded_replica(
    url: &str,
    prefix: &str,
    name: &'static str,
    limits: AdmissionLimits,
    cap: Option<usize>,
) -> Tools {
    let runtime = TaskRuntime::builder(store(url, prefix).await)
        .with_poll_interval(Duration::from_millis(20))
        .with_admission(limits)
        .with_max_tasks_per_caller(cap)
        .build();
    Tools { runtime, name }
}

/// What `redis-cli` prints for `args` against `redis`, trimmed.
pub(crate) fn cli(redis: &RedisServer, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &redis.port().to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// How many times Redis ran `command` (lower case) so far, scripts'
/// calls included (`INFO commandstats`).
pub(crate) fn calls(redis: &RedisServer, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    cli(redis, &["info", "commandstats"])
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn form(message: &str) -> InputRequest {
    serde_json::from_value(
        json!({"method": "elicitation/create", "params": {"mode": "form",
        "message": message, "requestedSchema": {"type": "object",
        "properties": {"v": {"type": "string"}}, "required": ["v"]}}}),
    )
    .expect("a valid form")
}

pub(crate) fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

impl Tools {
    /// The tools of replica `name` on `runtime`.
    pub(crate) fn new(runtime: TaskRuntime, name: &'static str) -> Self {
        Self { runtime, name }
    }
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = self.name;
        let arguments = request.arguments.clone();
        let rt = &self.runtime;
        match request.name.as_ref() {
            // Asks for "v" and answers with it.
            "ask" => {
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    move |task| async move {
                        let answer = task.request_input("v", form("V?")).await?;
                        Ok(text(format!(
                            "{name} got {}",
                            answer["content"]["v"].as_str().unwrap_or("nothing")
                        )))
                    },
                )
                .await
            }
            // Sleeps `ms` (default an hour); not resumable.
            "sleep" => {
                let ms = arguments
                    .as_ref()
                    .and_then(|a| a.get("ms"))
                    .and_then(Value::as_u64)
                    .unwrap_or(3_600_000);
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    move |task| async move {
                        task.set_status_message(format!("{name} sleeping")).await?;
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        task.set_status_message(format!("{name} woke up")).await?;
                        Ok(text(format!("{name} slept")))
                    },
                )
                .await
            }
            // Steps, then asks "confirm"; resumable.
            "steps" => {
                let tasks = ToolTasks::required().with_resumable(true);
                rt.call_tool(&request, &context, &tasks, move |task| {
                    steps(name, arguments, task)
                })
                .await
            }
            // Checkpointed steps; resumable.
            "counted" => {
                let tasks = ToolTasks::required().with_resumable(true);
                rt.call_tool(&request, &context, &tasks, move |task| {
                    counted(name, arguments, task)
                })
                .await
            }
            _ => Err(ErrorData::invalid_params("no such tool", None)),
        }
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// A client of `tools`, over an in-process duplex.
pub(crate) async fn client(tools: Tools) -> TasksClient<()> {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = tools.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    TasksClient::new(
        serve_client_with_lifecycle((), client_io, lifecycle)
            .await
            .expect("connect in process"),
    )
}

/// Calls `tool`, which answers with a task; its id.
pub(crate) async fn start(client: &TasksClient<()>, tool: &str, arguments: Value) -> TaskId {
    let arguments = match arguments {
        Value::Object(object) => Some(object),
        _ => None,
    };
    match client
        .call_tool(tool, arguments, CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state.id,
        other => panic!("{tool} should answer with a task, got {other:?}"),
    }
}

/// Reads task `id` through `runtime` (another replica's, maybe) as tasks/get does.
pub(crate) async fn read(runtime: &TaskRuntime, id: &TaskId) -> Value {
    let result = runtime
        .get_task_as(id, &process())
        .await
        .expect("tasks/get");
    serde_json::to_value(result).expect("json")
}

/// Polls `id` through `runtime` every 5 ms until `done` holds, for at most
/// `within`; a read that fails (the store not reachable yet, as while Redis
/// restarts) is tried again until then.
pub(crate) async fn until(
    runtime: &TaskRuntime,
    id: &TaskId,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let last = match runtime.get_task_as(id, &process()).await {
            Ok(result) => {
                let task = serde_json::to_value(result).expect("json");
                if done(&task) {
                    return task;
                }
                format!("the task is {task}")
            }
            Err(error) => format!("tasks/get answers {error:?}"),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Answers input key `key` with `{action: accept, content: {v}}` through `runtime`.
pub(crate) async fn answer(runtime: &TaskRuntime, id: &TaskId, key: &str, v: &str) {
    let responses = serde_json::from_value(json!({
        key: {"action": "accept", "content": {"v": v}}
    }))
    .expect("responses");
    runtime
        .update_task_as(id, responses, &process())
        .await
        .expect("tasks/update");
}

/// The status of a tasks/get answer.
pub(crate) fn status(task: &Value) -> &str {
    task["status"].as_str().unwrap_or("?")
}

/// The text of a completed task's result.
pub(crate) fn result_text(task: &Value) -> &str {
    task["result"]["content"][0]["text"].as_str().unwrap_or("")
}
