//! The result budget and the client's bound on an answer, over Streamable
//! HTTP on 127.0.0.1 with the serving recipe and a client made by
//! `TasksClient::connect`: a task whose result is past the runtime's
//! budget fails naming both sizes with nothing of the result stored (at
//! once or later, and the same for a tool's error), a synchronous call past
//! it gets the error, input answers past it are refused; a client whose
//! bound an answer passes gets `Error::AnswerTooLarge` and goes on.

use std::time::Duration;

use mcp_tasks::client::{ConnectOptions, Endpoint};
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskRuntime, ToolTasks};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, Error, TaskOutcome, TasksClient};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use crate::support::{Handler, args};

/// A server of one tool, `sized`: `{bytes, task, later, ms, error, ask}`
/// answers a text of `bytes` bytes (an error whose `data` holds that many
/// with `error`), as a task when `task`, after a pause of `ms` (default
/// 20) when `later`, after asking for input when `ask`.
#[derive(Clone)]
struct Sized {
    runtime: TaskRuntime,
}

impl ServerHandler for Sized {
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
        let arguments = request.arguments.clone().unwrap_or_default();
        let flag = |key: &str| arguments.get(key) == Some(&json!(true));
        let bytes = arguments.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize;
        let (later, error, ask) = (flag("later"), flag("error"), flag("ask"));
        let pause = arguments.get("ms").and_then(Value::as_u64).unwrap_or(20);
        let tasks = if flag("task") {
            ToolTasks::required()
        } else {
            ToolTasks::forbidden()
        };
        self.runtime
            .call_tool(&request, &context, &tasks, move |task| async move {
                if later {
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                if ask {
                    let form = serde_json::from_value(json!({"method": "elicitation/create",
                        "params": {"mode": "form", "message": "Name?", "requestedSchema":
                        {"type": "object", "properties": {"name": {"type": "string"}}}}}))
                    .expect("a form");
                    let answer = task.request_input("name", form).await?;
                    let name = answer["content"]["name"].as_str().unwrap_or("").len();
                    return Ok(text(&format!("a name of {name} bytes")));
                }
                if error {
                    let data = json!({"dump": "e".repeat(bytes)});
                    return Err(ErrorData::internal_error("the tool failed", Some(data)));
                }
                Ok(text(&"x".repeat(bytes)))
            })
            .await
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

fn text(text: &str) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// The server on a memory store with result budget `budget`, over HTTP;
/// its runtime and URL.
async fn serve(budget: Option<usize>) -> (TaskRuntime, String) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(20))
        .with_max_result_bytes(budget)
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = Sized {
        runtime: runtime.clone(),
    };
    tokio::spawn(StreamableHttpServer::new(server, runtime.clone()).serve(listener));
    (runtime, url)
}

/// A client of `url` that reads answers of at most `bound` bytes.
async fn client(url: &str, bound: usize) -> TasksClient<mcp_tasks::client::legacy::Handler> {
    let options = ConnectOptions::default().with_max_answer_bytes(bound);
    TasksClient::connect(Endpoint::url(url), Handler::default(), options)
        .await
        .expect("connect")
}

/// `sized` called with `arguments` and awaited, within 10 s.
async fn sized(
    client: &TasksClient<mcp_tasks::client::legacy::Handler>,
    arguments: Value,
) -> Result<TaskOutcome, Error> {
    client
        .call_and_await(
            "sized",
            args(arguments),
            CallOptions::default(),
            &within(10),
        )
        .await
}

fn within(seconds: u64) -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(Duration::from_secs(seconds)))
}

/// How many bytes the result `text(x * bytes)` takes as JSON.
fn result_bytes(bytes: usize) -> usize {
    serde_json::to_vec(&text(&"x".repeat(bytes))).unwrap().len()
}

