//! The tap on Streamable HTTP. A 2025-11-25 server answers a POST either with
//! an SSE stream or with a plain JSON body (the TypeScript SDK's
//! `enableJsonResponse`, the Python SDK's `json_response`). rmcp's reqwest
//! client reads an SSE answer event by event, which the tap can watch; but it
//! reads a JSON body whole and hands on only its typed parse, which has
//! already lost what the era needs. So for the few requests whose answers the
//! era keeps (`initialize`, `tools/list`, `tools/call`, `tasks/*`, and only
//! while the server may speak 2025-11-25) [`TapHttp`] makes the POST itself,
//! as a custom rmcp HTTP backend may: it reads a JSON body within rmcp's limit,
//! shows its bytes to the tap, and gives rmcp the message those same bytes
//! parse to. Every other POST, the GET stream and the DELETE go to rmcp's own
//! reqwest client unchanged, and any SSE answer is only watched.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use super::super::Link;
use super::MAX_MESSAGE;

type Events = BoxStream<'static, Result<Sse, SseError>>;
type Failure = StreamableHttpError<reqwest::Error>;

/// A Streamable HTTP client for rmcp's `StreamableHttpClientTransport` that
/// shows the server's answers to the tap: every SSE event, and the plain JSON
/// body of each request whose answer the 2025-11-25 era needs (those POSTs it
/// makes itself, with the same `reqwest::Client`, headers and limits; rmcp
/// receives the message the body's bytes parse to, as from its own client).
/// Everything else is rmcp's reqwest client's doing. Made by
/// [`Tap::http`](super::Tap::http).
#[derive(Clone)]
pub struct TapHttp {
    inner: reqwest::Client,
    link: Arc<Link>,
}

impl std::fmt::Debug for TapHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapHttp").finish_non_exhaustive()
    }
}

impl TapHttp {
    pub(super) fn new(inner: reqwest::Client, link: Arc<Link>) -> Self {
        Self { inner, link }
    }

    /// Whether the tap makes this POST itself: a request whose answer the
    /// era keeps, while the server may speak 2025-11-25.
    fn reads_answer(&self, message: &ClientJsonRpcMessage) -> bool {
        match message {
            ClientJsonRpcMessage::Request(request) => {
                self.link.wants_answer(request.request.method())
            }
            _ => false,
        }
    }

    /// Shows every event of an SSE answer to the tap as it passes.
    fn watch(&self, events: Events) -> Events {
        let link = self.link.clone();
        events
            .inspect(move |event| {
                if let Ok(Sse {
                    data: Some(data), ..
                }) = event
                    && link.tapping()
                {
                    link.observe_message(data.as_bytes());
                }
            })
            .boxed()
    }

