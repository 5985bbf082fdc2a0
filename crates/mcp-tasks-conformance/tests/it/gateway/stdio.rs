//! The task gateway (`mcp_tasks::gateway`) in front of a real child
//! process: the `plain-upstream` binary, a task-less 2025-11-25 server over
//! stdio. The gateway is served over Streamable HTTP on 127.0.0.1 and
//! called by our client, declaring the extension or not.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskPolicy, TaskRuntime};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    CallOptions, CallResponse, InputMode, ListenChannel, ListenMode, TaskOutcome, TaskState,
    TaskStatus, TasksClient,
};
use mcp_tasks_conformance::plain::FAIL_CODE;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, InputResponses, ProtocolVersion, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::{args, completed_text, first_lines, fixture_log, text, waiting};

const UPSTREAM: &str = env!("CARGO_BIN_EXE_plain-upstream");

/// A gateway in front of a fresh `plain-upstream`, served over HTTP, and a
/// client of it.
async fn gateway(options: GatewayOptions) -> (Gateway, TasksClient<()>) {
    let options = options.with_restart_backoff(Duration::from_millis(50), Duration::from_secs(1));
    gateway_of(UPSTREAM, options).await
}

/// A gateway in front of `command` (a `plain-upstream` command line, with
/// flags), with `options` as they are.
async fn gateway_of(
    command: impl Into<String>,
    options: GatewayOptions,
) -> (Gateway, TasksClient<()>) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let gateway = Gateway::start(Upstream::command(command), runtime.clone(), options)
        .await
        .expect("the gateway starts in front of plain-upstream");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let recipe = StreamableHttpServer::new(gateway.clone(), runtime);
    tokio::spawn(recipe.serve_with_shutdown(listener, std::future::pending()));
    // A client that can listen, so that a wait hears every status change.
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let http = reqwest::Client::new();
    let channel = ListenChannel::http(http.clone(), &config);
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let running = serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .expect("connect to the gateway");
    (gateway, TasksClient::new(running).with_listen(channel))
}

/// Calls `tool` declaring the extension and expects a task.
async fn task(client: &TasksClient<()>, tool: &str, arguments: Value) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("expected a task for {tool}, got {other:?}"),
    }
}

