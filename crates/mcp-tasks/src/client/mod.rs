//! The client half: call a tool, await its task, answer its input, cancel it.
//!
//! [`TasksClient`] wraps a running rmcp client (any transport) and adds what
//! rmcp 3.11 leaves to its users: the extension declared per request, typed
//! task state, an await with clamped intervals, a deadline, retries and an
//! input loop, MRTR rounds before a task exists, and a listen mode that
//! hears the task's `notifications/tasks` instead of polling ([`listen`]).
//! On a connection opened with `initialize` to a server without the
//! extension, the same calls drive the 2025-11-25 era's tasks ([`legacy`]).
//!
//! [`TasksClient::connect`] opens the connection too, from a URL or a child
//! process, with the listen channel and the legacy pieces wired in the one
//! order that works ([`connect`] says what and why);
//! [`TasksClient::new`] wraps a connection built by hand. A client given a
//! [`journal`] records the tasks it creates; [`resume`] awaits them again
//! from another process.

pub mod answer_bound;
#[cfg(feature = "http-client")]
pub mod bearer;
mod call;
pub mod connect;
mod deadline;
pub mod error;
mod input;
pub mod journal;
pub mod legacy;
pub mod line_check;
pub mod listen;
pub mod many;
mod read;
pub mod resume;
mod state;
mod unanswered;
mod wait;
mod wire;

use std::sync::Arc;
use std::time::Duration;

pub use answer_bound::DEFAULT_MAX_ANSWER_BYTES;
#[cfg(any(feature = "gateway", feature = "__fuzzing", test))]
pub(crate) use call::read_call_result;
pub use call::{CallOptions, CallResponse, arguments};
pub use connect::{ConnectOptions, Endpoint};
pub use deadline::DEFAULT_REQUEST_TIMEOUT;
pub use error::{Error, ErrorKind, Stage};
pub use input::{FormRequest, InputError, InputMode, InputResolver, validate_input_response};
pub use line_check::{CheckedReader, LineCheck};
pub use listen::{ListenChannel, ListenMode};
pub use many::TaskOutcomes;
#[cfg(feature = "__fuzzing")]
pub(crate) use read::{read_ack, read_task_result};
pub use resume::{Resumed, ResumedTasks, Unfinished};
use rmcp::model::{
    ClientCapabilities, ClientRequest, InputResponses, JsonObject, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestHandle, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient};
pub use state::{Era, TaskFailure, TaskOutcome, TaskState, result_text};
pub use unanswered::{InputKind, Unanswered};
pub use wait::{AwaitFrom, AwaitOptions, StateObserver};

use self::error::ProtocolViolation;
use self::line_check::UnusableLine;
use crate::task::{CREATED_OUTCOME_EXTENSION, TASKS_EXTENSION, TaskId};
use crate::telemetry::client_spans;

/// Adds the Tasks extension to a capabilities value, for callers who want
/// to declare it client-wide (for example in their `ClientHandler::get_info`).
/// [`TasksClient`] declares it per request whether or not this is used.
pub fn with_tasks_extension(mut capabilities: ClientCapabilities) -> ClientCapabilities {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(TASKS_EXTENSION.to_owned(), JsonObject::new());
    capabilities
}

/// A client for the Tasks extension over a running rmcp client.
///
/// Cheap to clone; every clone drives the same connection. On a connection
/// opened with `initialize` to a server without the extension it drives
/// the 2025-11-25 era's tasks instead,
/// through the same calls (see [`legacy`] for what to build such a
/// connection with).
pub struct TasksClient<H: ClientHandler> {
    running: Arc<RunningService<RoleClient, H>>,
    /// The connection's legacy plumbing, when its handler is a [`legacy::Handler`].
    legacy: Option<Arc<legacy::Link>>,
    listen: Option<ListenChannel>,
    /// Set once a wait of this client has said it polls for want of a
    /// listen channel (it is said once per client).
    polling_said: Arc<std::sync::atomic::AtomicBool>,
    journal: Option<Arc<journal::JournalLink>>,
    lines: Option<LineCheck>,
}

impl<H: ClientHandler> Clone for TasksClient<H> {
    fn clone(&self) -> Self {
        Self {
            running: self.running.clone(),
            legacy: self.legacy.clone(),
            listen: self.listen.clone(),
            polling_said: self.polling_said.clone(),
            journal: self.journal.clone(),
            lines: self.lines.clone(),
        }
    }
}

impl<H: ClientHandler> std::fmt::Debug for TasksClient<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TasksClient")
            .field("listen", &self.listen)
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

