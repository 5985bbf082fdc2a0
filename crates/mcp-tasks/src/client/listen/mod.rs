//! Listening for `notifications/tasks` on a `subscriptions/listen` stream:
//! what rmcp 3.11 lacks on the client, built beside it. Delete it when
//! rmcp's `Peer::listen` carries `taskIds` and routes task notifications.
//!
//! rmcp 3.11's `SubscriptionFilter` has no `taskIds`: a listen request
//! cannot name tasks, and the ids in the server's acknowledgement are
//! dropped when rmcp parses it; its `Subscription` routes no
//! `notifications/tasks`. Upstream PR 1170 adds open filter fields and
//! task routing. Until then this module sends `subscriptions/listen` as a
//! request of its own and reads the acknowledgement and the notifications
//! as JSON before rmcp parses them, through a [`ListenChannel`]:
//!
//! * [`ListenChannel::stdio`] for a newline-delimited transport (a child
//!   process, a socket, an in-process pipe): it wraps the reader rmcp reads
//!   the server's messages from, takes out the messages of this client's
//!   streams (demultiplexed by subscription id), and sends the listen
//!   request through rmcp; the stream ends with `notifications/cancelled`;
//! * [`ListenChannel::http`][http] (feature `http-client`) for Streamable
//!   HTTP: each stream is a POST of its own whose SSE response is the
//!   stream; dropping it ends the stream.
//!
//! [`TasksClient::connect`](super::TasksClient::connect) gives a client the
//! channel of the transport it opens, and
//! [`TasksClient::with_listen`](super::TasksClient::with_listen) one built by
//! hand (a client without a channel polls, and says so once in the log);
//! [`AwaitOptions::with_listen`](super::AwaitOptions::with_listen) chooses
//! whether a wait listens ([`ListenMode`]). A listening wait opens
//! the stream for its task, reads `tasks/get` once after the
//! acknowledgement (a change made before the stream opened is not missed),
//! then acts on each notification as on a poll result. It falls back to
//! polling for the rest of the wait when the stream ends before the task
//! does, when the acknowledgement leaves the task out, or when events were
//! lost; a server that refuses listen (-32601) is polled as well unless the
//! mode is [`ListenMode::Required`]; one that refuses the stream for load
//! (its listen budget is spent: -32603 with `data.reason` `"listenStreams"`,
//! over HTTP a 503) is polled whatever the mode. A wait on a set of tasks
//! ([`TasksClient::await_each`](super::TasksClient::await_each)) opens one
//! stream naming all of them (see [`many`](super::many)).
//!
//! [http]: https://docs.rs/mcp-tasks/latest/mcp_tasks/client/listen/struct.ListenChannel.html#method.http

#[cfg(feature = "http-client")]
mod http;
pub(crate) mod routed;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ClientHandler;
use serde_json::Value;

pub use routed::DemuxReader;

use super::TasksClient;
use crate::task::{RpcError, TaskId};

/// The method of a listen request.
pub(crate) const LISTEN: &str = "subscriptions/listen";
/// The notification that opens a stream.
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// A task's state on a stream.
const TASK_NOTIFICATION: &str = "notifications/tasks";
/// A stream's end, said by the server on stdio.
const CANCELLED: &str = "notifications/cancelled";
/// Why a client without a channel does not listen.
pub(crate) const NO_CHANNEL: &str = "this client has no listen channel";
/// The `_meta` key naming the stream a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Whether a wait listens for `notifications/tasks` or polls `tasks/get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ListenMode {
    /// Listen when the client has a [`ListenChannel`] and the server
    /// serves the stream; poll otherwise (the default).
    #[default]
    Auto,
    /// Always poll.
    Poll,
    /// Listen, or fail the wait when the server cannot: no channel, an
    /// initialize-era connection, a refused listen request, or an
    /// acknowledgement that leaves the task out. A stream that breaks
    /// later still falls back to polling, and so does one the server
    /// refuses for load (its listen budget is spent for now).
    Required,
}

