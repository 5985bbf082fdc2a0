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
//! * The request is read once. A plain call (`jsonrpc`, `id`, `method` and
//!   `params` with only `_meta`, `name` and `arguments`, no key given
//!   twice) is read from its bytes straight into the parts of rmcp's
//!   `CallToolRequest` ([`ToolCalls::read`]); any other is parsed by the
//!   guard, in the serving recipe's front middleware, and read into rmcp's
//!   own `CallToolRequest` with rmcp's own deserializer. Either way the
//!   handler gets the very `CallToolRequestParams`, `_meta` and extensions
//!   (the request's `http::request::Parts` among them) it gets through rmcp:
//!   a unit test and the fuzz target `server_reads_request` hold the bytes
//!   reading to the `Value` one's.
//! * The handler runs through rmcp's `Service::handle_request`, the function
//!   rmcp's loop calls: version checks (-32022), required `_meta` (-32602),
//!   the tasks-extension guard (-32021), MRTR results and the 2026-07-28
//!   result shape are rmcp's own. It is awaited in the HTTP request's own
//!   future (rmcp spawns a task for it), with a cancellation token that
//!   fires when the handler is done or the client goes away first; a
//!   handler whose client went away runs on to its end in a task spawned
//!   then ([`RunsToEnd`]), and a panic in it is answered 500, as rmcp
//!   answers one.
//! * The answer is rmcp's `ServerJsonRpcMessage`, serialized by serde as
//!   rmcp does, with the HTTP status rmcp gives it (400 for -32020, -32021,
//!   -32022 and for -32602 on a request whose `_meta` lacks a required key;
//!   404 for -32601; 200 otherwise) and `Content-Type: application/json`.
//!   The most common answer, a task made (`CreateTaskResult` without
//!   `_meta`), is written straight into bytes instead
//!   ([`create_task_answer`]): the very bytes serde writes, which a unit
//!   test checks, without serde's buffering of the flattened `Task`.
//!
//! Only requests rmcp would accept as they are take this path: ones the
//! serving recipe's guard admitted (`Host`, `Origin` and bearer token
//! checked); exactly one `MCP-Protocol-Version: 2026-07-28`,
//! one `Mcp-Method: tools/call` and one plain `Mcp-Name` equal to the
//! tool's name; no `Mcp-Param-*` header and a tool whose schema asks for
//! none; a body with only `jsonrpc`, `id`, `method` and `params`, whose
//! `_meta` names the same version and has no `logLevel`, and a
//! `progressToken` only if it is one rmcp reads and no call in flight on
//! this path holds it. Everything else goes to rmcp, which validates and
//! answers as usual. The handler's `RequestContext::peer` is one shared,
//! detached peer that knows the client as rmcp's stateless peer does
//! (protocol 2026-07-28, nothing else): a 2026-07-28 request cannot send
//! the client requests, and without a `logLevel` it gets no log messages.
//! The progress a call asked for is routed by its token to the call's own
//! answer, which becomes an event stream when a notification comes before
//! the answer, as rmcp's does (see [its module](super::progress)); any
//! other notification a handler sends is dropped instead of turning the
//! answer into an event stream. Delete this module the day rmcp's own
//! path is as fast.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderName, StatusCode};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequest, ClientRequest, ErrorCode, Extensions, GetExtensions, GetMeta, Implementation,
    InitializeRequestParams, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerJsonRpcMessage as Message, ServerResult,
};
use rmcp::service::{RequestContext, RoleServer, RunningService, Service, serve_directly};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::body::create_task_answer;
use super::progress::{self, Route, Router, Routes};
use super::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use crate::server::engine::era::ReadMeta;
use crate::server::transport::http::reply::json_body;
use crate::server::transport::plain::{Notifications, VERSION, meta_takes, read_plain};
use crate::telemetry::server_spans;

/// `tools/call` answered by calling `server`'s handler directly; see the
/// [module docs](self).
pub(crate) struct ToolCalls<S: ServerHandler> {
    server: S,
    /// Made on the first call, inside the runtime.
    detached: OnceLock<Detached<S>>,
    /// The progress tokens of the calls in flight, for the shared peer.
    routes: Arc<Routes>,
}