/// Calls `tool` without declaring the extension and expects a result.
async fn synchronous(client: &TasksClient<()>, tool: &str, arguments: Value) -> CallToolResult {
    match client
        .call_tool(
            tool,
            args(arguments),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .expect("tools/call")
    {
        CallResponse::Complete(result) => result,
        other => panic!("expected a result for {tool}, got {other:?}"),
    }
}

fn completed(outcome: TaskOutcome) -> CallToolResult {
    match outcome {
        TaskOutcome::Completed(result) => result,
        other => panic!("expected completed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_plain_tool_becomes_a_task_whose_status_follows_progress() {
    let (gateway, client) = gateway(GatewayOptions::default()).await;
    assert!(client.server_supports());
    let names: Vec<String> = gateway
        .tools()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert!(names.contains(&"progress".to_owned()), "{names:?}");
    let state = task(&client, "progress", json!({"steps": 4, "ms": 250})).await;
    assert_eq!(state.status, TaskStatus::Working);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let options = waiting()
        .with_listen(ListenMode::Required)
        .with_observer(move |state| {
            if let Some(message) = &state.status_message {
                let mut log = log.lock().unwrap();
                if log.last() != Some(message) {
                    log.push(message.clone());
                }
            }
        });
    let result = completed(client.await_task(state, &options).await.unwrap());
    assert_eq!(text(&result), "done: 4 steps");
    let seen = seen.lock().unwrap().clone();
    // Heard on the listen stream: each step is seen, in order.
    for step in ["1/4", "2/4", "3/4"] {
        assert!(
            seen.iter().any(|message| message == step),
            "{step} not in {seen:?}"
        );
    }
    let positions: Vec<usize> = ["1/4", "2/4", "3/4"]
        .iter()
        .filter_map(|step| seen.iter().position(|message| message == step))
        .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_log_message_is_not_the_status_message() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    // Another call in flight: the log message goes to neither task.
    let hanging = task(&client, "hang", json!({})).await;
    let state = task(&client, "log", json!({"text": "warming up"})).await;
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let options = waiting().with_observer(move |state| {
        if let Some(message) = &state.status_message {
            log.lock().unwrap().push(message.clone());
        }
    });
    assert_eq!(
        text(&completed(
            client.await_task(state, &options).await.unwrap()
        )),
        "logged"
    );
    // A log line is not progress: the task's status message never read
    // `info: warming up` (the upstream sent no progress, so none at all).
    let seen = seen.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|message| message.contains("warming up")),
        "{seen:?}"
    );
    let hung = client.get(&hanging.id).await.unwrap();
    assert_eq!(hung.status_message, None, "{hung:?}");
    client.cancel(&hanging.id).await.unwrap();
}

#[tokio::test]
async fn synchronous_calls_pass_straight_through() {
    let options = GatewayOptions::default().with_tool_policy("echo", TaskPolicy::Forbidden);
    let (gateway, client) = gateway(options).await;
    assert_eq!(gateway.policy("echo"), TaskPolicy::Forbidden);
    // Forbidden: no task, even for a caller that declared the extension.
    let response = client
        .call_tool("echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(completed_text(response), "hi");
    // Optional, and the caller did not declare the extension: no task.
    let result = synchronous(&client, "progress", json!({"steps": 1, "ms": 10})).await;
    assert_eq!(text(&result), "done: 1 steps");
    let result = synchronous(&client, "error_result", json!({})).await;
    assert_eq!(result.is_error, Some(true));
    let error = client
        .call_tool("fail", (), CallOptions::default().with_declare_tasks(false))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(FAIL_CODE));
}

#[tokio::test]
async fn the_upstreams_outcomes_become_the_tasks() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let state = task(&client, "error_result", json!({})).await;
    let result = completed(client.await_task(state, &waiting()).await.unwrap());
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), "the tool reports an error");

    let state = task(&client, "fail", json!({})).await;
    match client.await_task(state, &waiting()).await.unwrap() {
        TaskOutcome::Failed(failure) => {
            assert_eq!(failure.error.code, FAIL_CODE);
            assert_eq!(failure.error.message, "the fixture tool failed");
        }
        other => panic!("expected failed, got {other:?}"),
    }
}

