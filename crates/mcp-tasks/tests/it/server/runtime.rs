//! The server runtime: policy, creation, TaskContext, tasks/*, outcomes
//! and caller binding, in process and over real HTTP, with our own client
//! and with raw JSON-RPC checked against the official schemas. Expiry and
//! retention, which follow the clock, are in `expiry.rs`.

use std::time::Duration;

use mcp_tasks::{CallOptions, CallResponse, TaskOutcome, TaskStatus, TasksClient, Ttl};
use rmcp::ServiceExt;
use rmcp::service::serve_client_with_lifecycle;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::runtime_server::serve_http;
use crate::support::schema::{check_def, check_request};
use crate::support::{
    Handler, RuntimeServer, TASKS, args, completed_text, in_process, lifecycle, options, task_of,
};

#[tokio::test]
async fn policy_decides_between_task_and_synchronous_run() {
    let client = in_process(RuntimeServer::in_memory()).await;
    assert!(client.server_supports());
    let undeclared = CallOptions::default().with_declare_tasks(false);

    // Optional: a task when declared, else the result at once.
    let state = task_of(&client, "slow", json!({"ms": 10})).await;
    assert_eq!(state.status, TaskStatus::Working);
    assert_eq!(
        state.id.expose().len(),
        44,
        "the time, then 128 random bits, in hex"
    );
    let sync = client
        .call_tool("slow", args(json!({"ms": 10})), undeclared.clone())
        .await
        .unwrap();
    assert!(matches!(sync, CallResponse::Complete(_)), "{sync:?}");
    // A selector can decide per call.
    let selected = client
        .call_tool(
            "slow",
            args(json!({"ms": 10, "sync": true})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        matches!(selected, CallResponse::Complete(_)),
        "{selected:?}"
    );
    // Forbidden: never a task, and the context says so.
    let CallResponse::Complete(result) = client
        .call_tool("forbidden_tool", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("forbidden must run at once")
    };
    assert_eq!(result.content[0].as_text().unwrap().text, "is task: false");
    // Required without the declaration: -32021 naming the extension.
    let error = client
        .call_tool("required_job", (), undeclared)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32021));
    assert!(error.requires_tasks_extension(), "{error}");
    let state = task_of(&client, "required_job", json!({})).await;
    assert_eq!(
        completed_text(&client.await_task(&state, &options()).await.unwrap()),
        "required done"
    );
}

#[tokio::test]
async fn a_created_task_is_readable_at_once_with_its_status_message() {
    let client = in_process(RuntimeServer::in_memory()).await;
    for _ in 0..20 {
        let state = task_of(&client, "slow", json!({"ms": 100})).await;
        let read = client
            .get(&state.id)
            .await
            .expect("a tasks/get right after creation finds it");
        assert!(!read.status.is_terminal());
    }
    let state = task_of(&client, "slow", json!({"ms": 200})).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    let read = client.get(&state.id).await.unwrap();
    assert_eq!(read.status_message.as_deref(), Some("halfway"));
    assert_eq!(read.poll_interval, Some(Duration::from_millis(20)));
    // The status message is activity: the TTL follows it, an hour past it.
    assert!(
        matches!(read.ttl, Some(Ttl::Limited(ttl))
            if ttl >= Duration::from_secs(3600) && ttl < Duration::from_secs(3601)),
        "{:?}",
        read.ttl
    );
    let outcome = client.await_task(&state, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "slept 200 ms");
}

#[tokio::test]
async fn input_is_asked_answered_and_partial_sets_wait() {
    let client = in_process(RuntimeServer::in_memory()).await;
    // Answered by the client's handler through tasks/update.
    let outcome = client
        .call_and_await("ask", (), CallOptions::default(), &options())
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Ada!");

    // Two keys; answer one (plus a key never issued): only the other stays outstanding.
    let state = task_of(&client, "ask_two", json!({})).await;
    let mut read = client.get(&state.id).await.unwrap();
    while read.status != TaskStatus::InputRequired || read.input_requests.len() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        read = client.get(&state.id).await.unwrap();
    }
    let one = json!({"action": "accept", "content": {"v": "one"}});
    client
        .update(
            &state.id,
            [("first".to_owned(), one), ("bogus".to_owned(), json!({}))].into(),
        )
        .await
        .unwrap();
    let read = client.get(&state.id).await.unwrap();
    assert_eq!(read.status, TaskStatus::InputRequired);
    assert_eq!(read.input_requests.keys().collect::<Vec<_>>(), ["second"]);
    // Every poll shows every outstanding request.
    assert_eq!(client.get(&state.id).await.unwrap().input_requests.len(), 1);
    let two = json!({"action": "accept", "content": {"v": "two"}});
    client
        .update(&state.id, [("second".to_owned(), two)].into())
        .await
        .unwrap();
    let outcome = client.await_task(&state.id, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "one two");
    // An update on a finished task is acknowledged and changes nothing.
    client
        .update(&state.id, [("second".to_owned(), json!({}))].into())
        .await
        .unwrap();
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::Completed
    );
}