/// A call this path takes: its id, rmcp's request, and the route of its
/// progress when it asks for progress.
pub(crate) struct Taken {
    id: RequestId,
    request: ClientRequest,
    route: Option<Route>,
}

/// What [`ToolCalls::accepts`] holds for a call it takes: the route of its
/// progress when it asks for progress.
pub(crate) struct Accepted(Option<Route>);

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
            routes: Arc::default(),
        }
    }

    /// `Some` when the request is one this path answers exactly as rmcp
    /// would (its progress token, if any, then held for it).
    pub(crate) fn accepts(&self, headers: &HeaderMap, message: &Value) -> Option<Accepted> {
        let name = call_name(headers, message)?;
        if !self.takes_tool(name) {
            return None;
        }
        let meta = message.get("params")?.get("_meta")?.as_object()?;
        let token = match meta.get("progressToken") {
            None => None,
            Some(token) => Some(serde_json::from_value(token.clone()).ok()?),
        };
        self.route(token).map(Accepted)
    }

    /// `Some(None)` without a token, `Some(route)` with one this path
    /// holds for the call, `None` when a call in flight holds it already.
    fn route(&self, token: Option<ProgressToken>) -> Option<Option<Route>> {
        match token {
            None => Some(None),
            Some(token) => self.routes.reserve(token).map(Some),
        }
    }

    /// The request read from `body`, its bytes, when it is a plain call
    /// this path answers: one [`ToolCalls::accepts`] would take, with no
    /// key but `_meta`, `name` and `arguments` in its `params`, none given
    /// twice. `None` leaves the request to the guard's `Value` (and maybe
    /// [`ToolCalls::accepts`]): being unsure costs time, never an answer.
    pub(crate) fn read(&self, headers: &HeaderMap, body: &[u8]) -> Option<Taken> {
        let (id, call) = read_bytes(headers, body)?;
        if !self.takes_tool(&call.params.name) {
            return None;
        }
        let request = ClientRequest::CallToolRequest(call);
        let meta = request.get_meta();
        let token = meta.get_progress_token();
        if token.is_none() && meta.contains_key("progressToken") {
            // A token rmcp does not read: left to rmcp.
            return None;
        }
        let route = self.route(token)?;
        Some(Taken { id, request, route })
    }

    /// False for a tool that asks for `Mcp-Param-*` headers: rmcp checks them.
    fn takes_tool(&self, name: &str) -> bool {
        self.server.get_tool(name).is_none_or(|tool| {
            !tool
                .input_schema
                .iter()
                .any(|(key, value)| key == "x-mcp-header" || mentions_param_headers(value))
        })
    }

    /// Answers a request [`ToolCalls::accepts`] took.
    pub(crate) async fn answer_value(
        &self,
        parts: Parts,
        message: Value,
        Accepted(route): Accepted,
    ) -> Response {
        let Some((id, request)) = read_call(message) else {
            // `accepts` took it, so rmcp's own types read it: unreachable in
            // practice, and answered as rmcp answers an unreadable body.
            return plain_error(
                StatusCode::BAD_REQUEST,
                "Bad Request: the request is not a valid tools/call",
            );
        };
        let taken = Taken { id, request, route };
        self.answer(parts, taken).await
    }

    /// Answers a request [`ToolCalls::read`] or [`ToolCalls::accepts`] took.
    pub(crate) async fn answer(&self, parts: Parts, taken: Taken) -> Response {
        let Taken {
            id,
            mut request,
            route,
        } = taken;
        // As rmcp's stateless path and its service loop do: the request's
        // HTTP parts ride in its extensions, then `_meta` and the
        // extensions move into the handler's context.
        // `_meta` read once for the era's questions (see `ReadMeta`); a
        // `_meta` without both required keys is also what rmcp's check of
        // them refuses.
        let read = ReadMeta::read(request.get_meta());
        let meta_malformed = read.is_none();
        request.extensions_mut().insert(parts);
        if let Some(read) = read {
            request.extensions_mut().insert(read);
        }
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
        let span = server_spans::span_of(&request, &context, server_spans::TCP);
        // A progress token stays held while the handler runs, to its end.
        let (held, events) = match route {
            Some(Route {
                reservation,
                events,
            }) => (Some(reservation), Some(events)),
            None => (None, None),
        };
        // Awaited here rather than spawned (a task of its own costs about
        // 3 % of a task's creation to spawn, schedule and join), on the
        // heap: the handler's future is large (about 10 KB, most of it the
        // runtime's task creation), and a boxed one moves as a pointer.
        // `RunsToEnd` keeps what the spawn gave: a client that goes away
        // before the answer drops this future, and the handler's rest is
        // then spawned to run to its end; a panic is caught.
        // With feature `otel`, in the request's span, boxed too:
        // `with_context` moves the future it wraps, and the future moves
        // again as it is awaited.
        let mut handler = RunsToEnd::new(crate::quiet::scope(async move {
            let answer = server_spans::answer(span, server.handle_request(request, context)).await;
            drop(held);
            answer
        }));
        // A client that goes away before the answer cancels the handler's token.
        let disconnect = request_ct.clone().drop_guard();
        let outcome = match events {
            None => handler.await,
            Some(mut events) => {
                // As rmcp's path: a notification before the answer makes
                // the answer an event stream (see `progress`).
                tokio::select! {
                    biased;
                    Some(first) = events.recv() => {
                        let rest = async move { message_of(handler.await, id) };
                        return progress::event_stream(first, events, Box::pin(rest), disconnect);
                    }
                    outcome = &mut handler => match events.try_recv() {
                        Ok(first) => {
                            let rest = std::future::ready(message_of(outcome, id));
                            return progress::event_stream(first, events, Box::pin(rest), disconnect);
                        }
                        Err(_) => outcome,
                    },
                }
            }
        };
        disconnect.disarm();
        request_ct.cancel();
        let message: ServerJsonRpcMessage = match outcome {
            Ok(Ok(ServerResult::CreateTaskResult(created))) => {
                // Most answers: written here, as rmcp's serde would.
                if let Some(body) = create_task_answer(&id, &created) {
                    return json_body(StatusCode::OK, body);
                }
                Message::response(ServerResult::CreateTaskResult(created), id)
            }
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
                    let transport = Router(Arc::clone(&self.routes));
                    serve_directly(self.server.clone(), transport, Some(info))
                });
                Detached {
                    peer: running.peer().clone(),
                    _loop: running,
                }
            })
            .peer
    }
}

