//! The one error type of the client half (re-exported as [`crate::Error`]).
//!
//! Variants are grouped by who is at fault: the peer refused (a JSON-RPC
//! error it sent), the peer misbehaved (a malformed or unexpected answer),
//! the task ended badly (failed, cancelled, input left unanswered), the wait
//! ended (timeout, stall), the transport failed, the connection could not be
//! opened, or the caller misused the API.

use std::time::Duration;

use rmcp::ServiceError;
use serde_json::Value;

use super::answer_bound::too_large_of;
use super::state::{TaskFailure, TaskState};
use super::unanswered::Unanswered;
use crate::task::{RpcError, TaskId, TaskStatus, grouped};
use crate::telemetry::{Outcome, SpanError};

/// JSON-RPC "invalid params": an unknown, expired or foreign task id on `tasks/*`.
pub const INVALID_PARAMS: i64 = -32602;
/// MCP "missing required client capability".
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The code older drafts used for a missing capability; recognised, never sent.
pub const LEGACY_MISSING_CAPABILITY: i64 = -32003;

/// JSON a misbehaving peer sent. `Debug` does not print it: it may hold a
/// task id. Read it with [`Error::payload`].
#[derive(Clone, PartialEq)]
pub struct Payload(Box<Value>);

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Payload(<withheld>)")
    }
}

/// What a misbehaving peer did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A task object without a usable `taskId` or `status`.
    MalformedTask(String),
    /// A result that does not have the shape its `resultType` promises.
    MalformedResult(String),
    /// A `resultType` this client does not know.
    UnknownResultType(String),
    /// A `CreateTaskResult` (`resultType: "task"`) in answer to a request that cannot create one.
    UnexpectedTask,
    /// A result of the wrong kind for the request, e.g. not a task for `tasks/get`.
    UnexpectedResult(String),
    /// An input request this client cannot read.
    MalformedInputRequest {
        /// The key of the input request.
        key: String,
        /// Why it could not be read.
        reason: String,
    },
    /// `input_required` rounds on `tools/call` went past the configured bound.
    TooManyInputRounds(usize),
    /// The server kept answering a request with something that is not a
    /// JSON-RPC message (not JSON, the wrong content type, too large).
    UnusableAnswers {
        /// The method of the request.
        method: &'static str,
        /// How many answers in a row were unusable.
        attempts: u32,
    },
    /// `tasks/get` kept answering with a state that lacks what its status
    /// requires (`result` for completed, `error` for failed, `inputRequests`
    /// for input_required).
    IncompleteTask {
        /// The status without its payload.
        status: TaskStatus,
        /// How many answers in a row were incomplete.
        polls: u32,
    },
}

impl std::fmt::Display for ProtocolViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MalformedTask(why) => write!(f, "malformed task: {why}"),
            Self::MalformedResult(why) => write!(f, "malformed result: {why}"),
            Self::UnknownResultType(kind) => write!(f, "unknown resultType {kind:?}"),
            Self::UnexpectedTask => {
                f.write_str("a task (resultType \"task\") answered a request other than tools/call")
            }
            Self::UnexpectedResult(what) => write!(f, "unexpected result: {what}"),
            Self::MalformedInputRequest { key, reason } => {
                write!(f, "malformed input request {key:?}: {reason}")
            }
            Self::TooManyInputRounds(rounds) => {
                write!(f, "tools/call still asked for input after {rounds} rounds")
            }
            Self::UnusableAnswers { method, attempts } => write!(
                f,
                "{method} was answered {attempts} times in a row with something that is not a JSON-RPC message"
            ),
            Self::IncompleteTask { status, polls } => write!(
                f,
                "tasks/get answered {polls} times in a row with a {status} task that lacks its payload"
            ),
        }
    }
}

