//! [`StdioTransport`]: the newline-delimited transport (stdio, a socket, an
//! in-process pipe) of a server on a [`TaskRuntime`], for clients of both
//! eras.

use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::TaskRuntime;
use super::legacy::{self, outbound::Outbound, outbound::Rewriting};
use super::listen::stdio::Reroute;
use crate::stdio::{FilteredReader, Line, LineFilter, contains};

/// rmcp's newline-delimited transport for a server on a [`TaskRuntime`],
/// with what rmcp 3.11 cannot read or write itself on such a connection:
///
/// * `subscriptions/listen` for tasks (as [`ListenReader`](super::listen::ListenReader) does);
/// * the 2025-11-25 tasks of clients that open the connection with
///   `initialize` (see [`TaskRuntime::serve_custom_request`]): their task
///   requests reach the runtime, `capabilities.tasks` goes into the
///   `InitializeResult` of a server that declares the Tasks extension, and
///   each tool's `execution.taskSupport` into `tools/list`, from
///   [`TaskRuntime::advertise_tool`].
///
/// ```no_run
/// # use mcp_tasks::server::TaskRuntime;
/// # #[derive(Clone)] struct MyServer { runtime: TaskRuntime }
/// # impl rmcp::ServerHandler for MyServer {}
/// # async fn run(server: MyServer) -> anyhow::Result<()> {
/// use mcp_tasks::server::StdioTransport;
/// use rmcp::ServiceExt;
///
/// let (stdin, stdout) = rmcp::transport::stdio();
/// let transport = StdioTransport::new(&server.runtime, stdin, stdout);
/// // In the quiet scope, so that rmcp's logs carry no task id (see `quiet`).
/// let running = mcp_tasks::quiet::scope(server.serve(transport)).await?;
/// running.waiting().await?;
/// # Ok(()) }
/// ```
///
/// The server's `ServerHandler::on_custom_request` must hand what it does
/// not serve itself to [`TaskRuntime::serve_custom_request`], as
/// [`delegate_task_methods!`](crate::delegate_task_methods) does.
pub struct StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    inner: Rewriting<AsyncRwTransport<RoleServer, TaskReader<R>, W>>,
}

impl<R, W> std::fmt::Debug for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport").finish_non_exhaustive()
    }
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The transport over `read` and `write` for a server on `runtime`.
    pub fn new(runtime: &TaskRuntime, read: R, write: W) -> Self {
        let reader = TaskReader(FilteredReader::new(read, TaskLines::default()));
        Self {
            inner: Rewriting::new(
                AsyncRwTransport::new_server(reader, write),
                Outbound::new(runtime, false),
            ),
        }
    }
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The reader of a [`StdioTransport`].
#[derive(Debug)]
struct TaskReader<R>(FilteredReader<R, TaskLines>);

impl<R: AsyncRead + Unpin> AsyncRead for TaskReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

/// Renames, line by line, what must reach the runtime past rmcp's parsing:
/// task listens, and once the client opened with `initialize`, the
/// requests of 2025-11-25 tasks.
#[derive(Debug, Default)]
pub(crate) struct TaskLines {
    /// The client opened with `initialize`, declaring no Tasks extension:
    /// it speaks 2025-11-25 tasks (a client that declared the extension in
    /// `initialize`, as rmcp's may, is served in the new era).
    old_tasks: bool,
    /// The first request has been seen.
    opened: bool,
}

impl LineFilter for TaskLines {
    fn filter(&mut self, line: &[u8], cx: &mut Context<'_>) -> Line {
        let legacy = if self.old_tasks {
            legacy::may_reroute(line)
        } else {
            !self.opened && contains(line, b"\"initialize\"")
        };
        if !legacy {
            if !self.opened && contains(line, b"\"method\"") && contains(line, b"\"id\"") {
                // A first request that is not `initialize`: a 2026-07-28 client.
                self.opened = true;
            }
            return Reroute.filter(line, cx);
        }
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(line) else {
            return Line::Pass;
        };
        if !self.opened {
            self.opened = message.contains_key("id") && message.contains_key("method");
            self.old_tasks = message.get("method").and_then(Value::as_str) == Some("initialize")
                && message.contains_key("id")
                && !legacy::declares_extension(
                    message
                        .get("params")
                        .and_then(|params| params.get("capabilities")),
                );
            return Line::Pass;
        }
        if !legacy::reroute(&mut message) {
            return Line::Pass;
        }
        let mut rerouted = Value::Object(message).to_string().into_bytes();
        rerouted.push(b'\n');
        Line::Replace(rerouted)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filtered(lines: &mut TaskLines, message: &Value) -> Option<Value> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match lines.filter(&line, &mut cx) {
            Line::Pass => None,
            Line::Replace(bytes) => Some(serde_json::from_slice(&bytes).unwrap()),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn initialize(capabilities: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "c", "version": "1"}}})
    }

    #[test]
    fn old_task_requests_are_renamed_only_after_initialize() {
        let get =
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "t"}});
        let mut lines = TaskLines::default();
        assert_eq!(filtered(&mut lines, &initialize(&json!({}))), None);
        let renamed = filtered(&mut lines, &get).expect("renamed");
        assert_eq!(renamed["method"], format!("{}tasks/get", legacy::PREFIX));
        assert_eq!(renamed["params"], get["params"]);
        // A 2026-07-28 client opens with another request: nothing is renamed.
        let mut lines = TaskLines::default();
        let discover =
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
        assert_eq!(filtered(&mut lines, &discover), None);
        assert_eq!(filtered(&mut lines, &initialize(&json!({}))), None);
        assert_eq!(filtered(&mut lines, &get), None);
        // A client that declares the extension in `initialize` is served in the new era.
        let mut lines = TaskLines::default();
        let declared = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        assert_eq!(filtered(&mut lines, &initialize(&declared)), None);
        assert_eq!(filtered(&mut lines, &get), None);
    }

    #[test]
    fn task_listens_are_still_rerouted() {
        let mut lines = TaskLines::default();
        let listen = json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": ["a"]}}});
        assert!(filtered(&mut lines, &listen).is_some());
    }
}
