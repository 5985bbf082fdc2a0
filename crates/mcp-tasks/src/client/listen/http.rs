//! Listen streams over Streamable HTTP: each one is a POST of its own,
//! made with the transport's HTTP client, whose SSE response is the
//! stream. Dropping the stream closes the response, which ends the
//! subscription on HTTP.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::ClientHandler;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, CustomRequest, RequestId, RequestMetaObject,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde_json::Value;

use super::{Event, LISTEN, Refusal, classify, listen_params};
use crate::client::{TasksClient, with_tasks_extension};
use crate::task::TaskId;

/// Tells the streams of one process apart.
static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// Sends one listen request.
pub(crate) trait Post: Send + Sync {
    fn post(
        &self,
        message: ClientJsonRpcMessage,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> BoxFuture<'_, Result<StreamableHttpPostResponse, String>>;
}

/// Where and how to POST: the transport's client, endpoint and headers.
pub(crate) struct Endpoint<C> {
    client: C,
    uri: Arc<str>,
    auth_header: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
    /// The transport's bounds on an answer: an event past them ends the
    /// stream, and the wait polls.
    limits: StreamableHttpResponseLimits,
}

impl<C> Endpoint<C> {
    pub(crate) fn new(client: C, config: &StreamableHttpClientTransportConfig) -> Self {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = config.max_sse_event_size;
        limits.max_json_response_size = config.max_json_response_size;
        Self {
            client,
            uri: config.uri.clone(),
            auth_header: config.auth_header.clone(),
            headers: config.custom_headers.clone(),
            limits,
        }
    }
}

impl<C: StreamableHttpClient + Sync> Post for Endpoint<C> {
    fn post(
        &self,
        message: ClientJsonRpcMessage,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> BoxFuture<'_, Result<StreamableHttpPostResponse, String>> {
        let mut all = self.headers.clone();
        all.extend(headers);
        Box::pin(async move {
            self.client
                .post_message_with_response_limits(
                    self.uri.clone(),
                    message,
                    None,
                    self.auth_header.clone(),
                    all,
                    self.limits,
                )
                .await
                .map_err(|error| error.to_string())
        })
    }
}

/// One stream: the SSE response of its POST.
pub(crate) struct HttpStream {
    id: Value,
    /// The `data` of each SSE event.
    events: Option<BoxStream<'static, Result<Option<String>, SseError>>>,
    /// What a plain JSON answer said.
    answered: Option<Event>,
}

impl HttpStream {
    /// POSTs the listen request for `tasks`.
    pub(crate) async fn open<H: ClientHandler>(
        client: &TasksClient<H>,
        endpoint: &dyn Post,
        tasks: &[TaskId],
    ) -> Result<Self, Refusal> {
        let Some(version) = client
            .peer()
            .peer_info()
            .map(|info| info.protocol_version.clone())
        else {
            return Err(Refusal::Unavailable("the server is not known yet"));
        };
        let id = format!(
            "mcp-tasks-listen-{}",
            NEXT_STREAM.fetch_add(1, Ordering::Relaxed)
        );
        let mut meta = RequestMetaObject::new();
        meta.set_protocol_version(version.clone());
        meta.set_client_info(client.running.service().get_info().client_info);
        meta.set_client_capabilities(with_tasks_extension(client.capabilities()));
        let mut request = CustomRequest::new(LISTEN, Some(listen_params(tasks)));
        request.extensions.insert(meta);
        let message = ClientJsonRpcMessage::request(
            ClientRequest::CustomRequest(request),
            RequestId::String(id.clone().into()),
        );
        let mut headers = HashMap::new();
        let version = HeaderValue::from_str(version.as_str())
            .map_err(|_| Refusal::Unavailable("the protocol version cannot be sent as a header"))?;
        headers.insert(HeaderName::from_static("mcp-protocol-version"), version);
        headers.insert(
            HeaderName::from_static("mcp-method"),
            HeaderValue::from_static(LISTEN),
        );
        let id = Value::String(id);
        match endpoint.post(message, headers).await {
            Ok(StreamableHttpPostResponse::Sse(events, _)) => Ok(Self {
                id,
                events: Some(events.map(|event| event.map(|event| event.data)).boxed()),
                answered: None,
            }),
            Ok(StreamableHttpPostResponse::Json(message, _)) => {
                let answered = serde_json::to_value(message)
                    .ok()
                    .and_then(|message| classify(&message, &id))
                    .unwrap_or(Event::Ended);
                Ok(Self {
                    id,
                    events: None,
                    answered: Some(answered),
                })
            }
            Ok(_) => Err(Refusal::Failed(
                "the server answered the listen request without a stream".into(),
            )),
            Err(error) => Err(Refusal::Failed(format!(
                "the listen request failed: {error}"
            ))),
        }
    }

    /// The next event. Cancel safe.
    pub(crate) async fn next(&mut self) -> Event {
        if let Some(answered) = self.answered.take() {
            return answered;
        }
        let Some(events) = self.events.as_mut() else {
            return Event::Ended;
        };
        loop {
            let data = match events.next().await {
                Some(Ok(data)) => data,
                // A broken or finished response.
                Some(Err(_)) | None => {
                    self.events = None;
                    return Event::Ended;
                }
            };
            // Keep-alive comments carry no data.
            let Some(message) = data.and_then(|data| serde_json::from_str::<Value>(&data).ok())
            else {
                continue;
            };
            if let Some(event) = classify(&message, &self.id) {
                if matches!(event, Event::Ended | Event::Refused(_)) {
                    self.events = None;
                }
                return event;
            }
        }
    }
}