/// What was running when the deadline of a call or a wait passed: the
/// `stage` of [`Error::Timeout`], read with [`Error::timeout_stage`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// A `tools/call` of [`TasksClient::start_tool`](super::TasksClient::start_tool)
    /// or [`TasksClient::call_and_await`](super::TasksClient::call_and_await),
    /// before any task existed. `round` counts the calls from 1: round 1 is
    /// the first; each later one sends the call again, with the answers to
    /// the input the round before asked for (MRTR), or with the extension
    /// declared after a -32021.
    Call {
        /// The round, from 1.
        round: usize,
    },
    /// The client's `ClientHandler`, answering the input request under
    /// `key` ([`InputMode::Handlers`](super::InputMode::Handlers)).
    InputHandler {
        /// The key of the input request.
        key: String,
        /// The round of `tools/call` whose answer asked for the input
        /// (MRTR); `None` when the task asked.
        round: Option<usize>,
    },
    /// The input resolver ([`InputMode::Resolver`](super::InputMode::Resolver)),
    /// answering the input requests under `keys`.
    InputResolver {
        /// The keys of the input requests it was given.
        keys: Vec<String>,
        /// The round of `tools/call` whose answer asked for the input
        /// (MRTR); `None` when the task asked.
        round: Option<usize>,
    },
    /// A request of the wait, or the pause before sending it again after a
    /// transient failure: `tasks/get`, `tasks/update`, `tasks/cancel`,
    /// `subscriptions/listen`, or `tasks/result` on a 2025-11-25 connection.
    Request {
        /// The method.
        method: &'static str,
    },
    /// The pause between two reads of the task: the poll interval, or
    /// listening for its next notification.
    Pause,
    /// Writing the task to the journal: its creation, or the statuses the
    /// wait saw ([`TasksClient::with_journal`](super::TasksClient::with_journal)).
    Journal,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let asked_by = |f: &mut std::fmt::Formatter<'_>, round: &Option<usize>| match round {
            Some(round) => write!(f, " (asked by tools/call round {round})"),
            None => Ok(()),
        };
        match self {
            Self::Call { round: 1 } => f.write_str("tools/call"),
            Self::Call { round } => write!(f, "tools/call round {round}"),
            Self::InputHandler { key, round } => {
                write!(f, "the input handler for key {key:?}")?;
                asked_by(f, round)
            }
            Self::InputResolver { keys, round } => {
                f.write_str("the input resolver for ")?;
                match keys.as_slice() {
                    [key] => write!(f, "key {key:?}")?,
                    keys => write!(f, "keys {keys:?}")?,
                }
                asked_by(f, round)
            }
            Self::Request { method } => f.write_str(method),
            Self::Pause => f.write_str("the pause before the next read of the task"),
            Self::Journal => f.write_str("the journal write"),
        }
    }
}

