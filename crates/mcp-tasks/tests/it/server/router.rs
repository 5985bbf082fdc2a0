//! A server written with rmcp's tool macros, made task-capable with
//! `TaskRouter`, served with the library's HTTP recipe on 127.0.0.1 and
//! driven by a `TasksClient`: policies, the tool's `TaskContext`, typed
//! forms on both sides, and cancellation through rmcp's token extractor.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{TaskContext, TaskRouter, TaskRuntime, ToolTasks};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    AwaitOptions, CallOptions, CallResponse, Elicited, Error, InputMode, TaskOutcome, TasksClient,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ElicitationSchema, ServerCapabilities, ServerConfig};
use rmcp::service::serve_client_with_lifecycle;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{Handler, args, completed_text, lifecycle};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Target {
    target: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct Approval {
    approve: bool,
    reason: Option<String>,
}

#[derive(Clone)]
struct Builds {
    tasks: TaskRouter<Self>,
    seen: Arc<Mutex<Vec<String>>>,
}

#[tool_router]
impl Builds {
    /// Builds a target (required to run as a task).
    #[tool]
    async fn build(
        &self,
        Parameters(target): Parameters<Target>,
        task: TaskContext,
    ) -> Result<String, ErrorData> {
        task.set_status_message(format!("building {}", target.target))
            .await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(format!(
            "built {} (task: {})",
            target.target,
            task.is_task()
        ))
    }

    /// Says whether it runs as a task (optional).
    #[tool]
    async fn where_am_i(&self, task: TaskContext) -> String {
        format!("task: {}", task.is_task())
    }

    /// Has no task policy: always synchronous.
    #[tool]
    async fn version(&self, task: TaskContext) -> String {
        format!("1.0 (task: {})", task.is_task())
    }

    /// Asks for approval with a typed form (required).
    #[tool]
    async fn deploy(&self, task: TaskContext) -> Result<String, ErrorData> {
        Ok(
            match task
                .elicit::<Approval>("approval", "Approve the deploy?")
                .await?
            {
                Elicited::Accept(approval) => format!(
                    "approve: {}, reason: {}",
                    approval.approve,
                    approval.reason.unwrap_or_default()
                ),
                Elicited::Decline => "declined".to_owned(),
                _ => "cancelled".to_owned(),
            },
        )
    }

    /// Asks for a name with a form built with rmcp's builder (required).
    #[tool]
    async fn rename(&self, task: TaskContext) -> Result<String, ErrorData> {
        let form = ElicitationSchema::builder()
            .required_string("name")
            .build()
            .map_err(|error| ErrorData::internal_error(error, None))?;
        let answer = task
            .elicit_form::<serde_json::Map<String, serde_json::Value>>("name", "New name?", form)
            .await?;
        Ok(match answer {
            Elicited::Accept(content) => format!("renamed to {}", content["name"]),
            _ => "kept".to_owned(),
        })
    }

    /// Runs until cancelled, watching rmcp's cancellation token (required).
    #[tool]
    async fn forever(&self, token: CancellationToken) -> String {
        let seen = self.seen.clone();
        tokio::spawn(async move {
            token.cancelled().await;
            seen.lock()
                .unwrap()
                .push("forever saw its token cancelled".into());
        });
        std::future::pending().await
    }
}

#[tool_handler(router = self.tasks)]
impl ServerHandler for Builds {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    mcp_tasks::delegate_task_methods!(tasks);
}

/// Serves a fresh `Builds` over HTTP on 127.0.0.1; returns a connected
/// client and what the tools saw.
async fn connect() -> (TasksClient<Handler>, Arc<Mutex<Vec<String>>>) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(50))
        .build();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = Builds {
        tasks: TaskRouter::new(Builds::tool_router(), runtime.clone())
            .with_tool("build", ToolTasks::required())
            .with_tool("where_am_i", ToolTasks::optional())
            .with_tool("deploy", ToolTasks::required())
            .with_tool("rename", ToolTasks::required())
            .with_tool("forever", ToolTasks::required()),
        seen: seen.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(StreamableHttpServer::new(server, runtime).serve(listener));
    let transport = StreamableHttpClientTransport::from_uri(url);
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect over HTTP");
    (TasksClient::new(running), seen)
}

fn options() -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)))
}

fn undeclared() -> CallOptions {
    CallOptions::default().with_declare_tasks(false)
}

