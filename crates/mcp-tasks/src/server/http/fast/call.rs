//! A fast path for `tools/call` over Streamable HTTP.
//!
//! rmcp's Streamable HTTP service serves each stateless request with a
//! one-shot rmcp service of its own: it parses the body into its message
//! enum through serde's buffering, serializes it back into a JSON value to
//! check the `Mcp-*` headers, starts a service loop with its channels and
//! tasks, and hands the request to the handler from there. For a
//! `tools/call` that becomes a task, that machinery costs several times what
//! creating the task does. [`ToolCalls`] calls the same handler the
//! same way rmcp's loop does, without the machinery:
//!
//! * The request is parsed once (by the guard, in the serving recipe's
//!   front middleware) and read
//!   into rmcp's own `CallToolRequest` with rmcp's own deserializer, so the
//!   handler gets the very `CallToolRequestParams`, `_meta` and extensions
//!   (the request's `http::request::Parts` among them) it gets through rmcp.
//! * The handler runs through rmcp's `Service::handle_request`, the function
//!   rmcp's loop calls: version checks (-32022), required `_meta` (-32602),
//!   the tasks-extension guard (-32021), MRTR results and the 2026-07-28
//!   result shape are rmcp's own. It runs in a task of its own, as in rmcp,
//!   with a cancellation token that fires when the handler is done or the
//!   client goes away first.
//! * The answer is rmcp's `ServerJsonRpcMessage`, serialized by serde as
//!   rmcp does, with the HTTP status rmcp gives it (400 for -32020, -32021,
//!   -32022 and for -32602 on a request whose `_meta` lacks a required key;
//!   404 for -32601; 200 otherwise) and `Content-Type: application/json`.
//!
//! Only requests rmcp would accept as they are take this path: ones the
//! serving recipe's guard admitted (`Host`, `Origin` and bearer token
//! checked); exactly one `MCP-Protocol-Version: 2026-07-28`,
//! one `Mcp-Method: tools/call` and one plain `Mcp-Name` equal to the
//! tool's name; no `Mcp-Param-*` header and a tool whose schema asks for
//! none; a body with only `jsonrpc`, `id`, `method` and `params`, whose
//! `_meta` names the same version and has no `progressToken` and no
//! `logLevel`. Everything else goes to rmcp, which validates and answers as
//! usual. The handler's `RequestContext::peer` is one shared, detached peer
//! that knows the client as rmcp's stateless peer does (protocol
//! 2026-07-28, nothing else): a 2026-07-28 request cannot send the client
//! requests, and without a `progressToken` or `logLevel` it gets no
//! notifications, so the peer has nothing to deliver; were a handler to
//! send a notification anyway, it is dropped instead of turning the answer
//! into an event stream. Delete this module the day rmcp's own path is as
//! fast.

use std::sync::OnceLock;

use axum::body::Body;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequest, ClientRequest, ErrorCode, Extensions, GetExtensions, GetMeta, Implementation,
    InitializeRequestParams, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerJsonRpcMessage as Message,
};
use rmcp::service::{
    RequestContext, RoleServer, RunningService, RxJsonRpcMessage, Service, TxJsonRpcMessage,
    serve_directly,
};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::server::http::reply::json_body;

/// The only protocol version served here.
const VERSION: &str = "2026-07-28";

/// `tools/call` answered by calling `server`'s handler directly; see the
/// [module docs](self).
pub(crate) struct ToolCalls<S: ServerHandler> {
    server: S,
    /// Made on the first call, inside the runtime.
    detached: OnceLock<Detached<S>>,
}

/// The shared peer, and the idle service loop that owns its channel.
struct Detached<S: ServerHandler> {
    peer: rmcp::Peer<RoleServer>,
    _loop: RunningService<RoleServer, S>,
}