/// A future awaited in its caller's task that still runs to its end when
/// the caller drops it first: the rest is then spawned (within a runtime;
/// a runtime shutting down drops it, as it drops its tasks). It answers
/// the future's output, or the panic that ended it.
///
/// What `tokio::spawn` and its `JoinHandle` gave a `tools/call` handler,
/// without a task of its own for every call: hyper drops a request's
/// future when its client goes away, and a handler that had begun to
/// create a task must not stop halfway (a record stored with no tool
/// running it).
struct RunsToEnd<T: Send + 'static> {
    future: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> RunsToEnd<T> {
    fn new(future: impl Future<Output = T> + Send + 'static) -> Self {
        Self {
            future: Some(Box::pin(future)),
        }
    }
}

impl<T: Send + 'static> Future for RunsToEnd<T> {
    type Output = std::thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(future) = self.future.as_mut() else {
            // Not reached: it is awaited once, and not polled after its end.
            return Poll::Pending;
        };
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
        let output = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(output)) => Ok(output),
            Err(panic) => Err(panic),
        };
        self.future = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for RunsToEnd<T> {
    fn drop(&mut self) {
        if let Some(rest) = self.future.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(rest);
        }
    }
}

/// The message rmcp sends for a handler's `outcome`: its result or error,
/// or none when it panicked.
fn message_of(
    outcome: std::thread::Result<Result<ServerResult, rmcp::ErrorData>>,
    id: RequestId,
) -> Option<ServerJsonRpcMessage> {
    match outcome {
        Ok(Ok(result)) => Some(Message::response(result, id)),
        Ok(Err(error)) => Some(Message::error(error, Some(id))),
        Err(_) => {
            tracing::error!("a tools/call handler panicked");
            None
        }
    }
}

/// The tool's name, if the request is a `tools/call` whose headers and
/// body take this path (see the module docs).
fn call_name<'a>(headers: &HeaderMap, message: &'a Value) -> Option<&'a str> {
    if !headers_take(headers) {
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
    (meta_takes(meta, Notifications::Progress) && names(headers, name)).then_some(name)
}

