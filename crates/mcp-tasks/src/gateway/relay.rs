//! What the upstream sends during a call, relayed to the call's task: the
//! rmcp client handler of the upstream connection ([`RelayHandler`]) and the
//! calls in flight it relays to ([`Calls`]).
//!
//! The upstream's requests (elicitation, sampling, roots) become the task's
//! `input_required` through [`TaskContext::request_input`], and the answer
//! of the client's `tasks/update` goes back as the response; its progress
//! notifications become the task's status message (its log messages do
//! not: they are logged at debug, see `on_logging_message`). During
//! a synchronous call ([`Target::Caller`]) the requests go to the call's
//! caller instead (see [`sync`](super::sync)).
//!
//! Which call a message belongs to: a progress notification names its call
//! by the progress token of the request (on the connection it came on). A
//! request names none (a 2025-11-25 server's requests tied
//! to one of its own tasks are routed by
//! [`legacy::Handler`](crate::client::legacy::Handler) to the wait on that
//! task before they reach this handler), so it goes to the call in flight
//! on the connection it came on: each connection that carries calls of
//! plain tools carries one at a time (the [pool](super::pool)), so that
//! call is the one it belongs to. A request on a connection with no call
//! of its own (the gateway's own connection, which lists the tools and
//! awaits an upstream's tasks, or an idle one) is refused, never guessed: a guess could hand one caller's
//! prompt to another.
//!
//! `roots/list` is the exception servers make at start-up: many ask for
//! the client's roots once they are initialized, for the whole session
//! (server-everything 350 ms after `notifications/initialized`, a
//! filesystem server at once, and again at each
//! `notifications/roots/list_changed`), and such a request lands in
//! whatever call happens to be in flight. A `roots/list` during a
//! connection's handshake or within [`GatewayOptions::startup_window`]
//! after it (or after the gateway told it its roots changed), or with no
//! call in flight on the connection, is answered by the gateway itself,
//! with its own roots ([`GatewayOptions::roots`], none unless given).
//! Later ones during a call are relayed like elicitation.
//!
//! The same relay answers an upstream's MRTR rounds
//! ([`Target::answer_round`], see [`rounds`](super::rounds)).
//!
//! [`GatewayOptions::startup_window`]: super::GatewayOptions::startup_window
//! [`GatewayOptions::roots`]: super::GatewayOptions::roots

// Sampling and roots are deprecated (SEP-2577) but an upstream may still ask.
#![allow(deprecated)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationCapability, FormElicitationCapability,
    Implementation, InputRequest, InputRequests, InputResponses, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, RootsCapabilities,
    SamplingCapability, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::roots::{SessionRoots, SessionWindow};
use crate::server::TaskContext;

/// The gateway's calls in flight on the upstream, shared by the handler of
/// every connection the gateway makes.
#[derive(Default)]
pub(crate) struct Calls {
    active: Mutex<Vec<Active>>,
    next_call: AtomicU64,
    next_connection: AtomicU64,
    next_key: AtomicU64,
    /// Set by `notifications/tools/list_changed`: the tool list is read again.
    tools_stale: AtomicBool,
    /// Woken by `notifications/tools/list_changed`: the supervisor reads the
    /// list again at once and tells the gateway's clients.
    tools_changed: tokio::sync::Notify,
}

struct Active {
    id: u64,
    /// The connection the call is in flight on.
    connection: u64,
    token: Option<ProgressToken>,
    target: Target,
}

/// Where the upstream's messages during a call go.
#[derive(Clone)]
pub(crate) enum Target {
    /// The call's task: requests become its input requests, progress its
    /// status message.
    Task(TaskContext),
    /// A synchronous call's caller, asked by the call itself (see
    /// [`sync`](super::sync)); progress is dropped.
    Caller(mpsc::UnboundedSender<Asked>),
}

impl Target {
    fn task(&self) -> Option<TaskContext> {
        match self {
            Self::Task(task) => Some(task.clone()),
            Self::Caller(_) => None,
        }
    }

