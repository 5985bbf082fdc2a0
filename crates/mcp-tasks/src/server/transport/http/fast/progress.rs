//! The progress of a `tools/call` the [fast path](super::call) answers,
//! delivered on the call's own answer, as rmcp's stateless path delivers it.
//!
//! rmcp's client puts a `progressToken` in every request it sends, so a
//! fast path that left such calls to rmcp left it every call of every
//! rmcp-based client (the task gateway's HTTP links among them), at 2.5
//! times the cost (see docs/benchmarks-history.md). rmcp serves a call
//! with a service loop and a peer of its own, whose notifications become
//! the call's answer: one JSON body when the handler's first message is
//! its answer, an event stream (the notifications, then the answer) when
//! a notification comes first. The fast path has one shared peer for all
//! its calls (rmcp's `Peer::new` is not public), so it tells their
//! progress apart by token:
//!
//! * A call that asks for progress [reserves](Routes::reserve) its token
//!   for as long as its handler runs. A token a call in flight holds
//!   already is not reserved twice: that call goes to rmcp, whose peer is
//!   its own, so two calls never hear each other's progress.
//! * The shared peer's transport ([`Router`]) hands a
//!   `notifications/progress` to the call that reserved its token, and
//!   drops every other message: a 2026-07-28 call may not send its client
//!   requests, and it gets no log messages on this path (a call with a
//!   `logLevel` goes to rmcp: a log names no call).
//! * rmcp's peer hands a notification to the transport before the
//!   handler's `notify_progress` returns, so every notification a handler
//!   sent before its answer is on its route when the answer is ready: the
//!   answer is [an event stream](event_stream) exactly when rmcp's would be.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::HeaderValue;
use rmcp::model::{ProgressToken, ServerJsonRpcMessage, ServerNotification};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::sync::DropGuard;

/// The progress tokens of the calls in flight that asked for progress, and
/// where each one's notifications go.
#[derive(Default)]
pub(super) struct Routes(Mutex<HashMap<ProgressToken, UnboundedSender<ServerJsonRpcMessage>>>);

impl Routes {
    /// The route of `token`'s notifications, or `None` when a call in
    /// flight holds the token already.
    pub(super) fn reserve(self: &Arc<Self>, token: ProgressToken) -> Option<Route> {
        let mut routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let std::collections::hash_map::Entry::Vacant(free) = routes.entry(token.clone()) else {
            return None;
        };
        let (sender, events) = unbounded_channel();
        free.insert(sender);
        drop(routes);
        Some(Route {
            reservation: Reservation {
                routes: Arc::clone(self),
                token,
            },
            events,
        })
    }

    /// Hands `message` to the call whose token it names, if it is a
    /// progress notification and that call is in flight.
    fn deliver(&self, message: ServerJsonRpcMessage) {
        let ServerJsonRpcMessage::Notification(notification) = &message else {
            return;
        };
        let ServerNotification::ProgressNotification(progress) = &notification.notification else {
            return;
        };
        let routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(route) = routes.get(&progress.params.progress_token) {
            // A call whose answer is gone no longer listens: dropped, as
            // rmcp drops what a gone client's stream would have carried.
            let _ = route.send(message);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A call's reserved token and the notifications sent with it.
pub(crate) struct Route {
    pub(super) reservation: Reservation,
    pub(super) events: UnboundedReceiver<ServerJsonRpcMessage>,
}

/// A token held for one call; dropped (with the handler that holds it)
/// when the handler ends, which frees the token.
pub(super) struct Reservation {
    routes: Arc<Routes>,
    token: ProgressToken,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.routes
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.token);
    }
}

/// The shared peer's transport: it never receives, and sends a progress
/// notification to the call whose token it names (see the module docs).
pub(super) struct Router(pub(super) Arc<Routes>);

impl Transport<RoleServer> for Router {
    type Error = Infallible;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Delivered here, as the loop hands it on, before the handler's
        // `send_notification` returns (it awaits this future's end).
        self.0.deliver(item);
        std::future::ready(Ok(()))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        std::future::pending()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        std::future::ready(Ok(()))
    }
}

/// The rest of a call's answer once a notification came first: its
/// handler's answer, `None` when it has none (a panic).
pub(super) type Rest = Pin<Box<dyn Future<Output = Option<ServerJsonRpcMessage>> + Send>>;