/// True when the headers are the ones of a `tools/call` this path takes.
fn headers_take(headers: &HeaderMap) -> bool {
    single(headers, &MCP_PROTOCOL_VERSION, VERSION)
        && single(headers, &MCP_METHOD, "tools/call")
        && !headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
}

/// True when `Mcp-Name` names the tool `name`: a Base64-encoded name is
/// decoded by rmcp; a plain one must match.
fn names(headers: &HeaderMap, name: &str) -> bool {
    only(headers, &MCP_NAME).is_some_and(|header| header == name && !header.starts_with("=?"))
}

/// The request id and rmcp's `CallToolRequest` of a plain call read from
/// its bytes, when the headers and body are ones [`call_name`] takes: the
/// same as [`read_call`] gives from the `Value`, the `_meta` in the
/// extensions as rmcp's deserializer puts it.
fn read_bytes(headers: &HeaderMap, body: &[u8]) -> Option<(RequestId, CallToolRequest)> {
    if !headers_take(headers) {
        return None;
    }
    let (id, call) = read_plain(body, Notifications::Progress)?;
    names(headers, &call.params.name).then_some((id, call))
}

/// The one value of header `name`, if there is exactly one and it is text.
fn only<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    match values.next() {
        Some(_) => None,
        None => value.to_str().ok(),
    }
}

