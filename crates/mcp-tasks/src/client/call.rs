//! Calling a tool: [`TasksClient::call_tool`] (one `tools/call`),
//! [`TasksClient::start_tool`] (its MRTR rounds answered, up to a task or a
//! result) and [`TasksClient::call_and_await`] (then the wait), with their
//! arguments and options.

use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, InputRequiredResult,
    InputResponses, JsonObject, ServerResult,
};
use serde_json::Value;

use super::deadline::Deadline;
use super::error::{ProtocolViolation, Retry, Stage};
use super::read::{parse_call_tool_result, result_type, to_value};
use super::state::Era;
use super::unanswered::Unanswered;
use super::{AwaitOptions, Error, TaskOutcome, TaskState, TasksClient};
use crate::idempotency::{IDEMPOTENCY_KEY_META, IdempotencyKey};

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
    /// How long this one `tools/call` may wait for its answer (default
    /// `None`: as long as the tool runs). A synchronous tool answers when it
    /// is done, which may take minutes, so a call is bounded by the
    /// deadline of [`TasksClient::start_tool`] or
    /// [`TasksClient::call_and_await`] ([`AwaitOptions::deadline`], 60 s by
    /// default), not by a constant of its own; [`TasksClient::call_tool`]
    /// alone has no deadline, and waits for the answer, or for the
    /// transport to fail, unless this is set. A call cut short by this may
    /// have run: it is sent again only to a server that honours
    /// idempotency keys (see [`CallOptions::resend_lost`]).
    pub timeout: Option<Duration>,
    /// For a 2025-11-25 server only: the `ttl` to ask for when the call is
    /// task-augmented (`params.task.ttl`; default: none, the server picks).
    /// The extension has no such field: there the server alone sets the TTL.
    pub task_ttl: Option<Duration>,
    /// Send the call again, under the same idempotency key, when it or its
    /// answer is lost in transport (a connection reset, a timeout, a 5xx
    /// from a proxy), with backoff, until the deadline of
    /// [`TasksClient::start_tool`] or [`TasksClient::call_and_await`]
    /// (without one, at most 5 times), **only to a server that declares it
    /// honours the key** ([`IDEMPOTENCY_EXTENSION`](crate::IDEMPOTENCY_EXTENSION) in its capabilities:
    /// [`TasksClient::server_honours_idempotency`]); such a server answers
    /// with the first send's task or result, never a second run. To any
    /// other server a call that may have reached it is never sent again: it
    /// ends with [`Error::CallMayHaveRun`]. A call that provably never left
    /// (the connection was refused, the host not found) is sent again to
    /// any server. Default: yes.
    pub resend_lost: bool,
    /// Send a fresh idempotency key (`_meta` [`IDEMPOTENCY_KEY_META`]) with
    /// the call, unless `meta` holds one already (default: yes). Without a
    /// key nothing that may have reached the server is sent again.
    pub idempotent: bool,
    /// The call was sent before under the key in `meta` (its answer never
    /// came, in another process: see [`CallOptions::with_resent_key`]): it
    /// is sent only to a server that honours the key.
    pub resent: bool,
}