impl<H: ClientHandler> TasksClient<H> {
    /// Wraps a running rmcp client, built with any transport and lifecycle.
    ///
    /// [`TasksClient::connect`] builds the connection too, with everything
    /// wired. A client made here has no listen channel until it is given
    /// one ([`TasksClient::with_listen`]): its waits poll `tasks/get` at the
    /// server's suggested interval (which can make a short task seconds
    /// late), and the first wait says so once in the log. On a
    /// 2025-11-25 server it runs that era's tasks only when `running` was
    /// built on a [`legacy::Handler`] with its tap (see [`legacy`]).
    pub fn new(running: RunningService<RoleClient, H>) -> Self {
        Self::from_arc(Arc::new(running))
    }

    /// Wraps a running rmcp client that is shared already.
    pub fn from_arc(running: Arc<RunningService<RoleClient, H>>) -> Self {
        let service: &dyn std::any::Any = running.service();
        let legacy = service
            .downcast_ref::<legacy::Handler>()
            .map(|handler| handler.link.clone());
        Self {
            running,
            legacy,
            listen: None,
            polling_said: Arc::default(),
            journal: None,
            lines: None,
        }
    }

    #[cfg(feature = "gateway")]
    /// The connection's Streamable HTTP session, on a 2025-11-25 server
    /// that gave one (see `legacy::Link::http_session`).
    pub(crate) fn http_session(&self) -> Option<Arc<str>> {
        self.legacy.as_ref()?.http_session()
    }

    #[cfg(feature = "gateway")]
    /// Keeps the connection's Streamable HTTP session open on the server
    /// when the connection closes: another connection will adopt it.
    pub(crate) fn keep_http_session(&self) {
        if let Some(link) = &self.legacy {
            link.keep_http_session();
        }
    }

    /// Records every task this client creates in `journal` before
    /// `call_tool` returns it, with `server` (where this client's connection
    /// goes) to find it again, and each status it learns of the task later
    /// (see [`journal`]). Needs a tokio runtime.
    pub fn with_journal(
        mut self,
        journal: Arc<dyn journal::Journal>,
        server: journal::ServerRef,
    ) -> Self {
        self.journal = Some(journal::JournalLink::start(journal, server));
        self
    }

    /// The journal, if the client has one.
    pub fn journal(&self) -> Option<&Arc<dyn journal::Journal>> {
        self.journal.as_ref().map(|link| link.journal())
    }

    /// Where the journal says this client's tasks are, if it has one.
    pub fn journal_server(&self) -> Option<&journal::ServerRef> {
        self.journal.as_ref().map(|link| link.server())
    }

    /// `options` with an observer that also queues each new status for the
    /// journal; `None` without a journal.
    pub(crate) fn journaled(&self, options: &AwaitOptions) -> Option<AwaitOptions> {
        let link = self.journal.clone()?;
        let inner = options.observer.clone();
        let last = std::sync::Mutex::new(None);
        Some(options.clone().with_observer(move |state| {
            if let Some(inner) = &inner {
                inner(state);
            }
            let now = Some((state.status.clone(), state.ttl));
            let mut last = last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *last != now {
                *last = now;
                link.seen(state);
            }
        }))
    }

    /// Waits until the journal has every status queued so far.
    pub(crate) async fn flush_journal(&self) {
        if let Some(link) = &self.journal {
            link.flush().await;
        }
    }

    /// Lets waits listen for task notifications through `channel`, made
    /// for the transport `running` was built on (see [`listen`]).
    pub fn with_listen(mut self, channel: ListenChannel) -> Self {
        self.listen = Some(channel);
        self
    }

    /// Lets requests hear of the lines `check` counts: answers the
    /// transport could not read as JSON-RPC messages, which rmcp drops
    /// silently (see [`line_check`]). For a client on a newline-delimited
    /// transport (stdio, a socket, a pipe); without it, a server that
    /// answers `tasks/get` with garbage is only bounded by the deadline.
    /// [`TasksClient::connect`] sets it for a child process.
    pub fn with_line_check(mut self, check: LineCheck) -> Self {
        self.lines = Some(check);
        self
    }

    /// Whether waits can listen: the client has a listen channel and the
    /// connection was opened with `server/discover` (`subscriptions/listen`
    /// does not exist on a connection opened with `initialize`). The server
    /// may still refuse a stream; a [`ListenMode::Auto`] wait then polls.
    pub fn can_listen(&self) -> bool {
        self.listen.is_some()
            && self
                .peer()
                .peer_info()
                .is_some_and(|info| !info.protocol_version.has_initialize())
    }

    /// The rmcp client underneath, for everything else MCP offers.
    pub fn running(&self) -> &Arc<RunningService<RoleClient, H>> {
        &self.running
    }