/// How a [`TasksClient`] opens listen streams; see the [module docs](self).
/// Cheap to clone.
#[derive(Clone)]
pub struct ListenChannel(Arc<Backend>);

impl std::fmt::Debug for ListenChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &*self.0 {
            Backend::Routed(_) => "stdio",
            #[cfg(feature = "http-client")]
            Backend::Http(_) => "http",
        };
        f.debug_tuple("ListenChannel").field(&kind).finish()
    }
}

enum Backend {
    Routed(Arc<routed::Routes>),
    #[cfg(feature = "http-client")]
    Http(Box<dyn http::Post>),
}

impl ListenChannel {
    /// A channel for a newline-delimited transport: wraps `reader`, the
    /// half rmcp reads the server's messages from, and returns the channel
    /// and the reader to give rmcp instead.
    ///
    /// ```no_run
    /// # async fn run() -> anyhow::Result<()> {
    /// use mcp_tasks::TasksClient;
    /// use mcp_tasks::client::ListenChannel;
    /// use rmcp::ServiceExt;
    ///
    /// let mut child = tokio::process::Command::new("my-server")
    ///     .stdin(std::process::Stdio::piped())
    ///     .stdout(std::process::Stdio::piped())
    ///     .kill_on_drop(true)
    ///     .spawn()?;
    /// let stdout = child.stdout.take().expect("piped");
    /// let stdin = child.stdin.take().expect("piped");
    /// let (channel, stdout) = ListenChannel::stdio(stdout);
    /// let running = mcp_tasks::quiet::scope(().serve((stdout, stdin))).await?;
    /// let client = TasksClient::new(running).with_listen(channel);
    /// # Ok(()) }
    /// ```
    pub fn stdio<R>(reader: R) -> (Self, DemuxReader<R>) {
        let routes = Arc::new(routed::Routes::default());
        let reader = DemuxReader::new(reader, routes.clone());
        (Self(Arc::new(Backend::Routed(routes))), reader)
    }

    /// A channel for Streamable HTTP: every stream is a POST of its own
    /// with `client`, to the endpoint, bearer token and headers of
    /// `config` (the configuration the client's transport was built from).
    #[cfg(feature = "http-client")]
    pub fn http<C>(
        client: C,
        config: &rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
    ) -> Self
    where
        C: rmcp::transport::streamable_http_client::StreamableHttpClient + Sync,
    {
        Self(Arc::new(Backend::Http(Box::new(http::Endpoint::new(
            client, config,
        )))))
    }
}

/// What a stream said.
#[derive(Debug)]
pub(crate) enum Event {
    /// The acknowledgement: the `notifications` the server agreed to.
    Acknowledged(Value),
    /// A task's state (the params of `notifications/tasks`).
    Task(Value),
    /// The server refused the listen request.
    Refused(RpcError),
    /// Notifications were lost (the client read too slowly).
    Gap,
    /// The stream is over (the listen result, a cancellation, a closed
    /// connection).
    Ended,
}

impl Event {
    /// What kind of event this is, for a log line: never its content (a
    /// task's state, or a server's error, may name the task).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Acknowledged(_) => "acknowledged",
            Self::Task(_) => "task",
            Self::Refused(_) => "refused",
            Self::Gap => "gap",
            Self::Ended => "ended",
        }
    }
}

/// An open stream.
pub(crate) enum Stream {
    Routed(routed::RoutedStream),
    #[cfg(feature = "http-client")]
    Http(http::HttpStream),
}

impl Stream {
    /// The next thing the stream says. Cancel safe.
    pub(crate) async fn next(&mut self) -> Event {
        match self {
            Self::Routed(stream) => stream.next().await,
            #[cfg(feature = "http-client")]
            Self::Http(stream) => stream.next().await,
        }
    }
}