    /// What rmcp's client answered, watched: SSE events as they pass, and a
    /// `server/discover` result, which turns the tap off.
    fn watched(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(events, session) => {
                StreamableHttpPostResponse::Sse(self.watch(events), session)
            }
            StreamableHttpPostResponse::Json(message, session) => {
                self.link.observe_typed(&message);
                StreamableHttpPostResponse::Json(message, session)
            }
            other => other,
        }
    }

    /// The POST of a request whose answer the tap reads, made here; the
    /// outcome is what rmcp's reqwest client makes of the same HTTP answer
    /// (except the text of a few errors).
    async fn post_read(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let mut request = self.inner.post(uri.as_ref()).header(
            ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            // As rmcp's client: the headers it sets itself cannot be overridden
            // (MCP-Protocol-Version is the transport's own, so it passes).
            if [ACCEPT.as_str(), HEADER_SESSION_ID, HEADER_LAST_EVENT_ID]
                .iter()
                .any(|reserved| name.as_str().eq_ignore_ascii_case(reserved))
            {
                return Err(StreamableHttpError::ReservedHeaderConflict(
                    name.to_string(),
                ));
            }
            request = request.header(name, value);
        }
        let session_attached = session_id.is_some();
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id.as_ref());
        }
        let response = request.json(&message).send().await?;
        let status = response.status();
        let headers = response.headers();
        let session = headers
            .get(HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = Body::of(headers);
        if let Some(challenge) = challenge(status, headers) {
            return Err(challenge);
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        if status.is_success() {
            return match body {
                Body::Sse => {
                    let events = bounded_events(response, limits.max_sse_event_size);
                    Ok(StreamableHttpPostResponse::Sse(self.watch(events), session))
                }
                Body::Json => {
                    let bytes = read_bounded(response, limits.max_json_response_size).await?;
                    if bytes.len() <= MAX_MESSAGE && self.link.tapping() {
                        self.link.observe_message(&bytes);
                    }
                    match serde_json::from_slice::<ServerJsonRpcMessage>(&bytes) {
                        Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
                        // The body is not quoted: it may hold a task id.
                        Err(error) => {
                            Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                                format!("the JSON body is not one JSON-RPC message: {error}"),
                            )))
                        }
                    }
                }
                Body::Other(content_type) => {
                    Err(StreamableHttpError::UnexpectedContentType(content_type))
                }
            };
        }
        // A failure: its status, unless its JSON body is a JSON-RPC error,
        // which is then the request's answer (not for a 429, nor for a 401 or
        // 403, which keep their status).
        let status_error = status_error(status, headers);
        let keeps_status = matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        );
        if body == Body::Json
            && !keeps_status
            && let Ok(bytes) = read_bounded(response, limits.max_json_response_size).await
            && let Ok(error @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&bytes)
        {
            return Ok(StreamableHttpPostResponse::Json(error, session));
        }
        Err(match status_error {
            Some(error) => error.into(),
            None => {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}")))
            }
        })
    }
}

/// What a response's `Content-Type` says its body is.
#[derive(Debug, PartialEq, Eq)]
enum Body {
    Sse,
    Json,
    Other(Option<String>),
}

impl Body {
    fn of(headers: &HeaderMap) -> Self {
        let Some(value) = headers.get(CONTENT_TYPE) else {
            return Self::Other(None);
        };
        // The media type without its parameters, compared without case.
        let essence = value
            .to_str()
            .ok()
            .and_then(|text| text.split(';').next())
            .map(|essence| essence.trim_matches([' ', '\t']));
        match essence {
            Some(essence) if essence.eq_ignore_ascii_case(EVENT_STREAM_MIME_TYPE) => Self::Sse,
            Some(essence) if essence.eq_ignore_ascii_case(JSON_MIME_TYPE) => Self::Json,
            _ => Self::Other(Some(String::from_utf8_lossy(value.as_bytes()).into_owned())),
        }
    }
}

/// A 401 or 403 with a `WWW-Authenticate` challenge, as rmcp's errors.
fn challenge(status: StatusCode, headers: &HeaderMap) -> Option<Failure> {
    if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return None;
    }
    let Ok(header) = headers.get(WWW_AUTHENTICATE)?.to_str() else {
        return Some(StreamableHttpError::UnexpectedServerResponse(
            Cow::Borrowed("invalid www-authenticate header value"),
        ));
    };
    Some(if status == StatusCode::UNAUTHORIZED {
        StreamableHttpError::AuthRequired(AuthRequiredError::new(header.to_owned()))
    } else {
        StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
            header.to_owned(),
            required_scope(header),
        ))
    })
}

/// The `scope=` of a challenge, quoted or not.
fn required_scope(header: &str) -> Option<String> {
    let at = header.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let value = &header[at..];
    let scope = match value.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => {
            let end = value
                .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .unwrap_or(value.len());
            &value[..end]
        }
    };
    (!scope.is_empty() || value.starts_with('"')).then(|| scope.to_owned())
}

