//! The test kit of the mcp-tasks workspace: what the integration tests and
//! benches of several crates share. **Not published** (`publish = false`),
//! as rustls keeps `rustls-test`: no API promise, it changes with the tests.
//!
//! * peers: a client [`Handler`], a server on our runtime
//!   ([`runtime_server`]), scripted servers ([`scripted`] for the
//!   2026-07-28 era, [`legacy`] for 2025-11-25), a raw 2025-11-25 client
//!   ([`old_client`]), counting and listening clients ([`counting`],
//!   [`listening`]), a proxy that loses an answer ([`lossy_proxy`]);
//! * [`serve`]: the one harness that starts a server binary (`mcp-tasks
//!   serve`, a fixture) and reads the address of its `listening on` line;
//! * [`calls`]: the text of a result, a wait that returns at input;
//! * [`schema`]: checks against the official JSON schemas;
//! * [`wait`]: temp files, free ports, waiting for a condition;
//! * [`stats`]: the percentiles and medians the benches print, and
//!   [`bench_peers`]: the two task servers the library's benches compare.
//!
//! Only integration tests (`tests/`) and benches use it: a crate's unit
//! tests would see a second copy of `mcp-tasks` (the kit depends on the
//! library, the library dev-depends on the kit).

// Sampling is deprecated (SEP-2577) but still part of the protocol: the
// handler answers it.
#![allow(deprecated)]
// A kit of test peers: its structs are documented as a whole, their fields
// by the struct's doc, and they are test fixtures, not values to print.
#![allow(missing_docs, missing_debug_implementations)]

pub mod bench_peers;
pub mod calls;
pub mod counting;
pub mod handles;
pub mod legacy;
pub mod listening;
pub mod lossy_proxy;
pub mod old_client;
pub mod runtime_server;
pub mod schema;
pub mod scripted;
pub mod serve;
pub mod stats;
pub mod wait;

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

pub use runtime_server::RuntimeServer;

/// The extension's identifier, for raw JSON.
pub const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A client handler that declares form elicitation (and, if asked, URL
/// elicitation, sampling and roots), answers every form with
/// `{name: "Ada"}`, every URL request with consent, every sampling request
/// with "Paris"; it counts the elicitations. With `failing`, every
/// elicitation fails with -32603; with `hanging`, none is ever answered.
#[derive(Clone, Default)]
pub struct Handler {
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
pub fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// A client connected to `server` over an in-process duplex.
pub async fn in_process(server: RuntimeServer) -> TasksClient<Handler> {
    in_process_with(server, Handler::default()).await
}

/// [`in_process`] with a chosen handler.
pub async fn in_process_with(server: RuntimeServer, handler: Handler) -> TasksClient<Handler> {
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
pub fn options() -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)))
}

/// Calls `tool`, which must answer with a task, and returns its seed state.
pub async fn task_of<H: ClientHandler>(
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
pub fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// The first text of a completed outcome; panics on any other outcome.
pub fn completed_text(outcome: &TaskOutcome) -> String {
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