    /// Closes the connection (for a child process: ends it) once this is
    /// the last clone; with other clones alive it only drops this handle.
    pub async fn close(self) {
        if let Ok(running) = Arc::try_unwrap(self.running) {
            // The reason it stopped is of no use to a caller that is leaving.
            let _ = running.cancel().await;
        }
    }

    fn peer(&self) -> &Peer<RoleClient> {
        self.running.peer()
    }

    /// The capabilities the client declares: its handler's, per rmcp.
    fn capabilities(&self) -> ClientCapabilities {
        self.running.service().get_info().capabilities
    }

    /// Whether the server advertises the Tasks extension
    /// (`io.modelcontextprotocol/tasks` in its capabilities' `extensions`),
    /// in its `server/discover` answer or, on a connection opened with
    /// `initialize`, in its `initialize` answer: what this checks on every
    /// kind of connection. A 2025-11-25 server's own tasks are not the
    /// extension: [`TasksClient::era`] and [`TasksClient::task_methods`]
    /// tell about those.
    pub fn server_supports(&self) -> bool {
        self.peer().peer_info().is_some_and(|info| {
            info.capabilities
                .extensions
                .as_ref()
                .is_some_and(|extensions| extensions.contains_key(TASKS_EXTENSION))
        })
    }

    /// Whether the server declares that it honours idempotency keys
    /// ([`IDEMPOTENCY_EXTENSION`](crate::IDEMPOTENCY_EXTENSION) in its
    /// capabilities' `extensions`, in its `server/discover` or `initialize`
    /// answer): then a `tools/call` whose answer was lost is sent again
    /// under its key, and the server answers with what the first send made
    /// (see [`CallOptions::resend_lost`]). Servers of this library declare
    /// it (`mcp-tasks serve`, the gateway,
    /// [`TaskRuntime::declare_idempotency`](https://docs.rs/mcp-tasks/latest/mcp_tasks/server/struct.TaskRuntime.html#method.declare_idempotency)).
    pub fn server_honours_idempotency(&self) -> bool {
        self.peer().peer_info().is_some_and(|info| {
            info.capabilities
                .extensions
                .as_ref()
                .is_some_and(|extensions| extensions.contains_key(crate::IDEMPOTENCY_EXTENSION))
        })
    }

    /// The era of this connection's tasks: [`Era::Legacy`] on a connection
    /// opened with `initialize` to a server that does not advertise the
    /// extension, [`Era::Extension`] otherwise. Whether the
    /// server offers tasks at all is [`TasksClient::task_methods`].
    pub fn era(&self) -> Era {
        if self.initialize_era() {
            Era::Legacy
        } else {
            Era::Extension
        }
    }

