//! [`Caller`]: who a request comes from, as admission sees it.

use rmcp::model::Extensions;

use super::refusal::RetryMark;
use crate::server::principal::Principal;

/// Who a `tools/call` comes from: the principal its task is bound to, the
/// one its caps and rates are counted under, and the HTTP request's mark
/// for a refusal (see [`refusal`](super::refusal)).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The task's owner: only it may read, answer or cancel the task.
    pub(crate) principal: Principal,
    /// The principal whose caps and rates the task counts against.
    pub(crate) quota: Principal,
    /// Set when the call is refused for load, so HTTP answers 503.
    pub(crate) mark: Option<RetryMark>,
}

impl Caller {
    /// The owner of a task taken over from another server, as its caller.
    pub(crate) fn owner(principal: Principal) -> Self {
        Self {
            quota: principal.clone(),
            principal,
            mark: None,
        }
    }

    /// The caller of a request with `extensions`, bound to `principal`.
    pub(crate) fn new(principal: Principal, extensions: &Extensions) -> Self {
        Self {
            quota: principal.clone(),
            principal,
            mark: RetryMark::of(extensions).cloned(),
        }
    }
}