    /// Answers an upstream's MRTR round: asks its `requests` of the task
    /// (under keys of the gateway's own, unique for the process's
    /// lifetime: the upstream's may repeat from one round to the next) or
    /// of the caller, as the upstream's requests are asked, and returns
    /// the answers under the upstream's keys.
    pub(crate) async fn answer_round(
        &self,
        calls: &Calls,
        requests: InputRequests,
    ) -> Result<InputResponses, ErrorData> {
        let mut responses = InputResponses::new();
        match self {
            Self::Task(task) => {
                let mut ours = std::collections::BTreeMap::new();
                let mut theirs = std::collections::BTreeMap::new();
                for (key, request) in requests {
                    let mine = calls.next_key();
                    ours.insert(mine.clone(), request.clone());
                    theirs.insert(mine, (key, request));
                }
                let answers = task.request_inputs(ours).await?;
                for (mine, answer) in answers {
                    if let Some((key, request)) = theirs.remove(&mine) {
                        responses.insert(key, fit_to_form(&wire_of(&request), answer));
                    }
                }
            }
            Self::Caller(caller) => {
                let mut waiting = Vec::new();
                for (key, request) in requests {
                    let (answer, answered) = oneshot::channel();
                    let wire = wire_of(&request);
                    caller
                        .send(Asked { request, answer })
                        .map_err(|_| ErrorData::internal_error("the call has ended", None))?;
                    waiting.push((key, wire, answered));
                }
                for (key, wire, answered) in waiting {
                    let answer = answered.await.map_err(|_| {
                        ErrorData::internal_error(
                            "the caller went away before answering the upstream's input request",
                            None,
                        )
                    })??;
                    responses.insert(key, fit_to_form(&wire, answer));
                }
            }
        }
        Ok(responses)
    }
}

/// An input request as JSON (`{method, params}`).
fn wire_of(request: &InputRequest) -> Value {
    serde_json::to_value(request).unwrap_or(Value::Null)
}

/// A request of the upstream for a synchronous call's caller, and where
/// its answer goes.
pub(crate) struct Asked {
    pub(crate) request: InputRequest,
    pub(crate) answer: oneshot::Sender<Result<Value, ErrorData>>,
}

impl Calls {
    fn lock(&self) -> MutexGuard<'_, Vec<Active>> {
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A fresh connection id.
    pub(crate) fn next_connection(&self) -> u64 {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a call in flight on the connection `connection` whose
    /// messages go to `task`, until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, connection: u64, target: Target) -> CallGuard {
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        self.lock().push(Active {
            id,
            connection,
            token: None,
            target,
        });
        CallGuard {
            calls: self.clone(),
            id,
        }
    }

