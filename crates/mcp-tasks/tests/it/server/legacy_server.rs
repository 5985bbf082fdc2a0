//! The server serves 2025-11-25 task clients (clients that open with
//! `initialize` and speak that era's experimental tasks), from the same
//! runtime as 2026-07-28 clients: over stdio (`StdioTransport`) and over
//! Streamable HTTP (the serving recipe's sessions), checked on the raw
//! wire and against the official 2025-11-25 schema.

use std::time::Duration;

use mcp_tasks::store::MemoryStore;
use serde_json::{Value, json};

use crate::support::old_client::OldClient;
use crate::support::runtime_server::{POLICIES, RuntimeServer, runtime_on, serve_http};
use crate::support::schema::check_legacy;
use crate::support::{in_process, options};

fn schema(def: &str, value: &Value) {
    if let Err(why) = check_legacy(def, value) {
        panic!("{why}\n{value:#}");
    }
}

/// A task of `tool` made by `client`; its `task` object.
async fn task(client: &mut OldClient, tool: &str, arguments: Value, task: Value) -> Value {
    let created = client
        .request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "task": task}),
        )
        .await
        .unwrap_or_else(|error| panic!("{tool}: {error}"));
    schema("CreateTaskResult", &created);
    created["task"].clone()
}

async fn clients() -> Vec<(&'static str, OldClient)> {
    let stdio = OldClient::stdio(RuntimeServer::in_memory()).await;
    let url = serve_http(RuntimeServer::in_memory()).await;
    let http = OldClient::http(&url, None).await;
    assert!(
        http.session().is_some(),
        "an initialize-era client gets a session"
    );
    vec![("stdio", stdio), ("http", http)]
}

#[tokio::test]
async fn initialize_declares_the_old_tasks_and_tools_carry_their_policy() {
    for (transport, mut client) in clients().await {
        let initialized = &client.initialized;
        schema("InitializeResult", initialized);
        assert_eq!(
            initialized["capabilities"]["tasks"],
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
            "{transport}"
        );
        let tools = client.request("tools/list", json!({})).await.unwrap();
        schema("ListToolsResult", &tools);
        let listed = tools["tools"].as_array().unwrap();
        assert_eq!(listed.len(), POLICIES.len(), "{transport}");
        for (name, policy) in POLICIES {
            let tool = listed.iter().find(|tool| tool["name"] == name).unwrap();
            let expected = format!("{policy:?}").to_lowercase();
            assert_eq!(
                tool["execution"]["taskSupport"],
                expected.as_str(),
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn a_2026_client_sees_none_of_the_old_era() {
    let mut client = OldClient::stdio_uninitialized(RuntimeServer::in_memory());
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "new", "version": "1"}});
    let discovered = client
        .request("server/discover", json!({"_meta": meta}))
        .await
        .unwrap();
    let capabilities = &discovered["capabilities"];
    assert!(capabilities.get("tasks").is_none(), "{discovered}");
    assert!(
        capabilities["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some()
    );
    let tools = client
        .request("tools/list", json!({"_meta": meta}))
        .await
        .unwrap();
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|tool| tool.get("execution").is_none()),
        "{tools}"
    );
    // A `task` param is ignored; the extension makes the task.
    let created = client
        .request(
            "tools/call",
            json!({"_meta": meta, "name": "slow", "arguments": {"ms": 1}, "task": {"ttl": 5}}),
        )
        .await
        .unwrap();
    assert_eq!(created["resultType"], "task", "{created}");
    // This era's methods are unknown there, under any name.
    for method in [
        "tasks/result",
        "tasks/list",
        "mcp-tasks/2025-11-25/tasks/get",
    ] {
        let unknown = client
            .request(method, json!({"_meta": meta, "taskId": created["taskId"]}))
            .await
            .unwrap_err();
        assert_eq!(unknown["code"], -32601, "{method}");
    }
}

