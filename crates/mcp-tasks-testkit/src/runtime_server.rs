//! A server built on our `TaskRuntime`, for the server tests: in process
//! (tokio duplex) and over Streamable HTTP on 127.0.0.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::Ttl;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskContext, TaskPolicy, TaskRuntime, TaskRuntimeBuilder, ToolTasks};
use mcp_tasks::store::{IntoSharedStore, MemoryStore};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InputRequest,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

/// The server: tools that show every part of the runtime. `events` is
/// what tools report from outside their own future (their spawned work).
#[derive(Clone)]
pub struct RuntimeServer {
    pub runtime: TaskRuntime,
    pub events: Arc<Mutex<Vec<String>>>,
    /// What the `gated` tool waits for at each step.
    pub gate: Arc<tokio::sync::Semaphore>,
    /// Whether `server/discover` declares that the server honours
    /// idempotency keys, as a server of this library does.
    pub declares_idempotency: bool,
}

/// A runtime builder on `store` suggesting 20 ms polls.
pub fn runtime_on(store: impl IntoSharedStore) -> TaskRuntimeBuilder {
    TaskRuntime::builder(store).with_poll_interval(Duration::from_millis(20))
}

/// The policy of each tool, as 2025-11-25 clients read it in `tools/list`.
pub const POLICIES: [(&str, TaskPolicy); 16] = [
    ("slow", TaskPolicy::Optional),
    ("gated", TaskPolicy::Required),
    ("required_job", TaskPolicy::Required),
    ("forbidden_tool", TaskPolicy::Forbidden),
    ("ask", TaskPolicy::Required),
    ("ask_maybe", TaskPolicy::Optional),
    ("ask_two", TaskPolicy::Required),
    ("is_error", TaskPolicy::Required),
    ("rpc_error", TaskPolicy::Required),
    ("panics", TaskPolicy::Required),
    ("forever", TaskPolicy::Required),
    ("spawns_work", TaskPolicy::Required),
    ("ask_everything", TaskPolicy::Required),
    ("steps", TaskPolicy::Required),
    ("pay", TaskPolicy::Forbidden),
    ("counts", TaskPolicy::Optional),
];

impl RuntimeServer {
    pub fn new(runtime: TaskRuntime) -> Self {
        for (name, policy) in POLICIES {
            runtime.advertise_tool(name, policy);
        }
        Self {
            runtime,
            events: Arc::default(),
            gate: Arc::new(tokio::sync::Semaphore::new(0)),
            declares_idempotency: true,
        }
    }

    /// This server, declaring nothing of idempotency keys in
    /// `server/discover` (as a server of another library): its runtime
    /// still keeps them, but a client may not know it.
    pub fn undeclared(mut self) -> Self {
        self.declares_idempotency = false;
        self
    }

    /// How many times the `pay` tool ran.
    pub fn payments(&self) -> usize {
        self.events()
            .iter()
            .filter(|event| *event == "pay ran")
            .count()
    }

    /// Lets the `gated` tool take one more step.
    pub fn open_gate(&self) {
        self.gate.add_permits(1);
    }

    /// A server on `runtime` (a builder) whose `steps` tasks run again,
    /// from their checkpoint, when a server stopped before they finished.
    pub fn resuming(runtime: TaskRuntimeBuilder) -> Self {
        let events: Arc<Mutex<Vec<String>>> = Arc::default();
        let kept = events.clone();
        let runtime = runtime
            .with_resume(move |call: CallToolRequestParams, ctx| {
                let (n, ms) = (u64_arg(&call, "n", 5), ms_arg(&call));
                steps(kept.clone(), n, ms)(ctx)
            })
            .build();
        let mut server = Self::new(runtime);
        server.events = events;
        server
    }

    pub fn in_memory() -> Self {
        Self::new(runtime_on(MemoryStore::new()).build())
    }

    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}

