//! Task tools (`TaskTools`): a caller that declared no tasks, in either
//! era, over the library's stdio transport (an in-process pipe): a call
//! that ends within the window is answered as without task tools; past
//! it, a handle, which `tasks_wait`, `tasks_status`, `tasks_answer`,
//! `tasks_cancel` and `tasks_list` follow; input asked on a connection
//! that declared elicitation; a call cancelled inside the window cancels
//! its task. Waits under a paused clock. (Two callers, a restart on
//! SQLite, the flags and the gateway are in the CLI's tests, against the
//! binary over HTTP.)

use std::time::Duration;

use mcp_tasks::server::{HANDLE_META, TASK_TOOL_NAMES, TaskTools};
use mcp_tasks::store::MemoryStore;
use mcp_tasks_testkit::handles::{task_id, text};
use mcp_tasks_testkit::old_client::OldClient;
use mcp_tasks_testkit::runtime_server::{RuntimeServer, runtime_on};
use serde_json::{Value, json};

/// The two eras' callers that declare no tasks.
#[derive(Debug, Clone, Copy)]
enum Era {
    /// A 2025-11-25 session that declared nothing.
    Old,
    /// 2026-07-28 requests without the Tasks extension.
    New,
}

const ERAS: [Era; 2] = [Era::Old, Era::New];

fn server(tools: TaskTools) -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_task_tools(tools)
            .build(),
    )
}

/// Task tools on for every tool, with a 2 s window.
fn on() -> TaskTools {
    TaskTools::all().with_window(Duration::from_secs(2))
}

/// A client of `server` in `era` that declares no tasks (and, when
/// `elicits`, form elicitation).
async fn caller(server: RuntimeServer, era: Era, elicits: bool) -> Caller {
    let capabilities = match elicits {
        true => json!({"elicitation": {"form": {}}}),
        false => json!({}),
    };
    let client = match era {
        Era::Old => OldClient::stdio_declaring(server, capabilities).await,
        Era::New => OldClient::stdio_uninitialized(server),
    };
    Caller { client, era }
}

struct Caller {
    client: OldClient,
    era: Era,
}

