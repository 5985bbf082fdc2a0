//! In-process tests of the task fixture tools.

use std::time::Duration;

use mcp_tasks::{CallOptions, CallResponse, InputMode, TaskOutcome, TaskStatus};
use serde_json::json;

use crate::server::tests::{
    Forms, TASKS, accept, args, completed, in_process, input_required, sync_text, task_of,
    undeclared, waiting,
};

#[tokio::test]
async fn greet_is_synchronous_even_with_the_extension_declared() {
    let client = in_process(()).await;
    let declared = CallOptions::default();
    assert_eq!(
        sync_text(&client, "greet", json!({}), declared.clone()).await,
        "Hello, World!"
    );
    assert_eq!(
        sync_text(&client, "greet", json!({"name": "sep-2243"}), declared).await,
        "Hello, sep-2243!"
    );
    assert_eq!(
        sync_text(&client, "greet", json!({"name": "Ada"}), undeclared()).await,
        "Hello, Ada!"
    );
}

#[tokio::test]
async fn slow_compute_is_a_task_when_declared_and_synchronous_otherwise() {
    let client = in_process(()).await;
    let arguments = json!({"seconds": 0.05, "label": "lifecycle"});
    let state = task_of(&client, "slow_compute", arguments.clone()).await;
    assert_eq!(state.status, TaskStatus::Working);
    assert_eq!(state.poll_interval, Some(Duration::from_millis(20)));
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "lifecycle: computed in 0.05 s");
    assert_eq!(
        sync_text(&client, "slow_compute", arguments, undeclared()).await,
        "lifecycle: computed in 0.05 s"
    );
    // A long one can be cancelled.
    let state = task_of(&client, "slow_compute", json!({"seconds": 60})).await;
    client.cancel(&state.id).await.unwrap();
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Cancelled(_)), "{outcome:?}");
    // Bad arguments are -32602.
    for bad in [json!({}), json!({"seconds": -1}), json!({"seconds": "1"})] {
        let error = client
            .call_tool("slow_compute", args(bad), CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32602), "{error}");
    }
}

#[tokio::test]
async fn failing_job_needs_the_extension_and_completes_with_is_error() {
    let client = in_process(()).await;
    let error = client
        .call_tool("failing_job", (), undeclared())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(-32021));
    assert!(error.requires_tasks_extension(), "{error}");
    let state = task_of(&client, "failing_job", json!({})).await;
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    let TaskOutcome::Completed(result) = outcome else {
        panic!("a tool error is a completed task: {outcome:?}");
    };
    assert_eq!(result.is_error, Some(true));
    assert!(!result.content.is_empty());
}

#[tokio::test]
async fn protocol_error_job_ends_failed_with_a_json_rpc_error() {
    let client = in_process(()).await;
    let state = task_of(&client, "protocol_error_job", json!({})).await;
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    let TaskOutcome::Failed(failure) = outcome else {
        panic!("expected failed: {outcome:?}");
    };
    assert_eq!(failure.error.code, -32603);
    assert_eq!(
        failure.error.message,
        "protocol_error_job failed on purpose"
    );
    assert!(failure.state.result.is_none());
}

#[tokio::test]
async fn confirm_delete_asks_once_then_completes_after_tasks_update() {
    let client = in_process(Forms).await;
    let state = task_of(&client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let asked = input_required(&client, &state, 1).await;
    assert_eq!(asked.input_requests.keys().collect::<Vec<_>>(), ["confirm"]);
    let request = &asked.input_requests["confirm"];
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "form");
    let schema = &request["params"]["requestedSchema"];
    assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
    assert!(schema["properties"]["confirm"]["title"].is_string());
    assert_eq!(schema["required"], json!(["confirm"]));
    // An unknown key is acknowledged and ignored.
    client
        .update(
            &state.id,
            [("unknown-key".to_owned(), json!({"ignored": true}))].into(),
        )
        .await
        .unwrap();
    assert_eq!(
        client.get(&state.id).await.unwrap().status,
        TaskStatus::InputRequired
    );
    client
        .update(
            &state.id,
            [("confirm".to_owned(), accept(json!({"confirm": true})))].into(),
        )
        .await
        .unwrap();
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "Deleted a.txt");

    // Declined: it completes and keeps the file.
    let state = task_of(&client, "confirm_delete", json!({"filename": "b.txt"})).await;
    input_required(&client, &state, 1).await;
    client
        .update(
            &state.id,
            [("confirm".to_owned(), json!({"action": "decline"}))].into(),
        )
        .await
        .unwrap();
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "Kept b.txt");
}