/// Comma-grouped, as the messages write sizes.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[tokio::test]
async fn a_task_whose_result_is_past_the_budget_fails_naming_both_sizes() {
    let budget = 64 * 1024;
    let (runtime, url) = serve(Some(budget)).await;
    let client = client(&url, 1 << 20).await;
    // At the first step (stored finished in one write) and later (supervised).
    for later in [false, true] {
        let arguments = json!({"bytes": 100_000, "task": true, "later": later});
        let outcome = sized(&client, arguments).await;
        let Ok(TaskOutcome::Failed(failure)) = outcome else {
            panic!("failed: {outcome:?}");
        };
        assert_eq!(
            failure.error.message,
            format!(
                "the tool's result is {} bytes, past this server's limit of {} bytes \
                 (max-result-bytes)",
                grouped(result_bytes(100_000)),
                grouped(budget)
            ),
            "later: {later}"
        );
        let data = failure.error.data.clone().expect("data");
        assert_eq!(data["maxResultBytes"], budget);
        assert_eq!(data["resultBytes"], result_bytes(100_000));
        // Nothing of the result in the store: the record holds the error only.
        let record = runtime
            .store()
            .get(&failure.state.id)
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(record.result(), None);
        let stored = serde_json::to_vec(&record.error()).unwrap().len();
        assert!(stored < 1000, "{stored} bytes of error");
    }
    // Within the budget: the result whole.
    let arguments = json!({"bytes": 60_000, "task": true});
    let outcome = sized(&client, arguments).await.unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("completed: {outcome:?}");
    };
    assert_eq!(result.content[0].as_text().unwrap().text.len(), 60_000);
    // A tool's error is held to the budget too.
    let arguments = json!({"bytes": 100_000, "task": true, "error": true});
    let outcome = sized(&client, arguments).await;
    let Ok(TaskOutcome::Failed(failure)) = outcome else {
        panic!("failed: {outcome:?}");
    };
    assert!(
        failure
            .error
            .message
            .starts_with("the tool's error is 100,"),
        "{}",
        failure.error.message
    );
}

