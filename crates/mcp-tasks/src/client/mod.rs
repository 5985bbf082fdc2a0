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
//! [`TasksClient::new`] wraps a connection built by hand.

pub mod connect;
mod deadline;
pub mod error;
mod input;
pub mod journal;
pub mod legacy;
pub mod line_check;
pub mod listen;
pub mod many;
mod state;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelTaskParams, CancelTaskRequest,
    ClientCapabilities, ClientRequest, GetTaskParams, GetTaskRequest, InputRequiredResult,
    InputResponses, JsonObject, RequestMetaObject, ServerResult, UpdateTaskParams,
    UpdateTaskRequest,
};
use rmcp::service::{PeerRequestOptions, RequestHandle, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::Value;

pub use connect::{ConnectOptions, Endpoint};
pub use error::{Error, ErrorKind, Stage};
pub use input::{
    FormRequest, InputError, InputKind, InputMode, InputResolver, Unanswered,
    validate_input_response,
};
pub use line_check::{CheckedReader, LineCheck};
pub use listen::{ListenChannel, ListenMode};
pub use many::TaskOutcomes;
pub use state::{Era, TaskFailure, TaskOutcome, TaskState, result_text};
pub use wait::{AwaitFrom, AwaitOptions, StateObserver};

use self::deadline::Deadline;
use self::error::ProtocolViolation;
use self::line_check::UnusableLine;
use self::state::parse_call_tool_result;
use crate::TASKS_EXTENSION;
use crate::task::TaskId;

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

/// Tool arguments from any `impl Serialize` that serializes to a JSON
/// object (a struct, a map, `serde_json::json!({..})`): what
/// [`TasksClient::call_tool`], [`TasksClient::start_tool`] and
/// [`TasksClient::call_and_await`] do with their `arguments`. `()`, `null`
/// and `None` give no arguments; anything else is [`Error::Usage`].
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Build { target: &'static str, release: bool }
///
/// let arguments = mcp_tasks::client::arguments(&Build { target: "app", release: true })?;
/// assert_eq!(arguments.unwrap()["target"], "app");
/// assert!(mcp_tasks::client::arguments(&()).unwrap().is_none());
/// assert!(mcp_tasks::client::arguments(&3).is_err());
/// # Ok::<(), mcp_tasks::Error>(())
/// ```
pub fn arguments<T: serde::Serialize + ?Sized>(value: &T) -> Result<Option<JsonObject>, Error> {
    match serde_json::to_value(value) {
        Ok(Value::Object(object)) => Ok(Some(object)),
        Ok(Value::Null) => Ok(None),
        Ok(_) => Err(Error::Usage(
            "tool arguments must serialize to a JSON object",
        )),
        Err(_) => Err(Error::Usage(
            "tool arguments could not be serialized to JSON",
        )),
    }
}

/// What a `tools/call` answered.
#[derive(Debug, Clone)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "one per call, moved once; boxing the task state would cost every caller"
)]
pub enum CallResponse {
    /// The server made a task; this is its seed state.
    Task(TaskState),
    /// The server ran the tool at once. An `isError: true` result is a result.
    Complete(CallToolResult),
    /// The server asks for input before it runs the tool (MRTR).
    InputRequired(InputRequiredResult),
}

/// Options of one `tools/call`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallOptions {
    /// Declare the Tasks extension on this request (default: yes).
    pub declare_tasks: bool,
    /// Entries to put in the request's `_meta`; they win over ours.
    pub meta: JsonObject,
    /// MRTR `inputResponses` for a retry.
    pub input_responses: Option<InputResponses>,
    /// MRTR `requestState` to echo on a retry.
    pub request_state: Option<String>,
    /// How long to wait for the answer (default 60 s; `None`: no limit).
    pub timeout: Option<Duration>,
    /// For a 2025-11-25 server only: the `ttl` to ask for when the call is
    /// task-augmented (`params.task.ttl`; default: none, the server picks).
    /// The extension has no such field: there the server alone sets the TTL.
    pub task_ttl: Option<Duration>,
}