pub fn form(message: &str, field: &str) -> InputRequest {
    serde_json::from_value(
        json!({"method": "elicitation/create", "params": {"mode": "form",
        "message": message, "requestedSchema": {"type": "object",
        "properties": {field: {"type": "string"}}, "required": [field]}}}),
    )
    .expect("a valid form")
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn answer(value: &Value, field: &str) -> String {
    value["content"][field]
        .as_str()
        .unwrap_or("nothing")
        .to_owned()
}

/// `tasks` with the TTL the arguments ask for: `ttl_ms`, `unlimited`,
/// `from_creation` (the TTL does not follow activity).
fn with_ttl_args(request: &CallToolRequestParams, mut tasks: ToolTasks) -> ToolTasks {
    let args = request.arguments.clone().unwrap_or_default();
    if let Some(ttl) = args.get("ttl_ms").and_then(Value::as_u64) {
        tasks = tasks.with_ttl(Ttl::from_millis(ttl));
    }
    if args.get("unlimited") == Some(&json!(true)) {
        tasks = tasks.with_ttl(Ttl::Unlimited);
    }
    if args.get("from_creation") == Some(&json!(true)) {
        tasks = tasks.with_ttl_from_creation();
    }
    tasks
}

fn u64_arg(request: &CallToolRequestParams, key: &str, default: u64) -> u64 {
    request
        .arguments
        .as_ref()
        .and_then(|a| a.get(key))
        .and_then(Value::as_u64)
        .unwrap_or(default)
}

/// The resumable `steps` tool: `n` steps of `ms` each; before each, a
/// checkpoint of the steps done with the message "step K of N"; after
/// each, the event "step K" (what the test counts: a step that ran twice
/// shows twice). A resumed run continues after its last checkpoint.
fn steps(
    events: Arc<Mutex<Vec<String>>>,
    n: u64,
    ms: u64,
) -> impl FnOnce(
    TaskContext,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<CallToolResult, ErrorData>> + Send>,
> {
    move |ctx| {
        Box::pin(async move {
            let from = ctx.resumed::<u64>()?.unwrap_or(0);
            for done in from..n {
                ctx.checkpoint_with_message(&done, format!("step {} of {n}", done + 1))
                    .await?;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                events.lock().unwrap().push(format!("step {}", done + 1));
            }
            Ok(text(format!("did {n} steps")))
        })
    }
}

fn ms_arg(request: &CallToolRequestParams) -> u64 {
    request
        .arguments
        .as_ref()
        .and_then(|a| a.get("ms"))
        .and_then(Value::as_u64)
        .unwrap_or(50)
}

impl ServerHandler for RuntimeServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build();
        ServerConfig::new(if self.declares_idempotency {
            self.runtime.declare_idempotency(capabilities)
        } else {
            capabilities
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(JsonObject::from_iter([(
            "type".to_owned(),
            json!("object"),
        )]));
        let tools = POLICIES
            .iter()
            .map(|(name, _)| Tool::new(*name, "a test tool", schema.clone()))
            .collect();
        // The task tools too, to a caller without tasks, when they are on.
        Ok(ListToolsResult::with_all_items(
            self.runtime.list_tools_for(tools, &context),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A server that routes by name itself asks for the task tools first.
        if let Some(answered) = self.runtime.call_task_tool(&request, &context).await {
            return answered.map(CallToolResponse::from);
        }
        let ms = ms_arg(&request);
        let rt = &self.runtime;
        match request.name.as_ref() {
            "slow" => {
                let tasks = ToolTasks::optional().with_selector(|request| {
                    let sync = request.arguments.as_ref().and_then(|a| a.get("sync"));
                    if sync == Some(&json!(true)) {
                        TaskPolicy::Forbidden
                    } else {
                        TaskPolicy::Optional
                    }
                });
                let tasks = with_ttl_args(&request, tasks);
                rt.call_tool(
                    &request,
                    &context,
                    &tasks,
                    move |ctx: TaskContext| async move {
                        ctx.set_status_message("halfway").await?;
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok(text(format!("slept {ms} ms")))
                    },
                )
                .await
            }
            "gated" => {
                // "step 1", a gate, "step 2", a gate, done.
                let (gate, events) = (self.gate.clone(), self.events.clone());
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    move |ctx| async move {
                        events.lock().unwrap().push("gated started".into());
                        ctx.set_status_message("step 1").await?;
                        gate.acquire().await.map(|permit| permit.forget()).ok();
                        ctx.set_status_message("step 2").await?;
                        gate.acquire().await.map(|permit| permit.forget()).ok();
                        Ok(text("gated done"))
                    },
                )
                .await
            }
            "required_job" => {
                rt.call_tool(&request, &context, &ToolTasks::required(), |_| async {
                    Ok(text("required done"))
                })
                .await
            }
            "pay" => {
                // A synchronous tool with a side effect: each run is counted
                // (at its start), then it takes `ms`.
                let events = self.events.clone();
                let amount = u64_arg(&request, "amount", 1);
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::forbidden(),
                    move |_| async move {
                        events.lock().unwrap().push("pay ran".to_owned());
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Ok(text(format!("paid {amount}")))
                    },
                )
                .await
            }
            "forbidden_tool" => {
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::forbidden(),
                    |ctx| async move { Ok(text(format!("is task: {}", ctx.is_task()))) },
                )
                .await
            }
            "ask" => {
                let after = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("after_ms"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                rt.call_tool(
                    &request,
                    &context,
                    &with_ttl_args(&request, ToolTasks::required()),
                    move |ctx| async move {
                        tokio::time::sleep(Duration::from_millis(after)).await;
                        let name = ctx.request_input("name", form("Name?", "name")).await?;
                        Ok(text(format!("Hello, {}!", answer(&name, "name"))))
                    },
                )
                .await
            }
            "ask_maybe" => {
                // Optional: asks as a task, and synchronously too.
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::optional(),
                    |ctx| async move {
                        let name = ctx.request_input("name", form("Name?", "name")).await?;
                        Ok(text(format!("Hello, {}!", answer(&name, "name"))))
                    },
                )
                .await
            }
            "ask_everything" => {
                // One input request of each kind: a form, sampling, roots.
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    |ctx| async move {
                        let sampling = serde_json::from_value(json!({
                            "method": "sampling/createMessage",
                            "params": {"messages": [{"role": "user",
                                "content": {"type": "text", "text": "2+2?"}}],
                                "maxTokens": 10}}))
                        .expect("a sampling request");
                        let roots = serde_json::from_value(json!({"method": "roots/list"}))
                            .expect("a roots request");
                        let answers = ctx
                            .request_inputs(
                                [
                                    ("form".to_owned(), form("Name?", "name")),
                                    ("sampling".to_owned(), sampling),
                                    ("roots".to_owned(), roots),
                                ]
                                .into(),
                            )
                            .await?;
                        Ok(text(format!(
                            "{} / {} / {}",
                            answer(&answers["form"], "name"),
                            answers["sampling"]["content"]["text"]
                                .as_str()
                                .unwrap_or("?"),
                            answers["roots"]["roots"][0]["uri"].as_str().unwrap_or("?")
                        )))
                    },
                )
                .await
            }
            "ask_two" => {
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    |ctx| async move {
                        let answers = ctx
                            .request_inputs(
                                [
                                    ("first".to_owned(), form("First?", "v")),
                                    ("second".to_owned(), form("Second?", "v")),
                                ]
                                .into(),
                            )
                            .await?;
                        Ok(text(format!(
                            "{} {}",
                            answer(&answers["first"], "v"),
                            answer(&answers["second"], "v")
                        )))
                    },
                )
                .await
            }
            "is_error" => {
                rt.call_tool(&request, &context, &ToolTasks::required(), |_| async {
                    Ok(CallToolResult::error(vec![ContentBlock::text(
                        "tool said no",
                    )]))
                })
                .await
            }
            "rpc_error" => {
                rt.call_tool(&request, &context, &ToolTasks::required(), |_| async {
                    Err(ErrorData::invalid_params(
                        "bad input",
                        Some(json!({"field": "x"})),
                    ))
                })
                .await
            }
            "panics" => {
                rt.call_tool(&request, &context, &ToolTasks::required(), |_| async {
                    panic!("tool bug");
                })
                .await
            }
            "counts" => {
                // `n` steps of `ms`, reported with `progress` before each
                // (1 of n, ..., n of n); `sync: true` runs it without a task.
                let n = u64_arg(&request, "n", 3);
                let sync =
                    request.arguments.as_ref().and_then(|a| a.get("sync")) == Some(&json!(true));
                let tasks = match sync {
                    true => ToolTasks::forbidden(),
                    false => ToolTasks::optional(),
                };
                rt.call_tool(&request, &context, &tasks, move |ctx| async move {
                    for done in 1..=n {
                        ctx.progress(done, n).await?;
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    Ok(text(format!("counted {n}")))
                })
                .await
            }
            "forever" => {
                let tasks = with_ttl_args(&request, ToolTasks::required());
                let heartbeat = request
                    .arguments
                    .as_ref()
                    .is_some_and(|a| a.get("heartbeat") == Some(&json!(true)));
                rt.call_tool(&request, &context, &tasks, move |ctx| async move {
                    loop {
                        if heartbeat {
                            ctx.extend_ttl(Duration::from_millis(1000)).await?;
                        }
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                })
                .await
            }
            "spawns_work" => {
                // Work the tool spawned outside its own future: it must learn of
                // a cancel through the token.
                let events = self.events.clone();
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    move |ctx| async move {
                        let token = ctx.cancellation_token();
                        tokio::spawn(async move {
                            token.cancelled().await;
                            events.lock().unwrap().push("token fired".to_owned());
                        });
                        std::future::pending::<()>().await;
                        Ok(text("never"))
                    },
                )
                .await
            }
            "steps" => {
                let tasks = ToolTasks::required().with_resumable(true);
                let n = u64_arg(&request, "n", 5);
                rt.call_tool(
                    &request,
                    &context,
                    &tasks,
                    steps(self.events.clone(), n, ms),
                )
                .await
            }
            // Not listed: a handler that works `ms` before its task
            // exists, whose tool then says it ran; and a handler that panics.
            "slow_start" => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let events = self.events.clone();
                rt.call_tool(
                    &request,
                    &context,
                    &ToolTasks::required(),
                    move |_| async move {
                        events.lock().unwrap().push("slow_start ran".to_owned());
                        Ok(text("started late"))
                    },
                )
                .await
            }
            "handler_panics" => panic!("handler bug"),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// Serves `server` over Streamable HTTP on 127.0.0.1 with the library's
/// serving recipe; returns the URL.
pub async fn serve_http(server: RuntimeServer) -> String {
    serve_http_with(server, |recipe| recipe).await
}

/// [`serve_http`] with the recipe's settings changed by `configure`.
pub async fn serve_http_with(
    server: RuntimeServer,
    configure: impl FnOnce(StreamableHttpServer<RuntimeServer>) -> StreamableHttpServer<RuntimeServer>,
) -> String {
    let runtime = server.runtime.clone();
    let recipe = configure(StreamableHttpServer::new(server, runtime));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let address = listener.local_addr().expect("local address");
    recipe
        .check_reserve()
        .expect("the listen budget leaves a reserve of connections");
    tokio::spawn(recipe.serve(listener));
    format!("http://{address}/mcp")
}

/// Serves any `handler` whose tasks live in `runtime` (a gateway, a
/// fixture) with the library's serving recipe on a fresh loopback port, in
/// the background: its endpoint's URL.
pub async fn serve_recipe<S>(handler: S, runtime: TaskRuntime) -> String
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
    tokio::spawn(StreamableHttpServer::new(handler, runtime).serve(listener));
    url
}