impl<S> ToolCalls<S>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(server: S) -> Self {
        Self {
            server,
            detached: OnceLock::new(),
        }
    }

    /// True when the request is one this path answers exactly as rmcp would.
    pub(crate) fn accepts(&self, headers: &HeaderMap, message: &Value) -> bool {
        let Some(name) = call_name(headers, message) else {
            return false;
        };
        // A tool that asks for `Mcp-Param-*` headers: rmcp checks them.
        self.server.get_tool(name).is_none_or(|tool| {
            !tool
                .input_schema
                .iter()
                .any(|(key, value)| key == "x-mcp-header" || mentions_param_headers(value))
        })
    }

    /// Answers a request [`ToolCalls::accepts`] took.
    pub(crate) async fn answer(&self, parts: Parts, message: Value) -> Response {
        let Some((id, mut request)) = read_call(message) else {
            // `accepts` took it, so rmcp's own types read it: unreachable in
            // practice, and answered as rmcp answers an unreadable body.
            return plain_error(
                StatusCode::BAD_REQUEST,
                "Bad Request: the request is not a valid tools/call",
            );
        };
        // As rmcp's stateless path and its service loop do: the request's
        // HTTP parts ride in its extensions, then `_meta` and the
        // extensions move into the handler's context.
        let meta_malformed = !request
            .get_meta()
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty();
        request.extensions_mut().insert(parts);
        let mut meta = RequestMetaObject::new();
        std::mem::swap(&mut meta, request.get_meta_mut());
        let mut extensions = Extensions::new();
        std::mem::swap(&mut extensions, request.extensions_mut());
        let request_ct = CancellationToken::new();
        let mut context = RequestContext::new(id.clone(), self.peer().clone());
        context.ct = request_ct.child_token();
        context.meta = meta;
        context.extensions = extensions;
        let server = self.server.clone();
        // In the quiet scope (see `crate::quiet`), as rmcp's own handler
        // tasks are when its loop runs in it.
        #[cfg(feature = "otel")]
        let span = crate::server::traced::span_of(&request, &context, crate::otel::TCP);
        // On the heap: the handler's future is large (about 10 KB, most of
        // it the runtime's task creation), and tokio copies a task's whole
        // future whenever the task changes stage (spawned, polled to its
        // end, output taken); boxed, it copies a pointer.
        let handler = tokio::spawn(crate::quiet::scope(Box::pin(async move {
            #[cfg(feature = "otel")]
            {
                use opentelemetry::context::FutureExt as _;
                let answer = server
                    .handle_request(request, context)
                    .with_context(span.clone())
                    .await;
                crate::server::traced::end(&span, &answer);
                answer
            }
            #[cfg(not(feature = "otel"))]
            server.handle_request(request, context).await
        })));
        // A client that goes away before the answer cancels the handler's token.
        let disconnect = request_ct.clone().drop_guard();
        let outcome = handler.await;
        disconnect.disarm();
        request_ct.cancel();
        let message: ServerJsonRpcMessage = match outcome {
            Ok(Ok(result)) => Message::response(result, id),
            Ok(Err(error)) => Message::error(error, Some(id)),
            Err(_) => {
                tracing::error!("a tools/call handler panicked");
                return plain_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Encounter an error when empty response: no response message received from \
                     handler",
                );
            }
        };
        let status = status_of(&message, meta_malformed);
        match serde_json::to_vec(&message) {
            Ok(body) => json_body(status, body),
            Err(error) => plain_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("Encounter an error when serialize json response: {error}"),
            ),
        }
    }

    fn peer(&self) -> &rmcp::Peer<RoleServer> {
        &self
            .detached
            .get_or_init(|| {
                // The peer rmcp's stateless path makes for a request whose
                // MCP-Protocol-Version header is 2026-07-28.
                let info =
                    InitializeRequestParams::new(Default::default(), Implementation::default())
                        .with_protocol_version(ProtocolVersion::V_2026_07_28);
                // Its loop in the quiet scope: what the handlers send
                // through this peer is logged by no one.
                let running = crate::quiet::in_scope(|| {
                    serve_directly(self.server.clone(), Discard, Some(info))
                });
                Detached {
                    peer: running.peer().clone(),
                    _loop: running,
                }
            })
            .peer
    }
}

/// A transport that never receives and drops what it is given.
struct Discard;

impl Transport<RoleServer> for Discard {
    type Error = std::convert::Infallible;

    fn send(
        &mut self,
        _item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        std::future::pending()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        std::future::ready(Ok(()))
    }
}

/// The tool's name, if the request is a `tools/call` whose headers and
/// body take this path (see the module docs).
fn call_name<'a>(headers: &HeaderMap, message: &'a Value) -> Option<&'a str> {
    if !single(headers, "mcp-protocol-version", VERSION) {
        return None;
    }
    if !single(headers, "mcp-method", "tools/call")
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    let Value::Object(fields) = message else {
        return None;
    };
    if fields
        .keys()
        .any(|key| !matches!(key.as_str(), "jsonrpc" | "id" | "method" | "params"))
        || fields.get("jsonrpc")? != "2.0"
        || fields.get("method")? != "tools/call"
        || !matches!(fields.get("id")?, Value::String(_) | Value::Number(_))
    {
        return None;
    }
    let Value::Object(params) = fields.get("params")? else {
        return None;
    };
    let name = params.get("name")?.as_str()?;
    let Value::Object(meta) = params.get("_meta")? else {
        return None;
    };
    if meta.get("io.modelcontextprotocol/protocolVersion")? != VERSION
        || !meta
            .get("io.modelcontextprotocol/clientCapabilities")?
            .is_object()
        || meta.contains_key("progressToken")
        || meta.contains_key("io.modelcontextprotocol/logLevel")
    {
        return None;
    }
    // A Base64-encoded name is decoded by rmcp; a plain one must match.
    let header_name = only(headers, "mcp-name")?;
    (header_name == name && !header_name.starts_with("=?")).then_some(name)
}

/// The one value of header `name`, if there is exactly one and it is text.
fn only<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    match values.next() {
        Some(_) => None,
        None => value.to_str().ok(),
    }
}

fn single(headers: &HeaderMap, name: &str, expected: &str) -> bool {
    only(headers, name) == Some(expected)
}

/// True when a schema mentions `x-mcp-header` anywhere.
fn mentions_param_headers(schema: &Value) -> bool {
    match schema {
        Value::Object(fields) => fields
            .iter()
            .any(|(key, value)| key == "x-mcp-header" || mentions_param_headers(value)),
        Value::Array(items) => items.iter().any(mentions_param_headers),
        _ => false,
    }
}

/// The request id and rmcp's `ClientRequest`, read with rmcp's own
/// deserializers (as its service reads a message).
fn read_call(message: Value) -> Option<(RequestId, ClientRequest)> {
    let Value::Object(mut fields) = message else {
        return None;
    };
    let id: RequestId = serde_json::from_value(fields.remove("id")?).ok()?;
    fields.remove("jsonrpc");
    let call: CallToolRequest = serde_json::from_value(Value::Object(fields)).ok()?;
    Some((id, ClientRequest::CallToolRequest(call)))
}

/// The HTTP status rmcp gives a JSON-RPC answer on the 2026-07-28 path.
fn status_of(message: &ServerJsonRpcMessage, meta_malformed: bool) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS if meta_malformed => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn plain_error(status: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    response
}