/// Why a stream could not be opened for a task.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The client has no channel (said once per client, in the log).
    NoChannel,
    /// The connection is initialize-era.
    Unavailable(&'static str),
    /// The server answered the listen request with an error.
    Refused(RpcError),
    /// The server refused the stream for load (its listen budget, or the
    /// caller's, is spent: `data.reason` `"listenStreams"`); the wait
    /// polls, whatever its mode.
    Busy,
    /// The acknowledgement left the task out.
    Declined,
    /// The stream failed or ended before its acknowledgement, or the
    /// acknowledgement did not come in time.
    Failed(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoChannel => f.write_str(NO_CHANNEL),
            Self::Unavailable(why) => f.write_str(why),
            // The code only: a server's message may name the task.
            Self::Refused(error) => write!(f, "the server refused (code {})", error.code),
            Self::Busy => f.write_str("the server has no listen stream left for now"),
            Self::Declined => f.write_str("the acknowledgement left the task out"),
            Self::Failed(why) => f.write_str(why),
        }
    }
}

/// Whether a refused listen was refused for load: the server's one shape
/// of that refusal (-32603 with `data.reason`) for listen streams.
fn is_busy(error: &RpcError) -> bool {
    error.code == -32603
        && error
            .data
            .as_ref()
            .and_then(|data| data.get("reason"))
            .is_some_and(|reason| reason == "listenStreams")
}

/// The listen request's params for `ids`, with its `_meta` left to the caller.
fn listen_params(ids: &[TaskId]) -> Value {
    let ids: Vec<&str> = ids.iter().map(TaskId::expose).collect();
    serde_json::json!({"notifications": {"taskIds": ids}})
}

/// The JSON-RPC id a stream's messages name, from a notification's params.
fn subscription_of(params: &Value) -> Option<&Value> {
    params.get("_meta")?.get(SUBSCRIPTION_ID)
}

/// What one JSON-RPC message from the server means for the stream `id`,
/// if anything.
pub(crate) fn classify(message: &Value, id: &Value) -> Option<Event> {
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        let params = message.get("params")?;
        if method == CANCELLED {
            return (params.get("requestId") == Some(id)).then_some(Event::Ended);
        }
        if subscription_of(params) != Some(id) {
            return None;
        }
        return match method {
            ACKNOWLEDGED => Some(Event::Acknowledged(
                params.get("notifications").cloned().unwrap_or(Value::Null),
            )),
            TASK_NOTIFICATION => Some(Event::Task(params.clone())),
            // Nothing else was asked for.
            _ => None,
        };
    }
    if message.get("id") != Some(id) {
        return None;
    }
    Some(match message.get("error") {
        Some(error) => Event::Refused(RpcError::from_json(error)),
        None => Event::Ended,
    })
}

impl<H: ClientHandler> TasksClient<H> {
    /// Opens a stream for task `id` and waits for its acknowledgement,
    /// at most `timeout`. Returns the stream when it covers the task.
    pub(crate) async fn open_listen(
        &self,
        id: &TaskId,
        timeout: Duration,
    ) -> Result<Stream, Refusal> {
        let (stream, covered) = self
            .open_listen_for(std::slice::from_ref(id), timeout)
            .await?;
        if covered.contains(id.expose()) {
            Ok(stream)
        } else {
            Err(Refusal::Declined)
        }
    }