/// Every way an operation of this crate can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- the peer refused ---
    /// The server answered with a JSON-RPC error.
    #[error("{method} was refused by the server: {error}")]
    Rpc {
        /// The method of the refused request.
        method: &'static str,
        /// The error the server sent.
        error: Box<RpcError>,
    },
    /// The server does not know the task (unknown, expired, purged or not the caller's): -32602.
    #[error("{method}: the server does not know this task: {error}")]
    UnknownTask {
        /// The method of the refused request.
        method: &'static str,
        /// The error the server sent (code -32602).
        error: Box<RpcError>,
    },

    /// The server does not report on the task over `subscriptions/listen`:
    /// its acknowledgement left the task out (a wait in
    /// [`ListenMode::Required`](super::ListenMode::Required)).
    #[error("the server does not report on this task over subscriptions/listen")]
    ListenDeclined,

    // --- the peer misbehaved ---
    /// The server sent something the protocol does not allow.
    #[error("protocol error from the server: {violation}")]
    Protocol {
        /// What was wrong.
        violation: ProtocolViolation,
        /// The offending payload, when there is one.
        payload: Option<Payload>,
    },

    // --- the task ended without a result ---
    /// The task ended `failed` with a JSON-RPC error.
    #[error(transparent)]
    TaskFailed(Box<TaskFailure>),
    /// The task was cancelled.
    #[error("the task was cancelled")]
    TaskCancelled(Box<TaskState>),
    /// The task needs input that was not given.
    #[error("the task needs input that was not given")]
    InputRequired {
        /// The task, `input_required`, with its input requests.
        state: Box<TaskState>,
        /// Why it was not given: which handler is missing, for which key.
        #[source]
        unanswered: Unanswered,
    },
    /// The `tools/call` asked for input (MRTR) that was not given.
    #[error("the tool call needs input that was not given")]
    CallInputRequired {
        /// Why it was not given: which handler is missing, for which key.
        #[source]
        unanswered: Unanswered,
    },
    /// [`TaskState::outcome`] was asked for an outcome the state does not hold.
    #[error("the task state is {status} without {missing}; call tasks/get first")]
    NotReady {
        /// The status of the state.
        status: TaskStatus,
        /// What was missing.
        missing: &'static str,
    },

    // --- the wait ended ---
    /// The deadline ([`AwaitOptions::deadline`](super::AwaitOptions::deadline))
    /// passed before the call or the wait ended; a task keeps running on
    /// the server. `stage` says what was running when it passed.
    #[error("gave up after {}, during {stage} ({})",
        crate::task::human_duration(*waited),
        match (task_id, last_state) {
            (None, _) => "no task was made".to_owned(),
            (Some(_), None) => "last status: none read".to_owned(),
            (Some(_), Some(state)) => format!("last status: {}", state.status.as_str()),
        })]
    Timeout {
        /// The task, once one exists (`None` when the deadline passed in
        /// the MRTR rounds of `tools/call`, before the server made one).
        task_id: Option<TaskId>,
        /// How long the call or the wait lasted.
        waited: Duration,
        /// The last state read, if any.
        last_state: Option<Box<TaskState>>,
        /// What was running when the deadline passed.
        stage: Stage,
    },
    /// The task stayed `input_required` with nothing new to answer for too many polls.
    #[error("the task stayed input_required with nothing new to answer for {polls} polls{}",
        if *cancel_sent { "; tasks/cancel was sent" } else { "" })]
    Stalled {
        /// The task state at the last poll.
        state: Box<TaskState>,
        /// The number of polls.
        polls: u32,
        /// Whether `tasks/cancel` was sent before giving up.
        cancel_sent: bool,
    },
    /// An answer to an input request is not valid for its kind; nothing was sent.
    #[error("invalid response for input request {key:?}: {reason}")]
    InvalidInputResponse {
        /// The key of the input request.
        key: String,
        /// What is wrong with the response.
        reason: String,
    },
    /// The local handler or resolver for an input request failed; nothing
    /// was sent for it.
    #[error("the local handler for input request {key:?} failed")]
    InputHandler {
        /// The key of the input request.
        key: String,
        /// What the handler or resolver returned (for an rmcp
        /// `ClientHandler`, the [`RpcError`] it answered with).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    // --- the answer was too large ---
    /// The server's answer was past this client's bound
    /// ([`ConnectOptions::max_answer_bytes`](super::ConnectOptions::max_answer_bytes)):
    /// it was not read, and the request ended (the connection goes on).
    #[error("{}", too_large_text(method, *bound, *size))]
    AnswerTooLarge {
        /// The method of the request.
        method: &'static str,
        /// The client's bound, in bytes.
        bound: u64,
        /// The answer's size in bytes, when it was counted (on stdio;
        /// over HTTP the rest of the answer is not read).
        size: Option<u64>,
    },

    // --- the transport failed ---
    /// The request could not be sent or its answer not received.
    #[error("{method} failed in transport")]
    Transport {
        /// The method of the request.
        method: &'static str,
        /// The transport failure.
        #[source]
        source: Box<ServiceError>,
    },

    /// A `tools/call` may have reached the server and run, but no answer
    /// came (the connection broke, a proxy answered 5xx, the request timed
    /// out; or, for a call sent before and journaled, the process sending
    /// it stopped), and it was not sent again: the server does not declare
    /// that it honours idempotency keys
    /// ([`IDEMPOTENCY_EXTENSION`](crate::IDEMPOTENCY_EXTENSION)), so a
    /// second send could run the tool a second time. Find out on the
    /// server whether it ran before calling again.
    #[error(
        "the tools/call may have run on the server, but its answer was lost; it was not sent \
         again, because the server does not declare that it honours idempotency keys \
         ({}), and a second send could run the tool twice",
        crate::IDEMPOTENCY_EXTENSION
    )]
    CallMayHaveRun {
        /// How the answer was lost (`None` for a call sent before, by
        /// another process, whose answer never came).
        #[source]
        source: Option<Box<Error>>,
    },

    // --- the connection could not be opened ---
    /// The server's process could not be started
    /// ([`TasksClient::connect`](super::TasksClient::connect)).
    #[error("cannot start {program:?}")]
    Spawn {
        /// The program (`sh` for a command line).
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP client for the endpoint could not be built.
    #[error("cannot build an HTTP client")]
    HttpClient {
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server did not complete the MCP lifecycle: it is unreachable,
    /// exited, refused, or does not speak MCP.
    #[error("the server did not complete the MCP lifecycle")]
    Lifecycle {
        /// What rmcp reported.
        #[source]
        source: Box<rmcp::service::ClientInitializeError>,
    },
    /// The server did not complete the MCP lifecycle in time.
    #[error("the server did not complete the MCP lifecycle within {}", crate::task::human_duration(*.0))]
    ConnectTimeout(Duration),

    // --- the caller misused the API ---
    /// Options that contradict each other, or an argument that cannot be sent.
    #[error("invalid use of the API: {0}")]
    Usage(&'static str),
    /// A header given for an HTTP endpoint is not a valid HTTP header.
    #[error("the header {name:?} is not a valid HTTP header")]
    InvalidHeader {
        /// The header's name, as given.
        name: String,
    },
}

/// Who is at fault, in a few groups: what [`Error::kind`] answers. Print it,
/// count it or route on it without matching every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server refused the request with a JSON-RPC error (including an
    /// unknown task), or would not report on the task over a listen:
    /// [`Error::Rpc`], [`Error::UnknownTask`], [`Error::ListenDeclined`].
    Refused,
    /// The server broke the protocol: [`Error::Protocol`].
    Protocol,
    /// The task ended without a result, or needs input that was not given:
    /// [`Error::TaskFailed`], [`Error::TaskCancelled`],
    /// [`Error::InputRequired`], [`Error::CallInputRequired`].
    Task,
    /// The wait gave up while the task goes on: [`Error::Timeout`],
    /// [`Error::Stalled`].
    Wait,
    /// This side's answer to an input request was invalid or its handler
    /// failed; nothing was sent: [`Error::InvalidInputResponse`],
    /// [`Error::InputHandler`].
    Input,
    /// The server's answer was past this client's bound:
    /// [`Error::AnswerTooLarge`].
    TooLarge,
    /// The request or its answer was lost on the way: [`Error::Transport`],
    /// [`Error::CallMayHaveRun`].
    Transport,
    /// The connection could not be opened: [`Error::Spawn`],
    /// [`Error::HttpClient`], [`Error::Lifecycle`], [`Error::ConnectTimeout`].
    Connect,
    /// The API was used wrongly: [`Error::Usage`], [`Error::NotReady`],
    /// [`Error::InvalidHeader`].
    Usage,
}

impl ErrorKind {
    /// A short lower-case name: `refused`, `protocol`, `task`, `wait`,
    /// `input`, `too_large`, `transport`, `connect`, `usage`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::Protocol => "protocol",
            Self::Task => "task",
            Self::Wait => "wait",
            Self::Input => "input",
            Self::TooLarge => "too_large",
            Self::Transport => "transport",
            Self::Connect => "connect",
            Self::Usage => "usage",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    pub(crate) fn protocol(violation: ProtocolViolation, payload: Option<Value>) -> Self {
        Self::Protocol {
            violation,
            payload: payload.map(|value| Payload(Box::new(value))),
        }
    }

    /// Classifies an rmcp failure of `method`.
    pub(crate) fn from_service(method: &'static str, error: ServiceError) -> Self {
        match error {
            // An answer past the bound, as the layers under rmcp answer it.
            ServiceError::McpError(data) if too_large_of(&data).is_some() => {
                let (bound, size) = too_large_of(&data).unwrap_or_default();
                Self::AnswerTooLarge {
                    method,
                    bound,
                    size,
                }
            }
            ServiceError::McpError(data) => {
                let error = Box::new(RpcError::from(data));
                if error.code == INVALID_PARAMS && method.starts_with("tasks/") {
                    Self::UnknownTask { method, error }
                } else {
                    Self::Rpc { method, error }
                }
            }
            ServiceError::UnexpectedResponse => Self::protocol(
                ProtocolViolation::UnexpectedResult(format!(
                    "rmcp rejected the answer to {method}"
                )),
                None,
            ),
            source => Self::Transport {
                method,
                source: Box::new(source),
            },
        }
    }

    /// Who is at fault.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Rpc { .. } | Self::UnknownTask { .. } | Self::ListenDeclined => {
                ErrorKind::Refused
            }
            Self::Protocol { .. } => ErrorKind::Protocol,
            Self::TaskFailed(_)
            | Self::TaskCancelled(_)
            | Self::InputRequired { .. }
            | Self::CallInputRequired { .. } => ErrorKind::Task,
            Self::Timeout { .. } | Self::Stalled { .. } => ErrorKind::Wait,
            Self::InvalidInputResponse { .. } | Self::InputHandler { .. } => ErrorKind::Input,
            Self::AnswerTooLarge { .. } => ErrorKind::TooLarge,
            Self::Transport { .. } | Self::CallMayHaveRun { .. } => ErrorKind::Transport,
            Self::Spawn { .. }
            | Self::HttpClient { .. }
            | Self::Lifecycle { .. }
            | Self::ConnectTimeout(_) => ErrorKind::Connect,
            Self::Usage(_) | Self::NotReady { .. } | Self::InvalidHeader { .. } => ErrorKind::Usage,
        }
    }

    /// The JSON-RPC error code the server sent, for [`Error::Rpc`],
    /// [`Error::UnknownTask`] and [`Error::TaskFailed`].
    pub fn code(&self) -> Option<i64> {
        self.rpc_error().map(|error| error.code)
    }

    /// The JSON-RPC error the server sent, if this error carries one.
    pub fn rpc_error(&self) -> Option<&RpcError> {
        match self {
            Self::Rpc { error, .. } | Self::UnknownTask { error, .. } => Some(error),
            Self::TaskFailed(failure) => Some(&failure.error),
            _ => None,
        }
    }

    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// What was running when the deadline passed, for [`Error::Timeout`].
    pub fn timeout_stage(&self) -> Option<&Stage> {
        match self {
            Self::Timeout { stage, .. } => Some(stage),
            _ => None,
        }
    }

    /// True for [`Error::Stalled`].
    pub fn is_stalled(&self) -> bool {
        matches!(self, Self::Stalled { .. })
    }

    /// True for [`Error::UnknownTask`].
    pub fn is_unknown_task(&self) -> bool {
        matches!(self, Self::UnknownTask { .. })
    }

    /// True when the server misbehaved ([`Error::Protocol`]).
    pub fn is_protocol(&self) -> bool {
        matches!(self, Self::Protocol { .. })
    }

    /// True when the server's answer was past this client's bound
    /// ([`Error::AnswerTooLarge`]).
    pub fn is_answer_too_large(&self) -> bool {
        matches!(self, Self::AnswerTooLarge { .. })
    }

    /// The client's bound on an answer, in bytes, for
    /// [`Error::AnswerTooLarge`].
    pub fn answer_bound(&self) -> Option<u64> {
        match self {
            Self::AnswerTooLarge { bound, .. } => Some(*bound),
            _ => None,
        }
    }

    /// True when the transport failed (`Error::Transport`).
    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Transport { .. })
    }

    /// True for [`Error::CallMayHaveRun`]: a `tools/call` whose answer was
    /// lost, not sent again because the server does not honour
    /// idempotency keys.
    pub fn may_have_run(&self) -> bool {
        matches!(self, Self::CallMayHaveRun { .. })
    }

    /// True when the request provably never reached the server: the
    /// connection to it could not be opened (refused, no such host, no
    /// route, a TLS handshake that failed), so it may be sent again to any
    /// server without running anything twice.
    pub(crate) fn never_sent(&self) -> bool {
        let Self::Transport { source, .. } = self else {
            return false;
        };
        let mut current: Option<&(dyn std::error::Error + 'static)> = Some(&**source);
        while let Some(error) = current {
            // rmcp's Streamable HTTP error does not give its client's error
            // as a source: it is read here.
            #[cfg(feature = "http-client")]
            if let Some(HttpError::Client(http)) = error.downcast_ref::<HttpError<reqwest::Error>>()
            {
                return http.is_connect();
            }
            #[cfg(feature = "http-client")]
            if let Some(http) = error.downcast_ref::<reqwest::Error>() {
                return http.is_connect();
            }
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                return io.kind() == std::io::ErrorKind::ConnectionRefused;
            }
            current = error.source();
        }
        false
    }

    /// The last status read before the wait ended, for [`Error::Timeout`] and
    /// [`Error::Stalled`], and the status of the task for the task outcomes.
    pub fn last_status(&self) -> Option<&TaskStatus> {
        self.task_state().map(|state| &state.status)
    }

    /// The task this error is about, when there is one.
    pub fn task_id(&self) -> Option<&TaskId> {
        match self {
            Self::Timeout { task_id, .. } => task_id.as_ref(),
            Self::Stalled { state, .. }
            | Self::TaskCancelled(state)
            | Self::InputRequired { state, .. } => Some(&state.id),
            Self::TaskFailed(failure) => Some(&failure.state.id),
            _ => None,
        }
    }

    /// The last task state this error carries, when there is one (for a
    /// timeout: the last state read before the deadline).
    pub fn task_state(&self) -> Option<&TaskState> {
        match self {
            Self::Timeout { last_state, .. } => last_state.as_deref(),
            Self::Stalled { state, .. }
            | Self::TaskCancelled(state)
            | Self::InputRequired { state, .. } => Some(state),
            Self::TaskFailed(failure) => Some(&failure.state),
            _ => None,
        }
    }

    /// Why input was not given, for [`Error::InputRequired`] and
    /// [`Error::CallInputRequired`]: which handler is missing, for which key.
    pub fn unanswered(&self) -> Option<&Unanswered> {
        match self {
            Self::InputRequired { unanswered, .. } | Self::CallInputRequired { unanswered } => {
                Some(unanswered)
            }
            _ => None,
        }
    }

    /// The offending payload of a [`Error::Protocol`].
    pub fn payload(&self) -> Option<&Value> {
        match self {
            Self::Protocol { payload, .. } => payload.as_ref().map(|payload| &*payload.0),
            _ => None,
        }
    }

    /// True when the server refused because a capability was not declared
    /// (-32021, or -32003 from older servers), and names the Tasks extension
    /// among the required capabilities.
    pub fn requires_tasks_extension(&self) -> bool {
        let Self::Rpc { error, .. } = self else {
            return false;
        };
        (error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            || error.code == LEGACY_MISSING_CAPABILITY)
            && error
                .data
                .as_ref()
                .and_then(|data| data.pointer("/requiredCapabilities/extensions"))
                .and_then(Value::as_object)
                .is_some_and(|extensions| extensions.contains_key(crate::task::TASKS_EXTENSION))
    }

    /// Whether a failure is worth retrying inside a wait, and why.
    pub(crate) fn retry(&self) -> Retry {
        match self {
            Self::Transport { source, .. } => match &**source {
                ServiceError::Timeout { .. } => Retry::Fault,
                ServiceError::TransportSend(error) if answered_unusably(error) => Retry::Garbage,
                ServiceError::TransportSend(_) => Retry::Fault,
                _ => Retry::No,
            },
            // A line a newline-delimited transport dropped (see `LineCheck`).
            Self::Protocol {
                violation: ProtocolViolation::UnusableAnswers { .. },
                ..
            } => Retry::Garbage,
            _ => Retry::No,
        }
    }

    /// True for a request that ran out of its own timeout (rmcp's).
    pub(crate) fn is_request_timeout(&self) -> bool {
        matches!(self, Self::Transport { source, .. } if matches!(**source, ServiceError::Timeout { .. }))
    }
}

