//! Which era a request belongs to, and the rules of each for a call: for
//! tool code that checks what the client declared, [`declares_tasks`] and
//! [`missing_client_capabilities`] answer by the rules of the request's
//! own era, 2026-07-28 (per request) or 2025-11-25 and before (a session
//! opened with `initialize`); for the runtime, whether a call of the older
//! era becomes a task and with which TTL (see `server::legacy`).

use std::borrow::Cow;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ErrorCode, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use super::policy::{TaskPolicy, ToolTasks};
use crate::task::{CREATED_OUTCOME_EXTENSION, Ttl};

/// The `_meta` key of a request's client capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// What a request's `_meta` says of its era, read once where the request
/// is read (the HTTP fast path for `tools/call`) and kept in its
/// context's extensions: rmcp's typed accessors decode `_meta` again at
/// each call (some 1,200 instructions for the client capabilities), and
/// a call asks up to five times. Kept only when `_meta` gives both the
/// version and the capabilities, so that it answers as the accessors
/// would (they fall back to the session's only when `_meta` lacks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadMeta {
    /// The version has `initialize` (2025-11-25 and before).
    initialize_era: bool,
    /// The capabilities declare the Tasks extension.
    declares_tasks: bool,
}

impl ReadMeta {
    /// What `meta` says, when it gives both the version and the
    /// capabilities (as rmcp's typed accessors read them); `None` when
    /// either is missing or malformed.
    #[cfg_attr(
        not(feature = "http-server"),
        allow(dead_code, reason = "only the HTTP fast path reads `_meta` first")
    )]
    pub(crate) fn read(meta: &RequestMetaObject) -> Option<Self> {
        let version = meta.protocol_version()?;
        let capabilities = meta.client_capabilities()?;
        Some(Self {
            initialize_era: version.has_initialize(),
            declares_tasks: capabilities.supports_tasks(),
        })
    }
}

/// True when the request belongs to a session opened with `initialize`
/// (2025-11-25 and before).
pub(crate) fn is_initialize_era(context: &RequestContext<RoleServer>) -> bool {
    if let Some(read) = context.extensions.get::<ReadMeta>() {
        return read.initialize_era;
    }
    context
        .protocol_version()
        .is_some_and(|version| version.has_initialize())
}

/// True when the request's client capabilities (its own, or its
/// session's) declare the Tasks extension.
fn capabilities_declare_tasks(context: &RequestContext<RoleServer>) -> bool {
    if let Some(read) = context.extensions.get::<ReadMeta>() {
        return read.declares_tasks;
    }
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// True when the request speaks the tasks of 2025-11-25: its session was
/// opened with `initialize` and neither the request nor the session
/// declared the Tasks extension (a client of both eras that declares it
/// on such a session, as rmcp's may, is served in the new era).
pub(crate) fn is_old_tasks_era(context: &RequestContext<RoleServer>) -> bool {
    is_initialize_era(context) && !capabilities_declare_tasks(context)
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
        capabilities_declare_tasks(context)
    }
}

/// True when the request's own client capabilities (in its `_meta`)
/// declare [`CREATED_OUTCOME_EXTENSION`]: read from the JSON as it is, a
/// few map look-ups, without decoding the capabilities.
pub(crate) fn declares_created_outcome(meta: &RequestMetaObject) -> bool {
    meta.get(CLIENT_CAPABILITIES)
        .and_then(|capabilities| capabilities.get("extensions"))
        .and_then(|extensions| extensions.get(CREATED_OUTCOME_EXTENSION))
        .is_some_and(serde_json::Value::is_object)
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

#[cfg(test)]
mod tests {
    use rmcp::ServerHandler;
    use rmcp::model::{Implementation, InitializeRequestParams, NumberOrString, ProtocolVersion};
    use rmcp::service::serve_directly;

    use super::*;

    struct Nothing;

    impl ServerHandler for Nothing {}

    /// The era's three answers for a request with `meta` on a session
    /// that opened with `session` (version, and whether it declared the
    /// Tasks extension): read through rmcp's accessors, and through the
    /// `_meta` read once when it gives both keys.
    fn answers(meta: &RequestMetaObject, session: (ProtocolVersion, bool)) -> [[bool; 3]; 2] {
        let capabilities = match session.1 {
            true => ClientCapabilities::builder().enable_tasks().build(),
            false => ClientCapabilities::default(),
        };
        let info = InitializeRequestParams::new(capabilities, Implementation::default())
            .with_protocol_version(session.0);
        let running = serve_directly(Nothing, tokio::io::duplex(64).0, Some(info));
        let mut context = RequestContext::new(NumberOrString::Number(1), running.peer().clone());
        context.meta = meta.clone();
        let ask = |context: &RequestContext<RoleServer>| {
            [
                is_initialize_era(context),
                is_old_tasks_era(context),
                declares_tasks(context),
            ]
        };
        let plain = ask(&context);
        if let Some(read) = ReadMeta::read(meta) {
            context.extensions.insert(read);
        }
        [plain, ask(&context)]
    }

    #[tokio::test]
    async fn the_meta_read_once_answers_as_rmcps_accessors() {
        let versions = [ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25];
        let mut kept = 0;
        for version in &versions {
            for declared in [true, false] {
                for with_capabilities in [true, false] {
                    let mut meta = RequestMetaObject::new();
                    meta.set_protocol_version(version.clone());
                    if with_capabilities {
                        let capabilities = match declared {
                            true => ClientCapabilities::builder().enable_tasks().build(),
                            false => ClientCapabilities::default(),
                        };
                        meta.set_client_capabilities(capabilities);
                    }
                    kept += usize::from(ReadMeta::read(&meta).is_some());
                    for session in &versions {
                        for session_declared in [true, false] {
                            let [plain, read] = answers(&meta, (session.clone(), session_declared));
                            assert_eq!(plain, read, "{meta:?} on {session:?}");
                        }
                    }
                }
            }
        }
        assert_eq!(kept, 4, "kept only with both keys");
        // A 2025-11-25 request that declares the extension is served in
        // the new era; one that does not, in the old.
        let mut meta = RequestMetaObject::new();
        meta.set_protocol_version(ProtocolVersion::V_2025_11_25);
        meta.set_client_capabilities(ClientCapabilities::default());
        let [_, read] = answers(&meta, (ProtocolVersion::V_2025_11_25, false));
        assert_eq!(read, [true, true, false]);
    }
}