    /// Opens one stream for the tasks `ids` and waits for its
    /// acknowledgement, at most `timeout`. Returns the stream and the ids
    /// the acknowledgement covers (perhaps none of them).
    pub(crate) async fn open_listen_for(
        &self,
        ids: &[TaskId],
        timeout: Duration,
    ) -> Result<(Stream, HashSet<String>), Refusal> {
        let Some(channel) = &self.listen else {
            if !self
                .polling_said
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::info!(
                    "this client has no listen channel: its waits poll tasks/get at the \
                     server's interval (TasksClient::connect or TasksClient::with_listen \
                     gives it one)"
                );
            }
            return Err(Refusal::NoChannel);
        };
        let modern = self
            .peer()
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        if !modern {
            return Err(Refusal::Unavailable(
                "subscriptions/listen does not exist on an initialize-era connection",
            ));
        }
        let opening = async {
            let mut stream = match &*channel.0 {
                Backend::Routed(routes) => {
                    Stream::Routed(routed::RoutedStream::open(self, routes, ids).await?)
                }
                #[cfg(feature = "http-client")]
                Backend::Http(endpoint) => {
                    Stream::Http(http::HttpStream::open(self, &**endpoint, ids).await?)
                }
            };
            match stream.next().await {
                Event::Acknowledged(notifications) => {
                    let asked: HashSet<&str> = ids.iter().map(TaskId::expose).collect();
                    let covered = notifications
                        .get("taskIds")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .filter(|acked| asked.contains(acked))
                        .map(str::to_owned)
                        .collect();
                    Ok((stream, covered))
                }
                Event::Refused(error) if is_busy(&error) => Err(Refusal::Busy),
                Event::Refused(error) => Err(Refusal::Refused(error)),
                Event::Task(_) => Err(Refusal::Failed(
                    "a notification came before the acknowledgement".into(),
                )),
                Event::Gap | Event::Ended => Err(Refusal::Failed(
                    "the stream ended before its acknowledgement".into(),
                )),
            }
        };
        match tokio::time::timeout(timeout, opening).await {
            Ok(opened) => opened,
            Err(_) => Err(Refusal::Failed("no acknowledgement in time".to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_are_classified_by_their_stream() {
        let id = json!(7);
        let meta = json!({SUBSCRIPTION_ID: 7});
        let ack = json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED,
            "params": {"_meta": meta, "notifications": {"taskIds": ["a"]}}});
        assert!(
            matches!(classify(&ack, &id), Some(Event::Acknowledged(n)) if n["taskIds"][0] == "a")
        );
        let task = json!({"jsonrpc": "2.0", "method": TASK_NOTIFICATION,
            "params": {"_meta": meta, "taskId": "a", "status": "working"}});
        assert!(matches!(classify(&task, &id), Some(Event::Task(_))));
        let other_stream = json!({"jsonrpc": "2.0", "method": TASK_NOTIFICATION,
            "params": {"_meta": {SUBSCRIPTION_ID: "7"}, "taskId": "a", "status": "working"}});
        assert!(classify(&other_stream, &id).is_none(), "\"7\" is not 7");
        let unasked = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": meta}});
        assert!(classify(&unasked, &id).is_none());
        let cancelled = json!({"jsonrpc": "2.0", "method": CANCELLED, "params": {"requestId": 7}});
        assert!(matches!(classify(&cancelled, &id), Some(Event::Ended)));
        let result = json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}});
        assert!(matches!(classify(&result, &id), Some(Event::Ended)));
        let error = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "no"}});
        assert!(matches!(classify(&error, &id), Some(Event::Refused(e)) if e.code == -32601));
        let someone_else = json!({"jsonrpc": "2.0", "id": 8, "result": {}});
        assert!(classify(&someone_else, &id).is_none());
    }

    #[test]
    fn only_a_refusal_for_load_of_streams_is_busy() {
        let error = |value: Value| RpcError::from_json(&value);
        assert!(is_busy(&error(json!({"code": -32603, "message": "full",
            "data": {"reason": "listenStreams", "retryAfterMs": 5000, "maxListenStreams": 3}}))));
        assert!(!is_busy(&error(json!({"code": -32603, "message": "full",
            "data": {"reason": "queueFull", "retryAfterMs": 5000}}))));
        assert!(!is_busy(&error(
            json!({"code": -32603, "message": "broken"})
        )));
        assert!(!is_busy(&error(json!({"code": -32601, "message": "no",
            "data": {"reason": "listenStreams"}}))));
    }
}
