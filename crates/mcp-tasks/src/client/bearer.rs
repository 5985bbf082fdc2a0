//! A bearer token that can change while a connection is open: OAuth access
//! tokens expire and are refreshed mid-wait.
//!
//! An `Authorization: Bearer ..` header given to [`Endpoint::with_header`]
//! is fixed when the connection opens. A [`BearerSource`] given to
//! [`ConnectOptions::with_bearer_source`] is asked for the token of every
//! HTTP request instead: the transport's POSTs and GET stream, the listen
//! streams (each a POST of its own), and the POSTs the legacy tap makes for
//! a 2025-11-25 server. When the server answers 401 anyway, the source is
//! told (with the server's `WWW-Authenticate` challenge) and may give a new
//! token, with which the request is sent once more; a 403
//! `insufficient_scope` is told too (the request fails as it is).
//!
//! This crate does no OAuth itself: a source wraps whatever keeps the
//! token, for example rmcp's `AuthorizationManager` (rmcp's `auth`
//! feature), which refreshes a token before it expires. The `mcp-tasks`
//! CLI's sign-in is built that way.
//!
//! [`Endpoint::with_header`]: super::Endpoint::with_header
//! [`ConnectOptions::with_bearer_source`]: super::ConnectOptions::with_bearer_source

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// Why a [`BearerSource`] has no token to give: its own error (a refresh
/// the authorization server refused, a token file that cannot be read). Its
/// text must not hold a token or a secret.
pub type BearerError = Box<dyn std::error::Error + Send + Sync>;

/// Where the bearer token of each HTTP request comes from (see the
/// [module](self) docs). Implementations must never log the tokens they
/// hand out, and their `Debug` must not print them.
pub trait BearerSource: Send + Sync + std::fmt::Debug {
    /// The token for the next request, refreshed first if it is about to
    /// expire; `None` sends none (a server that needs one answers 401, and
    /// [`BearerSource::rejected`] is called).
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, BearerError>>;

    /// The server answered 401 to a request that carried `sent` (`None`: no
    /// token), with the `WWW-Authenticate` header `challenge`. Returns a
    /// token to send the request again with (once; only when it differs
    /// from `sent`), or `None` to let the 401 stand.
    fn rejected<'a>(
        &'a self,
        sent: Option<&'a str>,
        challenge: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, BearerError>>;

    /// The server answered 403 `insufficient_scope` with the
    /// `WWW-Authenticate` header `challenge` (which names the scopes it
    /// wants): the token is valid but not enough. The request fails as it
    /// is; the source may remember it (to say so, or to ask for more
    /// scopes next time). Does nothing by default.
    fn insufficient_scope(&self, challenge: &str) {
        let _ = challenge;
    }
}

/// A Streamable HTTP client whose every request carries the token of a
/// [`BearerSource`] (in place of the transport's fixed one), and that sends
/// a request once more with a new token when the source has one after a 401.
#[derive(Clone)]
pub(crate) struct BearerClient<C> {
    inner: C,
    source: Arc<dyn BearerSource>,
}

impl<C> std::fmt::Debug for BearerClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerClient").finish_non_exhaustive()
    }
}

type Failure<E> = StreamableHttpError<E>;

impl<C: StreamableHttpClient + Sync> BearerClient<C> {
    pub(crate) fn new(inner: C, source: Arc<dyn BearerSource>) -> Self {
        Self { inner, source }
    }

    /// Runs `call` with the source's token (or `fixed`, the transport's own,
    /// when the source has none), and once more after a 401 when the source
    /// gives a new token.
    async fn with_token<T, F, Fut>(
        &self,
        fixed: Option<String>,
        call: F,
    ) -> Result<T, Failure<C::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, Failure<C::Error>>>,
    {
        let token = self.source.token().await.map_err(source_failure)?.or(fixed);
        match call(token.clone()).await {
            Err(StreamableHttpError::AuthRequired(refusal)) => {
                let fresh = self
                    .source
                    .rejected(token.as_deref(), &refusal.www_authenticate_header)
                    .await
                    .map_err(source_failure)?;
                match fresh {
                    Some(fresh) if Some(&fresh) != token.as_ref() => call(Some(fresh)).await,
                    _ => Err(StreamableHttpError::AuthRequired(refusal)),
                }
            }
            Err(StreamableHttpError::InsufficientScope(refusal)) => {
                self.source
                    .insufficient_scope(&refusal.www_authenticate_header);
                Err(StreamableHttpError::InsufficientScope(refusal))
            }
            other => other,
        }
    }
}

/// A source's error as a transport error (rmcp's error type has no arm of
/// its own for it without rmcp's `auth` feature).
fn source_failure<E: std::error::Error + Send + Sync + 'static>(error: BearerError) -> Failure<E> {
    StreamableHttpError::Io(std::io::Error::other(error))
}

type Events = BoxStream<'static, Result<Sse, SseError>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for BearerClient<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure<Self::Error>> {
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
    ) -> Result<StreamableHttpPostResponse, Failure<Self::Error>> {
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
    ) -> Result<StreamableHttpPostResponse, Failure<Self::Error>> {
        self.with_token(auth_header, |token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure<Self::Error>> {
        self.with_token(auth_header, |token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, Failure<Self::Error>> {
        self.with_token(auth_header, |token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, Failure<Self::Error>> {
        self.with_token(auth_header, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests;