#[tokio::test]
async fn a_task_cancelled_while_it_waits_for_input_ends_cancelled() {
    let client = in_process(RuntimeServer::in_memory()).await;
    // The tool's wait for input and the runtime both hear the cancel; the
    // tool must not finish first with its error (the task would be failed).
    for _ in 0..20 {
        let state = task_of(&client, "ask_two", json!({})).await;
        let mut read = client.get(&state.id).await.unwrap();
        while read.status != TaskStatus::InputRequired {
            tokio::time::sleep(Duration::from_millis(5)).await;
            read = client.get(&state.id).await.unwrap();
        }
        let ended = client.cancel_and_wait(&state.id, &options()).await.unwrap();
        assert_eq!(ended.status(), TaskStatus::Cancelled);
    }
}

#[tokio::test]
async fn outcomes_errors_panics_and_cancel() {
    let client = in_process(RuntimeServer::in_memory()).await;
    let outcome = client
        .call_and_await("is_error", (), CallOptions::default(), &options())
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("isError is completed")
    };
    assert_eq!(result.is_error, Some(true));

    let outcome = client
        .call_and_await("rpc_error", (), CallOptions::default(), &options())
        .await
        .unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("an RPC error fails the task")
    };
    assert_eq!(failure.error.code, -32602);
    assert_eq!(failure.error.data, Some(json!({"field": "x"})));

    let outcome = client
        .call_and_await("panics", (), CallOptions::default(), &options())
        .await
        .unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("a panic fails the task")
    };
    assert_eq!(failure.error.code, -32603);
    // The server keeps serving.
    let outcome = client
        .call_and_await("required_job", (), CallOptions::default(), &options())
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "required done");

    let state = task_of(&client, "forever", json!({})).await;
    client.cancel(&state.id).await.unwrap();
    let outcome = client.await_task(&state.id, &options()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    client
        .cancel(&state.id)
        .await
        .expect("cancel is idempotent");
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::Cancelled
    );

    for error in [
        client
            .get(&"0123456789abcdef0123456789abcdef".into())
            .await
            .unwrap_err(),
        client
            .update(&"nope".into(), Default::default())
            .await
            .unwrap_err(),
        client.cancel(&"nope".into()).await.unwrap_err(),
    ] {
        assert!(error.is_unknown_task(), "{error}");
    }
}

#[tokio::test]
async fn a_cancel_fires_the_token_of_the_work_a_tool_spawned() {
    let server = RuntimeServer::in_memory();
    let client = in_process(server.clone()).await;
    let state = task_of(&client, "spawns_work", json!({})).await;
    // Give the tool time to spawn its work; the token has not fired.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(server.events().is_empty(), "{:?}", server.events());
    client.cancel(&state.id).await.unwrap();
    let outcome = client.await_task(&state.id, &options()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    for _ in 0..100 {
        if !server.events().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        server.events(),
        ["token fired"],
        "the spawned work learned of the cancel"
    );
}

/// A raw JSON-RPC session over a duplex, to read the exact wire.
struct Raw {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    next: u64,
}

impl Raw {
    async fn start(server: RuntimeServer) -> Self {
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            if let Ok(running) = server.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let (read, write) = tokio::io::split(client_io);
        Self {
            lines: BufReader::new(read).lines(),
            write,
            next: 1,
        }
    }

    async fn call(&mut self, method: &str, mut params: Value, declare: bool) -> Value {
        let capabilities = if declare {
            json!({"extensions": {TASKS: {}}})
        } else {
            json!({})
        };
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities});
        self.next += 1;
        let request =
            json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        check_request(&request).expect("a valid request");
        let mut line = request.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.expect("write");
        loop {
            let line = self
                .lines
                .next_line()
                .await
                .expect("read")
                .expect("a response");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if message.get("id") == Some(&json!(self.next)) {
                return message;
            }
        }
    }
}