impl Default for CallOptions {
    fn default() -> Self {
        Self {
            declare_tasks: true,
            meta: JsonObject::new(),
            input_responses: None,
            request_state: None,
            timeout: Some(Duration::from_secs(60)),
            task_ttl: None,
        }
    }
}

impl CallOptions {
    /// Whether to declare the Tasks extension on the request.
    pub fn with_declare_tasks(mut self, declare: bool) -> Self {
        self.declare_tasks = declare;
        self
    }

    /// Adds an entry to the request's `_meta`; it wins over ours.
    pub fn with_meta(mut self, key: impl Into<String>, value: Value) -> Self {
        self.meta.insert(key.into(), value);
        self
    }

    /// The timeout of the request (`None`: no limit).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The `ttl` to ask a 2025-11-25 server for (see [`CallOptions::task_ttl`]).
    pub fn with_task_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.task_ttl = ttl;
        self
    }

    /// MRTR retry inputs: the responses and the echoed request state.
    pub fn with_mrtr_retry(
        mut self,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
    ) -> Self {
        self.input_responses = input_responses;
        self.request_state = request_state;
        self
    }
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
    /// extension (when `declare`), then the caller's entries, which win.
    fn request_meta(&self, declare: bool, caller: &JsonObject) -> RequestMetaObject {
        let mut capabilities = self.capabilities();
        if declare {
            capabilities = with_tasks_extension(capabilities);
        }
        let mut meta = RequestMetaObject::new();
        meta.set_client_capabilities(capabilities);
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
        let mut options =
            PeerRequestOptions::no_options().with_meta(self.request_meta(declare, caller_meta));
        options.timeout = timeout;
        let unusable = self.watch_lines(method);
        let handle = self
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|error| Error::from_service(method, error))?;
        self.answer(method, handle, unusable).await
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

    /// Calls a tool once, declaring the Tasks extension, and returns what
    /// the server answered: a task, a complete result or an input request.
    /// On a 2025-11-25 server the call is task-augmented when the server and
    /// the tool allow it (see [`legacy`]).
    ///
    /// `arguments` is anything that serializes to a JSON object (a struct, a
    /// map, `serde_json::json!({..})`, an `Option<JsonObject>`); `()` gives
    /// none (see [`arguments`]).
    pub async fn call_tool(
        &self,
        name: impl Into<String>,
        arguments: impl serde::Serialize,
        options: CallOptions,
    ) -> Result<CallResponse, Error> {
        self.call_tool_with(name.into(), self::arguments(&arguments)?, options)
            .await
    }

    /// [`TasksClient::call_tool`] with the arguments read already.
    async fn call_tool_with(
        &self,
        name: String,
        arguments: Option<JsonObject>,
        options: CallOptions,
    ) -> Result<CallResponse, Error> {
        self.call_within(name, arguments, options, &Deadline::start(None), 1)
            .await
    }

    /// A `tools/call`, round `round` of a call, inside `deadline`: the
    /// request gets the time left when that is shorter than its own
    /// timeout, and a task it creates must be in the journal by then.
    async fn call_within(
        &self,
        name: String,
        arguments: Option<JsonObject>,
        mut options: CallOptions,
        deadline: &Deadline,
        round: usize,
    ) -> Result<CallResponse, Error> {
        let timeout = || deadline.timeout(Stage::Call { round }, None, None);
        options.timeout = deadline.cut(options.timeout).map_err(|()| timeout())?;
        let calling = self.call_tool_unjournaled(name.clone(), arguments, options);
        let response = match deadline.within(calling).await {
            Some(Err(error)) if error.is_request_timeout() && deadline.passed() => {
                return Err(timeout());
            }
            Some(response) => response?,
            None => return Err(timeout()),
        };
        if let (CallResponse::Task(state), Some(link)) = (&response, &self.journal)
            && deadline.within(link.created(&name, state)).await.is_none()
        {
            return Err(deadline.timeout(Stage::Journal, Some(&state.id), Some(state)));
        }
        Ok(response)
    }

    async fn call_tool_unjournaled(
        &self,
        name: impl Into<String>,
        arguments: Option<JsonObject>,
        options: CallOptions,
    ) -> Result<CallResponse, Error> {
        if self.initialize_era() {
            return self
                .call_tool_legacy(name.into(), arguments, &options)
                .await;
        }
        let mut params = CallToolRequestParams::new(name.into());
        params.arguments = arguments;
        params.input_responses = options.input_responses.clone();
        params.request_state = options.request_state.clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let result = self
            .send(
                "tools/call",
                request,
                options.declare_tasks,
                &options.meta,
                options.timeout,
            )
            .await?;
        read_call_result(result)
    }

    /// `tasks/get`: the current state of a task.
    pub async fn get(&self, id: &TaskId) -> Result<TaskState, Error> {
        let state = self
            .get_with_timeout(id, Some(Duration::from_secs(60)))
            .await?;
        if let Some(link) = &self.journal {
            link.seen(&state);
            link.flush().await;
        }
        Ok(state)
    }

    pub(crate) async fn get_with_timeout(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<TaskState, Error> {
        if self.initialize_era() {
            return self.get_legacy(id, timeout).await;
        }
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(id.expose())));
        let result = self
            .send("tasks/get", request, true, &JsonObject::new(), timeout)
            .await?;
        read_task_result(result)
    }

    /// `tasks/update`: sends responses to input requests, by key. The ack is
    /// eventually consistent; poll to see the task resume. Responses are
    /// sent as given: validate them first with [`validate_input_response`],
    /// or let [`TasksClient::await_task`] do it. On a 2025-11-25 connection
    /// it answers the input requests a wait left unanswered, by key.
    pub async fn update(&self, id: &TaskId, responses: InputResponses) -> Result<(), Error> {
        self.update_with_timeout(id, responses, Some(Duration::from_secs(60)))
            .await
    }

    pub(crate) async fn update_with_timeout(
        &self,
        id: &TaskId,
        responses: InputResponses,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        if self.initialize_era() {
            return self.update_legacy(id, responses);
        }
        let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
            UpdateTaskParams::new(id.expose(), responses),
        ));
        let result = self
            .send("tasks/update", request, true, &JsonObject::new(), timeout)
            .await?;
        read_ack("tasks/update", result)
    }

    /// `tasks/cancel`: asks the server to cancel a task. Cancellation is
    /// cooperative: poll to see whether the task ended `cancelled`, or use
    /// [`TasksClient::cancel_and_wait`]. On a finished task this succeeds
    /// and changes nothing.
    pub async fn cancel(&self, id: &TaskId) -> Result<(), Error> {
        self.cancel_with_timeout(id, Some(Duration::from_secs(60)))
            .await
    }

    pub(crate) async fn cancel_with_timeout(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        if self.initialize_era() {
            return self.cancel_legacy(id, timeout).await.map(drop);
        }
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(id.expose()),
        ));
        let result = self
            .send("tasks/cancel", request, true, &JsonObject::new(), timeout)
            .await?;
        read_ack("tasks/cancel", result)
    }

    /// Calls a tool and answers what it asks before a task exists, without
    /// waiting for the task: MRTR rounds are answered as `options.input`
    /// says (at most `options.mrtr_max_rounds`), and a -32021 naming the
    /// Tasks extension is retried once with it declared. Returns the task's
    /// seed state, the tool's result when the server ran it at once, or the
    /// input request the wait was told not to answer (or had no handler for).
    /// `arguments` as in [`TasksClient::call_tool`].
    ///
    /// `options.deadline` bounds all of it: every `tools/call` (each gets
    /// the time left when that is shorter than `call.timeout`), every input
    /// handler or resolver (cancelled at the deadline), and the journal's
    /// record of the task. Past it, [`Error::Timeout`] says which
    /// [`Stage`] ran out.
    pub async fn start_tool(
        &self,
        name: impl Into<String>,
        arguments: impl serde::Serialize,
        call: CallOptions,
        options: &AwaitOptions,
    ) -> Result<CallResponse, Error> {
        let deadline = Deadline::start(options.deadline);
        Ok(
            match self
                .start(
                    name.into(),
                    self::arguments(&arguments)?,
                    call,
                    options,
                    &deadline,
                )
                .await?
            {
                Started::Task(state) => CallResponse::Task(state),
                Started::Complete(result) => CallResponse::Complete(result),
                Started::Unanswered(request, _) => CallResponse::InputRequired(request),
            },
        )
    }

    /// [`TasksClient::start_tool`] inside `deadline`, saying why an input
    /// request was left unanswered.
    async fn start(
        &self,
        name: String,
        arguments: Option<JsonObject>,
        mut call: CallOptions,
        options: &AwaitOptions,
        deadline: &Deadline,
    ) -> Result<Started, Error> {
        let mut retried_for_capability = false;
        // `tools/call`s sent, and input rounds answered.
        let mut round = 0usize;
        let mut input_rounds = 0usize;
        loop {
            round += 1;
            let response = match self
                .call_within(
                    name.clone(),
                    arguments.clone(),
                    call.clone(),
                    deadline,
                    round,
                )
                .await
            {
                Err(error)
                    if !retried_for_capability
                        && !call.declare_tasks
                        && error.requires_tasks_extension() =>
                {
                    retried_for_capability = true;
                    call.declare_tasks = true;
                    continue;
                }
                other => other?,
            };
            let request = match response {
                CallResponse::Task(state) => return Ok(Started::Task(state)),
                CallResponse::Complete(result) => return Ok(Started::Complete(result)),
                CallResponse::InputRequired(request) => request,
            };
            input_rounds += 1;
            if input_rounds > options.mrtr_max_rounds {
                return Err(Error::protocol(
                    ProtocolViolation::TooManyInputRounds(options.mrtr_max_rounds),
                    None,
                ));
            }
            let responses = match self
                .answer_call_input(&request, options, deadline, round)
                .await?
            {
                Ok(responses) => responses,
                Err(unanswered) => return Ok(Started::Unanswered(request, unanswered)),
            };
            call = call.with_mrtr_retry(
                (!responses.is_empty()).then_some(responses),
                request.request_state.clone(),
            );
        }
    }

    /// Calls a tool and waits for its outcome: [`TasksClient::start_tool`],
    /// then [`TasksClient::await_task`] on the task. A tool the server ran at
    /// once returns its result unchanged. `arguments` as in
    /// [`TasksClient::call_tool`].
    ///
    /// One deadline, `options.deadline`, started when this is called, bounds
    /// everything it does: the MRTR rounds before the task exists (each
    /// `tools/call` and each input handler or resolver), every request and
    /// pause of the wait, every input handler or resolver of the task, and
    /// the journal's writes. Past it, [`Error::Timeout`] carries the time
    /// taken, the last task state read and the [`Stage`] that ran out; a
    /// task, if one was made, keeps running on the server.
    pub async fn call_and_await(
        &self,
        name: impl Into<String>,
        arguments: impl serde::Serialize,
        call: CallOptions,
        options: &AwaitOptions,
    ) -> Result<TaskOutcome, Error> {
        let arguments = self::arguments(&arguments)?;
        let deadline = Deadline::start(options.deadline);
        match self
            .start(name.into(), arguments, call, options, &deadline)
            .await?
        {
            Started::Task(state) => self.await_within(state.into(), options, deadline).await,
            Started::Complete(result) => Ok(TaskOutcome::Completed(result)),
            Started::Unanswered(request, unanswered) => Ok(TaskOutcome::CallInputRequired {
                request,
                unanswered,
            }),
        }
    }
}

