//! [`Caller`]: who a request comes from, as admission sees it.

use rmcp::model::Extensions;

use super::refusal::RetryMark;
use crate::server::auth::principal::{Principal, authenticated_principal};
use crate::server::engine::idempotent::Idempotent;
use crate::telemetry::server_spans::RequestTrace;

/// The one principal every unauthenticated HTTP caller's caps and rates
/// count against, unless the runtime counts them by their principal
/// (`TaskRuntimeBuilder::with_quota_by_header`). No token label can be
/// this name (a label has no `:`).
pub(crate) const UNAUTHENTICATED: &str = "http:unauthenticated";

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
    /// The trace context of the request, when the serving recipe put it in
    /// the request's extensions (rmcp runs the handler where the current
    /// context is not the request's).
    pub(crate) trace: RequestTrace,
    /// The call's idempotency key and fingerprint, when it sent a key.
    pub(crate) idempotent: Option<Idempotent>,
    /// The call declared [`CREATED_OUTCOME_EXTENSION`]: a task it makes
    /// finished is answered with its outcome.
    ///
    /// [`CREATED_OUTCOME_EXTENSION`]: crate::task::CREATED_OUTCOME_EXTENSION
    pub(crate) created_outcome: bool,
}

impl Caller {
    /// The owner of a task taken over from another server, as its caller.
    pub(crate) fn owner(principal: Principal) -> Self {
        Self {
            quota: principal.clone(),
            principal,
            mark: None,
            trace: RequestTrace::default(),
            idempotent: None,
            created_outcome: false,
        }
    }

    /// This caller, whose call sent `idempotent` (see [`Idempotent::of`]).
    pub(crate) fn with_idempotent(mut self, idempotent: Option<Idempotent>) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// This caller, whose call declared [`CREATED_OUTCOME_EXTENSION`] or not.
    ///
    /// [`CREATED_OUTCOME_EXTENSION`]: crate::task::CREATED_OUTCOME_EXTENSION
    pub(crate) fn with_created_outcome(mut self, declared: bool) -> Self {
        self.created_outcome = declared;
        self
    }

    /// The caller of a request with `extensions`, bound to `principal` and
    /// counted under `quota`.
    pub(crate) fn new(principal: Principal, quota: Principal, extensions: &Extensions) -> Self {
        Self {
            principal,
            quota,
            mark: RetryMark::of(extensions).cloned(),
            trace: RequestTrace::of(extensions),
            idempotent: None,
            created_outcome: false,
        }
    }
}

/// The principal the caps and rates of a request with `extensions` (whose
/// task belongs to `principal`) count against: the [`Authenticated`] one
/// when a layer authenticated the request; over HTTP otherwise one
/// principal for all ([`UNAUTHENTICATED`]), so that a caller who varies
/// what it sends gains nothing, or `principal` when `by_header`; elsewhere
/// (stdio: the process is the caller) `principal`.
///
/// [`Authenticated`]: crate::server::Authenticated
pub(crate) fn quota_of(
    principal: &Principal,
    extensions: &Extensions,
    by_header: bool,
) -> Principal {
    if let Some(authenticated) = authenticated_principal(extensions) {
        return authenticated;
    }
    if by_header || extensions.get::<::http::request::Parts>().is_none() {
        return principal.clone();
    }
    Principal::new(UNAUTHENTICATED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Authenticated;
    use crate::server::auth::principal::default_principal;

    fn http_request(authorization: Option<&str>, authenticated: Option<&str>) -> Extensions {
        let mut request = ::http::Request::builder();
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let (mut parts, ()) = request.body(()).unwrap().into_parts();
        if let Some(name) = authenticated {
            parts
                .extensions
                .insert(Authenticated::new(Principal::new(name)));
        }
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        extensions
    }

    fn quota(extensions: &Extensions, by_header: bool) -> Principal {
        quota_of(&default_principal(extensions), extensions, by_header)
    }

    #[test]
    fn unauthenticated_http_callers_share_one_quota_unless_counted_by_header() {
        let (one, two) = (
            http_request(Some("Bearer one"), None),
            http_request(Some("Bearer two"), None),
        );
        let anonymous = http_request(None, None);
        for extensions in [&one, &two, &anonymous] {
            assert_eq!(quota(extensions, false).as_str(), UNAUTHENTICATED);
        }
        assert_eq!(quota(&one, true), default_principal(&one));
        assert_ne!(quota(&one, true), quota(&two, true));
    }

    #[test]
    fn an_authenticated_caller_is_its_own_quota_and_stdio_is_the_process() {
        let alice = http_request(Some("Bearer secret"), Some("alice"));
        assert_eq!(quota(&alice, false).as_str(), "alice");
        assert_eq!(quota(&alice, true).as_str(), "alice");
        assert_eq!(quota(&Extensions::new(), false).as_str(), "process");
    }
}
