//! Task listens over stdio: [`ListenReader`] reroutes them past rmcp's
//! lossy listen parsing to its custom-request hook, where
//! [`answer_rerouted`] serves them through rmcp's own peer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, CustomNotification, CustomResult,
    ServerNotification, SubscriptionsListenRequestMethod,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

use super::subscription::{Subscription, requested_task_ids};
use super::{ACKNOWLEDGED, LISTEN, TASK_NOTIFICATION};
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::tasks_required;
use crate::stdio::{FilteredReader, Line, LineFilter, contains};

/// The method under which [`ListenReader`] hands a task listen to rmcp.
pub(crate) const REROUTED: &str = "mcp-tasks/subscriptions/listen";

/// Wraps the reader of a newline-delimited server transport (stdio, a
/// socket, an in-process pipe) so that `subscriptions/listen` requests
/// naming `taskIds` reach the runtime: rmcp 3.11 would parse them into a
/// filter without the ids. Every other line passes through unchanged.
/// [`StdioTransport`](crate::server::StdioTransport) does this and serves
/// 2025-11-25 clients too: prefer it.
///
/// ```no_run
/// # use mcp_tasks::server::TaskRuntime;
/// # #[derive(Clone)] struct MyServer { runtime: TaskRuntime }
/// # impl rmcp::ServerHandler for MyServer {}
/// # async fn run(server: MyServer) -> anyhow::Result<()> {
/// use mcp_tasks::server::listen::ListenReader;
/// use rmcp::ServiceExt;
///
/// let (stdin, stdout) = rmcp::transport::stdio();
/// let running = mcp_tasks::quiet::scope(server.serve((ListenReader::new(stdin), stdout))).await?;
/// running.waiting().await?;
/// # Ok(()) }
/// ```
///
/// The server's `ServerHandler::on_custom_request` must hand the rerouted
/// request to [`TaskRuntime::on_custom_request`], as
/// [`delegate_task_methods!`](crate::delegate_task_methods) does.
#[derive(Debug)]
pub struct ListenReader<R>(FilteredReader<R, Reroute>);

impl<R> ListenReader<R> {
    /// Wraps `reader`.
    pub fn new(reader: R) -> Self {
        Self(FilteredReader::new(reader, Reroute))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for ListenReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

/// Renames the method of task listens.
#[derive(Debug)]
pub(crate) struct Reroute;

impl LineFilter for Reroute {
    fn filter(&mut self, line: &[u8], _cx: &mut Context<'_>) -> Line {
        if !contains(line, LISTEN.as_bytes()) || !contains(line, b"taskIds") {
            return Line::Pass;
        }
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(line) else {
            return Line::Pass;
        };
        let is_task_listen = message.get("method").and_then(Value::as_str) == Some(LISTEN)
            && message.contains_key("id")
            && message
                .get("params")
                .is_some_and(|params| requested_task_ids(params).is_some());
        if !is_task_listen {
            return Line::Pass;
        }
        message.insert("method".into(), Value::String(REROUTED.to_owned()));
        let mut rerouted = Value::Object(message).to_string().into_bytes();
        rerouted.push(b'\n');
        Line::Replace(rerouted)
    }
}

/// Serves a rerouted task listen on rmcp's peer: the acknowledgement, the
/// notifications, and, when the server ends the stream, a
/// `notifications/cancelled` for it followed by the listen result. The
/// client ends it with `notifications/cancelled`, which rmcp turns into
/// the request's cancellation (and then sends nothing more).
pub(crate) async fn answer_rerouted(
    runtime: &TaskRuntime,
    params: Option<Value>,
    context: RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    // Listen exists from 2026-07-28 on; an initialize-era session lacks it.
    let modern = context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize());
    if !modern {
        return Err(ErrorData::method_not_found::<
            SubscriptionsListenRequestMethod,
        >());
    }
    let params = params.unwrap_or(Value::Null);
    let Some(requested) = requested_task_ids(&params) else {
        return Err(ErrorData::invalid_params(
            "a task listen needs notifications.taskIds",
            None,
        ));
    };
    let requested = requested?;
    let declared = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks());
    if !declared {
        return Err(tasks_required());
    }
    let caller = runtime.caller_of(&context.extensions);
    let id = serde_json::to_value(&context.id).unwrap_or(Value::Null);
    // Past the stream budget: the refusal for load, as the listen's answer.
    let (acknowledgement, mut subscription) = Subscription::open(runtime, &caller, id, requested)
        .await
        .map_err(|refused| refused.error)?;
    let peer = &context.peer;
    let send = |method: &'static str, params: Value| {
        peer.send_notification(ServerNotification::CustomNotification(
            CustomNotification::new(method, Some(params)),
        ))
    };
    if send(ACKNOWLEDGED, acknowledgement).await.is_err() {
        return Err(ErrorData::internal_error(
            "cannot acknowledge the subscription",
            None,
        ));
    }
    loop {
        tokio::select! {
            () = context.ct.cancelled() => {
                // Cancelled by the client (or the connection closed): rmcp
                // drops whatever this returns.
                return Ok(CustomResult::new(subscription.result()));
            }
            next = subscription.next() => match next {
                Some(params) => {
                    if send(TASK_NOTIFICATION, params).await.is_err() {
                        return Ok(CustomResult::new(subscription.result()));
                    }
                }
                None => break,
            },
        }
    }
    // Ended by the server: on stdio that is said with notifications/cancelled
    // (the cancellation rule) and with the listen result (the subscriptions rule).
    let _ = peer
        .send_notification(ServerNotification::CancelledNotification(
            CancelledNotification::new(CancelledNotificationParam::new(
                Some(context.id.clone()),
                Some("the subscription ended".to_owned()),
            )),
        ))
        .await;
    Ok(CustomResult::new(subscription.result()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filtered(message: &Value) -> Option<Value> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match Reroute.filter(&line, &mut cx) {
            Line::Pass => None,
            Line::Replace(bytes) => Some(serde_json::from_slice(&bytes).unwrap()),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn only_task_listens_are_rerouted() {
        let listen = json!({"jsonrpc": "2.0", "id": "l-1", "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": ["a"], "toolsListChanged": true}}});
        let rerouted = filtered(&listen).expect("rerouted");
        assert_eq!(rerouted["method"], REROUTED);
        assert_eq!(rerouted["id"], "l-1");
        assert_eq!(rerouted["params"], listen["params"]);
        let tools_only = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}, "note": "taskIds"}});
        assert!(filtered(&tools_only).is_none());
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "subscriptions/listen", "arguments": {"taskIds": []}}});
        assert!(filtered(&call).is_none());
    }
}
