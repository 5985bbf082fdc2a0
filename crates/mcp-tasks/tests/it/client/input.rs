//! Input during a task, against the scripted server: every kind of request
//! answered by the client's own handler, and the ways answering can fail.

use mcp_tasks::client::InputError;
use mcp_tasks::{AwaitOptions, Error, InputMode, TaskOutcome};
use serde_json::json;

use crate::support::Handler;
use crate::support::schema::check_request;
use crate::support::scripted::{
    connect, get_value, gets, input_required, name_form, task_id, text_result,
};

#[tokio::test(start_paused = true)]
async fn sampling_is_answered_by_the_handler_when_declared() {
    let handler = Handler {
        sampling: true,
        ..Handler::default()
    };
    let question = json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
        "maxTokens": 10}});
    let (client, log) = connect(
        handler,
        gets(vec![
            input_required("capital", question),
            get_value("completed", json!({"result": text_result("ok")})),
        ]),
    )
    .await;
    let outcome = client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)));
    let updates = log.of("tasks/update");
    assert_eq!(updates.len(), 1);
    let answer = &updates[0].params()["inputResponses"]["capital"];
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["content"]["text"], "Paris");
    assert_eq!(answer["model"], "test-model");
    check_request(&updates[0].message).unwrap();
}

#[tokio::test(start_paused = true)]
async fn url_mode_elicitation_is_consent_without_content() {
    let handler = Handler {
        url: true,
        ..Handler::default()
    };
    let consent = json!({"method": "elicitation/create", "params": {"mode": "url",
        "message": "Sign in to continue", "url": "https://example.com/login?state=1"}});
    let (client, log) = connect(
        handler.clone(),
        gets(vec![
            input_required("login", consent),
            get_value("completed", json!({"result": text_result("signed in")})),
        ]),
    )
    .await;
    client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap();
    let updates = log.of("tasks/update");
    assert_eq!(
        updates[0].params()["inputResponses"],
        json!({"login": {"action": "accept"}})
    );
    check_request(&updates[0].message).unwrap();
    assert_eq!(*handler.elicitations.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failing_handler_ends_the_wait_naming_the_key() {
    let handler = Handler {
        failing: true,
        ..Handler::default()
    };
    let (client, log) = connect(handler, gets(vec![input_required("name", name_form())])).await;
    let error = client
        .await_task(task_id(), &AwaitOptions::default())
        .await
        .unwrap_err();
    let Error::InputHandler { key, source } = &error else {
        panic!("{error}")
    };
    assert_eq!(key, "name");
    assert!(source.to_string().contains("terminal is gone"), "{source}");
    assert!(error.to_string().contains("\"name\""), "{error}");
    assert!(log.of("tasks/update").is_empty(), "nothing is sent");
}

#[tokio::test(start_paused = true)]
async fn a_resolver_that_cannot_answer_ends_the_wait_naming_the_key() {
    let resolver = InputMode::resolver(|requests| async move {
        let key = requests.into_keys().next().unwrap_or_default();
        Err(InputError::new(
            key,
            "the required field `name` has no value",
        ))
    });
    let (client, log) = connect(
        Handler::default(),
        gets(vec![input_required("name", name_form())]),
    )
    .await;
    let error = client
        .await_task(task_id(), &AwaitOptions::default().with_input(resolver))
        .await
        .unwrap_err();
    let Error::InputHandler { key, source } = &error else {
        panic!("{error}")
    };
    assert_eq!(key, "name");
    assert!(source.to_string().contains("has no value"), "{source}");
    assert!(log.of("tasks/update").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_working_poll_resets_the_stall_count() {
    // The resolver answers `a`, never `b`. With 3 stall polls: one answer,
    // two idle polls, a working poll (which resets the count), two idle
    // polls again, then the task completes: no stall.
    let resolver = InputMode::resolver(|requests| async move {
        Ok(requests
            .into_keys()
            .filter(|key| key == "a")
            .map(|key| (key, json!({"action": "accept", "content": {"name": "Ada"}})))
            .collect())
    });
    let both = get_value(
        "input_required",
        json!({"pollIntervalMs": 100, "inputRequests": {"a": name_form(), "b": name_form()}}),
    );
    let only_b = input_required("b", name_form());
    let script = gets(vec![
        both,
        only_b.clone(),
        only_b.clone(),
        get_value("working", json!({"pollIntervalMs": 100})),
        only_b.clone(),
        only_b,
        get_value("completed", json!({"result": text_result("done")})),
    ]);
    let (client, log) = connect(Handler::default(), script).await;
    let options = AwaitOptions::default()
        .with_input(resolver)
        .with_stall_detection(3, false);
    let outcome = client.await_task(task_id(), &options).await.unwrap();
    assert!(matches!(outcome, TaskOutcome::Completed(_)), "{outcome:?}");
    assert_eq!(log.of("tasks/update").len(), 1);
    assert_eq!(log.of("tasks/get").len(), 7);
}