#[tokio::test]
async fn a_task_is_created_read_and_its_result_fetched() {
    for (transport, mut client) in clients().await {
        let created = task(
            &mut client,
            "slow",
            json!({"ms": 200}),
            json!({"ttl": 5000}),
        )
        .await;
        assert_eq!(created["status"], "working", "{transport}");
        assert_eq!(created["ttl"], 5000, "the ttl asked for");
        assert_eq!(created["pollInterval"], 20);
        assert!(created.get("ttlMs").is_none() && created.get("resultType").is_none());
        let id = created["taskId"].clone();
        let got = client
            .request("tasks/get", json!({"taskId": id}))
            .await
            .unwrap();
        schema("GetTaskResult", &got);
        assert_eq!(got["taskId"], id);
        assert!(
            got.get("_meta")
                .is_none_or(|meta| meta.get("io.modelcontextprotocol/related-task").is_none())
        );
        // Blocks until the tool is done, then answers its result exactly.
        let result = client
            .request("tasks/result", json!({"taskId": id}))
            .await
            .unwrap();
        schema("CallToolResult", &result);
        assert_eq!(result["content"][0]["text"], "slept 200 ms", "{transport}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
            id
        );
        assert!(result.get("resultType").is_none());
        let done = client
            .request("tasks/get", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(done["status"], "completed");
    }
}

#[tokio::test]
async fn the_ttl_asked_for_is_held_within_bounds() {
    let runtime = runtime_on(MemoryStore::new())
        .with_max_lifetime(Some(Duration::from_secs(7200)))
        .build();
    let mut client = OldClient::stdio(RuntimeServer::new(runtime)).await;
    let small = task(&mut client, "slow", json!({"ms": 1}), json!({"ttl": 1})).await;
    assert_eq!(small["ttl"], 1000, "at least a second");
    let large = task(
        &mut client,
        "slow",
        json!({"ms": 1}),
        json!({"ttl": 86_400_000}),
    )
    .await;
    assert_eq!(large["ttl"], 7_200_000, "at most the maximum lifetime");
    let default = task(&mut client, "slow", json!({"ms": 1}), json!({})).await;
    assert_eq!(
        default["ttl"], 3_600_000,
        "the runtime's default without one"
    );
    let bad = client
        .request(
            "tools/call",
            json!({"name": "slow", "task": {"ttl": "soon"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(bad["code"], -32602);
}

#[tokio::test]
async fn input_goes_to_the_client_while_tasks_result_blocks() {
    for (transport, mut client) in clients().await {
        client.answering(|request| {
            assert_eq!(request["method"], "elicitation/create");
            json!({"action": "accept", "content": {"name": "Ada"}})
        });
        let created = task(&mut client, "ask", json!({}), json!({})).await;
        let id = created["taskId"].clone();
        let result = client
            .request("tasks/result", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(result["content"][0]["text"], "Hello, Ada!", "{transport}");
        assert_eq!(client.asked.len(), 1, "asked once");
        let asked = &client.asked[0];
        schema("ElicitRequest", asked);
        assert_eq!(
            asked["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id,
            "the request names its task"
        );
    }
}

#[tokio::test]
async fn every_kind_of_input_request_is_relayed() {
    for (transport, mut client) in clients().await {
        client.answering(|request| match request["method"].as_str() {
            Some("elicitation/create") => json!({"action": "accept", "content": {"name": "Ada"}}),
            Some("sampling/createMessage") => json!({"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "4"}}),
            Some("roots/list") => json!({"roots": [{"uri": "file:///work"}]}),
            other => panic!("unexpected {other:?}"),
        });
        let created = task(&mut client, "ask_everything", json!({}), json!({})).await;
        let result = client
            .request("tasks/result", json!({"taskId": created["taskId"]}))
            .await
            .unwrap();
        assert_eq!(
            result["content"][0]["text"], "Ada / 4 / file:///work",
            "{transport}"
        );
        let mut methods: Vec<&str> = client
            .asked
            .iter()
            .map(|r| r["method"].as_str().unwrap())
            .collect();
        methods.sort_unstable();
        assert_eq!(
            methods,
            ["elicitation/create", "roots/list", "sampling/createMessage"]
        );
    }
}

#[tokio::test]
async fn a_synchronous_call_asks_on_the_session() {
    for (transport, mut client) in clients().await {
        client.answering(|_| json!({"action": "accept", "content": {"name": "Bo"}}));
        let result = client
            .request("tools/call", json!({"name": "ask_maybe", "arguments": {}}))
            .await
            .unwrap();
        assert_eq!(result["content"][0]["text"], "Hello, Bo!", "{transport}");
        schema("ElicitRequest", &client.asked[0]);
    }
}

#[tokio::test]
async fn an_error_result_is_failed_and_an_error_is_returned_exactly() {
    for (transport, mut client) in clients().await {
        let created = task(&mut client, "is_error", json!({}), json!({})).await;
        // Finished in its first step: failed already, in this era.
        assert_eq!(created["status"], "failed", "{transport}");
        let id = created["taskId"].clone();
        let got = client
            .request("tasks/get", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(got["status"], "failed");
        assert_eq!(got["statusMessage"], "tool said no");
        let result = client
            .request("tasks/result", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(result["isError"], true, "the result itself");
        let created = task(&mut client, "rpc_error", json!({}), json!({})).await;
        let error = client
            .request("tasks/result", json!({"taskId": created["taskId"]}))
            .await
            .unwrap_err();
        assert_eq!(
            error,
            json!({"code": -32602, "message": "bad input", "data": {"field": "x"}})
        );
    }
}

#[tokio::test]
async fn the_old_eras_errors_and_never_the_new_ones() {
    for (transport, mut client) in clients().await {
        let code = |error: Value| error["code"].as_i64().unwrap();
        let required = client
            .request("tools/call", json!({"name": "required_job"}))
            .await
            .unwrap_err();
        assert_eq!(
            code(required),
            -32601,
            "{transport}: a required tool without a task"
        );
        let forbidden = client
            .request("tools/call", json!({"name": "forbidden_tool", "task": {}}))
            .await
            .unwrap_err();
        assert_eq!(code(forbidden), -32601, "a forbidden tool asked for a task");
        let plain = client
            .request("tools/call", json!({"name": "forbidden_tool"}))
            .await
            .unwrap();
        assert_eq!(plain["content"][0]["text"], "is task: false");
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let unknown = client
                .request(
                    method,
                    json!({"taskId": "00000000000000000000000000000000"}),
                )
                .await
                .unwrap_err();
            assert_eq!(code(unknown), -32602, "{method}: unknown id");
            let malformed = client
                .request(method, json!({"taskId": 7}))
                .await
                .unwrap_err();
            assert_eq!(code(malformed), -32602, "{method}: malformed id");
        }
        // tasks/update is the new era's: this era has no such method.
        let update = client
            .request("tasks/update", json!({"taskId": "x", "inputResponses": {}}))
            .await
            .unwrap_err();
        assert_eq!(code(update), -32601);
    }
}

#[tokio::test]
async fn cancel_makes_it_cancelled_before_answering() {
    for (transport, mut client) in clients().await {
        let created = task(&mut client, "forever", json!({"ms": 50}), json!({})).await;
        let id = created["taskId"].clone();
        let cancelled = client
            .request("tasks/cancel", json!({"taskId": id}))
            .await
            .unwrap();
        schema("CancelTaskResult", &cancelled);
        assert_eq!(cancelled["status"], "cancelled", "{transport}");
        assert_eq!(
            cancelled["statusMessage"], "cancelled by the caller",
            "{transport}"
        );
        let got = client
            .request("tasks/get", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(got["status"], "cancelled", "at once");
        let again = client
            .request("tasks/cancel", json!({"taskId": id}))
            .await
            .unwrap_err();
        assert_eq!(again["code"], -32602, "a finished task cannot be cancelled");
        let result = client
            .request("tasks/result", json!({"taskId": id}))
            .await
            .unwrap_err();
        assert_eq!(result["code"], -32603);
    }
}

#[tokio::test]
async fn a_task_hears_progress_on_its_session_when_its_call_asked_for_it() {
    for (transport, mut client) in clients().await {
        client.open_stream().await;
        let created = client
            .request(
                "tools/call",
                json!({"name": "counts", "arguments": {"n": 3, "ms": 30}, "task": {},
                    "_meta": {"progressToken": "p-old"}}),
            )
            .await
            .unwrap();
        let id = created["task"]["taskId"].clone();
        assert!(id.is_string(), "{transport}: a task: {created}");
        let progress = |notes: &[Value]| -> Vec<Value> {
            notes
                .iter()
                .filter(|note| note["method"] == "notifications/progress")
                .map(|note| note["params"].clone())
                .collect()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while progress(&client.notifications).len() < 3 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{transport}: {:?}",
                client.notifications
            );
            let more = client.notifications.len() + 1;
            let heard =
                tokio::time::timeout(Duration::from_secs(5), client.notifications_until(more))
                    .await
                    .is_ok();
            assert!(heard, "{transport}: {:?}", client.notifications);
        }
        // The 2025-11-25 token stays valid for the task's life; each carries
        // the related task.
        let related = json!({"io.modelcontextprotocol/related-task": {"taskId": id}});
        assert_eq!(
            progress(&client.notifications),
            (1..=3)
                .map(
                    |done| json!({"progressToken": "p-old", "progress": done as f64,
                    "total": 3.0, "_meta": related})
                )
                .collect::<Vec<_>>(),
            "{transport}"
        );
        for note in &client.notifications {
            schema(
                if note["method"] == "notifications/progress" {
                    "ProgressNotification"
                } else {
                    "TaskStatusNotification"
                },
                note,
            );
        }
    }
}

#[tokio::test]
async fn status_changes_are_notified() {
    for (transport, mut client) in clients().await {
        client.open_stream().await;
        let created = task(&mut client, "slow", json!({"ms": 100}), json!({})).await;
        let notes = client.notifications_until(2).await.to_vec();
        let statuses: Vec<&Value> = notes
            .iter()
            .filter(|note| note["method"] == "notifications/tasks/status")
            .inspect(|note| schema("TaskStatusNotification", note))
            .map(|note| &note["params"])
            .collect();
        assert!(
            statuses
                .iter()
                .all(|task| task["taskId"] == created["taskId"]),
            "{transport}: {notes:?}"
        );
        assert!(
            statuses
                .iter()
                .any(|task| task["statusMessage"] == "halfway"),
            "{transport}: {notes:?}"
        );
    }
}

#[tokio::test]
async fn tasks_list_pages_through_the_callers_own_tasks() {
    let url = serve_http(RuntimeServer::in_memory()).await;
    let mut alice = OldClient::http(&url, Some("Bearer alice")).await;
    let mut bob = OldClient::http(&url, Some("Bearer bob")).await;
    let mut made = Vec::new();
    for _ in 0..55 {
        let created = task(&mut alice, "slow", json!({"ms": 1}), json!({})).await;
        made.push(created["taskId"].clone());
    }
    let bobs = task(&mut bob, "slow", json!({"ms": 1}), json!({})).await;
    let first = alice.request("tasks/list", json!({})).await.unwrap();
    schema("ListTasksResult", &first);
    assert_eq!(first["tasks"].as_array().unwrap().len(), 50);
    let cursor = first["nextCursor"].clone();
    assert!(cursor.is_string());
    let second = alice
        .request("tasks/list", json!({"cursor": cursor}))
        .await
        .unwrap();
    assert_eq!(second["tasks"].as_array().unwrap().len(), 5);
    assert!(second.get("nextCursor").is_none());
    let listed: Vec<Value> = first["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["tasks"].as_array().unwrap())
        .map(|task| task["taskId"].clone())
        .collect();
    let mut expected = made.clone();
    expected.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    assert_eq!(listed, expected, "every task once, in order");
    assert!(!listed.contains(&bobs["taskId"]), "never another caller's");
    let bad = alice
        .request("tasks/list", json!({"cursor": "not-a-cursor"}))
        .await
        .unwrap_err();
    assert_eq!(bad["code"], -32602);
    // Another caller's id is unknown here, whatever the method.
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let foreign = alice
            .request(method, json!({"taskId": bobs["taskId"]}))
            .await
            .unwrap_err();
        assert_eq!(foreign["code"], -32602, "{method}");
    }
}

#[tokio::test]
async fn a_2026_client_of_the_same_caller_reads_and_cancels_an_old_task() {
    let server = RuntimeServer::in_memory();
    let mut old = OldClient::stdio(server.clone()).await;
    let created = task(&mut old, "forever", json!({"ms": 50}), json!({})).await;
    let new = in_process(server).await;
    let id = mcp_tasks::TaskId::new(created["taskId"].as_str().unwrap().to_owned());
    let state = new.get(&id).await.expect("read with the extension");
    assert_eq!(state.status, mcp_tasks::TaskStatus::Working);
    let ended = new
        .cancel_and_wait(&id, &options())
        .await
        .expect("cancelled with the extension");
    assert_eq!(ended.status(), mcp_tasks::TaskStatus::Cancelled);
    let got = old
        .request("tasks/get", json!({"taskId": created["taskId"]}))
        .await
        .unwrap();
    assert_eq!(got["status"], "cancelled");
}

#[tokio::test]
async fn an_idempotency_key_gives_an_old_client_its_task_again_over_both_transports() {
    for (transport, mut client) in clients().await {
        let call = |ms: u64| {
            json!({"name": "slow", "arguments": {"ms": ms}, "task": {},
                "_meta": {(mcp_tasks::IDEMPOTENCY_KEY_META): format!("key-{transport}")}})
        };
        let first = client
            .request("tools/call", call(60_000))
            .await
            .expect("created");
        schema("CreateTaskResult", &first);
        let again = client
            .request("tools/call", call(60_000))
            .await
            .expect("again");
        assert_eq!(
            again["task"]["taskId"], first["task"]["taskId"],
            "{transport}: the same call under the key is the same task"
        );
        let other = client
            .request("tools/call", call(5))
            .await
            .expect_err("other arguments under the key");
        assert_eq!(other["code"], -32602, "{transport}: {other}");
    }
}
