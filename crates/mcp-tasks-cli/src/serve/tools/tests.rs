//! In-process tests of the demo tools.

use std::time::Duration;

use mcp_tasks::{CallOptions, TaskOutcome};
use serde_json::json;

use crate::serve::tests::{
    Forms, TASKS, accept, args, completed, in_process, input_required, sync_text, task_of,
    undeclared, waiting,
};

#[test]
fn each_demo_tool_is_listed_once_with_a_schema() {
    let names: Vec<String> = super::list()
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["long_job", "confirm_action", "failing_tool", "sleep"]
    );
    assert_eq!(super::names().collect::<Vec<_>>(), names);
    for name in &names {
        let tool = super::find(name).expect("found by name");
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()));
    }
    assert!(super::find("greet").is_none());
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
        .call_tool("sleep", (), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602));
    let error = client
        .call_tool("no_such_tool", (), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602));
    // Fixtures of the conformance server are not served here.
    let error = client
        .call_tool("greet", (), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32602));
}

#[tokio::test]
async fn bad_arguments_are_invalid_params_before_any_task() {
    let client = in_process(Forms).await;
    for (tool, bad) in [
        ("long_job", json!({"steps": 10_001})),
        ("long_job", json!({"steps": -1})),
        ("long_job", json!({"step_ms": "fast"})),
        ("confirm_action", json!({"action": 7})),
        ("sleep", json!({"ms": 1.5})),
    ] {
        let error = client
            .call_tool(tool, args(bad.clone()), CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32602), "{tool} {bad}: {error}");
    }
    // 5.0 is an integer.
    assert_eq!(
        sync_text(&client, "sleep", json!({"ms": 1.0}), undeclared()).await,
        "slept 1 ms"
    );
}

#[tokio::test]
async fn confirm_action_names_every_capability_the_client_did_not_declare() {
    let client = in_process(()).await;
    let error = client
        .call_tool("confirm_action", (), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32021), "{error}");
    let data = error.rpc_error().and_then(|e| e.data.clone()).unwrap();
    assert_eq!(
        data["requiredCapabilities"]["elicitation"],
        json!({"form": {}})
    );
    assert!(data["requiredCapabilities"].get("extensions").is_none());
    let error = client
        .call_tool("confirm_action", (), undeclared())
        .await
        .unwrap_err();
    let data = error.rpc_error().and_then(|e| e.data.clone()).unwrap();
    assert_eq!(data["requiredCapabilities"]["extensions"][TASKS], json!({}));
    assert!(data["requiredCapabilities"]["elicitation"].is_object());
}
