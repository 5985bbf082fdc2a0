//! `mcp-tasks serve --http` as a child process on any store (the kit's
//! `serve` harness), and a client of it: for the tests that stop a server
//! mid-task (SIGKILL, SIGTERM) and start it again, or run several replicas
//! of it.

use std::time::{Duration, Instant};

use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, InputMode, TaskId, TaskOutcome, TaskState, TasksClient,
};
use rmcp::model::JsonObject;
use serde_json::Value;

/// `mcp-tasks serve --http` as a child process, killed when dropped: the
/// kit's harness, given this build's binary.
pub(crate) use mcp_tasks_testkit::serve::{Forms, Logs, Served, client_of};

pub(crate) fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// Calls `tool`, which must make a task.
pub(crate) async fn start(client: &TasksClient<Forms>, tool: &str, arguments: Value) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("{tool} should make a task, got {other:?}"),
    }
}

/// Reads task `id` every 20 ms until `done` holds, for at most `within`.
pub(crate) async fn until(
    client: &TasksClient<Forms>,
    id: &TaskId,
    within: Duration,
    mut done: impl FnMut(&TaskState) -> bool,
) -> TaskState {
    let deadline = Instant::now() + within;
    loop {
        let state = client.get(id).await.expect("tasks/get");
        if done(&state) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {:?} {:?}",
            state.status,
            state.status_message
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The text of a completed task's result.
pub(crate) fn text_of(outcome: &TaskOutcome) -> String {
    match outcome {
        TaskOutcome::Completed(result) => serde_json::to_value(result).expect("json")["content"][0]
            ["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        other => panic!("expected a completed task, got {other:?}"),
    }
}

/// Await options: a 30 s deadline, input requests returned to the test.
pub(crate) fn returned() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(30)))
        .with_input(InputMode::Return)
}