fn single(headers: &HeaderMap, name: &HeaderName, expected: &str) -> bool {
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

/// The two readings of a `tools/call` side by side, as JSON: the bytes
/// reading ([`read_bytes`]) and the `Value` one (the guard's parse, then
/// [`call_name`] and [`read_call`]). When the bytes reading takes a
/// request, the `Value` one must take it too and read the same (the
/// unit tests below and the fuzz target `server_reads_request`).
#[cfg(any(test, feature = "__fuzzing"))]
pub(crate) fn both_readings(headers: &HeaderMap, body: &[u8]) -> (Option<Value>, Option<Value>) {
    let as_json = |(id, request): (RequestId, ClientRequest)| serde_json::json!({"id": id, "request": request});
    let bytes = read_bytes(headers, body)
        .map(|(id, call)| as_json((id, ClientRequest::CallToolRequest(call))));
    let value = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(|message| crate::server::transport::http::guard::not_a_message(message).is_none())
        .filter(|message| call_name(headers, message).is_some())
        .and_then(read_call)
        .map(as_json);
    (bytes, value)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(name: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("mcp-protocol-version", HeaderValue::from_static(VERSION));
        headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
        headers.insert("mcp-name", HeaderValue::from_str(name).unwrap());
        headers
    }

    const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

    fn body(params: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{params}}}"#)
    }

    #[test]
    fn a_plain_call_is_read_from_its_bytes_as_the_value_path_reads_it() {
        for params in [
            format!(r#"{{"name":"sleep","arguments":{{"ms":5}},"_meta":{META}}}"#),
            format!(r#"{{"_meta":{META},"name":"sleep"}}"#),
            format!(r#"{{"name":"sleep","arguments":null,"_meta":{META}}}"#),
            format!(
                r#"{{"name":"sleep","arguments":{{"a":[1,{{"b":"\u00e9\n"}}],"a":2}},"_meta":{META}}}"#
            ),
            r#"{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"x","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"other":1}}"#
                .to_owned(),
            // Progress tokens, of both kinds and of none rmcp reads.
            r#"{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":1}}"#
                .to_owned(),
            r#"{"name":"sleep","_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#
                .to_owned(),
            r#"{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":[1]}}"#
                .to_owned(),
        ] {
            let (bytes, value) = both_readings(&headers("sleep"), body(&params).as_bytes());
            assert!(bytes.is_some(), "not read from its bytes: {params}");
            assert_eq!(bytes, value, "{params}");
        }
        // A string id, spaces and a key order of its own.
        let text = format!(
            r#" {{ "params" : {{"_meta":{META},"name":"sleep"}}, "method":"tools/call", "id":"a\"b", "jsonrpc":"2.0" }} "#
        );
        let (bytes, value) = both_readings(&headers("sleep"), text.as_bytes());
        assert!(bytes.is_some());
        assert_eq!(bytes, value);
    }

    #[test]
    fn anything_else_is_left_to_the_value_path() {
        let plain = format!(r#"{{"name":"sleep","_meta":{META}}}"#);
        let cases = [
            // Keys the bytes reading does not read (rmcp reads them).
            body(&format!(
                r#"{{"name":"sleep","_meta":{META},"requestState":"s"}}"#
            )),
            body(&format!(
                r#"{{"name":"sleep","_meta":{META},"inputResponses":{{}}}}"#
            )),
            body(&format!(r#"{{"name":"sleep","_meta":{META},"task":{{}}}}"#)),
            // A key given twice.
            body(&format!(
                r#"{{"name":"other","name":"sleep","_meta":{META}}}"#
            )),
            format!(r#"{{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{plain}}}"#),
            // Not a call this path answers.
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{plain},"x":1}}"#),
            format!(r#"{{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{plain}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{plain}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{plain}}}"#),
            format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{plain}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{plain}}}"#),
            body(r#"{"name":"sleep"}"#),
            body(r#"{"name":"sleep","_meta":null}"#),
            body(&format!(
                r#"{{"name":"sleep","arguments":[],"_meta":{META}}}"#
            )),
            body(&format!(r#"{{"name":"other","_meta":{META}}}"#)),
            body(&format!(r#"{{"name":1,"_meta":{META}}}"#)),
            body(
                r#"{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}"#,
            ),
            body(
                r#"{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}"#,
            ),
            body(
                r#"{"name":"sleep","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}"#,
            ),
            format!("[{}]", body(&plain)),
            body(&plain)[1..].to_owned(),
        ];
        for text in cases {
            let (bytes, _) = both_readings(&headers("sleep"), text.as_bytes());
            assert_eq!(bytes, None, "read from its bytes: {text}");
        }
        // Headers this path does not take.
        let text = body(&plain);
        let mut encoded = headers("sleep");
        encoded.insert("mcp-name", HeaderValue::from_static("=?base64?c2xlZXA=?="));
        let mut param = headers("sleep");
        param.insert("mcp-param-x", HeaderValue::from_static("1"));
        let mut old = headers("sleep");
        old.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        let mut twice = headers("sleep");
        twice.append("mcp-name", HeaderValue::from_static("sleep"));
        for headers in [
            encoded,
            param,
            old,
            twice,
            headers("other"),
            HeaderMap::new(),
        ] {
            assert_eq!(both_readings(&headers, text.as_bytes()), (None, None));
        }
    }

    /// A server whose `tools/list` is empty: every tool name is taken.
    #[derive(Clone)]
    struct NoTools;

    impl ServerHandler for NoTools {}

    #[tokio::test]
    async fn a_progress_token_is_held_by_one_call_in_flight_the_next_goes_to_rmcp() {
        let calls = ToolCalls::new(NoTools);
        let call = |meta: &str| {
            body(&format!(
                r#"{{"name":"sleep","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}{meta}}}}}"#
            ))
        };
        let read = |meta: &str| calls.read(&headers("sleep"), call(meta).as_bytes());
        let value = |meta: &str| {
            let message: Value = serde_json::from_str(&call(meta)).unwrap();
            calls.accepts(&headers("sleep"), &message)
        };
        // No token: nothing held, taken as often as it comes.
        assert!(read("").is_some_and(|taken| taken.route.is_none()));
        assert!(read("").is_some());
        assert!(value("").is_some_and(|Accepted(route)| route.is_none()));
        // A token: held while the first call is in flight, by either reading.
        let first = read(r#","progressToken":7"#).expect("a free token");
        assert!(first.route.is_some());
        assert!(read(r#","progressToken":7"#).is_none());
        assert!(value(r#","progressToken":7"#).is_none());
        let other = value(r#","progressToken":"7""#).expect("another token");
        assert!(read(r#","progressToken":"7""#).is_none());
        drop(first);
        assert!(read(r#","progressToken":7"#).is_some(), "freed");
        drop(other);
        // A token rmcp does not read: left to rmcp.
        assert!(read(r#","progressToken":1.5"#).is_none());
        assert!(value(r#","progressToken":{}"#).is_none());
    }
}
