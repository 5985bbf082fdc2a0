//! A task its tool finished in its first step comes with its outcome: our
//! client declares [`CREATED_OUTCOME_EXTENSION`] on its `tools/call`, a
//! server of this crate puts the outcome in the `CreateTaskResult`'s
//! `_meta` ([`OUTCOME_META`]), and the wait reads it with no `tasks/get`.
//! Against our runtime over stdio and over Streamable HTTP (its fast path),
//! the requests counted on the server's side.

use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, OUTCOME_META, TASKS_EXTENSION, TaskOutcome, TaskState,
    TaskStatus, TasksClient,
};
use serde_json::json;

use crate::support::counting::counted_client;
use crate::support::listening::TRANSPORTS;
use crate::support::runtime_server::runtime_on;
use crate::support::schema::check_def;
use crate::support::{Handler, RuntimeServer, completed_text};

async fn started(client: &TasksClient<Handler>, tool: &str, options: CallOptions) -> TaskState {
    match client.call_tool(tool, json!({"ms": 300}), options).await {
        Ok(CallResponse::Task(state)) => state,
        other => panic!("{tool}: not a task: {other:?}"),
    }
}

#[tokio::test]
async fn a_task_finished_at_once_comes_with_its_outcome_and_needs_no_get() {
    for transport in TRANSPORTS {
        let server = RuntimeServer::new(runtime_on(MemoryStore::new()).build());
        let (client, counts) = counted_client(&server, transport).await;
        let wait = AwaitOptions::default();

        // Completed (a tool result that says it failed is a completed task).
        let completed = started(&client, "is_error", CallOptions::default()).await;
        assert_eq!(completed.status, TaskStatus::Completed, "{transport:?}");
        assert!(
            completed.has_outcome(),
            "{transport:?}: {:?}",
            completed.raw
        );
        // Still a `CreateTaskResult` as the official schema has it (checked
        // where ../shared/spec is; the check says so when it is not).
        check_def("CreateTaskResult", &completed.raw).unwrap();
        let TaskOutcome::Completed(result) =
            client.await_task(completed.clone(), &wait).await.unwrap()
        else {
            panic!("{transport:?}: not completed");
        };
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            completed_text(&TaskOutcome::Completed(result)),
            "tool said no"
        );

        // Failed: the JSON-RPC error.
        let failed = started(&client, "rpc_error", CallOptions::default()).await;
        assert_eq!(failed.status, TaskStatus::Failed, "{transport:?}");
        let TaskOutcome::Failed(failure) = client.await_task(failed.clone(), &wait).await.unwrap()
        else {
            panic!("{transport:?}: not failed");
        };
        assert_eq!(
            (failure.error.code, failure.error.message.as_str()),
            (-32602, "bad input")
        );
        assert_eq!(failure.error.data, Some(json!({"field": "x"})));
        // Without an idempotency key (the tool's first step runs before the
        // task is stored, which is stored finished) as with one (stored
        // first, then the step, then its outcome).
        let unkeyed = CallOptions::default().with_idempotent(false);
        let unkeyed = started(&client, "rpc_error", unkeyed).await;
        assert!(unkeyed.has_outcome(), "{transport:?}: {:?}", unkeyed.raw);
        assert_eq!(unkeyed.error, failed.error);
        assert_eq!(
            counts.of("tasks/get"),
            0,
            "{transport:?}: read from the creation"
        );

        // What the creation carried is what `tasks/get` says.
        for carried in [&completed, &failed] {
            let read = client.get(&carried.id).await.unwrap();
            assert_eq!(
                (&read.result, &read.error),
                (&carried.result, &carried.error),
                "{transport:?}"
            );
        }
        assert_eq!(counts.of("tasks/get"), 2, "{transport:?}");

        // A task still working when answered carries nothing, and is read.
        let working = started(&client, "slow", CallOptions::default()).await;
        assert_eq!(working.status, TaskStatus::Working, "{transport:?}");
        assert!(
            working
                .raw
                .pointer(&format!("/_meta/{OUTCOME_META}"))
                .is_none()
        );
        let outcome = client.await_task(working, &wait).await.unwrap();
        assert_eq!(completed_text(&outcome), "slept 300 ms");
        assert!(counts.of("tasks/get") > 2, "{transport:?}");
    }
}

#[tokio::test]
async fn a_call_that_does_not_declare_it_gets_the_task_alone() {
    for transport in TRANSPORTS {
        let server = RuntimeServer::new(runtime_on(MemoryStore::new()).build());
        let (client, counts) = counted_client(&server, transport).await;
        // The caller's own capabilities win over the client's: the Tasks
        // extension alone, as any other client of the extension declares.
        let tasks_alone = CallOptions::default().with_meta(
            "io.modelcontextprotocol/clientCapabilities",
            json!({"extensions": {TASKS_EXTENSION: {}}}),
        );
        let completed = started(&client, "is_error", tasks_alone).await;
        assert_eq!(completed.status, TaskStatus::Completed, "{transport:?}");
        assert!(!completed.has_outcome(), "{transport:?}");
        assert!(completed.raw.get("_meta").is_none(), "{:?}", completed.raw);
        // Read as before: one `tasks/get`.
        let outcome = client
            .await_task(completed, &AwaitOptions::default())
            .await
            .unwrap();
        assert_eq!(completed_text(&outcome), "tool said no");
        assert_eq!(counts.of("tasks/get"), 1, "{transport:?}");
    }
}