/// What [`Error::AnswerTooLarge`] says.
fn too_large_text(method: &str, bound: u64, size: Option<u64>) -> String {
    let size = size
        .map(|size| format!(" {} bytes,", grouped(size)))
        .unwrap_or_default();
    format!(
        "the answer to {method} is{size} past this client's limit of {} bytes \
         (ConnectOptions::max_answer_bytes); it was not read",
        grouped(bound)
    )
}

/// How a failed request may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Not at all: a JSON-RPC error, a closed transport, a misuse.
    No,
    /// Until the deadline: the request or its answer was lost on the way
    /// (a connection refused or reset, an HTTP 5xx, a per-request timeout).
    Fault,
    /// A few times: the server answered, but not with a JSON-RPC message.
    Garbage,
}

/// True when the transport got an answer it could not use (not JSON, the
/// wrong content type, too large) rather than losing it: a JSON error in
/// the source chain, or one of the variants of rmcp's Streamable HTTP error
/// that [`unusable_http`] names.
fn answered_unusably(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    let mut innermost = error;
    while let Some(error) = current {
        if error.is::<serde_json::Error>() {
            return true;
        }
        #[cfg(feature = "http-client")]
        if let Some(http) = error.downcast_ref::<HttpError<reqwest::Error>>() {
            return unusable_http(http);
        }
        innermost = error;
        current = error.source();
    }
    unusable_by_name(innermost)
}