/// What the MRTR rounds of a call ended with.
#[allow(
    clippy::large_enum_variant,
    reason = "one per call, moved once, as CallResponse"
)]
enum Started {
    /// The server made a task.
    Task(TaskState),
    /// The server ran the tool at once.
    Complete(CallToolResult),
    /// An input request the wait did not answer, and why.
    Unanswered(InputRequiredResult, Unanswered),
}

/// Reads a `tools/call` result by its `resultType`.
pub(crate) fn read_call_result(result: ServerResult) -> Result<CallResponse, Error> {
    match result {
        ServerResult::CallToolResult(result) => Ok(CallResponse::Complete(result)),
        ServerResult::InputRequiredResult(result) => Ok(CallResponse::InputRequired(result)),
        // A contentless `{}` or `{"resultType": "complete"}` is an empty result.
        ServerResult::EmptyResult(_) | ServerResult::TaskAckResult(_) => {
            Ok(CallResponse::Complete(CallToolResult::default()))
        }
        other => {
            let value = to_value(other);
            match result_type(&value) {
                Some("task") => Ok(CallResponse::Task(TaskState::from_json(value)?)),
                Some("input_required") => serde_json::from_value(value.clone())
                    .map(CallResponse::InputRequired)
                    .map_err(|error| {
                        Error::protocol(
                            ProtocolViolation::MalformedResult(error.to_string()),
                            Some(value),
                        )
                    }),
                None | Some("complete") => {
                    parse_call_tool_result(&value).map(CallResponse::Complete)
                }
                Some(unknown) => Err(Error::protocol(
                    ProtocolViolation::UnknownResultType(unknown.to_owned()),
                    Some(value),
                )),
            }
        }
    }
}