#[tokio::test]
async fn wire_shapes_match_the_extension_schema() {
    let mut raw = Raw::start(RuntimeServer::in_memory()).await;
    let discover = raw.call("server/discover", json!({}), false).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"][TASKS],
        json!({})
    );
    check_def("DiscoverResult", &discover["result"]).unwrap();

    let created = raw
        .call("tools/call", json!({"name": "ask", "arguments": {}}), true)
        .await;
    let created = &created["result"];
    assert_eq!(created["resultType"], "task");
    assert!(created.get("ttlMs").is_some(), "ttlMs is always present");
    check_def("CreateTaskResult", created).unwrap();
    let id = created["taskId"].as_str().unwrap().to_owned();

    let mut got = raw.call("tasks/get", json!({"taskId": id}), true).await;
    while got["result"]["status"] != "input_required" {
        got = raw.call("tasks/get", json!({"taskId": id}), true).await;
    }
    assert_eq!(got["result"]["resultType"], "complete");
    check_def("GetTaskResult", &got["result"]).unwrap();
    let update = raw
        .call("tasks/update", json!({"taskId": id, "inputResponses": {"name": {"action": "accept", "content": {"name": "Wire"}}}}), true)
        .await;
    assert_eq!(update["result"], json!({"resultType": "complete"}));
    loop {
        got = raw.call("tasks/get", json!({"taskId": id}), true).await;
        if got["result"]["status"] == "completed" {
            break;
        }
    }
    check_def("GetTaskResult", &got["result"]).unwrap();
    assert_eq!(
        got["result"]["result"]["content"][0]["text"],
        "Hello, Wire!"
    );
    let cancel = raw.call("tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(cancel["result"], json!({"resultType": "complete"}));

    let failed = raw
        .call(
            "tools/call",
            json!({"name": "rpc_error", "arguments": {}}),
            true,
        )
        .await;
    let failed_id = failed["result"]["taskId"].as_str().unwrap().to_owned();
    loop {
        got = raw
            .call("tasks/get", json!({"taskId": failed_id}), true)
            .await;
        if got["result"]["status"] == "failed" {
            break;
        }
    }
    check_def("GetTaskResult", &got["result"]).unwrap();
    assert_eq!(got["result"]["error"]["code"], -32602);

    // Errors: unknown id -32602; not declared -32021.
    let unknown = raw
        .call("tasks/get", json!({"taskId": "missing"}), true)
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
    let undeclared = raw.call("tasks/get", json!({"taskId": id}), false).await;
    assert_eq!(undeclared["error"]["code"], -32021);
    assert_eq!(
        undeclared["error"]["data"]["requiredCapabilities"]["extensions"][TASKS],
        json!({})
    );
}

async fn http_client(url: &str, token: &str) -> TasksClient<Handler> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect over HTTP");
    TasksClient::new(running)
}

#[tokio::test]
async fn over_http_tasks_belong_to_the_bearer_that_made_them() {
    let url = serve_http(RuntimeServer::in_memory()).await;
    let alice = http_client(&url, "alice-token").await;
    let mallory = http_client(&url, "mallory-token").await;

    let outcome = alice
        .call_and_await("ask", (), CallOptions::default(), &options())
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "Hello, Ada!");

    let state = task_of(&alice, "forever", json!({})).await;
    for error in [
        mallory.get(&state.id).await.unwrap_err(),
        mallory
            .update(&state.id, Default::default())
            .await
            .unwrap_err(),
        mallory.cancel(&state.id).await.unwrap_err(),
    ] {
        assert!(
            error.is_unknown_task(),
            "another bearer gets the same -32602: {error}"
        );
        assert_eq!(error.code(), Some(-32602));
    }
    // Mallory's cancel changed nothing; Alice still owns a working task.
    assert_eq!(
        alice.get(&state.id).await.unwrap().status,
        TaskStatus::Working
    );
    alice.cancel(&state.id).await.unwrap();
    let outcome = alice.await_task(&state.id, &options()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)));

    // Raw HTTP: plain JSON replies to tasks/*.
    let reply = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tasks/get")
        .header("mcp-name", state.id.expose())
        .header("authorization", "Bearer alice-token")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": state.id.expose(),
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert!(
        reply.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["result"]["status"], "cancelled");

    // Requests the fast path does not take still get rmcp's answers:
    // a mismatched Mcp-Name is -32020, a missing declaration -32021.
    let raw = |name: &str, capabilities: Value| {
        reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tasks/get")
            .header("mcp-name", name)
            .header("authorization", "Bearer alice-token")
            .body(json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": state.id.expose(),
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": capabilities}}}).to_string())
            .send()
    };
    let mismatch = raw("someone-else", json!({"extensions": {TASKS: {}}}))
        .await
        .unwrap();
    assert_eq!(mismatch.status(), 400);
    let body: Value = mismatch.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32020, "{body}");
    let undeclared = raw(state.id.expose(), json!({})).await.unwrap();
    assert_eq!(undeclared.status(), 400);
    let body: Value = undeclared.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32021, "{body}");
}