    /// A fresh input key, unique for the process's lifetime.
    pub(crate) fn next_key(&self) -> String {
        format!(
            "upstream-{}",
            self.next_key.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    /// The task of the call on `connection` whose request carried
    /// `token`, else of the one call on it whose token is not known yet.
    fn by_token(&self, connection: u64, token: &ProgressToken) -> Option<TaskContext> {
        let active = self.lock();
        let on: Vec<&Active> = active
            .iter()
            .filter(|call| call.connection == connection)
            .collect();
        on.iter()
            .find(|call| call.token.as_ref() == Some(token))
            .or_else(|| match on.as_slice() {
                [only] if only.token.is_none() => Some(only),
                _ => None,
            })
            .and_then(|call| call.target.task())
    }

    /// How many calls are in flight on `connection`.
    fn in_flight(&self, connection: u64) -> usize {
        self.lock()
            .iter()
            .filter(|call| call.connection == connection)
            .count()
    }

    /// The task of the call in flight on `connection`; `Err` with how many
    /// there are (none, or several on a connection shared by calls of an
    /// upstream that makes tasks).
    fn only(&self, connection: u64) -> Result<Target, usize> {
        let active = self.lock();
        let mut on = active.iter().filter(|call| call.connection == connection);
        match (on.next(), on.next()) {
            (Some(only), None) => Ok(only.target.clone()),
            (None, _) => Err(0),
            (Some(_), Some(_)) => Err(2 + on.count()),
        }
    }

    /// Marks the tool list stale and wakes [`Calls::tools_change`].
    pub(crate) fn tools_changed(&self) {
        self.tools_stale.store(true, Ordering::Release);
        self.tools_changed.notify_one();
    }

    /// Marks the tool list stale, to be read again when next needed.
    pub(crate) fn tools_still_stale(&self) {
        self.tools_stale.store(true, Ordering::Release);
    }

    /// Completes at the upstream's next `notifications/tools/list_changed`
    /// (at once if one came since the last wait).
    pub(crate) async fn tools_change(&self) {
        self.tools_changed.notified().await;
    }

    /// Whether the tool list is to be read again, clearing the mark.
    pub(crate) fn take_tools_stale(&self) -> bool {
        self.tools_stale.swap(false, Ordering::AcqRel)
    }
}

/// A call in flight; dropping it ends the relaying to its task.
pub(crate) struct CallGuard {
    calls: Arc<Calls>,
    id: u64,
}

impl CallGuard {
    /// The progress token the call's request carries.
    pub(crate) fn set_progress_token(&self, token: ProgressToken) {
        if let Some(call) = self.calls.lock().iter_mut().find(|call| call.id == self.id) {
            call.token = Some(token);
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.calls.lock().retain(|call| call.id != self.id);
    }
}

/// The rmcp client handler of an upstream connection: it declares form and
/// URL elicitation, sampling and roots, and relays each to the task of the
/// call in flight on it (see the [module](self) docs).
#[derive(Clone)]
pub(crate) struct RelayHandler {
    pub(crate) calls: Arc<Calls>,
    /// The gateway's own roots, for the upstream's session-level asks.
    roots: Arc<SessionRoots>,
    /// The connection this handler serves.
    pub(crate) connection: u64,
    /// When a `roots/list` counts as the session's: in the handshake, and
    /// `startup_window` after it or after the gateway told the upstream
    /// its roots changed.
    window: SessionWindow,
    startup_window: std::time::Duration,
    /// The version offered in `initialize`, when it is not the latest.
    handshake_version: Option<rmcp::model::ProtocolVersion>,
}

impl RelayHandler {
    /// The handler of the connection `connection`, being opened now.
    pub(crate) fn new(
        calls: Arc<Calls>,
        roots: Arc<SessionRoots>,
        connection: u64,
        startup_window: std::time::Duration,
        window: SessionWindow,
        handshake_version: Option<rmcp::model::ProtocolVersion>,
    ) -> Self {
        Self {
            calls,
            roots,
            connection,
            window,
            startup_window,
            handshake_version,
        }
    }

    /// Asks the task of the call in flight to relay `method` with `params`,
    /// and reads its answer as a `T`.
    async fn relay<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<T, ErrorData> {
        let target = self.calls.only(self.connection).map_err(|calls| {
            ErrorData::internal_error(
                if calls == 0 {
                    format!(
                        "the gateway has no call in flight on this connection to relay {method} to"
                    )
                } else {
                    format!(
                        "the gateway has {calls} calls in flight on this connection and cannot \
                         tell which one {method} belongs to"
                    )
                },
                None,
            )
        })?;
        let wire = if params.is_null() {
            json!({ "method": method })
        } else {
            json!({ "method": method, "params": params })
        };
        let request: InputRequest = serde_json::from_value(wire.clone()).map_err(|error| {
            ErrorData::invalid_params(
                format!("the {method} request cannot be relayed: {error}"),
                None,
            )
        })?;
        let answer = match target {
            Target::Task(task) => {
                if !task.is_task() {
                    return Err(ErrorData::internal_error(
                        format!("the gateway has no task to relay {method} to"),
                        None,
                    ));
                }
                tokio::select! {
                    answer = task.request_input(self.calls.next_key(), request) => match answer {
                        Ok(answer) => answer,
                        Err(error) => return Err(error),
                    },
                    () = context.ct.cancelled() => {
                        return Err(ErrorData::internal_error("the upstream withdrew its request", None));
                    }
                }
            }
            Target::Caller(caller) => {
                let (answer, answered) = oneshot::channel();
                caller
                    .send(Asked { request, answer })
                    .map_err(|_| ErrorData::internal_error("the call has ended", None))?;
                tokio::select! {
                    answer = answered => answer.map_err(|_| {
                        ErrorData::internal_error(
                            format!("the caller went away before answering {method}"),
                            None,
                        )
                    })??,
                    () = context.ct.cancelled() => {
                        return Err(ErrorData::internal_error("the upstream withdrew its request", None));
                    }
                }
            }
        };
        serde_json::from_value(fit_to_form(&wire, answer)).map_err(|error| {
            ErrorData::invalid_params(
                format!("the client's answer to {method} does not read as one: {error}"),
                None,
            )
        })
    }
}

impl ClientHandler for RelayHandler {
    fn get_info(&self) -> ClientConfig {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        elicitation.url = Some(UrlElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = Some(SamplingCapability::default());
        // The gateway's own roots can change (Gateway::set_roots), and it
        // says so.
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(true);
        capabilities.roots = Some(roots);
        let config = ClientConfig::new(
            capabilities,
            Implementation::new("mcp-tasks-gateway", env!("CARGO_PKG_VERSION")),
        );
        match &self.handshake_version {
            Some(version) => config.with_protocol_version(version.clone()),
            None => config,
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let params = serde_json::to_value(&request)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        self.relay("elicitation/create", params, &context).await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let params = serde_json::to_value(&params)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        self.relay("sampling/createMessage", params, &context).await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        // The upstream's start-up ask (or its ask after list_changed), or
        // one outside any call, is for the session, not for a caller: the
        // gateway answers with its own roots.
        if self.window.is_open(self.startup_window) || self.calls.in_flight(self.connection) == 0 {
            tracing::debug!("roots/list for the session: answered with the gateway's roots");
            return Ok(ListRootsResult::new(self.roots.current()));
        }
        self.relay("roots/list", Value::Null, &context).await
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(task) = self.calls.by_token(self.connection, &params.progress_token) {
            let message = progress_message(&params);
            // A task that has ended takes no more status: nothing to do.
            let _ = task.set_status_message(message).await;
        }
    }

    /// A log line is not progress: the task's status message comes from
    /// the upstream's progress notifications and its own task's status
    /// message, never from its log. (A status line that read `debug:
    /// cache warm` half the time told the caller nothing about the
    /// task.) The gateway notes it at debug, for its operator, by its
    /// level and logger alone, naming neither a call nor a task: its
    /// text is the upstream's, and may hold the upstream's task ids.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|level| level.as_str().map(str::to_owned))
            .unwrap_or_else(|| "log".to_owned());
        tracing::debug!(
            level,
            logger = params.logger.as_deref().unwrap_or(""),
            "the upstream's log message"
        );
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.calls.tools_changed();
    }
}

/// An answer to an input request as the upstream asked for it: an accepted
/// form's `content` keeps only the fields of the form (a client may send
/// more, and the gateway's own client checks answers against the form
/// before it sends them on); anything else is left as it is.
pub(crate) fn fit_to_form(request: &Value, mut answer: Value) -> Value {
    if request.get("method").and_then(Value::as_str) != Some("elicitation/create")
        || !matches!(
            request.pointer("/params/mode").and_then(Value::as_str),
            None | Some("form")
        )
    {
        return answer;
    }
    let Some(properties) = request
        .pointer("/params/requestedSchema/properties")
        .and_then(Value::as_object)
    else {
        return answer;
    };
    if let Some(content) = answer.get_mut("content").and_then(Value::as_object_mut) {
        content.retain(|field, _| properties.contains_key(field));
    }
    answer
}

/// The status message of a progress notification: `3/5`, `3`, with its
/// message after (`3/5: copying`).
pub(crate) fn progress_message(params: &ProgressNotificationParam) -> String {
    let number = |value: f64| {
        if value.fract() == 0.0 && value.abs() < 1e15 {
            format!("{}", value as i64)
        } else {
            format!("{value}")
        }
    };
    let mut text = number(params.progress);
    if let Some(total) = params.total {
        text = format!("{text}/{}", number(total));
    }
    match &params.message {
        Some(message) if !message.is_empty() => format!("{text}: {message}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accepted_form_keeps_only_its_fields() {
        let request = json!({"method": "elicitation/create", "params": {
            "message": "?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        }});
        let answer = json!({"action": "accept", "content": {"name": "Ada", "confirm": true}});
        assert_eq!(
            fit_to_form(&request, answer),
            json!({"action": "accept", "content": {"name": "Ada"}})
        );
        let sampling = json!({"method": "sampling/createMessage", "params": {}});
        let answer = json!({"role": "assistant", "content": {"type": "text", "text": "x"}});
        assert_eq!(fit_to_form(&sampling, answer.clone()), answer);
    }

    #[test]
    fn progress_reads_as_a_status_message() {
        let mut params: ProgressNotificationParam =
            serde_json::from_value(json!({"progressToken": 1, "progress": 3, "total": 5})).unwrap();
        assert_eq!(progress_message(&params), "3/5");
        params.message = Some("copying".into());
        assert_eq!(progress_message(&params), "3/5: copying");
        params.total = None;
        params.progress = 0.5;
        assert_eq!(progress_message(&params), "0.5: copying");
    }
}
