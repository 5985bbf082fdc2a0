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
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
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
use super::renumber::Renumber;
use crate::client::answer_bound::too_large_error;

use super::Events;
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
    /// On a session taken over: this connection's own request ids.
    renumber: Option<Arc<Renumber>>,
}

impl std::fmt::Debug for TapHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapHttp").finish_non_exhaustive()
    }
}

impl TapHttp {
    pub(super) fn new(inner: reqwest::Client, link: Arc<Link>) -> Self {
        let renumber = link.adopted_session().map(|_| Arc::new(Renumber::new()));
        Self {
            inner,
            link,
            renumber,
        }
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

    /// Shows every event of an SSE answer to the tap as it passes (with
    /// rmcp's request ids, on a session taken over).
    fn watch(&self, events: Events) -> Events {
        let events = match &self.renumber {
            Some(renumber) => renumber.incoming_events(events),
            None => events,
        };
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

    /// The answer to the handshake, its session recorded; with a session
    /// to adopt, the handshake's own is closed (in the background, with
    /// `closing`: the endpoint, its authorization and headers) and the
    /// adopted one is what rmcp goes on with.
    fn session_of_handshake(
        &self,
        response: StreamableHttpPostResponse,
        closing: (Arc<str>, Option<String>, HashMap<HeaderName, HeaderValue>),
    ) -> StreamableHttpPostResponse {
        let (response, given) = match response {
            StreamableHttpPostResponse::Json(message, session) => {
                (StreamableHttpPostResponse::Json(message, None), session)
            }
            StreamableHttpPostResponse::Sse(events, session) => {
                (StreamableHttpPostResponse::Sse(events, None), session)
            }
            other => return other,
        };
        let session = match (self.link.adopted_session(), given) {
            (Some(adopted), own) => {
                if let Some(own) = own {
                    let inner = self.inner.clone();
                    let (uri, auth, headers) = closing;
                    tokio::spawn(async move {
                        let _ = inner.delete_session(uri, own.into(), auth, headers).await;
                    });
                }
                Some(adopted)
            }
            (None, own) => own.map(Arc::from),
        };
        if let Some(session) = &session {
            self.link.set_http_session(session.clone());
        }
        let session = session.map(|session| session.to_string());
        match response {
            StreamableHttpPostResponse::Json(message, _) => {
                StreamableHttpPostResponse::Json(message, session)
            }
            StreamableHttpPostResponse::Sse(events, _) => {
                StreamableHttpPostResponse::Sse(events, session)
            }
            other => other,
        }
    }

    /// What rmcp's client answered, watched: SSE events as they pass, and a
    /// `server/discover` result, which turns the tap off.
    fn watched(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(events, session) => {
                StreamableHttpPostResponse::Sse(self.watch(events), session)
            }
            StreamableHttpPostResponse::Json(message, session) => {
                let message = match &self.renumber {
                    Some(renumber) => renumber.incoming(message),
                    None => message,
                };
                self.link.observe_typed(&message);
                StreamableHttpPostResponse::Json(message, session)
            }
            other => other,
        }
    }

    /// A JSON body with rmcp's request id again, on a session taken over.
    fn ids_restored<B: AsRef<[u8]> + From<Vec<u8>>>(&self, bytes: B) -> B {
        match &self.renumber {
            Some(renumber) => match renumber.incoming_bytes(bytes.as_ref()) {
                Some(restored) => restored.into(),
                None => bytes,
            },
            None => bytes,
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
                    let bytes = self.ids_restored(bytes);
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
            && let bytes = self.ids_restored(bytes)
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

/// The answer to the request `id`, with an answer past the transport's
/// bounds (a JSON body, or an SSE event past `max_event` bytes) turned into
/// the error of the request that [`answer_bound`](crate::client::answer_bound)
/// makes, so that the request ends saying why; the response is closed.
fn within_bound(
    response: Result<StreamableHttpPostResponse, Failure>,
    id: RequestId,
    max_event: usize,
) -> Result<StreamableHttpPostResponse, Failure> {
    match response {
        Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => {
            tracing::warn!(
                bound = max_size,
                "the server's answer is past this client's bound; it was not read"
            );
            let error = too_large_error(max_size, None);
            Ok(StreamableHttpPostResponse::Json(
                ServerJsonRpcMessage::error(error, Some(id)),
                None,
            ))
        }
        Ok(StreamableHttpPostResponse::Sse(events, session)) => {
            let events = events
                .scan(false, move |ended, event| {
                    let next = match event {
                        _ if *ended => None,
                        Err(error) if event_too_large(&error) => {
                            *ended = true;
                            tracing::warn!(bound = max_event, "an SSE event of the server is past this client's bound; it was not read");
                            let error = too_large_error(max_event, None);
                            let message = ServerJsonRpcMessage::error(error, Some(id.clone()));
                            serde_json::to_string(&message)
                                .ok()
                                .map(|data| Ok(Sse::default().data(data)))
                        }
                        event => Some(event),
                    };
                    std::future::ready(next)
                })
                .boxed();
            Ok(StreamableHttpPostResponse::Sse(events, session))
        }
        other => other,
    }
}

/// Whether an SSE body failed on an event past its bound: this file's
/// bound ([`EventsError::TooLarge`]) or rmcp's, told by its message (its
/// type is private; the tests read a real one).
fn event_too_large(error: &SseError) -> bool {
    let SseError::Body(error) = error else {
        return false;
    };
    matches!(
        error.downcast_ref::<EventsError>(),
        Some(EventsError::TooLarge(_))
    ) || error.to_string().contains("exceeded the maximum size")
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
        let id = match &message {
            ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let handshake = matches!(&message, ClientJsonRpcMessage::Request(request)
            if request.request.method() == "initialize");
        // On a session taken over, with ids of this connection's own (the
        // answers get rmcp's back in `watch`, `watched` and `post_read`).
        let message = match &self.renumber {
            Some(renumber) => renumber.outgoing(message),
            None => message,
        };
        // What closing the handshake's own session takes (only for it).
        let closing = handshake.then(|| (uri.clone(), auth_header.clone(), custom_headers.clone()));
        let response = if self.reads_answer(&message) {
            self.post_read(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
        } else {
            self.inner
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await
                .map(|response| self.watched(response))
        };
        let response = match closing {
            Some(closing) => response.map(|response| self.session_of_handshake(response, closing)),
            None => response,
        };
        match id {
            Some(id) => within_bound(response, id, limits.max_sse_event_size),
            None => response,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        if self.link.keeps_http_session() {
            return Ok(());
        }
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
        if self.link.adopted_session().is_some() {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
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
        if self.link.adopted_session().is_some() {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
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
mod tests;