/// A 429 or 5xx, with its `Retry-After`.
fn status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// The whole body, refused past `max` bytes (counted as they arrive).
async fn read_bounded(response: reqwest::Response, max: usize) -> Result<Vec<u8>, Failure> {
    let too_large = || StreamableHttpError::ResponseBodyTooLarge { max_size: max };
    if response
        .content_length()
        .is_some_and(|length| length > max as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if chunk.len() > max - body.len() {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Why an SSE body stopped.
#[derive(Debug, thiserror::Error)]
enum EventsError {
    #[error("an SSE event exceeded the maximum size of {0} bytes")]
    TooLarge(usize),
    #[error("the SSE body could not be read")]
    Read(#[source] reqwest::Error),
}

/// The events of an SSE body, none longer than `max` bytes: the stream ends
/// with an error at the first that is.
fn bounded_events(response: reqwest::Response, max: usize) -> Events {
    let bytes =
        response
            .bytes_stream()
            .scan((EventSize::new(max), false), move |(size, ended), chunk| {
                let item = if *ended {
                    None
                } else {
                    Some(match chunk {
                        Ok(chunk) if size.fits(&chunk) => Ok(chunk),
                        Ok(_) => {
                            *ended = true;
                            Err(EventsError::TooLarge(max))
                        }
                        Err(error) => {
                            *ended = true;
                            Err(EventsError::Read(error))
                        }
                    })
                };
                std::future::ready(item)
            });
    SseStream::from_bytes_stream(bytes).boxed()
}

/// Counts the bytes of the SSE event being received (its lines so far and
/// the current one), up to the blank line that ends it.
#[derive(Debug)]
struct EventSize {
    max: usize,
    event: usize,
    line: usize,
    after_cr: bool,
}

impl EventSize {
    fn new(max: usize) -> Self {
        Self {
            max,
            event: 0,
            line: 0,
            after_cr: false,
        }
    }

    /// Takes in a chunk; false once the event is longer than allowed.
    fn fits(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    self.event = match self.line {
                        0 => 0,
                        line => self.event.saturating_add(line + 1),
                    };
                    self.line = 0;
                    self.after_cr = byte == b'\r';
                }
                _ => self.line += 1,
            }
            if self.event.saturating_add(self.line) > self.max {
                return false;
            }
        }
        true
    }
}

impl StreamableHttpClient for TapHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        if self.reads_answer(&message) {
            return self
                .post_read(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
        }
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(self.watched(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, Failure> {
        let events = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.watch(events))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, Failure> {
        let events = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.watch(events))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::body::Body as AxumBody;
    use axum::extract::State;
    use axum::response::Response;
    use serde_json::{Value, json};

    use super::*;

    /// An HTTP answer: status, headers, body.
    type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);

    /// The one answer the test server gives to every request, as bytes.
    #[derive(Clone, Default)]
    struct Canned(Arc<Mutex<Answer>>);

    impl Canned {
        fn set(&self, status: u16, headers: &[(&'static str, &str)], body: impl Into<Vec<u8>>) {
            let headers = headers
                .iter()
                .map(|(name, value)| (*name, (*value).to_owned()))
                .collect();
            *self.0.lock().unwrap() = (status, headers, body.into());
        }
    }

    async fn answer(State(canned): State<Canned>) -> Response {
        let (status, headers, body) = canned.0.lock().unwrap().clone();
        let mut response = Response::builder().status(status);
        for (name, value) in headers {
            response = response.header(name, value);
        }
        response.body(AxumBody::from(body)).unwrap()
    }

    /// A server on a loopback port that answers every request with `canned`.
    async fn serve(canned: Canned) -> Arc<str> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/mcp", axum::routing::any(answer))
            .with_state(canned);
        tokio::spawn(async move { axum::serve(listener, app).await });
        url.into()
    }

    fn message(value: Value) -> ClientJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    fn request(id: u64, method: &str, params: &Value) -> ClientJsonRpcMessage {
        message(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    }

    fn initialize() -> ClientJsonRpcMessage {
        request(
            0,
            "initialize",
            &json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}),
        )
    }

    fn initialize_result() -> Value {
        json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "s", "version": "0"}}})
    }

    /// A link that has seen a 2025-11-25 `InitializeResult`.
    fn legacy_link() -> Arc<Link> {
        let link = Arc::new(Link::default());
        link.observe_message(initialize_result().to_string().as_bytes());
        link
    }

    fn get(id: u64) -> ClientJsonRpcMessage {
        request(id, "tasks/get", &json!({"taskId": "t-1"}))
    }

    fn task_answer(id: u64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"taskId": "t-1", "status": "working",
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:30:00Z",
            "ttl": 60000, "pollInterval": 250}})
    }

    /// What a client made of an answer, in a form two clients can be compared by.
    async fn outcome(result: Result<StreamableHttpPostResponse, Failure>) -> String {
        match result {
            Ok(StreamableHttpPostResponse::Accepted) => "accepted".into(),
            Ok(StreamableHttpPostResponse::Json(message, session)) => format!(
                "json {} session {session:?}",
                serde_json::to_string(&message).unwrap()
            ),
            Ok(StreamableHttpPostResponse::Sse(mut events, session)) => {
                let mut seen = Vec::new();
                while let Some(event) = events.next().await {
                    match event {
                        Ok(event) => seen.push(format!("{:?} {:?}", event.event, event.data)),
                        Err(_) => {
                            seen.push("error".into());
                            break;
                        }
                    }
                }
                format!("sse {seen:?} session {session:?}")
            }
            Err(StreamableHttpError::SessionExpired) => "session expired".into(),
            Err(StreamableHttpError::HttpStatus(error)) => {
                format!("status {} {:?}", error.status, error.retry_after)
            }
            Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => {
                format!("too large {max_size}")
            }
            Err(StreamableHttpError::UnexpectedServerResponse(_)) => "unexpected response".into(),
            Err(StreamableHttpError::UnexpectedContentType(content_type)) => {
                format!("content type {content_type:?}")
            }
            Err(StreamableHttpError::AuthRequired(error)) => {
                format!("auth {}", error.www_authenticate_header)
            }
            Err(StreamableHttpError::InsufficientScope(error)) => format!(
                "scope {} {:?}",
                error.www_authenticate_header, error.required_scope
            ),
            Err(StreamableHttpError::ReservedHeaderConflict(name)) => format!("reserved {name}"),
            Err(other) => format!("other {other}"),
            Ok(_) => "another response".into(),
        }
    }

    /// Sends `message` with the tap (on `link`) and with rmcp's own reqwest
    /// client to a server answering `canned`, and returns both outcomes.
    async fn both(
        url: &Arc<str>,
        link: &Arc<Link>,
        message: &ClientJsonRpcMessage,
        session: Option<&str>,
        limits: StreamableHttpResponseLimits,
    ) -> (String, String) {
        let tap = TapHttp::new(reqwest::Client::new(), link.clone());
        assert!(
            tap.reads_answer(message),
            "the tap reads this answer itself"
        );
        let session: Option<Arc<str>> = session.map(Into::into);
        let ours = tap
            .post_message_with_response_limits(
                url.clone(),
                message.clone(),
                session.clone(),
                None,
                HashMap::new(),
                limits,
            )
            .await;
        let rmcp = reqwest::Client::new()
            .post_message_with_response_limits(
                url.clone(),
                message.clone(),
                session,
                None,
                HashMap::new(),
                limits,
            )
            .await;
        (outcome(ours).await, outcome(rmcp).await)
    }

    const JSON: (&str, &str) = ("content-type", "application/json");
    const SSE: (&str, &str) = ("content-type", "text/event-stream");

    #[tokio::test]
    async fn a_json_body_is_read_and_rmcp_gets_what_its_own_client_would() {
        let canned = Canned::default();
        let url = serve(canned.clone()).await;
        let limits = StreamableHttpResponseLimits::default();

        // The InitializeResult, before the era is known: capabilities.tasks is kept.
        let link = Arc::new(Link::default());
        canned.set(
            200,
            &[JSON, ("mcp-session-id", "s-1")],
            initialize_result().to_string(),
        );
        let (ours, rmcp) = both(&url, &link, &initialize(), None, limits).await;
        assert_eq!(ours, rmcp);
        assert!(ours.contains(r#"session Some("s-1")"#), "{ours}");
        let tasks = link
            .server_tasks()
            .expect("the tap saw the InitializeResult");
        assert_eq!(
            tasks.map(|tasks| tasks.methods()),
            Some(vec!["tasks/get", "tasks/result", "tasks/cancel"])
        );

        // A tasks/get answer: kept with the ttl and pollInterval rmcp's types drop.
        canned.set(200, &[JSON], task_answer(7).to_string());
        let (ours, rmcp) = both(&url, &link, &get(7), Some("s-1"), limits).await;
        assert_eq!(ours, rmcp);
        assert!(
            !ours.contains("pollInterval"),
            "rmcp's parse drops it: {ours}"
        );
        let kept = link.take_answer(&rmcp::model::RequestId::Number(7));
        assert_eq!(kept, Some(task_answer(7)["result"].clone()));

        // A media type in other case and with parameters is JSON all the same.
        canned.set(
            200,
            &[("content-type", "Application/JSON; charset=utf-8")],
            task_answer(8).to_string(),
        );
        let (ours, rmcp) = both(&url, &link, &get(8), Some("s-1"), limits).await;
        assert_eq!(ours, rmcp);
        assert!(
            link.take_answer(&rmcp::model::RequestId::Number(8))
                .is_some()
        );
    }

    #[tokio::test]
    async fn an_sse_answer_is_streamed_and_watched_and_other_answers_end_alike() {
        let canned = Canned::default();
        let url = serve(canned.clone()).await;
        let limits = StreamableHttpResponseLimits::default();
        let link = legacy_link();
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}});
        let sse = format!(
            "event: message\r\ndata: {progress}\r\n\r\n: keep-alive\n\nid: 2\ndata: {}\n\n",
            task_answer(9)
        );
        // Status, headers, body, and the session the request is sent in.
        type Case<'a> = (u16, Vec<(&'static str, &'a str)>, String, Option<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            (200, vec![SSE], sse, Some("s-1")),
            (202, vec![], String::new(), Some("s-1")),
            (204, vec![JSON], String::new(), Some("s-1")),
            (404, vec![JSON], r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#.into(), Some("s-1")),
            (404, vec![("content-type", "text/plain")], "no such thing".into(), None),
            (400, vec![JSON], r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"bad"}}"#.into(), Some("s-1")),
            (400, vec![JSON], r#"{"nothing": "useful"}"#.into(), Some("s-1")),
            (500, vec![("content-type", "text/plain"), ("retry-after", "3")], "down".into(), Some("s-1")),
            (503, vec![JSON], r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"busy"}}"#.into(), Some("s-1")),
            (429, vec![JSON, ("retry-after", "1")], r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"slow down"}}"#.into(), Some("s-1")),
            (401, vec![JSON, ("www-authenticate", r#"Bearer realm="mcp""#)], "{}".into(), Some("s-1")),
            (403, vec![("www-authenticate", r#"Bearer error="insufficient_scope", scope="tasks:read tasks:write""#)], String::new(), Some("s-1")),
            (403, vec![JSON], r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"no"}}"#.into(), Some("s-1")),
            (200, vec![("content-type", "text/html")], "<html/>".into(), Some("s-1")),
            (200, vec![], "{}".into(), Some("s-1")),
            (200, vec![JSON], "not json".into(), Some("s-1")),
            (200, vec![JSON], format!("[{}]", task_answer(9)), Some("s-1")),
        ];
        for (status, headers, body, session) in cases {
            canned.set(status, &headers, body.clone());
            let (ours, rmcp) = both(&url, &link, &get(9), session, limits).await;
            assert_eq!(ours, rmcp, "HTTP {status} {headers:?} {body}");
        }
        // The SSE answer was watched (the last case, a batch, which rmcp cannot
        // take either, was not kept).
        assert_eq!(
            link.take_answer(&rmcp::model::RequestId::Number(9)),
            Some(task_answer(9)["result"].clone())
        );
        assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(9)), None);
    }

    #[tokio::test]
    async fn bodies_past_the_limits_are_refused_alike() {
        let canned = Canned::default();
        let url = serve(canned.clone()).await;
        let link = legacy_link();
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_json_response_size = 64;
        limits.max_sse_event_size = 64;
        canned.set(200, &[JSON], task_answer(3).to_string());
        let (ours, rmcp) = both(&url, &link, &get(3), Some("s-1"), limits).await;
        assert_eq!(
            (ours.as_str(), rmcp.as_str()),
            ("too large 64", "too large 64")
        );
        assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(3)), None);
        canned.set(200, &[SSE], format!("data: {}\n\n", task_answer(3)));
        let (ours, rmcp) = both(&url, &link, &get(3), Some("s-1"), limits).await;
        assert_eq!(ours, rmcp);
        assert!(ours.contains("error"), "{ours}");
        assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(3)), None);
    }

    #[tokio::test]
    async fn only_the_answers_the_era_needs_are_read_here_and_discover_turns_the_tap_off() {
        let undecided = TapHttp::new(reqwest::Client::new(), Arc::new(Link::default()));
        let legacy = TapHttp::new(reqwest::Client::new(), legacy_link());
        let notification =
            message(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let discover = request(1, "server/discover", &json!({}));
        let call = request(2, "tools/call", &json!({"name": "x"}));
        let list = request(3, "tools/list", &json!({}));
        let ping = request(4, "ping", &json!({}));
        assert!(undecided.reads_answer(&initialize()));
        for other in [&discover, &call, &get(5), &notification] {
            assert!(!undecided.reads_answer(other));
        }
        for read in [&call, &list, &get(5)] {
            assert!(legacy.reads_answer(read));
        }
        for other in [&initialize(), &discover, &ping, &notification] {
            assert!(!legacy.reads_answer(other));
        }

        // A 2026-07-28 server answers server/discover with a plain JSON body:
        // rmcp's client reads it, and its typed result turns the tap off.
        let canned = Canned::default();
        let url = serve(canned.clone()).await;
        let result = rmcp::model::DiscoverResult::new(
            vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            rmcp::model::ServerCapabilities::default(),
        );
        canned.set(
            200,
            &[JSON],
            json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string(),
        );
        let answer = undecided
            .post_message(url, discover, None, None, HashMap::new())
            .await;
        assert!(matches!(answer, Ok(StreamableHttpPostResponse::Json(..))));
        assert!(!undecided.link.tapping());
        assert!(!undecided.reads_answer(&initialize()));
    }

    #[test]
    fn an_sse_event_is_measured_up_to_its_blank_line() {
        // A line counts with the newline that joins it to the next.
        let mut size = EventSize::new(11);
        assert!(size.fits(b"data: 1234\r"));
        assert!(
            size.fits(b"\n\r\n"),
            "a CRLF split across chunks ends one line"
        );
        assert!(size.fits(b"data: 1234\n\ndata: 1234\n\n"));
        assert!(!size.fits(b"data: 123456"), "one byte too many");
        let mut size = EventSize::new(11);
        assert!(size.fits(b"a: 1\nb: 2\nc"));
        assert!(!size.fits(b"c"), "the lines of one event add up");
    }

    #[test]
    fn the_scope_of_a_challenge() {
        assert_eq!(
            required_scope(r#"Bearer error="insufficient_scope", scope="a b""#).as_deref(),
            Some("a b")
        );
        assert_eq!(
            required_scope("Bearer Scope=read:data, x=y").as_deref(),
            Some("read:data")
        );
        assert_eq!(required_scope("Bearer realm=x"), None);
        assert_eq!(required_scope("Bearer scope=").as_deref(), None);
    }
}
