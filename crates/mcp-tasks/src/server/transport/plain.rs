//! A plain `tools/call` read straight from its bytes, for the transports
//! that read ahead of rmcp: the HTTP fast path (`http/fast/call.rs`, after
//! its header checks) and the stdio transport (`stdio.rs`, a line at a
//! time). Neither transport's module owns it, so that each works without
//! the other's feature.
//!
//! A plain call has `jsonrpc`, `id`, `method` and `params` with only
//! `_meta`, `name` and `arguments`, no key given twice; its reading is
//! held to rmcp's own deserializer by the HTTP fast path's unit tests and
//! the fuzz target `server_reads_request`.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, JsonObject, RequestId, RequestMetaObject,
};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The protocol version a plain call names.
pub(crate) const VERSION: &str = "2026-07-28";

/// Whether a plain call may ask for progress or log notifications (a
/// `progressToken`, an `io.modelcontextprotocol/logLevel` in its `_meta`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notifications {
    /// Progress only: the HTTP fast path routes a call's progress to its
    /// own answer by token, and a log message names no call (rmcp's own
    /// path streams them).
    #[cfg_attr(
        not(feature = "http-server"),
        allow(dead_code, reason = "only the HTTP fast path refuses logs")
    )]
    Progress,
    /// Yes: the stdio transport hands the call to rmcp's own service loop,
    /// whose peer sends them on the connection as for a call rmcp read.
    Allowed,
}

/// True when the request's `_meta` is one a plain call has: it names
/// 2026-07-28 and the client's capabilities, and, unless `notifications`
/// allows them, asks for no log messages.
pub(crate) fn meta_takes(meta: &Map<String, Value>, notifications: Notifications) -> bool {
    meta.get("io.modelcontextprotocol/protocolVersion")
        .is_some_and(|version| version == VERSION)
        && meta
            .get("io.modelcontextprotocol/clientCapabilities")
            .is_some_and(Value::is_object)
        && (notifications == Notifications::Allowed
            || !meta.contains_key("io.modelcontextprotocol/logLevel"))
}

/// A plain `tools/call`, as its bytes are read; any other key, at the top
/// or in `params`, or a key given twice, fails the reading.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(rename = "_meta")]
    meta: JsonObject,
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

/// The request id and rmcp's `CallToolRequest` of a plain call (see
/// [`Envelope`]) whose `_meta` [takes](meta_takes) (with `notifications`),
/// read from its bytes: what rmcp's own deserializer reads from them.
/// `None` for any other message.
pub(crate) fn read_plain(
    body: &[u8],
    notifications: Notifications,
) -> Option<(RequestId, CallToolRequest)> {
    let envelope: Envelope<'_> = serde_json::from_slice(body).ok()?;
    let Params {
        meta,
        name,
        arguments,
    } = envelope.params;
    if envelope.jsonrpc != "2.0"
        || envelope.method != "tools/call"
        || !meta_takes(&meta, notifications)
    {
        return None;
    }
    let mut params = CallToolRequestParams::new(name);
    params.arguments = arguments;
    let mut call = CallToolRequest::new(params);
    call.extensions.insert(RequestMetaObject::from(meta));
    Some((envelope.id, call))
}
