//! `notifications/tasks` over `subscriptions/listen`: what rmcp 3.11 lacks
//! on the server, built beside it. Delete it when rmcp routes `taskIds`.
//!
//! rmcp 3.11 parses `subscriptions/listen` into a `SubscriptionFilter` that
//! has no `taskIds` (the ids are dropped on parse), asks the handler for
//! the accepted filter without the request's context (so without the
//! caller's principal), acknowledges with that lossy filter itself, and its
//! `SubscriptionSink` refuses `notifications/tasks` as "not yet routable".
//! Upstream PR 1170 adds open filter fields and a contextual accept hook;
//! with it this module shrinks to two `ServerHandler` methods.
//!
//! Until then a listen request that names `taskIds` never reaches rmcp's
//! listen code:
//!
//! * over stdio (any newline-delimited transport) the reader of
//!   [`StdioTransport`](crate::server::StdioTransport) (or [`ListenReader`] around a
//!   reader of one's own) hands such a request to rmcp as a custom request,
//!   which [`TaskRuntime::on_custom_request`] answers (the
//!   [`delegate_task_methods!`](crate::delegate_task_methods) macro wires it
//!   into `ServerHandler::on_custom_request`); rmcp still frames, writes and
//!   cancels it like any request;
//! * over Streamable HTTP the serving recipe answers it in front of rmcp,
//!   as an SSE stream of its own (see [`http`][http], feature `http-server`).
//!
//! Listen requests without `taskIds` go to rmcp untouched. A request that
//! names `taskIds` and also other notification types is acknowledged for
//! the task ids only (the acknowledgement lists what the server agreed to).
//!
//! What a stream does: it acknowledges only ids that exist and belong to
//! the caller (others are left out alike: no existence oracle); then every
//! change of those tasks, woken by the store's change feed, goes out as
//! `notifications/tasks` carrying the `DetailedTask` that `tasks/get`
//! would answer at that moment, without `resultType`, tagged with the
//! subscription id. Changes that land faster than they are sent
//! coalesce: the latest state always goes out. The stream ends gracefully
//! when its last task has finished, when the runtime ends every stream
//! ([`TaskRuntime::end_subscriptions`]).
//!
//! Streams have a budget of their own: at most
//! [`TaskRuntimeBuilder::with_max_listen_streams`] open at once in the
//! runtime (default [`DEFAULT_MAX_LISTEN_STREAMS`]) and
//! [`TaskRuntimeBuilder::with_max_listen_streams_per_caller`] per caller
//! (default [`DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER`]). A stream past
//! either is refused at once, before its acknowledgement, with the
//! server's one shape of a refusal for load (-32603, `data.reason`
//! `"listenStreams"`, `retryAfterMs`, and `maxListenStreams` or
//! `maxListenStreamsPerCaller`); over HTTP with status 503 and
//! `Retry-After`. Our client's waits then poll.
//!
//! [`TaskRuntime::on_custom_request`]: crate::server::TaskRuntime::on_custom_request
//! [`TaskRuntime::end_subscriptions`]: crate::server::TaskRuntime::end_subscriptions
//! [`TaskRuntimeBuilder::with_max_listen_streams`]: crate::server::TaskRuntimeBuilder::with_max_listen_streams
//! [`TaskRuntimeBuilder::with_max_listen_streams_per_caller`]: crate::server::TaskRuntimeBuilder::with_max_listen_streams_per_caller
//! [http]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/index.html

pub(crate) mod stdio;
mod subscription;

pub use stdio::ListenReader;

pub use crate::server::engine::builder::{
    DEFAULT_MAX_LISTEN_STREAMS, DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER,
};
pub(crate) use stdio::{REROUTED, answer_rerouted};
#[cfg(feature = "http-server")]
pub(crate) use subscription::{Refused, Subscription, requested_task_ids};

/// The method of a listen request.
pub(crate) const LISTEN: &str = "subscriptions/listen";
/// The notification that opens a stream.
pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// A task's state on a stream.
pub(crate) const TASK_NOTIFICATION: &str = "notifications/tasks";
/// The `_meta` key naming the stream a notification belongs to.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