impl Default for CallOptions {
    fn default() -> Self {
        Self {
            declare_tasks: true,
            meta: JsonObject::new(),
            input_responses: None,
            request_state: None,
            timeout: None,
            task_ttl: None,
            resend_lost: true,
            idempotent: true,
            resent: false,
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

    /// Whether a call lost in transport is sent again under its
    /// idempotency key (see [`CallOptions::resend_lost`]).
    pub fn with_resend_lost(mut self, resend: bool) -> Self {
        self.resend_lost = resend;
        self
    }

    /// Whether a call that may create a task carries a fresh idempotency
    /// key (see [`CallOptions::idempotent`]).
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// The idempotency key of the call (`_meta`
    /// [`IDEMPOTENCY_KEY_META`]) instead of a fresh one.
    pub fn with_idempotency_key(self, key: &IdempotencyKey) -> Self {
        self.with_meta(IDEMPOTENCY_KEY_META, Value::String(key.as_str().to_owned()))
    }

    /// Sends again, under its key, a call whose answer never came (sent by
    /// a process that stopped before, as `mcp-tasks call --resume` does
    /// with a [`PendingCall`](super::journal::PendingCall) of its journal):
    /// to a server that honours idempotency keys, which answers with what
    /// the first send made, if it made anything; to any other the call is
    /// not sent, and ends with [`Error::CallMayHaveRun`].
    pub fn with_resent_key(mut self, key: &IdempotencyKey) -> Self {
        self.resent = true;
        self.with_idempotency_key(key)
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

impl<H: ClientHandler> TasksClient<H> {
    /// Calls a tool once, declaring the Tasks extension, and returns what
    /// the server answered: a task, a complete result or an input request.
    /// On a 2025-11-25 server the call is task-augmented when the server and
    /// the tool allow it (see [`legacy`](super::legacy)).
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
        let key = call_key(&mut options)?;
        let link = self.journal.as_ref();
        if let (Some(key), Some(link)) = (&key, link)
            && deadline
                .within(link.calling(key, &name, arguments.as_ref()))
                .await
                .is_none()
        {
            return Err(timeout());
        }
        let own_timeout = options.timeout;
        // Sent again when it may have run only where the server says the
        // key makes that safe.
        let honoured = key.is_some() && self.server_honours_idempotency();
        if options.resent && !honoured {
            return Err(Error::CallMayHaveRun { source: None });
        }
        let mut backoff = LOST_CALL_BACKOFF;
        let mut resent = 0u32;
        let response = loop {
            options.timeout = deadline.cut(own_timeout).map_err(|()| timeout())?;
            let calling =
                self.call_tool_unjournaled(name.clone(), arguments.clone(), options.clone());
            let error = match deadline.within(calling).await {
                Some(Err(error)) if error.is_request_timeout() && deadline.passed() => {
                    return Err(timeout());
                }
                Some(Err(error)) if error.retry() == Retry::Fault => error,
                Some(Err(error)) if error.is_transport() => return Err(error),
                Some(response) => break response,
                None => return Err(timeout()),
            };
            // Lost on the way: sent again if it never left, or if the
            // server honours its key; never where it may have run twice.
            let safe = error.never_sent() || honoured;
            if !options.resend_lost || (deadline.at().is_none() && resent >= LOST_CALL_RESENDS) {
                return Err(error);
            }
            if !safe {
                return Err(Error::CallMayHaveRun {
                    source: Some(Box::new(error)),
                });
            }
            resent += 1;
            tracing::debug!(%error, ?backoff, "a tools/call was lost in transport; sending it again");
            if deadline.within(tokio::time::sleep(backoff)).await.is_none() {
                return Err(timeout());
            }
            backoff = (backoff * 2).min(LOST_CALL_MAX_BACKOFF);
        };
        // Answered (a task, a result, a refusal): the pending call goes
        // once its task, if any, is journaled.
        if let (Ok(CallResponse::Task(state)), Some(link)) = (&response, link)
            && deadline.within(link.created(&name, state)).await.is_none()
        {
            return Err(deadline.timeout(Stage::Journal, Some(&state.id), Some(state)));
        }
        if let (Some(key), Some(link)) = (&key, link) {
            let _ = deadline.within(link.answered(key)).await;
        }
        response
    }

    async fn call_tool_unjournaled(
        &self,
        name: impl Into<String>,
        arguments: Option<JsonObject>,
        options: CallOptions,
    ) -> Result<CallResponse, Error> {
        if self.initialize_era() {
            let response = self
                .call_tool_legacy(name.into(), arguments, &options)
                .await;
            return response.map(|response| handed_task(response, Era::Legacy));
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
        read_call_result(result).map(|response| handed_task(response, Era::Extension))
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

/// The first pause before a `tools/call` lost in transport is sent again.
const LOST_CALL_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause between two sends of a lost `tools/call`.
const LOST_CALL_MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How many times a lost `tools/call` without a deadline is sent again.
const LOST_CALL_RESENDS: u32 = 5;

/// The idempotency key of a call: the caller's own from `options.meta`,
/// else a fresh one written there. `None` when the options ask for none.
fn call_key(options: &mut CallOptions) -> Result<Option<IdempotencyKey>, Error> {
    if let Some(own) = IdempotencyKey::from_meta(&options.meta)
        .map_err(|_| Error::Usage("the idempotency key in CallOptions::meta is not a valid key"))?
    {
        return Ok(Some(own));
    }
    if !options.idempotent {
        return Ok(None);
    }
    let key = IdempotencyKey::random()
        .map_err(|_| Error::Usage("the system has no randomness for an idempotency key"))?;
    options.meta.insert(
        IDEMPOTENCY_KEY_META.to_owned(),
        Value::String(key.as_str().to_owned()),
    );
    Ok(Some(key))
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

/// `response`, or the task it names when it is a handle
/// ([`HANDLE_META`](crate::HANDLE_META)): the plain result a server of this
/// crate gives a call that declared no tasks when its task outlasts the
/// window. Awaited as any task of `era` (`tasks/get` reads it: it is the
/// caller's own).
fn handed_task(response: CallResponse, era: Era) -> CallResponse {
    let CallResponse::Complete(result) = &response else {
        return response;
    };
    let handed = result
        .meta
        .as_ref()
        .and_then(|meta| meta.get(crate::HANDLE_META))
        .and_then(|handle| handle.get("taskId"))
        .and_then(Value::as_str);
    let shown = result.structured_content.as_ref();
    let status = shown
        .and_then(|shown| shown.get("status"))
        .and_then(Value::as_str);
    let (Some(id), Some(status)) = (handed, status) else {
        return response;
    };
    let mut seed = serde_json::json!({"taskId": id, "status": status});
    if let Some(message) = shown.and_then(|shown| shown.get("statusMessage")) {
        seed["statusMessage"] = message.clone();
    }
    match TaskState::from_json(seed) {
        Ok(state) => CallResponse::Task(state.in_era(era)),
        Err(_) => response,
    }
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