#[tokio::test]
async fn a_synchronous_result_past_the_budget_is_answered_with_the_error() {
    let (runtime, url) = serve(Some(10_000)).await;
    let client = client(&url, 1 << 20).await;
    let answer = client
        .call_tool(
            "sized",
            args(json!({"bytes": 20_000})),
            CallOptions::default(),
        )
        .await;
    let Err(Error::Rpc { error, .. }) = answer else {
        panic!("refused: {answer:?}");
    };
    assert_eq!(
        error.message,
        format!(
            "the tool's result is {} bytes, past this server's limit of 10,000 bytes \
             (max-result-bytes)",
            grouped(result_bytes(20_000))
        )
    );
    // The call, kept under its idempotency key, keeps the error only.
    let kept = runtime.store().list_all(None, 100).await.unwrap();
    assert_eq!(kept.len(), 1, "the call's record");
    assert_eq!(kept[0].result(), None);
    let stored = serde_json::to_vec(&kept[0].error()).unwrap().len();
    assert!(stored < 1000, "{stored} bytes of error");
    let answer = client
        .call_tool(
            "sized",
            args(json!({"bytes": 9_000})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(matches!(answer, CallResponse::Complete(_)), "{answer:?}");
}

#[tokio::test]
async fn input_answers_past_the_budget_are_refused_and_nothing_is_recorded() {
    let (_, url) = serve(Some(10_000)).await;
    let client = client(&url, 1 << 20).await;
    let arguments = json!({"task": true, "ask": true});
    let state = match client
        .call_tool("sized", args(arguments), CallOptions::default())
        .await
        .unwrap()
    {
        CallResponse::Task(state) => state,
        other => panic!("a task: {other:?}"),
    };
    let mut asked = client.get(&state.id).await.unwrap();
    for _ in 0..100 {
        if asked.status == mcp_tasks::TaskStatus::InputRequired {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        asked = client.get(&state.id).await.unwrap();
    }
    assert_eq!(asked.status, mcp_tasks::TaskStatus::InputRequired);
    let big = json!({"action": "accept", "content": {"name": "n".repeat(20_000)}});
    let refused = client
        .update(&state.id, [("name".to_owned(), big)].into())
        .await
        .unwrap_err();
    let rpc = refused.rpc_error().expect("the server's error");
    assert_eq!(rpc.code, -32602);
    assert!(
        rpc.message.starts_with("the input responses are 20,")
            && rpc.message.ends_with(
                "past this server's limit of 10,000 bytes (max-result-bytes); nothing was recorded"
            ),
        "{}",
        rpc.message
    );
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        mcp_tasks::TaskStatus::InputRequired,
        "still waiting for its answer"
    );
    let small = json!({"action": "accept", "content": {"name": "Ada"}});
    client
        .update(&state.id, [("name".to_owned(), small)].into())
        .await
        .unwrap();
    let outcome = client
        .await_task(state.id.clone(), &within(10))
        .await
        .unwrap();
    assert_eq!(
        crate::support::completed_text(&outcome),
        "a name of 3 bytes"
    );
}

#[tokio::test]
async fn the_client_refuses_an_answer_past_its_bound_and_goes_on() {
    // No budget on the server: only the client's bound stands.
    let (_, url) = serve(None).await;
    let bound = 64 * 1024;
    let client = client(&url, bound).await;
    // A task's result, read by tasks/get (and heard on the listen stream).
    let arguments = json!({"bytes": 200_000, "task": true, "later": true});
    let outcome = sized(&client, arguments).await;
    let error = outcome.expect_err("past the bound");
    assert!(error.is_answer_too_large(), "{error:?}");
    assert_eq!(error.answer_bound(), Some(bound as u64));
    assert_eq!(error.kind(), mcp_tasks::ErrorKind::TooLarge);
    assert!(
        error
            .to_string()
            .contains("past this client's limit of 65,536 bytes"),
        "{error}"
    );
    // A synchronous result: the tools/call answer itself.
    let answer = client
        .call_tool(
            "sized",
            args(json!({"bytes": 200_000})),
            CallOptions::default(),
        )
        .await;
    assert!(
        answer.as_ref().is_err_and(Error::is_answer_too_large),
        "{answer:?}"
    );
    // The connection goes on: a result within the bound arrives whole.
    let arguments = json!({"bytes": 50_000, "task": true, "later": true});
    let outcome = sized(&client, arguments).await.unwrap();
    assert_eq!(crate::support::completed_text(&outcome).len(), 50_000);
}

/// A client of `runtime`'s `Sized` server over an in-process
/// newline-delimited pipe (the stdio framing), listening.
async fn stdio_client(runtime: TaskRuntime) -> TasksClient<Handler> {
    use mcp_tasks::client::ListenChannel;
    use mcp_tasks::server::listen::ListenReader;
    use rmcp::ServiceExt as _;
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = Sized { runtime };
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_io);
        if let Ok(running) = server.serve((ListenReader::new(read), write)).await {
            let _ = running.waiting().await;
        }
    });
    let (read, write) = tokio::io::split(client_io);
    let (channel, read) = ListenChannel::stdio(read);
    let running = rmcp::service::serve_client_with_lifecycle(
        Handler::default(),
        (read, write),
        crate::support::lifecycle(),
    )
    .await
    .expect("connect in process");
    TasksClient::new(running).with_listen(channel)
}

#[tokio::test]
async fn a_result_within_the_budget_but_past_the_listen_filters_line_arrives_at_once() {
    // 5 MB: within the budget, past what the stdio listen filter reads of
    // a line (4 MiB): its notification passes by unread, and the wait
    // learns of the end from the stream's end (a small line), then reads
    // the result with tasks/get, long before the 30 s poll interval.
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_secs(30))
        .build();
    let client = stdio_client(runtime).await;
    let arguments = json!({"bytes": 5_000_000, "task": true, "later": true, "ms": 500});
    let started = std::time::Instant::now();
    let outcome = client
        .call_and_await(
            "sized",
            args(arguments),
            CallOptions::default(),
            &within(20),
        )
        .await
        .unwrap();
    assert_eq!(crate::support::completed_text(&outcome).len(), 5_000_000);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "heard, not polled at 30 s nor cut at the deadline: {:?}",
        started.elapsed()
    );
}
