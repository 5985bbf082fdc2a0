//! What an input request asks for ([`InputKind`]) and why a wait left one
//! unanswered ([`Unanswered`]): the vocabulary that a task's outcome
//! (`state.rs`), the client's error (`error.rs`) and the input loop
//! (`input.rs`) share, one floor below all three so that none of them
//! reaches up into another for it.

use std::fmt;

use serde_json::Value;

/// What an input request asks for, by its method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InputKind {
    /// `elicitation/create`: a form or a URL for the user.
    Elicitation,
    /// `sampling/createMessage`: a completion from the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
    /// A method this version does not know.
    Unknown(String),
}

impl InputKind {
    /// The kind of the input request `request` (`{method, params}` as sent).
    pub fn of(request: &Value) -> Self {
        match request.get("method").and_then(Value::as_str) {
            Some("elicitation/create") => Self::Elicitation,
            Some("sampling/createMessage") => Self::Sampling,
            Some("roots/list") => Self::Roots,
            Some(other) => Self::Unknown(other.to_owned()),
            None => Self::Unknown(String::new()),
        }
    }

    /// The method of the request, e.g. `elicitation/create`.
    pub fn method(&self) -> &str {
        match self {
            Self::Elicitation => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
            Self::Unknown(method) => method,
        }
    }

    /// The `ClientHandler` method that answers it, e.g. `create_elicitation`.
    fn handler_method(&self) -> Option<&'static str> {
        match self {
            Self::Elicitation => Some("create_elicitation"),
            Self::Sampling => Some("create_message"),
            Self::Roots => Some("list_roots"),
            Self::Unknown(_) => None,
        }
    }

    /// The client capability that declares it, e.g. `elicitation`.
    fn capability(&self) -> Option<&'static str> {
        match self {
            Self::Elicitation => Some("elicitation"),
            Self::Sampling => Some("sampling"),
            Self::Roots => Some("roots"),
            Self::Unknown(_) => None,
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.method())
    }
}

/// Why a wait left an input request unanswered: what
/// [`TaskOutcome::InputRequired`](super::TaskOutcome::InputRequired) and
/// [`TaskOutcome::CallInputRequired`](super::TaskOutcome::CallInputRequired)
/// (and the errors they become) say besides the request itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unanswered {
    /// The wait was told to hand input back ([`InputMode::Return`](super::InputMode::Return)).
    Returned,
    /// The wait answers with the client's `ClientHandler`
    /// ([`InputMode::Handlers`](super::InputMode::Handlers), the default), and no handler answers the
    /// request under `key`: the client's handler does not declare the
    /// capability of its kind, or answered -32601 (rmcp's default for a
    /// method not implemented). Implement it (and declare the capability in
    /// `ClientHandler::get_info`), or give the wait a resolver
    /// ([`InputMode::resolver`](super::InputMode::resolver), [`InputMode::forms`](super::InputMode::forms)).
    MissingHandler {
        /// The key of the input request.
        key: String,
        /// What it asks for.
        kind: InputKind,
        /// Whether the handler declares the capability (and answered -32601).
        declared: bool,
    },
}

impl Unanswered {
    /// The key of the request no handler answers, for [`Unanswered::MissingHandler`].
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::MissingHandler { key, .. } => Some(key),
            Self::Returned => None,
        }
    }

    /// The kind of request no handler answers, for [`Unanswered::MissingHandler`].
    pub fn missing_handler(&self) -> Option<&InputKind> {
        match self {
            Self::MissingHandler { kind, .. } => Some(kind),
            Self::Returned => None,
        }
    }
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Returned => {
                f.write_str("the wait was told to return input requests (InputMode::Return)")
            }
            Self::MissingHandler {
                key,
                kind,
                declared,
            } => {
                write!(f, "no handler answers the {kind} request {key:?}: ")?;
                match (kind.handler_method(), kind.capability(), declared) {
                    (Some(method), _, true) => write!(
                        f,
                        "the client's ClientHandler declares it but does not implement {method}"
                    )?,
                    (Some(method), Some(capability), false) => write!(
                        f,
                        "the client's ClientHandler does not declare the {capability} capability \
                         (and implement {method})"
                    )?,
                    _ => f.write_str("a ClientHandler cannot answer this kind")?,
                }
                f.write_str(", and the wait has no resolver (InputMode::resolver)")
            }
        }
    }
}

impl std::error::Error for Unanswered {}