    /// The task methods the server offers: `tasks/get`, `tasks/update` and
    /// `tasks/cancel` when it advertises the extension; on a 2025-11-25
    /// connection `tasks/get` and `tasks/result`, with `tasks/list` and
    /// `tasks/cancel` when declared. Empty when it offers none; `None` when
    /// this cannot be told (a 2025-11-25 connection built without a
    /// [`legacy::Tap`]).
    pub fn task_methods(&self) -> Option<Vec<&'static str>> {
        if self.initialize_era() {
            return Some(
                self.legacy_server_tasks()?
                    .map(legacy::ServerTasks::methods)
                    .unwrap_or_default(),
            );
        }
        Some(if self.server_supports() {
            vec!["tasks/get", "tasks/update", "tasks/cancel"]
        } else {
            Vec::new()
        })
    }

    /// The `_meta` of a request: the client's capabilities with the Tasks
    /// extension (when `declare`), and for a `tools/call` (`call`)
    /// [`CREATED_OUTCOME_EXTENSION`] beside it (a server of this crate then
    /// answers a task finished at once with its outcome, read without a
    /// `tasks/get`), then the caller's entries, which win.
    fn request_meta(&self, declare: bool, call: bool, caller: &JsonObject) -> RequestMetaObject {
        let mut capabilities = self.capabilities();
        if declare {
            capabilities = with_tasks_extension(capabilities);
            if call {
                capabilities
                    .extensions
                    .get_or_insert_with(Default::default)
                    .insert(CREATED_OUTCOME_EXTENSION.to_owned(), JsonObject::new());
            }
        }
        let mut meta = RequestMetaObject::new();
        meta.set_client_capabilities(capabilities);
        // The current trace context (`traceparent`, `tracestate`), so that
        // the server continues the trace; a caller's own entries still win.
        client_spans::inject_current(&mut meta.0.0);
        meta.0.0.extend(caller.clone());
        meta
    }

    /// Sends one request with the extension declared and returns its raw result.
    async fn send(
        &self,
        method: &'static str,
        request: ClientRequest,
        declare: bool,
        caller_meta: &JsonObject,
        timeout: Option<Duration>,
    ) -> Result<ServerResult, Error> {
        let span = client_spans::start(method, &request);
        let meta = {
            // The request's span is the context its `_meta` carries.
            let _current = span.attach();
            self.request_meta(declare, method == "tools/call", caller_meta)
        };
        let mut options = PeerRequestOptions::no_options().with_meta(meta);
        options.timeout = timeout;
        let unusable = self.watch_lines(method);
        let handle = match self.peer().send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(error) => {
                let error = Error::from_service(method, error);
                span.end_error(&error);
                return Err(error);
            }
        };
        span.sent(&handle.id);
        let answer = self.answer(method, handle, unusable).await;
        span.end_answer(&answer);
        answer
    }

    /// A watch on the lines the transport drops from now on, for a request
    /// of `method` that such a line may answer: `tasks/get`,
    /// `tasks/update`, `tasks/cancel` (see [`line_check`]).
    pub(crate) fn watch_lines(&self, method: &str) -> Option<UnusableLine> {
        let check = self.lines.as_ref()?;
        matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel").then(|| check.watch())
    }

    /// The answer to the `method` request `handle`. With a watch made
    /// before it was sent, a line the transport dropped meanwhile ends it as
    /// an unusable answer.
    pub(crate) async fn answer(
        &self,
        method: &'static str,
        handle: RequestHandle<RoleClient>,
        unusable: Option<UnusableLine>,
    ) -> Result<ServerResult, Error> {
        let answer = handle.await_response();
        let Some(mut unusable) = unusable else {
            return answer
                .await
                .map_err(|error| Error::from_service(method, error));
        };
        tokio::select! {
            biased;
            answer = answer => answer.map_err(|error| Error::from_service(method, error)),
            () = unusable.arrived() => Err(Error::protocol(
                ProtocolViolation::UnusableAnswers { method, attempts: 1 },
                None,
            )),
        }
    }

    /// `tasks/get`: the current state of a task.
    pub async fn get(&self, id: &TaskId) -> Result<TaskState, Error> {
        let state = self
            .requests()
            .get(id, Some(DEFAULT_REQUEST_TIMEOUT))
            .await?;
        if let Some(link) = &self.journal {
            link.seen(&state);
            link.flush().await;
        }
        Ok(state)
    }

    /// `tasks/update`: sends responses to input requests, by key. The ack is
    /// eventually consistent; poll to see the task resume. Responses are
    /// sent as given: validate them first with [`validate_input_response`],
    /// or let [`TasksClient::await_task`] do it. On a 2025-11-25 connection
    /// it answers the input requests a wait left unanswered, by key.
    pub async fn update(&self, id: &TaskId, responses: InputResponses) -> Result<(), Error> {
        self.requests()
            .update(id, responses, Some(DEFAULT_REQUEST_TIMEOUT))
            .await
    }

    /// `tasks/cancel`: asks the server to cancel a task. Cancellation is
    /// cooperative: poll to see whether the task ended `cancelled`, or use
    /// [`TasksClient::cancel_and_wait`]. On a finished task this succeeds
    /// and changes nothing.
    pub async fn cancel(&self, id: &TaskId) -> Result<(), Error> {
        self.requests()
            .cancel(id, Some(DEFAULT_REQUEST_TIMEOUT))
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::CustomResult;
    use serde_json::{Value, json};

    use super::*;

    fn custom(value: Value) -> ServerResult {
        ServerResult::CustomResult(CustomResult::new(value))
    }

    #[test]
    fn call_results_dispatch_on_result_type() {
        let task = json!({"resultType": "task", "taskId": "a", "status": "working", "pollIntervalMs": 5000.0, "ttlMs": null});
        assert!(matches!(
            read_call_result(custom(task)),
            Ok(CallResponse::Task(_))
        ));
        let complete = json!({"content": [{"type": "text", "text": "x"}], "isError": true});
        let Ok(CallResponse::Complete(result)) = read_call_result(custom(complete)) else {
            panic!("expected a complete result");
        };
        assert_eq!(result.is_error, Some(true));
        let unknown = json!({"resultType": "later", "x": 1});
        let error = read_call_result(custom(unknown)).unwrap_err();
        assert!(error.is_protocol());
        assert_eq!(error.payload().unwrap()["x"], 1);
        let bad_task = json!({"resultType": "task", "status": "working"});
        assert!(
            read_call_result(custom(bad_task))
                .unwrap_err()
                .is_protocol()
        );
    }

    #[test]
    fn helper_adds_the_extension() {
        let capabilities = with_tasks_extension(ClientCapabilities::default());
        assert!(capabilities.supports_tasks());
        let value = serde_json::to_value(&capabilities).unwrap();
        assert_eq!(value["extensions"][TASKS_EXTENSION], json!({}));
    }
}
