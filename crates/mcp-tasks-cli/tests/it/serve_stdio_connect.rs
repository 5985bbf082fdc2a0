//! The library's `TasksClient::connect` against the real `mcp-tasks serve
//! --stdio` as a child process: started as a program with its arguments
//! and as a command line, it is reached with `server/discover`, and waits
//! listen (the server suggests polling every 10 minutes; the waits end
//! after 20 s, so a wait that finishes heard the task).

use std::time::Duration;

use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, ConnectOptions, Endpoint, Era, TaskOutcome,
    TasksClient,
};
use serde_json::json;

use crate::support::{BIN, stdio_server_polling};

/// Ten minutes, in milliseconds.
const PATIENT_MS: u64 = 600_000;

fn endpoints() -> [Endpoint; 2] {
    let interval = PATIENT_MS.to_string();
    [
        Endpoint::command(
            BIN,
            [
                "serve",
                "--stdio",
                "--store",
                "memory",
                "--poll-interval",
                interval.as_str(),
            ],
        ),
        Endpoint::shell(stdio_server_polling(PATIENT_MS)),
    ]
}

/// Waits that allow the server's 10 minutes and end after 20 s.
fn patient_wait() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_interval_bounds(Duration::from_millis(10), Duration::from_secs(600))
}

#[tokio::test]
async fn a_stdio_child_is_connected_in_one_call_and_its_tasks_are_heard() {
    for endpoint in endpoints() {
        let client = TasksClient::connect(endpoint.clone(), (), ConnectOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{endpoint:?}: {error}"));
        assert!(client.can_listen(), "{endpoint:?}");
        assert_eq!(client.era(), Era::Extension, "{endpoint:?}");

        let outcome = client
            .call_and_await(
                "sleep",
                json!({"ms": 300}),
                CallOptions::default(),
                &patient_wait(),
            )
            .await
            .unwrap_or_else(|error| panic!("{endpoint:?}: {error}"));
        assert_eq!(outcome.into_text().unwrap(), "slept 300 ms", "{endpoint:?}");

        // Cancelled while it sleeps: the same outcome type as a wait's.
        let CallResponse::Task(task) = client
            .call_tool("sleep", json!({"ms": 60_000}), CallOptions::default())
            .await
            .unwrap()
        else {
            panic!("{endpoint:?}: sleep is a task");
        };
        let outcome = client
            .cancel_and_wait(&task.id, &patient_wait())
            .await
            .unwrap();
        assert!(
            matches!(outcome, TaskOutcome::Cancelled(_)),
            "{endpoint:?}: {outcome:?}"
        );
        client.close().await;
    }
}