/// rmcp's Streamable HTTP error, generic over its HTTP client's error.
#[cfg(feature = "http-client")]
type HttpError<E> = rmcp::transport::streamable_http_client::StreamableHttpError<E>;

/// The variants of rmcp's Streamable HTTP error that mean the server
/// answered with something that is not a JSON-RPC message: the wrong
/// content type, a body that does not parse as one, one too large.
#[cfg(feature = "http-client")]
fn unusable_http<E: std::error::Error + Send + Sync + 'static>(error: &HttpError<E>) -> bool {
    matches!(
        error,
        HttpError::UnexpectedContentType(_)
            | HttpError::UnexpectedServerResponse(_)
            | HttpError::Deserialize(_)
            | HttpError::ResponseBodyTooLarge { .. }
    )
}

/// The same variants as [`unusable_http`], told by the name their `Debug`
/// starts with: rmcp's Streamable HTTP error is generic over the HTTP
/// client's error type, so with a client other than reqwest it cannot be
/// downcast from here. The only place that reads rmcp's names; the unit
/// tests build rmcp's real values, so a renamed variant fails them.
fn unusable_by_name(error: &(dyn std::error::Error + 'static)) -> bool {
    const UNUSABLE: [&str; 4] = [
        "UnexpectedContentType",
        "UnexpectedServerResponse",
        "Deserialize",
        "ResponseBodyTooLarge",
    ];
    let shown = format!("{error:?}");
    UNUSABLE.iter().any(|variant| {
        shown
            .strip_prefix(variant)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['(', ' ', '{']))
    })
}

/// What a request's span says of the error it ended with: the JSON-RPC
/// error the server sent, else `timeout` or `_OTHER`.
impl SpanError for Error {
    fn outcome(&self) -> Outcome<'_> {
        match self.rpc_error() {
            Some(rpc) => Outcome::Error {
                code: rpc.code,
                message: &rpc.message,
            },
            None if self.is_timeout() => Outcome::Failed("timeout"),
            None => Outcome::Failed("_OTHER"),
        }
    }
}

#[cfg(test)]
mod tests;