/// The answer as rmcp's stateless path streams it when a notification
/// comes first: status 200, `Content-Type: text/event-stream`,
/// `Cache-Control: no-cache`, `X-Accel-Buffering: no`, and one `data:`
/// event per message (no id, no keep-alive comment: the serving recipe
/// has no event store and no keep-alive): `first`, every notification
/// that follows on `events` while `rest` runs, then `rest`'s answer. The
/// stream's end, or the client's going away first, fires `disconnect`
/// (the handler's cancellation, as rmcp's stream cancels it); `rest` is
/// dropped then, which runs it on to its end (see the fast call path).
pub(super) fn event_stream(
    first: ServerJsonRpcMessage,
    events: UnboundedReceiver<ServerJsonRpcMessage>,
    rest: Rest,
    disconnect: DropGuard,
) -> Response {
    let state = Streaming {
        first: Some(first),
        events,
        rest: Some(rest),
        answer: None,
        _disconnect: disconnect,
    };
    let messages = futures::stream::unfold(state, Streaming::next).map(|message| {
        let data = serde_json::to_string(&message).unwrap_or_else(|error| {
            // Not reached: rmcp's messages serialize (rmcp expects it too).
            tracing::error!(%error, "a message of a tools/call's answer did not serialize");
            String::new()
        });
        Ok::<_, Infallible>(Event::default().data(data))
    });
    let mut response = Sse::new(messages).into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

struct Streaming {
    first: Option<ServerJsonRpcMessage>,
    events: UnboundedReceiver<ServerJsonRpcMessage>,
    /// The handler while it runs.
    rest: Option<Rest>,
    /// Its answer, once it is done, after the notifications still queued.
    answer: Option<ServerJsonRpcMessage>,
    _disconnect: DropGuard,
}

impl Streaming {
    async fn next(mut self) -> Option<(ServerJsonRpcMessage, Self)> {
        if let Some(first) = self.first.take() {
            return Some((first, self));
        }
        if let Some(rest) = self.rest.as_mut() {
            tokio::select! {
                biased;
                Some(note) = self.events.recv() => return Some((note, self)),
                answer = rest => {
                    self.rest = None;
                    self.answer = answer;
                }
            }
        }
        // The handler is done: what it sent before its answer is queued.
        if let Ok(note) = self.events.try_recv() {
            return Some((note, self));
        }
        let answer = self.answer.take()?;
        Some((answer, self))
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        NumberOrString, ProgressNotification, ProgressNotificationParam, RequestId, ServerResult,
    };

    use super::*;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn progress(token: ProgressToken, progress: f64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
            ProgressNotification::new(ProgressNotificationParam::new(token, progress)),
        ))
    }

    #[test]
    fn a_token_is_held_by_one_call_at_a_time_and_freed_when_its_handler_ends() {
        let routes = Arc::new(Routes::default());
        let first = routes.reserve(token(1)).expect("a free token");
        assert!(routes.reserve(token(1)).is_none(), "reserved twice");
        let text = ProgressToken(NumberOrString::String("1".into()));
        let other = routes
            .reserve(text)
            .expect("the string \"1\" is another token");
        assert_eq!(routes.len(), 2);
        drop(first);
        assert_eq!(routes.len(), 1);
        assert!(routes.reserve(token(1)).is_some(), "freed");
        drop(other);
        assert_eq!(routes.len(), 0);
    }

    #[test]
    fn progress_goes_to_the_call_of_its_token_and_anything_else_nowhere() {
        let routes = Arc::new(Routes::default());
        let mut one = routes.reserve(token(1)).unwrap();
        let mut two = routes.reserve(token(2)).unwrap();
        routes.deliver(progress(token(2), 0.5));
        routes.deliver(progress(token(1), 1.0));
        routes.deliver(progress(token(3), 1.0));
        routes.deliver(ServerJsonRpcMessage::response(
            ServerResult::empty(()),
            RequestId::Number(1),
        ));
        let heard = |route: &mut Route| {
            std::iter::from_fn(|| route.events.try_recv().ok())
                .map(|message| serde_json::to_value(message).unwrap())
                .map(|message| message["params"]["progress"].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(heard(&mut one), [serde_json::json!(1.0)]);
        assert_eq!(heard(&mut two), [serde_json::json!(0.5)]);
        // After its call's handler ended, its token routes nowhere.
        let Route {
            reservation,
            mut events,
        } = one;
        drop(reservation);
        routes.deliver(progress(token(1), 2.0));
        assert!(events.try_recv().is_err());
    }
}