#[tokio::test]
async fn each_caller_has_at_most_its_cap_of_unfinished_tasks() {
    let runtime = crate::support::runtime_server::runtime_on(mcp_tasks::store::MemoryStore::new())
        .with_max_tasks_per_caller(Some(3))
        // Without tokens, the callers below count apart only so.
        .with_quota_by_header(true)
        .build();
    let url = serve_http(RuntimeServer::new(runtime.clone())).await;
    let alice = http_client(&url, "alice-token").await;
    let bob = http_client(&url, "bob-token").await;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        tasks.push(task_of(&alice, "forever", json!({})).await);
    }
    let refused = alice
        .call_tool("forever", (), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(-32603), "{refused}");
    let rpc = refused.rpc_error().unwrap();
    assert!(
        rpc.message.contains("too many unfinished tasks"),
        "{}",
        rpc.message
    );
    assert_eq!(
        rpc.data,
        Some(json!({"maxTasksPerCaller": 3, "reason": "callerTasks", "retryAfterMs": 1000}))
    );
    // Other callers keep being served, and a synchronous call is no task.
    let bobs = task_of(&bob, "forever", json!({})).await;
    let sync = alice
        .call_tool(
            "slow",
            args(json!({"ms": 1})),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .unwrap();
    assert!(matches!(sync, CallResponse::Complete(_)));
    // A finished task frees its seat (once its tool's supervision has ended).
    let outcome = alice
        .cancel_and_wait(&tasks[0].id, &options())
        .await
        .unwrap();
    assert_eq!(outcome.status(), TaskStatus::Cancelled);
    let mut replacement = None;
    for _ in 0..100 {
        if let Ok(CallResponse::Task(state)) =
            alice.call_tool("forever", (), CallOptions::default()).await
        {
            replacement = Some(state);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let replacement = replacement.expect("a finished task frees its seat");
    assert!(
        alice
            .call_tool("forever", (), CallOptions::default())
            .await
            .is_err(),
        "at the cap again"
    );
    for task in [&tasks[1], &tasks[2], &replacement] {
        alice.cancel(&task.id).await.unwrap();
    }
    bob.cancel(&bobs.id).await.unwrap();
    drop(runtime);
}

#[tokio::test]
async fn a_full_store_answers_a_clear_error_and_keeps_serving_reads() {
    let dir = tempfile::tempdir().unwrap();
    let options = mcp_tasks_sqlite::SqliteOptions::default().with_max_size_bytes(64 * 1024);
    let store = mcp_tasks_sqlite::SqliteStore::open_with(dir.path().join("full.db"), &options)
        .expect("open");
    let client = in_process(RuntimeServer::new(
        crate::support::runtime_server::runtime_on(store).build(),
    ))
    .await;
    let mut created = Vec::new();
    let refused = loop {
        assert!(created.len() < 5_000, "the size limit never bit");
        match client
            .call_tool("forever", (), CallOptions::default())
            .await
        {
            Ok(CallResponse::Task(state)) => created.push(state),
            Ok(other) => panic!("a task expected: {other:?}"),
            Err(error) => break error,
        }
    };
    assert_eq!(refused.code(), Some(-32603), "{refused}");
    let message = &refused.rpc_error().unwrap().message;
    assert!(message.contains("the task store is full"), "{message}");
    // What was acknowledged is still there.
    let first = client
        .get(&created[0].id)
        .await
        .expect("a created task is kept");
    assert_eq!(first.status, TaskStatus::Working);
}