#[tokio::test]
async fn macro_tools_run_as_their_policy_says() {
    let (client, _) = connect().await;
    let tools = client.running().list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|tool| tool.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "build",
            "deploy",
            "forever",
            "rename",
            "version",
            "where_am_i"
        ]
    );

    // Required: a task, its status message seen by the observer, its result.
    let CallResponse::Task(state) = client
        .call_tool(
            "build",
            args(json!({"target": "app"})),
            CallOptions::default(),
        )
        .await
        .unwrap()
    else {
        panic!("build must become a task")
    };
    let messages = Arc::new(Mutex::new(Vec::new()));
    let observing = options().with_observer({
        let messages = messages.clone();
        move |state| messages.lock().unwrap().push(state.status_message.clone())
    });
    let outcome = client.await_task(&state, &observing).await.unwrap();
    assert_eq!(completed_text(&outcome), "built app (task: true)");
    assert!(
        messages
            .lock()
            .unwrap()
            .contains(&Some("building app".to_owned())),
        "{messages:?}"
    );
    let refused = client
        .call_tool("build", args(json!({"target": "app"})), undeclared())
        .await
        .unwrap_err();
    assert!(refused.requires_tasks_extension(), "{refused}");

    // Arguments that do not parse: rmcp's tool error, as the task's result.
    let outcome = client
        .call_and_await(
            "build",
            args(json!({"target": 3})),
            CallOptions::default(),
            &options(),
        )
        .await
        .unwrap();
    let TaskOutcome::Completed(result) = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result.is_error, Some(true), "{result:?}");

    // Optional: a task when declared, synchronous otherwise.
    let CallResponse::Task(state) = client
        .call_tool("where_am_i", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("where_am_i must become a task when the extension is declared")
    };
    let outcome = client.await_task(&state, &options()).await.unwrap();
    assert_eq!(completed_text(&outcome), "task: true");
    let CallResponse::Complete(result) = client
        .call_tool("where_am_i", (), undeclared())
        .await
        .unwrap()
    else {
        panic!("where_am_i must run at once without the extension")
    };
    assert_eq!(result.content[0].as_text().unwrap().text, "task: false");

    // No policy: synchronous, declared or not.
    let CallResponse::Complete(result) = client
        .call_tool("version", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("version has no policy: it runs at once")
    };
    assert_eq!(
        result.content[0].as_text().unwrap().text,
        "1.0 (task: false)"
    );
}

#[tokio::test]
async fn a_typed_form_is_answered_with_a_typed_value() {
    let (client, _) = connect().await;
    let accept = options().with_input(InputMode::forms(|request| async move {
        assert_eq!(request.key(), "approval");
        assert_eq!(request.message(), "Approve the deploy?");
        let fields: Vec<_> = request.form().fields().iter().map(|f| f.name()).collect();
        assert!(fields.contains(&"approve"), "{fields:?}");
        Ok(Elicited::Accept(Approval {
            approve: true,
            reason: Some("tests pass".into()),
        }))
    }));
    let outcome = client
        .call_and_await("deploy", (), CallOptions::default(), &accept)
        .await
        .unwrap();
    assert_eq!(
        completed_text(&outcome),
        "approve: true, reason: tests pass"
    );

    let decline = options().with_input(InputMode::forms(|_| async {
        Ok(Elicited::<Approval>::Decline)
    }));
    let outcome = client
        .call_and_await("deploy", (), CallOptions::default(), &decline)
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "declined");

    // A form from rmcp's builder, answered as a map.
    let named = options().with_input(InputMode::forms(|request| async move {
        assert_eq!(request.form().fields()[0].name(), "name");
        Ok(Elicited::Accept(json!({"name": "Ada"})))
    }));
    let outcome = client
        .call_and_await("rename", (), CallOptions::default(), &named)
        .await
        .unwrap();
    assert_eq!(completed_text(&outcome), "renamed to \"Ada\"");

    // A value that does not fit the form is never sent.
    #[derive(serde::Serialize)]
    struct Wrong {
        approve: &'static str,
    }
    let wrong = options().with_input(InputMode::forms(|_| async {
        Ok(Elicited::Accept(Wrong { approve: "yes" }))
    }));
    let error = client
        .call_and_await("deploy", (), CallOptions::default(), &wrong)
        .await
        .unwrap_err();
    let Error::InvalidInputResponse { key, reason } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(key, "approval");
    assert!(reason.contains("approve"), "{reason}");
}

#[tokio::test]
async fn cancelling_a_task_cancels_the_tools_token() {
    let (client, seen) = connect().await;
    let CallResponse::Task(state) = client
        .call_tool("forever", (), CallOptions::default())
        .await
        .unwrap()
    else {
        panic!("forever must become a task")
    };
    // The request was answered long ago; the task's token is not the
    // request's, so nothing fires until the task is cancelled.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    let outcome = client.cancel_and_wait(&state.id, &options()).await.unwrap();
    assert_eq!(outcome.status(), mcp_tasks::TaskStatus::Cancelled);
    for _ in 0..100 {
        if !seen.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["forever saw its token cancelled".to_owned()]
    );
}