#[tokio::test]
async fn an_upstream_mark_of_required_is_kept_unless_overridden() {
    let (first, client) = gateway(GatewayOptions::default()).await;
    assert_eq!(first.policy("needs_task"), TaskPolicy::Required);
    // plain-upstream marks every plain tool `forbidden`, as the TypeScript
    // SDK v1 does: that is its default, not a mark of the tool.
    assert_eq!(first.policy("echo"), TaskPolicy::Optional);
    let error = client
        .call_tool(
            "needs_task",
            (),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .unwrap_err();
    assert!(error.requires_tasks_extension(), "{error}");
    let state = task(&client, "needs_task", json!({})).await;
    assert_eq!(
        text(&completed(
            client.await_task(state, &waiting()).await.unwrap()
        )),
        "ran"
    );

    let options = GatewayOptions::default().with_tool_policy("needs_task", TaskPolicy::Optional);
    let (_gateway, client) = gateway(options).await;
    assert_eq!(
        text(&synchronous(&client, "needs_task", json!({})).await),
        "ran"
    );
}

#[tokio::test]
async fn a_forbidden_mark_is_kept_from_an_upstream_that_leaves_tools_unmarked() {
    // Only echo is marked forbidden; the other plain tools carry no mark.
    let command = format!("{UPSTREAM} --mark-forbidden echo");
    let (first, client) = gateway_of(&command, GatewayOptions::default()).await;
    assert_eq!(first.policy("echo"), TaskPolicy::Forbidden);
    assert_eq!(first.policy("progress"), TaskPolicy::Optional);
    assert_eq!(first.policy("needs_task"), TaskPolicy::Required);
    // A caller that declared the extension still gets echo synchronously...
    let response = client
        .call_tool("echo", args(json!({"text": "hi"})), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(completed_text(response), "hi");
    // ...and an unmarked tool as a task.
    let state = task(&client, "progress", json!({"steps": 1, "ms": 10})).await;
    assert_eq!(
        text(&completed(
            client.await_task(state, &waiting()).await.unwrap()
        )),
        "done: 1 steps"
    );

    // Told otherwise, the gateway's policy wins.
    let options = GatewayOptions::default().with_tool_policy("echo", TaskPolicy::Optional);
    let (_gateway, client) = gateway_of(&command, options).await;
    let state = task(&client, "echo", json!({"text": "as a task"})).await;
    assert_eq!(
        text(&completed(
            client.await_task(state, &waiting()).await.unwrap()
        )),
        "as a task"
    );
}

#[tokio::test]
async fn an_elicitation_becomes_input_required_answered_with_tasks_update() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let state = task(&client, "ask", json!({})).await;
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    let requests = asking.input_requests.clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.iter().next().unwrap();
    let request = serde_json::to_value(request).unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "What is your name?");
    assert_eq!(
        request["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let mut answer = InputResponses::new();
    answer.insert(
        key.clone(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    client.update(&asking.id, answer).await.unwrap();
    let result = completed(client.await_task(&asking.id, &waiting()).await.unwrap());
    assert_eq!(text(&result), "hello Ada");
}

#[tokio::test]
async fn a_url_elicitation_is_relayed_too() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let state = task(&client, "ask_url", json!({})).await;
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    let (key, request) = asking.input_requests.iter().next().expect("a request");
    assert_eq!(request["params"]["mode"], "url");
    assert_eq!(request["params"]["url"], "https://auth.example.com/sign-in");
    let mut answer = InputResponses::new();
    answer.insert(key.clone(), json!({"action": "accept"}));
    client.update(&asking.id, answer).await.unwrap();
    let result = completed(client.await_task(&asking.id, &waiting()).await.unwrap());
    assert_eq!(text(&result), "url: accept");
}

#[tokio::test]
async fn a_sampling_request_is_relayed_too() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let state = task(&client, "sample", json!({})).await;
    let options = waiting().with_input(InputMode::resolver(|requests| async move {
        let mut answers = InputResponses::new();
        for (key, request) in requests {
            assert_eq!(request["method"], "sampling/createMessage");
            answers.insert(
                key,
                json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
            );
        }
        Ok(answers)
    }));
    let result = completed(client.await_task(state, &options).await.unwrap());
    assert_eq!(text(&result), "the model said: hi");
}

/// Waits for the task to ask for input and returns the one request's key
/// and the task.
async fn asked(client: &TasksClient<()>, state: TaskState) -> (String, TaskState) {
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
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
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "What is your name?");
    (key.clone(), asking)
}

fn named(key: &str, name: &str) -> InputResponses {
    let mut answer = InputResponses::new();
    answer.insert(
        key.to_owned(),
        json!({"action": "accept", "content": {"name": name}}),
    );
    answer
}

#[tokio::test]
async fn a_roots_request_during_a_call_is_relayed_as_input_required() {
    // No start-up window: plain-upstream asks for roots only in its call.
    let options = GatewayOptions::default().with_startup_window(Duration::ZERO);
    let (_gateway, client) = gateway(options).await;
    let state = task(&client, "roots", json!({})).await;
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
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
    let request = serde_json::to_value(request).unwrap();
    assert_eq!(request["method"], "roots/list", "{request}");
    let mut answer = InputResponses::new();
    answer.insert(
        key.clone(),
        json!({"roots": [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]}),
    );
    client.update(&asking.id, answer).await.unwrap();
    let result = completed(client.await_task(&asking.id, &waiting()).await.unwrap());
    assert_eq!(text(&result), "roots: file:///work (work), file:///tmp");
}

#[tokio::test]
async fn an_upstream_asking_roots_at_start_up_does_not_break_the_first_call() {
    // As server-everything does: roots/list 350 ms after initialized, while
    // the first call (1 s of progress) is in flight.
    let command = format!("{UPSTREAM} --roots-at-start 350");
    let (_gateway, client) = gateway_of(&command, GatewayOptions::default()).await;
    let state = task(&client, "progress", json!({"steps": 4, "ms": 250})).await;
    let outcome = client.await_task(state, &waiting()).await.unwrap();
    assert_eq!(text(&completed(outcome)), "done: 4 steps");
    // The gateway answered the start-up ask itself: no roots.
    let mut said = String::new();
    for _ in 0..50 {
        said = text(&synchronous(&client, "startup_roots", json!({})).await);
        if said != "not asked" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(said, "no roots");
    // Past the window, a roots request during a call is relayed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let state = task(&client, "roots", json!({})).await;
    let TaskOutcome::InputRequired { state: asking, .. } =
        client.await_task(state, &waiting()).await.unwrap()
    else {
        panic!("expected input_required");
    };
    let (key, _) = asking.input_requests.iter().next().unwrap();
    let mut answer = InputResponses::new();
    answer.insert(key.clone(), json!({"roots": []}));
    client.update(&asking.id, answer).await.unwrap();
    let result = completed(client.await_task(&asking.id, &waiting()).await.unwrap());
    assert_eq!(text(&result), "no roots");
}

#[tokio::test]
async fn concurrent_elicitations_each_reach_their_own_call() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let hanging = task(&client, "hang", json!({})).await;
    let calls = futures::future::join_all((0..3).map(|_| task(&client, "ask", json!({})))).await;
    let mut asking = Vec::new();
    for state in calls {
        asking.push(asked(&client, state).await);
    }
    // Answered separately, in another order than asked: each result
    // carries its own answer.
    let names = ["Ada", "Grace", "Edsger"];
    for ((key, state), name) in asking.iter().zip(names).rev() {
        client.update(&state.id, named(key, name)).await.unwrap();
    }
    for ((_, state), name) in asking.iter().zip(names) {
        let result = completed(client.await_task(&state.id, &waiting()).await.unwrap());
        assert_eq!(text(&result), format!("hello {name}"));
    }
    assert_eq!(
        client.get(&hanging.id).await.unwrap().status,
        TaskStatus::Working
    );
    client.cancel(&hanging.id).await.unwrap();
}

#[tokio::test]
async fn a_bound_of_one_makes_the_next_call_wait_then_run() {
    let options = GatewayOptions::default().with_max_upstream_connections(1);
    let (_gateway, client) = gateway(options).await;
    let first = task(&client, "progress", json!({"steps": 4, "ms": 250})).await;
    let second = task(&client, "echo", json!({"text": "second"})).await;
    assert_eq!(second.status, TaskStatus::Working);
    let mut message = None;
    for _ in 0..40 {
        message = client.get(&second.id).await.unwrap().status_message;
        if message.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let message = message.expect("the waiting task says so");
    assert!(message.contains("waiting for a connection"), "{message}");
    assert!(message.contains("all 1 are busy"), "{message}");
    let result = completed(client.await_task(&second.id, &waiting()).await.unwrap());
    assert_eq!(text(&result), "second");
    // It ran only once the first call had given its connection back.
    let first = client.get(&first.id).await.unwrap();
    assert_eq!(first.status, TaskStatus::Completed);
    // A synchronous call waits its turn the same way.
    let hanging = task(&client, "hang", json!({})).await;
    let waited = tokio::time::timeout(
        Duration::from_millis(300),
        synchronous(&client, "echo", json!({"text": "later"})),
    )
    .await;
    assert!(waited.is_err(), "the synchronous call ran past the bound");
    client.cancel(&hanging.id).await.unwrap();
    assert_eq!(
        text(&synchronous(&client, "echo", json!({"text": "later"})).await),
        "later"
    );
}

#[tokio::test]
async fn a_pooled_child_that_dies_fails_only_its_call() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let state = task(&client, "ask", json!({})).await;
    let (key, asking) = asked(&client, state).await;
    // This call's child exits while the other waits for its answer.
    let crashing = task(&client, "crash", json!({"ms": 100})).await;
    match client.await_task(crashing, &waiting()).await.unwrap() {
        TaskOutcome::Failed(failure) => assert!(
            failure.error.message.contains("exited or crashed"),
            "{}",
            failure.error.message
        ),
        other => panic!("expected failed, got {other:?}"),
    }
    client.update(&asking.id, named(&key, "Ada")).await.unwrap();
    let result = completed(client.await_task(&asking.id, &waiting()).await.unwrap());
    assert_eq!(text(&result), "hello Ada");
    assert_eq!(
        text(&synchronous(&client, "echo", json!({"text": "still"})).await),
        "still"
    );
}

#[tokio::test]
async fn further_connections_left_idle_are_closed_and_the_gateways_own_stays() {
    let log = fixture_log("life", line!());
    let lines = |word: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.starts_with(word))
            .count()
    };
    let command = format!("{UPSTREAM} --life-log {}", log.display());
    let options =
        GatewayOptions::default().with_idle_connection_timeout(Duration::from_millis(300));
    let (_gateway, client) = gateway_of(command, options).await;
    // Two calls at once: the gateway's own connection and a further one.
    let first = task(&client, "progress", json!({"steps": 2, "ms": 100})).await;
    let second = task(&client, "progress", json!({"steps": 2, "ms": 100})).await;
    for state in [first, second] {
        completed(client.await_task(state, &waiting()).await.unwrap());
    }
    assert_eq!(lines("start"), 2);
    let mut exited = 0;
    for _ in 0..100 {
        exited = lines("exit");
        if exited > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(exited, 1, "the further child did not exit");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(lines("exit"), 1, "the gateway's own child exited too");
    // The next call runs on the gateway's own child: no new process.
    assert_eq!(
        text(&synchronous(&client, "echo", json!({"text": "still"})).await),
        "still"
    );
    assert_eq!(lines("start"), 2);
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn tasks_cancel_cancels_the_upstream_request() {
    let log = fixture_log("cancel", line!());
    let command = format!("{UPSTREAM} --cancel-log {}", log.display());
    // A long backoff: closing the cancelled call's connection is no
    // failure of the upstream, so nothing waits for it.
    let options = GatewayOptions::default()
        .with_restart_backoff(Duration::from_secs(3), Duration::from_secs(10));
    let (_gateway, client) = gateway_of(command, options).await;
    let state = task(&client, "hang", json!({})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let settled = client.cancel_and_wait(&state.id, &waiting()).await.unwrap();
    assert_eq!(settled.status(), TaskStatus::Cancelled);
    let heard = first_lines(&log).await;
    assert_eq!(
        heard.lines().count(),
        1,
        "the upstream heard no notifications/cancelled: {heard:?}"
    );
    // The cancelled call's connection is not used again (the upstream may
    // still ask on the cancelled call's behalf): the next call runs on
    // another child, which heard no cancellation.
    let started = std::time::Instant::now();
    let state = task(&client, "cancellations", json!({})).await;
    assert_eq!(
        text(&completed(
            client.await_task(state, &waiting()).await.unwrap()
        )),
        "0"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the next call waited {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_file(&log);
}

#[tokio::test]
async fn a_crashed_upstream_fails_its_task_and_the_gateway_keeps_serving() {
    let (_gateway, client) = gateway(GatewayOptions::default()).await;
    let state = task(&client, "crash", json!({"ms": 200})).await;
    match client.await_task(state, &waiting()).await.unwrap() {
        TaskOutcome::Failed(failure) => assert!(
            failure.error.message.contains("exited or crashed"),
            "{}",
            failure.error.message
        ),
        other => panic!("expected failed, got {other:?}"),
    }
    // The upstream is started again: the next calls work, as a task and not.
    let state = task(&client, "echo", json!({"text": "again"})).await;
    assert_eq!(
        text(&completed(
            client.await_task(state, &waiting()).await.unwrap()
        )),
        "again"
    );
    assert_eq!(
        text(&synchronous(&client, "echo", json!({"text": "plain"})).await),
        "plain"
    );
    // A synchronous call cut off by a crash gets an error that says so.
    let error = client
        .call_tool(
            "crash",
            args(json!({"ms": 100})),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("exited or crashed"), "{error}");
    assert_eq!(
        text(&synchronous(&client, "echo", json!({"text": "still"})).await),
        "still"
    );
}

fn names(tools: Vec<rmcp::model::Tool>) -> Vec<String> {
    tools
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect()
}

/// Waits (at most 10 s) for a `notifications/tools/list_changed` on `subscription`.
async fn heard_tools_changed(subscription: &mut rmcp::service::Subscription) {
    let next = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("notifications/tools/list_changed within 10 s")
        .expect("the stream is well formed");
    assert!(
        matches!(
            next,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{next:?}"
    );
}

#[tokio::test]
async fn the_tool_list_follows_the_upstreams_list_changed_and_clients_hear_it() {
    let (gateway, client) = gateway(GatewayOptions::default()).await;
    assert_eq!(
        client
            .running()
            .peer_info()
            .and_then(|info| info.capabilities.tools.clone())
            .and_then(|tools| tools.list_changed),
        Some(true),
        "the gateway declares tools.listChanged"
    );
    // A 2026-07-28 client hears it on a subscriptions/listen stream (HTTP).
    let mut subscription = client
        .running()
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("the gateway serves subscriptions/listen for tool list changes");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    assert!(!names(client.running().list_all_tools().await.unwrap()).contains(&"added".to_owned()));
    synchronous(&client, "add_tool", json!({})).await;
    heard_tools_changed(&mut subscription).await;
    // Sent after the list was read again: the new tool is there at once.
    let listed = names(client.running().list_all_tools().await.unwrap());
    assert!(listed.contains(&"added".to_owned()), "{listed:?}");
    assert!(names(gateway.tools()).contains(&"added".to_owned()));
    // A second add changes nothing upstream: no second notification.
    synchronous(&client, "add_tool", json!({})).await;
    let quiet = tokio::time::timeout(Duration::from_millis(500), subscription.next()).await;
    assert!(quiet.is_err(), "{quiet:?}");
}

#[tokio::test]
async fn a_graceful_shutdown_ends_the_tool_list_streams() {
    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let gateway = Gateway::start(
        Upstream::command(UPSTREAM),
        runtime.clone(),
        GatewayOptions::default(),
    )
    .await
    .expect("the gateway starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(
        StreamableHttpServer::new(gateway, runtime).serve_with_shutdown(listener, async {
            let _ = stopped.await;
        }),
    );
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = serve_client_with_lifecycle((), transport, lifecycle)
        .await
        .unwrap();
    let mut subscription = client
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    stop.send(()).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("the stream ends within 10 s");
    assert!(matches!(ended, Ok(None)), "{ended:?}");
    assert!(
        matches!(
            subscription.end(),
            Some(rmcp::service::SubscriptionEnd::Graceful(_))
        ),
        "{:?}",
        subscription.end()
    );
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("the server stops within 10 s")
        .unwrap()
        .unwrap();
}

/// A client handler that reports `notifications/tools/list_changed`.
#[derive(Clone)]
struct ToolsChanged(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for ToolsChanged {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(());
    }
}

#[tokio::test]
async fn clients_on_stdio_of_either_era_hear_tool_list_changes() {
    use rmcp::ServiceExt;
    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let gateway = Gateway::start(
        Upstream::command(UPSTREAM),
        runtime,
        GatewayOptions::default(),
    )
    .await
    .expect("the gateway starts");
    // Two newline-delimited stdio transports, in process.
    let (modern_server, modern_client) = tokio::io::duplex(1 << 16);
    let (legacy_server, legacy_client) = tokio::io::duplex(1 << 16);
    for io in [modern_server, legacy_server] {
        let gateway = gateway.clone();
        tokio::spawn(async move {
            if let Ok(serving) = gateway.serve(io).await {
                let _ = serving.waiting().await;
            }
        });
    }
    let modern = serve_client_with_lifecycle(
        (),
        modern_client,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("a 2026-07-28 client");
    let (heard, mut hearing) = tokio::sync::mpsc::unbounded_channel();
    let legacy = serve_client_with_lifecycle(
        ToolsChanged(heard),
        legacy_client,
        ClientLifecycleMode::Initialize,
    )
    .await
    .expect("an initialize-era client");
    let mut subscription = modern
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("listen on stdio");
    // The legacy client's initialized notification has reached the gateway
    // once it has answered a request after it.
    legacy.peer().list_all_tools().await.unwrap();
    modern
        .peer()
        .call_tool(CallToolRequestParams::new("add_tool"))
        .await
        .unwrap();
    heard_tools_changed(&mut subscription).await;
    tokio::time::timeout(Duration::from_secs(10), hearing.recv())
        .await
        .expect("the initialize-era client hears list_changed within 10 s")
        .expect("a notification");
    let listed = names(legacy.peer().list_all_tools().await.unwrap());
    assert!(listed.contains(&"added".to_owned()), "{listed:?}");
}

#[tokio::test]
async fn an_upstream_that_cannot_start_is_a_clear_error() {
    let runtime = TaskRuntime::builder(MemoryStore::new()).build();
    let error = Gateway::start(
        Upstream::command("true"),
        runtime,
        GatewayOptions::default().with_connect_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("did not complete the MCP handshake"),
        "{error}"
    );
}
