//! What the tests of this binary share: a client handler, connections to
//! the test servers, and small helpers. Each submodule is one kind of peer
//! or check.

// Sampling is deprecated (SEP-2577) but still part of the protocol: the
// handler answers it.
#![allow(deprecated)]

pub(crate) mod counting;
pub(crate) mod legacy;
pub(crate) mod listening;
pub(crate) mod lossy_proxy;
pub(crate) mod old_client;
pub(crate) mod runtime_server;
pub(crate) mod schema;
pub(crate) mod scripted;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TaskOutcome, TaskState, TasksClient};
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, JsonObject, ProtocolVersion, SamplingCapability,
    SamplingMessage, UrlElicitationCapability,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, serve_client_with_lifecycle};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

pub(crate) use runtime_server::RuntimeServer;

/// The extension's identifier, for raw JSON.
pub(crate) const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A client handler that declares form elicitation (and, if asked, URL
/// elicitation, sampling and roots), answers every form with
/// `{name: "Ada"}`, every URL request with consent, every sampling request
/// with "Paris"; it counts the elicitations. With `failing`, every
/// elicitation fails with -32603; with `hanging`, none is ever answered.
#[derive(Clone, Default)]
pub(crate) struct Handler {
    pub elicitations: Arc<Mutex<u32>>,
    pub roots: bool,
    pub sampling: bool,
    pub url: bool,
    pub failing: bool,
    pub hanging: bool,
}

impl ClientHandler for Handler {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        *self.elicitations.lock().unwrap() += 1;
        if self.hanging {
            std::future::pending::<()>().await;
        }
        if self.failing {
            return Err(ErrorData::internal_error(
                "the user's terminal is gone",
                None,
            ));
        }
        Ok(match request {
            ElicitRequestParams::UrlElicitationParams { .. } => {
                ElicitResult::new(ElicitationAction::Accept)
            }
            _ => ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"})),
        })
    }

    async fn create_message(
        &self,
        _request: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("Paris"),
            "test-model".to_owned(),
        ))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::default();
        if self.url {
            elicitation.form = Some(FormElicitationCapability::default());
            elicitation.url = Some(UrlElicitationCapability::default());
        }
        capabilities.elicitation = Some(elicitation);
        if self.roots {
            capabilities.roots = Some(Default::default());
        }
        if self.sampling {
            capabilities.sampling = Some(SamplingCapability::default());
        }
        ClientConfig::new(capabilities, Implementation::new("test-client", "0"))
    }
}

/// A 2026-07-28 connection (`server/discover`, no `initialize`).
pub(crate) fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// A client connected to `server` over an in-process duplex.
pub(crate) async fn in_process(server: RuntimeServer) -> TasksClient<Handler> {
    in_process_with(server, Handler::default()).await
}

/// [`in_process`] with a chosen handler.
pub(crate) async fn in_process_with(
    server: RuntimeServer,
    handler: Handler,
) -> TasksClient<Handler> {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let running = serve_client_with_lifecycle(handler, client_io, lifecycle())
        .await
        .expect("connect in process");
    TasksClient::new(running)
}

/// Wait options for the tests: a 20 s deadline.
pub(crate) fn options() -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)))
}

/// Calls `tool`, which must answer with a task, and returns its seed state.
pub(crate) async fn task_of<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    arguments: Value,
) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("call")
    {
        CallResponse::Task(state) => state,
        other => panic!("{tool} should be a task: {other:?}"),
    }
}

/// Tool arguments from a JSON object literal.
pub(crate) fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// The first text of a completed outcome; panics on any other outcome.
pub(crate) fn completed_text(outcome: &TaskOutcome) -> String {
    match outcome {
        TaskOutcome::Completed(result) => result
            .content
            .first()
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_default(),
        other => panic!("expected completed, got {other:?}"),
    }
}
