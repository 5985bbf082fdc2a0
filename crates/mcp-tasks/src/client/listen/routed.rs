//! Listen streams over a newline-delimited transport: the listen request
//! goes through rmcp; [`DemuxReader`] takes the stream's messages out of
//! what the server writes, by subscription id, before rmcp parses them.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use rmcp::model::{ClientRequest, CustomRequest, RequestId};
use rmcp::service::{PeerRequestOptions, RequestHandle};
use rmcp::{ClientHandler, RoleClient, ServiceError};
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

use super::{CANCELLED, Event, LISTEN, Refusal, SUBSCRIPTION_ID, classify, listen_params};
use crate::client::TasksClient;
use crate::stdio::{FilteredReader, Line, LineFilter, contains};
use crate::task::{RpcError, TaskId};

/// Messages buffered per stream before the stream counts as lagging.
const BUFFERED: usize = 64;

/// The open streams of one connection, by JSON-RPC id.
#[derive(Default)]
pub(crate) struct Routes(Mutex<RoutesInner>);

#[derive(Default)]
struct RoutesInner {
    by_id: HashMap<RequestId, Route>,
    /// Streams whose request is being sent, not registered yet.
    opening: usize,
    /// The reader, waiting for those to register.
    held: Option<Waker>,
    /// The connection's reader has ended.
    closed: bool,
}

struct Route {
    sender: mpsc::Sender<Value>,
    lagged: Arc<AtomicBool>,
}

impl Routes {
    fn lock(&self) -> MutexGuard<'_, RoutesInner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unregister(&self, id: &RequestId) {
        self.lock().by_id.remove(id);
    }
}

/// An open made known to the routes until its id is registered.
struct Opening<'a>(&'a Routes);

impl<'a> Opening<'a> {
    fn begin(routes: &'a Routes) -> Self {
        routes.lock().opening += 1;
        Self(routes)
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut routes = self.0.lock();
        routes.opening = routes.opening.saturating_sub(1);
        if let Some(waker) = routes.held.take() {
            waker.wake();
        }
    }
}

/// The reader rmcp reads the server's messages from, with the messages of
/// this client's listen streams taken out. Made by
/// [`ListenChannel::stdio`](super::ListenChannel::stdio).
pub struct DemuxReader<R>(FilteredReader<R, Demux>);

impl<R> std::fmt::Debug for DemuxReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemuxReader").finish_non_exhaustive()
    }
}

impl<R> DemuxReader<R> {
    pub(super) fn new(reader: R, routes: Arc<Routes>) -> Self {
        Self(FilteredReader::new(reader, Demux(routes)))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for DemuxReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

/// Takes out the notifications of registered streams.
pub(crate) struct Demux(Arc<Routes>);

impl Demux {
    /// A demux with no stream registered (for the fuzz targets).
    #[cfg(feature = "__fuzzing")]
    pub(crate) fn unrouted() -> Self {
        Self(Arc::default())
    }
}

impl LineFilter for Demux {
    fn filter(&mut self, line: &[u8], cx: &mut Context<'_>) -> Line {
        let tagged =
            contains(line, SUBSCRIPTION_ID.as_bytes()) || contains(line, CANCELLED.as_bytes());
        if !tagged {
            return Line::Pass;
        }
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return Line::Pass;
        };
        let Some(params) = message
            .get("params")
            .filter(|_| message.get("id").is_none())
        else {
            return Line::Pass;
        };
        let stream = if message.get("method").and_then(Value::as_str) == Some(CANCELLED) {
            params.get("requestId")
        } else {
            super::subscription_of(params)
        };
        let Some(id) = stream.and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok())
        else {
            return Line::Pass;
        };
        let mut routes = self.0.lock();
        let Some(route) = routes.by_id.get(&id) else {
            if routes.opening > 0 {
                // Perhaps the acknowledgement of a stream whose request was
                // just sent: wait until it is registered.
                routes.held = Some(cx.waker().clone());
                return Line::Hold;
            }
            return Line::Pass;
        };
        match route.sender.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => route.lagged.store(true, Ordering::Release),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                routes.by_id.remove(&id);
            }
        }
        Line::Consume
    }

    fn closed(&mut self) {
        let mut routes = self.0.lock();
        routes.closed = true;
        // Their receivers see the end.
        routes.by_id.clear();
    }
}

/// One stream over a newline-delimited transport.
pub(crate) struct RoutedStream {
    id: Value,
    request_id: RequestId,
    routes: Arc<Routes>,
    messages: mpsc::Receiver<Value>,
    lagged: Arc<AtomicBool>,
    /// The listen request, until it is answered or cancelled.
    request: Option<RequestHandle<RoleClient>>,
}

impl RoutedStream {
    /// Sends the listen request for `tasks` through rmcp and registers its id.
    pub(crate) async fn open<H: ClientHandler>(
        client: &TasksClient<H>,
        routes: &Arc<Routes>,
        tasks: &[TaskId],
    ) -> Result<Self, Refusal> {
        let request =
            ClientRequest::CustomRequest(CustomRequest::new(LISTEN, Some(listen_params(tasks))));
        // No timeout: the request lasts as long as the stream.
        let options = PeerRequestOptions::no_options().with_meta(client.request_meta(
            true,
            false,
            &Default::default(),
        ));
        let opening = Opening::begin(routes);
        let handle = client
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|error| Refusal::Failed(format!("cannot send the listen request: {error}")))?;
        // A stream on many tasks may carry a burst of their changes at once.
        let (sender, messages) = mpsc::channel(BUFFERED.max(4 * tasks.len()));
        let lagged = Arc::new(AtomicBool::new(false));
        {
            let mut inner = routes.lock();
            if !inner.closed {
                inner.by_id.insert(
                    handle.id.clone(),
                    Route {
                        sender,
                        lagged: lagged.clone(),
                    },
                );
            }
        }
        drop(opening);
        Ok(Self {
            id: serde_json::to_value(&handle.id).unwrap_or(Value::Null),
            request_id: handle.id.clone(),
            routes: routes.clone(),
            messages,
            lagged,
            request: Some(handle),
        })
    }

    /// The next event. Cancel safe.
    pub(crate) async fn next(&mut self) -> Event {
        loop {
            if let Ok(message) = self.messages.try_recv() {
                if let Some(event) = classify(&message, &self.id) {
                    return event;
                }
                continue;
            }
            if self.lagged.swap(false, Ordering::AcqRel) {
                return Event::Gap;
            }
            let Some(request) = self.request.as_mut() else {
                return match self.messages.recv().await {
                    Some(message) => match classify(&message, &self.id) {
                        Some(event) => event,
                        None => continue,
                    },
                    None => Event::Ended,
                };
            };
            tokio::select! {
                biased;
                message = self.messages.recv() => match message {
                    Some(message) => {
                        if let Some(event) = classify(&message, &self.id) {
                            return event;
                        }
                    }
                    None => return Event::Ended,
                },
                answer = &mut request.rx => {
                    self.request = None;
                    // The listen result, an error, or a connection that closed.
                    return match answer {
                        Ok(Err(ServiceError::McpError(error))) => Event::Refused(RpcError::from(error)),
                        _ => Event::Ended,
                    };
                }
            }
        }
    }
}

impl Drop for RoutedStream {
    fn drop(&mut self) {
        self.routes.unregister(&self.request_id);
        // Tell the server (notifications/cancelled); never hold the caller.
        if let Some(request) = self.request.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = request.cancel(Some("the wait ended".to_owned())).await;
            });
        }
    }
}
