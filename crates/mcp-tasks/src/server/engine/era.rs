//! Which era a request belongs to, and the rules of each for a call: for
//! tool code that checks what the client declared, [`declares_tasks`] and
//! [`missing_client_capabilities`] answer by the rules of the request's
//! own era, 2026-07-28 (per request) or 2025-11-25 and before (a session
//! opened with `initialize`); for the runtime, whether a call of the older
//! era becomes a task and with which TTL (see `server::legacy`).

use std::borrow::Cow;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ErrorCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use super::policy::{TaskPolicy, ToolTasks};
use crate::task::Ttl;

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
/// [`StdioTransport`](crate::server::StdioTransport)).
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

/// The shortest TTL a client may ask for: a task that expires before its
/// client's first poll is of no use to anyone.
const MIN_TTL: Duration = Duration::from_secs(1);

/// The mark a `tools/call` that asked for a task (`params.task`) carries in
/// its context's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Augmented {
    /// The `ttl` it asked for, in milliseconds.
    pub(crate) ttl: Option<u64>,
}

/// Whether a call of the 2025-11-25 era runs as a task (see
/// `TaskRuntime::decide`).
pub(crate) fn runs_as_task(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    policy: TaskPolicy,
) -> Result<bool, ErrorData> {
    let augmented = context.extensions.get::<Augmented>().is_some();
    match policy {
        TaskPolicy::Forbidden if augmented => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "Tool {} does not support task augmentation (taskSupport: 'forbidden')",
                request.name
            ),
            None,
        )),
        TaskPolicy::Required if !augmented => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "Tool {} requires task augmentation (taskSupport: 'required')",
                request.name
            ),
            None,
        )),
        TaskPolicy::Forbidden => Ok(false),
        _ => Ok(augmented),
    }
}

/// `tasks`, with the TTL the call asked for (`params.task.ttl`) where it
/// asked for one: from [`MIN_TTL`] up to `max` (the runtime's maximum
/// lifetime; unbounded when it has none).
pub(crate) fn with_requested_ttl<'a>(
    tasks: &'a ToolTasks,
    context: &RequestContext<RoleServer>,
    max: Option<Duration>,
) -> Cow<'a, ToolTasks> {
    match context
        .extensions
        .get::<Augmented>()
        .and_then(|mark| mark.ttl)
    {
        Some(ms) => {
            let asked = Duration::from_millis(ms).max(MIN_TTL);
            let mut tasks = tasks.clone();
            tasks.ttl = Some(Ttl::Limited(max.map_or(asked, |max| asked.min(max))));
            Cow::Owned(tasks)
        }
        None => Cow::Borrowed(tasks),
    }
}