/// Reads a `tasks/get` result: a task with `resultType` `complete` (or none).
pub(crate) fn read_task_result(result: ServerResult) -> Result<TaskState, Error> {
    let value = to_value(result);
    match result_type(&value) {
        None | Some("complete") => {}
        Some("task") => {
            return Err(Error::protocol(
                ProtocolViolation::UnexpectedTask,
                Some(value),
            ));
        }
        Some(unknown) => {
            return Err(Error::protocol(
                ProtocolViolation::UnknownResultType(unknown.to_owned()),
                Some(value),
            ));
        }
    }
    if value.get("taskId").is_none() || value.get("status").is_none() {
        return Err(Error::protocol(
            ProtocolViolation::UnexpectedResult("tasks/get did not answer with a task".into()),
            Some(value),
        ));
    }
    TaskState::from_json(value)
}

/// Reads the ack of `tasks/update` or `tasks/cancel`: any result but a task
/// or an unknown `resultType`.
pub(crate) fn read_ack(method: &'static str, result: ServerResult) -> Result<(), Error> {
    let value = to_value(result);
    match result_type(&value) {
        None | Some("complete") => Ok(()),
        Some("task") => Err(Error::protocol(
            ProtocolViolation::UnexpectedTask,
            Some(value),
        )),
        Some(unknown) => Err(Error::protocol(
            ProtocolViolation::UnknownResultType(format!("{unknown} (in answer to {method})")),
            Some(value),
        )),
    }
}