#[tokio::test]
async fn multi_input_keeps_the_unanswered_key_after_a_partial_update() {
    let client = in_process(Forms).await;
    let state = task_of(&client, "multi_input", json!({})).await;
    let asked = input_required(&client, &state, 2).await;
    assert_eq!(
        asked.input_requests.keys().collect::<Vec<_>>(),
        ["confirm", "name"]
    );
    // The conformance harness answers each key with both fields.
    client
        .update(
            &state.id,
            [(
                "confirm".to_owned(),
                accept(json!({"name": "partial-1", "confirm": true})),
            )]
            .into(),
        )
        .await
        .unwrap();
    let after = client.get(&state.id).await.unwrap();
    assert_eq!(after.status, TaskStatus::InputRequired);
    assert_eq!(after.input_requests.keys().collect::<Vec<_>>(), ["name"]);
    client
        .update(
            &state.id,
            [(
                "name".to_owned(),
                accept(json!({"name": "partial-2", "confirm": true})),
            )]
            .into(),
        )
        .await
        .unwrap();
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "Hello, partial-2! confirmed: true");
}

#[tokio::test]
async fn test_tool_with_task_runs_an_mrtr_round_then_becomes_a_task() {
    let client = in_process(Forms).await;
    let CallResponse::InputRequired(round) = client
        .call_tool(
            "test_tool_with_task",
            args(json!({})),
            CallOptions::default(),
        )
        .await
        .unwrap()
    else {
        panic!("round 1 must be an InputRequiredResult");
    };
    let wire = serde_json::to_value(&round).unwrap();
    assert_eq!(wire["resultType"], "input_required");
    assert!(wire.get("taskId").is_none());
    let requests = round.input_requests.as_ref().expect("inputRequests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["user_name"]);
    let request = serde_json::to_value(&requests["user_name"]).unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["name"]["type"],
        "string"
    );

    // A retry without a usable answer is asked again.
    let declined = [("user_name".to_owned(), json!({"action": "decline"}))].into();
    let again = client
        .call_tool(
            "test_tool_with_task",
            args(json!({})),
            CallOptions::default().with_mrtr_retry(Some(declined), round.request_state.clone()),
        )
        .await
        .unwrap();
    assert!(matches!(again, CallResponse::InputRequired(_)), "{again:?}");

    // The retry with the answer becomes a task that greets it.
    let answered = [("user_name".to_owned(), accept(json!({"name": "Alice"})))].into();
    let CallResponse::Task(state) = client
        .call_tool(
            "test_tool_with_task",
            args(json!({})),
            CallOptions::default().with_mrtr_retry(Some(answered), round.request_state.clone()),
        )
        .await
        .unwrap()
    else {
        panic!("round 2 must create a task");
    };
    assert!(state.raw.get("requestState").is_none());
    let outcome = client.await_task(&state, &waiting()).await.unwrap();
    assert_eq!(completed(&outcome), "Hello, Alice!");

    // All in one, the MRTR round answered by a resolver.
    let resolver = InputMode::resolver(|requests| async move {
        Ok(requests
            .into_keys()
            .map(|key| (key, accept(json!({"name": "Bob"}))))
            .collect())
    });
    let outcome = client
        .call_and_await(
            "test_tool_with_task",
            (),
            CallOptions::default(),
            &waiting().with_input(resolver),
        )
        .await
        .unwrap();
    assert_eq!(completed(&outcome), "Hello, Bob!");
}

#[tokio::test]
async fn input_tools_name_every_capability_the_client_did_not_declare() {
    let client = in_process(()).await;
    for tool in ["test_tool_with_task", "confirm_delete", "multi_input"] {
        let error = client
            .call_tool(tool, args(json!({"filename": "x"})), CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(-32021), "{tool}: {error}");
        let data = error.rpc_error().and_then(|e| e.data.clone()).unwrap();
        assert_eq!(
            data["requiredCapabilities"]["elicitation"],
            json!({"form": {}})
        );
        assert!(data["requiredCapabilities"].get("extensions").is_none());
    }
    let error = client
        .call_tool("test_tool_with_task", (), undeclared())
        .await
        .unwrap_err();
    let data = error.rpc_error().and_then(|e| e.data.clone()).unwrap();
    assert_eq!(data["requiredCapabilities"]["extensions"][TASKS], json!({}));
    assert!(data["requiredCapabilities"]["elicitation"].is_object());
}
