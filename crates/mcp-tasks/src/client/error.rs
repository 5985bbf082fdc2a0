//! The one error type of the client half (re-exported as [`crate::Error`]).
//!
//! Variants are grouped by who is at fault: the peer refused (a JSON-RPC
//! error it sent), the peer misbehaved (a malformed or unexpected answer),
//! the task ended badly (failed, cancelled, input left unanswered), the wait
//! ended (timeout, stall), the transport failed, or the caller misused the API.

use std::time::Duration;

use rmcp::ServiceError;
use serde_json::Value;

use super::state::{TaskFailure, TaskState};
use crate::task::{RpcError, TaskId, TaskStatus};

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
    InputRequired(Box<TaskState>),
    /// The `tools/call` asked for input (MRTR) that was not given.
    #[error("the tool call needs input that was not given")]
    CallInputRequired,
    /// [`TaskState::outcome`] was asked for an outcome the state does not hold.
    #[error("the task state is {status} without {missing}; call tasks/get first")]
    NotReady {
        /// The status of the state.
        status: TaskStatus,
        /// What was missing.
        missing: &'static str,
    },

    // --- the wait ended ---
    /// The deadline passed before the task finished; the task keeps running on the server.
    #[error("gave up waiting for the task after {waited:?} (last status: {})",
        last_state.as_ref().map_or("none read", |state| state.status.as_str()))]
    Timeout {
        /// The task.
        task_id: TaskId,
        /// How long the wait lasted.
        waited: Duration,
        /// The last state read, if any.
        last_state: Option<Box<TaskState>>,
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

    // --- the caller misused the API ---
    /// Options that contradict each other, or an argument that cannot be sent.
    #[error("invalid use of the API: {0}")]
    Usage(&'static str),
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

    /// True when the transport failed (`Error::Transport`).
    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Transport { .. })
    }

    /// The last status read before the wait ended, for [`Error::Timeout`] and
    /// [`Error::Stalled`], and the status of the task for the task outcomes.
    pub fn last_status(&self) -> Option<&TaskStatus> {
        self.task_state().map(|state| &state.status)
    }

    /// The task this error is about, when there is one.
    pub fn task_id(&self) -> Option<&TaskId> {
        match self {
            Self::Timeout { task_id, .. } => Some(task_id),
            Self::Stalled { state, .. }
            | Self::TaskCancelled(state)
            | Self::InputRequired(state) => Some(&state.id),
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
            | Self::InputRequired(state) => Some(state),
            Self::TaskFailed(failure) => Some(&failure.state),
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
                .is_some_and(|extensions| extensions.contains_key(crate::TASKS_EXTENSION))
    }

    /// True for failures worth retrying inside a wait: a transport error
    /// while sending or a per-request timeout. A closed transport and any
    /// JSON-RPC error are not.
    #[cfg(feature = "client")]
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Transport { source, .. }
                if matches!(**source, ServiceError::TransportSend(_) | ServiceError::Timeout { .. })
        )
    }
}