impl Caller {
    fn meta(&self) -> Option<Value> {
        match self.era {
            Era::Old => None,
            Era::New => Some(
                json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "plain", "version": "1"}}),
            ),
        }
    }

    async fn request(&mut self, method: &str, mut params: Value) -> Result<Value, Value> {
        if let Some(meta) = self.meta() {
            params["_meta"] = meta;
        }
        self.client.request(method, params).await
    }

    async fn call(&mut self, name: &str, arguments: Value) -> Result<Value, Value> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// `tasks_wait` on task `id` for at most `seconds`.
    async fn wait(&mut self, id: &str, seconds: u64) -> Value {
        let arguments = json!({"taskId": id, "timeoutSeconds": seconds});
        self.call("tasks_wait", arguments)
            .await
            .expect("tasks_wait")
    }

    async fn list(&mut self) -> Vec<Value> {
        let listed = self
            .request("tools/list", json!({}))
            .await
            .expect("tools/list");
        listed["tools"].as_array().cloned().unwrap_or_default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_that_ends_within_the_window_is_answered_as_without_task_tools() {
    for era in ERAS {
        let mut answers = Vec::new();
        for tools in [TaskTools::off(), on()] {
            let mut caller = caller(server(tools), era, false).await;
            let quick = caller.call("slow", json!({"ms": 500})).await;
            let counted = caller.call("counts", json!({"n": 2, "ms": 10})).await;
            answers.push((quick, counted));
        }
        let (off, on) = (&answers[0], &answers[1]);
        assert_eq!(
            serde_json::to_string(off).unwrap(),
            serde_json::to_string(on).unwrap(),
            "{era:?}"
        );
        assert_eq!(text(off.0.as_ref().unwrap()), "slept 500 ms", "{era:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_past_the_window_gets_a_handle_that_tasks_wait_follows_to_its_result() {
    for era in ERAS {
        let mut caller = caller(server(on()), era, false).await;
        let started = tokio::time::Instant::now();
        let handle = caller.call("slow", json!({"ms": 10_000})).await.unwrap();
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(2) && waited < Duration::from_millis(2_100),
            "{era:?}: the window, not {waited:?}"
        );
        assert_ne!(handle["isError"], json!(true), "{handle}");
        let id = task_id(&handle);
        assert_eq!(handle["structuredContent"]["status"], "working", "{handle}");
        assert_eq!(handle["structuredContent"]["tool"], "slow", "{handle}");
        assert_eq!(
            handle["structuredContent"]["next"], "tasks_wait",
            "{handle}"
        );
        assert_eq!(
            handle["_meta"][HANDLE_META]["taskId"],
            id.as_str(),
            "{handle}"
        );
        assert!(
            text(&handle).contains(&id) && text(&handle).contains("tasks_wait"),
            "{handle}"
        );

        let status = caller
            .call("tasks_status", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(status["structuredContent"]["status"], "working", "{status}");
        assert_eq!(
            status["structuredContent"]["statusMessage"], "halfway",
            "{status}"
        );
        let not_yet = caller.wait(&id, 1).await;
        assert_eq!(
            not_yet["structuredContent"]["status"], "working",
            "{not_yet}"
        );
        assert_ne!(not_yet["isError"], json!(true), "{not_yet}");
        let listed = caller.call("tasks_list", json!({})).await.unwrap();
        assert_eq!(
            listed["structuredContent"]["tasks"][0]["taskId"],
            id.as_str(),
            "{listed}"
        );

        let done = caller.wait(&id, 15).await;
        assert_eq!(text(&done), "slept 10000 ms", "{era:?}: {done}");
        let ran = started.elapsed();
        assert!(
            ran >= Duration::from_secs(10) && ran < Duration::from_millis(10_100),
            "{era:?}: {ran:?}"
        );
        // Read from the store: at once, the same, the tool not run again.
        let again = caller
            .call("tasks_wait", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(again, done);
        assert_eq!(started.elapsed(), ran, "{era:?}: not run again");
        let listed = caller.call("tasks_list", json!({})).await.unwrap();
        assert_eq!(listed["structuredContent"]["tasks"], json!([]), "{listed}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_task_tools_are_listed_only_to_callers_without_tasks_and_only_when_on() {
    let names = |tools: &[Value]| -> Vec<String> {
        tools
            .iter()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect()
    };
    for era in ERAS {
        let mut plain = caller(server(on()), era, false).await;
        let listed = plain.list().await;
        for name in TASK_TOOL_NAMES {
            assert!(names(&listed).contains(&name.to_owned()), "{era:?}: {name}");
        }
        let wait = listed
            .iter()
            .find(|tool| tool["name"] == "tasks_wait")
            .unwrap();
        assert_eq!(wait["inputSchema"]["required"], json!(["taskId"]), "{wait}");
        assert!(wait["description"].as_str().unwrap().contains("taskId"));
        if let Era::Old = era {
            // The TypeScript SDK would refuse to call it without a task.
            let ask = listed.iter().find(|tool| tool["name"] == "ask").unwrap();
            assert_eq!(ask["execution"]["taskSupport"], "optional", "{ask}");
            let forbidden = listed
                .iter()
                .find(|tool| tool["name"] == "forbidden_tool")
                .unwrap();
            assert_eq!(
                forbidden["execution"]["taskSupport"], "forbidden",
                "{forbidden}"
            );
        }
        let mut off = caller(server(TaskTools::off()), era, false).await;
        assert!(
            !names(&off.list().await)
                .iter()
                .any(|name| name.starts_with("tasks_")),
            "{era:?}: off"
        );
    }
    // A 2026-07-28 caller that declares the extension holds tasks itself.
    let mut holder = OldClient::stdio_uninitialized(server(on()));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let listed = holder
        .request("tools/list", json!({"_meta": meta}))
        .await
        .unwrap();
    assert!(
        !names(listed["tools"].as_array().unwrap())
            .iter()
            .any(|name| name.starts_with("tasks_")),
        "{listed}"
    );
    // And gets a task, not a handle.
    let created = holder
        .request(
            "tools/call",
            json!({"_meta": meta, "name": "slow", "arguments": {"ms": 10_000}}),
        )
        .await
        .unwrap();
    assert_eq!(created["resultType"], "task", "{created}");
}

#[tokio::test(start_paused = true)]
async fn a_question_is_answered_through_tasks_answer() {
    for era in ERAS {
        let mut caller = caller(server(on()), era, false).await;
        // `ask` requires a task: without task tools it is refused. Its
        // question can only be answered by a tool: the handle comes at once.
        let started = tokio::time::Instant::now();
        let handle = caller.call("ask", json!({})).await.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{era:?}: the window was waited out"
        );
        let id = task_id(&handle);
        let shown = &handle["structuredContent"];
        assert_eq!(shown["status"], "input_required", "{handle}");
        assert_eq!(shown["next"], "tasks_answer", "{handle}");
        assert_eq!(
            shown["inputRequests"]["name"]["method"], "elicitation/create",
            "{handle}"
        );
        assert!(text(&handle).contains("Name?"), "{handle}");
        let waited = caller.wait(&id, 5).await;
        assert_eq!(
            waited["structuredContent"]["status"], "input_required",
            "{waited}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{era:?}: tasks_wait waited"
        );

        let answered = caller
            .call(
                "tasks_answer",
                json!({"taskId": id, "answers": {"name": {"name": "Ada"}}}),
            )
            .await
            .unwrap();
        assert_ne!(answered["isError"], json!(true), "{answered}");
        let done = caller
            .call("tasks_wait", json!({"taskId": id}))
            .await
            .unwrap();
        assert_eq!(text(&done), "Hello, Ada!", "{era:?}: {done}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_session_that_takes_elicitation_is_asked_on_its_connection() {
    let mut caller = caller(server(on()), Era::Old, true).await;
    caller.client.answering(|request| {
        assert_eq!(request["method"], "elicitation/create", "{request}");
        json!({"action": "accept", "content": {"name": "Bob"}})
    });
    // Asked and answered within the window: the plain result.
    let done = caller.call("ask", json!({})).await.unwrap();
    assert_eq!(text(&done), "Hello, Bob!", "{done}");
    assert_eq!(caller.client.asked.len(), 1);

    // Asked while tasks_wait waits.
    let handle = caller
        .call("ask", json!({"after_ms": 5_000}))
        .await
        .unwrap();
    let id = task_id(&handle);
    let done = caller.wait(&id, 10).await;
    assert_eq!(text(&done), "Hello, Bob!", "{done}");
    assert_eq!(caller.client.asked.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_within_the_window_cancels_its_task() {
    let mut caller = caller(server(on()), Era::Old, false).await;
    caller
        .client
        .send_at_once(
            &[json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
                "params": {"name": "slow", "arguments": {"ms": 60_000}}})],
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    caller
        .client
        .send_at_once(&[
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 900, "reason": "timed out"}}),
        ])
        .await;
    let mut unfinished = json!(null);
    for _ in 0..20 {
        let listed = caller.call("tasks_list", json!({})).await.unwrap();
        unfinished = listed["structuredContent"]["tasks"].clone();
        if unfinished == json!([]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(unfinished, json!([]), "the task was not cancelled");
}

#[tokio::test(start_paused = true)]
async fn tasks_cancel_stops_the_tool_and_an_unknown_id_is_told_apart_from_nothing() {
    let mut caller = caller(server(on()), Era::New, false).await;
    let handle = caller.call("slow", json!({"ms": 60_000})).await.unwrap();
    let id = task_id(&handle);
    let cancelled = caller
        .call("tasks_cancel", json!({"taskId": id}))
        .await
        .unwrap();
    assert_eq!(
        cancelled["structuredContent"]["status"], "cancelled",
        "{cancelled}"
    );
    let waited = caller
        .call("tasks_wait", json!({"taskId": id}))
        .await
        .unwrap();
    assert_eq!(waited["isError"], json!(true), "{waited}");
    assert_eq!(
        waited["structuredContent"]["status"], "cancelled",
        "{waited}"
    );

    for tool in ["tasks_wait", "tasks_status", "tasks_cancel"] {
        let unknown = caller
            .call(tool, json!({"taskId": "0123abcd"}))
            .await
            .unwrap();
        assert_eq!(unknown["isError"], json!(true), "{unknown}");
        assert!(
            text(&unknown).contains("no task 0123abcd of yours"),
            "{unknown}"
        );
    }
    let unknown = caller
        .call("tasks_answer", json!({"taskId": "0123abcd", "answers": {}}))
        .await
        .unwrap();
    assert_eq!(unknown["isError"], json!(true), "{unknown}");
    // Arguments that are not the tool's: a clear -32602.
    let error = caller.call("tasks_wait", json!({})).await.unwrap_err();
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("taskId"),
        "{error}"
    );
    let error = caller
        .call(
            "tasks_wait",
            json!({"taskId": id, "timeoutSeconds": "soon"}),
        )
        .await
        .unwrap_err();
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("timeoutSeconds"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_client_of_this_crate_awaits_a_handle_as_the_task_it_names() {
    use mcp_tasks::client::{CallOptions, CallResponse};
    use mcp_tasks_testkit::{args, completed_text, in_process, options};

    let client = in_process(server(on())).await;
    let plain = CallOptions::default().with_declare_tasks(false);
    let response = client
        .call_tool("slow", args(json!({"ms": 10_000})), plain.clone())
        .await
        .expect("the call");
    let CallResponse::Task(state) = response else {
        panic!("a handle is read as its task: {response:?}");
    };
    let outcome = client
        .await_task(&state, &options())
        .await
        .expect("the outcome");
    assert_eq!(completed_text(&outcome), "slept 10000 ms");
    // A quick call is still a plain result.
    let response = client
        .call_tool("slow", args(json!({"ms": 10})), plain)
        .await
        .expect("the call");
    assert!(
        matches!(response, CallResponse::Complete(_)),
        "{response:?}"
    );
}

/// Calls `ask` as request `id` and reads, without answering it, the
/// question it asks on the connection, and the call's answer: the
/// question and the handle.
async fn ask_unanswered(caller: &mut Caller, id: u64) -> (Value, Value) {
    caller
        .client
        .send_at_once(&[json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "ask", "arguments": {}}})])
        .await;
    let (mut asked, mut handle) = (None, None);
    while asked.is_none() || handle.is_none() {
        let message = caller
            .client
            .next_within(Duration::from_secs(10))
            .await
            .expect("a message");
        if message["method"] == "elicitation/create" {
            asked = Some(message);
        } else if message["id"] == id {
            handle = Some(message["result"].clone());
        }
    }
    (asked.unwrap(), handle.unwrap())
}

#[tokio::test(start_paused = true)]
async fn an_answer_on_the_connection_after_the_window_answers_the_task_and_is_not_asked_again() {
    let mut caller = caller(server(on()), Era::Old, true).await;
    // The question, left unanswered (a person thinking), then the handle.
    let (asked, handle) = ask_unanswered(&mut caller, 900).await;
    assert_eq!(
        handle["structuredContent"]["status"], "input_required",
        "{handle}"
    );
    let id = task_id(&handle);
    // Answered after the window: it answers the task.
    tokio::time::sleep(Duration::from_secs(5)).await;
    caller
        .client
        .send_at_once(&[json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "accept", "content": {"name": "Cy"}}})])
        .await;
    let done = caller.wait(&id, 10).await;
    assert_eq!(text(&done), "Hello, Cy!", "{done}");
    assert!(
        caller.client.asked.is_empty(),
        "asked again: {:?}",
        caller.client.asked
    );

    // A question still out when tasks_wait comes is not asked again either.
    let (_asked, handle) = ask_unanswered(&mut caller, 901).await;
    let id = task_id(&handle);
    let waited = caller.wait(&id, 3).await;
    assert_eq!(
        waited["structuredContent"]["status"], "input_required",
        "{waited}"
    );
    assert!(
        caller.client.asked.is_empty(),
        "asked again: {:?}",
        caller.client.asked
    );
}
