//! [`Stop`]: why a creation ended before its task was made, and how that
//! becomes the call's answer at the engine's edge.

use rmcp::ErrorData;
use rmcp::model::CallToolResponse;

use crate::server::engine::admission::refusal::{Denial, Refusal, RetryMark};

/// Why a creation ended before its task was made.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The call has its answer already: the same call sent again under its
    /// idempotency key gets its first task (or a race for the key was lost
    /// to it).
    Answer(Box<CallToolResponse>),
    /// Refused for load: the caller may try again later.
    Refused(Refusal),
    /// Failed (the store, the lease, a key used for another call).
    Failed(ErrorData),
}

impl Stop {
    /// The call's answer: where a refusal becomes the wire's error (and
    /// marks the HTTP request, through `mark`, for a 503).
    pub(crate) fn into_answer(
        self,
        mark: Option<&RetryMark>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self {
            Self::Answer(answer) => Ok(*answer),
            Self::Refused(refusal) => Err(refusal.into_error(mark)),
            Self::Failed(error) => Err(error),
        }
    }
}

impl From<Refusal> for Stop {
    fn from(refusal: Refusal) -> Self {
        Self::Refused(refusal)
    }
}

impl From<ErrorData> for Stop {
    fn from(error: ErrorData) -> Self {
        Self::Failed(error)
    }
}

impl From<Denial> for Stop {
    fn from(denial: Denial) -> Self {
        match denial {
            Denial::Refused(refusal) => Self::Refused(refusal),
            Denial::Failed(error) => Self::Failed(error),
        }
    }
}