/// The JSON of a result: as sent when rmcp kept it raw, else as rmcp
/// re-serializes its typed form.
fn to_value(result: ServerResult) -> Value {
    match result {
        ServerResult::CustomResult(raw) => raw.0,
        // rmcp's result types serialize infallibly to JSON objects.
        typed => serde_json::to_value(&typed).unwrap_or(Value::Null),
    }
}

fn result_type(value: &Value) -> Option<&str> {
    match value.get("resultType") {
        Some(Value::String(kind)) => Some(kind),
        Some(_) => Some("<not a string>"),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::CustomResult;
    use serde_json::json;

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
    fn task_results_refuse_other_shapes() {
        let not_a_task = json!({"resultType": "complete", "content": []});
        let error = read_task_result(custom(not_a_task.clone())).unwrap_err();
        assert!(error.is_protocol());
        assert_eq!(error.payload(), Some(&not_a_task));
        let created = json!({"resultType": "task", "taskId": "a", "status": "working"});
        assert!(matches!(
            read_task_result(custom(created)).unwrap_err(),
            Error::Protocol {
                violation: ProtocolViolation::UnexpectedTask,
                ..
            }
        ));
    }

    #[test]
    fn helper_adds_the_extension() {
        let capabilities = with_tasks_extension(ClientCapabilities::default());
        assert!(capabilities.supports_tasks());
        let value = serde_json::to_value(&capabilities).unwrap();
        assert_eq!(value["extensions"][TASKS_EXTENSION], json!({}));
    }
}
