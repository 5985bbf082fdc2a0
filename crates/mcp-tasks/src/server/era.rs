//! Which era a request belongs to, for tool code that checks what the
//! client declared: [`declares_tasks`] and [`missing_client_capabilities`]
//! answer by the rules of the request's own era, 2026-07-28 (per request)
//! or 2025-11-25 and before (a session opened with `initialize`).

use rmcp::model::{ClientCapabilities, ErrorCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use super::legacy::Augmented;

/// True when the request belongs to a session opened with `initialize`
/// (2025-11-25 and before).
pub(crate) fn is_initialize_era(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.has_initialize())
}

/// True when the request speaks the tasks of 2025-11-25: its session was
/// opened with `initialize` and neither the request nor the session
/// declared the Tasks extension (a client of both eras that declares it
/// on such a session, as rmcp's may, is served in the new era).
pub(crate) fn is_old_tasks_era(context: &RequestContext<RoleServer>) -> bool {
    is_initialize_era(context)
        && !context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// True when this `tools/call` can take a task in its era: on 2026-07-28
/// the request declared the Tasks extension; on an initialize-era session
/// the call asked for a task (`params.task`, which reaches the server only
/// through the transports of this crate: see
/// [`StdioTransport`](super::StdioTransport)).
pub fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    if is_old_tasks_era(context) {
        context.extensions.get::<Augmented>().is_some()
    } else {
        context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
    }
}

/// The error for a call that needs the client capabilities `missing`,
/// which the client did not declare, in the request's era: on 2026-07-28
/// -32021 (`MissingRequiredClientCapability`, with
/// `data.requiredCapabilities`); on an initialize-era session, whose spec
/// has no such error, -32601 when the Tasks extension is among them (as
/// that era answers a call without `params.task` to a tool that requires
/// one), else -32600 (invalid request) with the same `data`.
pub fn missing_client_capabilities(
    context: &RequestContext<RoleServer>,
    missing: ClientCapabilities,
) -> ErrorData {
    if !is_old_tasks_era(context) {
        return ErrorData::missing_required_client_capability(missing);
    }
    if missing.supports_tasks() {
        return ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "this tool requires task augmentation (taskSupport: 'required')",
            None,
        );
    }
    let data = json!({"requiredCapabilities": missing});
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        "the client did not declare the capabilities this call needs",
        Some(data),
    )
}
