//! [`StdioTransport`]: the newline-delimited transport (stdio, a socket, an
//! in-process pipe) of a server on a [`TaskRuntime`], for clients of both
//! eras.
//!
//! # Calls read ahead of rmcp
//!
//! rmcp reads each line into its message types through serde's buffering
//! (an untagged union, a flattened map): for a `tools/call` that is most of
//! what the transport costs (a fifth of a stdio server's CPU under a stream
//! of calls, in the profile in docs/benchmarks-history.md). The reader's filter reads a
//! plain call of a 2026-07-28 client from its bytes instead, as the HTTP
//! fast path does (`plain::read_plain`, held to rmcp's own
//! reading by its tests and a fuzz target), and hands rmcp the message it
//! would have parsed, through [`Prefetched`]. Unlike the HTTP fast path it
//! takes a call that asks for progress or logs too (rmcp's SDK puts a
//! `progressToken` in every request): rmcp's own loop serves the call, and
//! its peer sends them. Everything else, and every
//! call of a connection opened with `initialize`, is parsed by rmcp as
//! before. Nothing else is bypassed: the message goes through rmcp's service
//! loop, its handler, its peer and its cancellation as a parsed one does,
//! and in its turn: the reader gives rmcp no further line until the message
//! read ahead has been taken (a cancellation sent right after a call finds
//! the call started), with or without the `http-server` feature.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::listen::stdio::Reroute;
use crate::server::TaskRuntime;
use crate::server::{legacy, legacy::outbound::Outbound, legacy::outbound::Rewriting};
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
    inner: Rewriting<Prefetched<AsyncRwTransport<RoleServer, TaskReader<R>, W>>>,
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
        Self::with_read_ahead(runtime, read, write, true)
    }

    /// [`StdioTransport::new`], reading plain calls ahead of rmcp or not
    /// (see the [module docs](self)): the tests compare the two.
    #[doc(hidden)]
    pub fn with_read_ahead(runtime: &TaskRuntime, read: R, write: W, read_ahead: bool) -> Self {
        let ahead = Arc::new(ReadAhead::default());
        let lines = TaskLines {
            ahead: read_ahead.then(|| ahead.clone()),
            ..TaskLines::default()
        };
        let reader = TaskReader(FilteredReader::new(read, lines));
        Self {
            inner: Rewriting::new(
                Prefetched {
                    inner: AsyncRwTransport::new_server(reader, write),
                    ahead,
                },
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
/// requests of 2025-11-25 tasks. Reads plain calls of a 2026-07-28 client
/// ahead of rmcp, into `ahead` (see the [module docs](self)).
#[derive(Debug, Default)]
pub(crate) struct TaskLines {
    /// The 2025-11-25 tasks' renaming.
    old_tasks: legacy::Lines,
    /// The first request has been seen.
    opened: bool,
    /// The first request was `initialize`.
    initialized: bool,
    /// Where calls read ahead go; `None`: none is.
    ahead: Option<Arc<ReadAhead>>,
}

impl LineFilter for TaskLines {
    fn blocked(&mut self, cx: &mut Context<'_>) -> bool {
        // In turn: nothing passes a message read ahead and not yet taken.
        self.ahead
            .as_ref()
            .is_some_and(|ahead| ahead.waiting(cx.waker()))
    }

    fn filter(&mut self, line: &[u8], cx: &mut Context<'_>) -> Line {
        if !self.opened && contains(line, b"\"initialize\"") {
            // Perhaps the first request, and an `initialize`.
            if let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(line) {
                self.opened = message.contains_key("id") && message.contains_key("method");
                self.initialized = message.get("method").and_then(Value::as_str)
                    == Some("initialize")
                    && message.contains_key("id");
                self.old_tasks = legacy::Lines::opened_with(&message);
            }
            return Line::Pass;
        }
        if let Some(line) = self.old_tasks.filter(line) {
            return line;
        }
        if !self.opened && contains(line, b"\"method\"") && contains(line, b"\"id\"") {
            // A first request that is not `initialize`: a 2026-07-28 client.
            self.opened = true;
        }
        if let Some(ahead) = &self.ahead
            && self.opened
            && !self.initialized
            && contains(line, b"\"tools/call\"")
            && let Some(message) = read_call(line)
        {
            ahead.put(message);
            return Line::Consume;
        }
        Reroute.filter(line, cx)
    }
}

/// A plain `tools/call` line (see the [module docs](self)) as the message
/// rmcp's own reading makes of it, or `None` for rmcp to read.
pub(crate) fn read_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    // rmcp reads a line without its end (`\n`, and a `\r` before it).
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (id, call) = super::plain::read_plain(line, super::plain::Notifications::Allowed)?;
    Some(RxJsonRpcMessage::<RoleServer>::request(
        rmcp::model::ClientRequest::CallToolRequest(call),
        id,
    ))
}

/// The message the reader's filter read ahead of rmcp, and the reader's
/// waker while it waits: one at a time, since the filter blocks every
/// further line until [`Prefetched`] has taken it.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    state: Mutex<Ahead>,
    /// Wakes [`Prefetched::receive`] when a message is put.
    put: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Ahead {
    message: Option<RxJsonRpcMessage<RoleServer>>,
    /// The reader, holding its lines until the message is taken.
    reader: Option<Waker>,
}

impl ReadAhead {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ahead> {
        // Nothing here can panic halfway through a change.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True when a message waits to be taken: the reader (`waker`) is woken
    /// once it has been.
    fn waiting(&self, waker: &Waker) -> bool {
        let mut ahead = self.lock();
        if ahead.message.is_none() {
            return false;
        }
        ahead.reader = Some(waker.clone());
        true
    }

    fn put(&self, message: RxJsonRpcMessage<RoleServer>) {
        self.lock().message = Some(message);
        self.put.notify_one();
    }

    fn take(&self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut ahead = self.lock();
        let message = ahead.message.take()?;
        if let Some(reader) = ahead.reader.take() {
            reader.wake();
        }
        Some(message)
    }
}

/// A transport whose `receive` gives the message read ahead (in its turn:
/// see [`ReadAhead`]) before reading on.
pub(crate) struct Prefetched<T> {
    inner: T,
    ahead: Arc<ReadAhead>,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Prefetched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(message) = self.ahead.take() {
                return Some(message);
            }
            // rmcp's read is cancel-safe (a line half read stays buffered),
            // as its service loop needs: dropped when a message is put.
            tokio::select! {
                biased;
                () = self.ahead.put.notified() => {}
                // The end of the input may come in the very read that put
                // the last line's message: that message is still given.
                message = self.inner.receive() => return message.or_else(|| self.ahead.take()),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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

    fn call_line(meta: &Value) -> Vec<u8> {
        let mut line = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "é \\ \"x\"", "n": 1.5e300},
                "_meta": meta}})
        .to_string()
        .into_bytes();
        line.extend_from_slice(b"\r\n");
        line
    }

    fn new_era_meta() -> Value {
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
    }

    fn ahead_lines() -> (TaskLines, Arc<ReadAhead>) {
        let ahead = Arc::new(ReadAhead::default());
        let lines = TaskLines {
            ahead: Some(ahead.clone()),
            ..TaskLines::default()
        };
        (lines, ahead)
    }

    fn offer(lines: &mut TaskLines, line: &[u8]) -> Line {
        let waker = futures::task::noop_waker();
        lines.filter(line, &mut Context::from_waker(&waker))
    }

    /// What rmcp's own reading of `line` gives, as JSON.
    fn rmcp_reads(line: &[u8]) -> Value {
        let line = line.strip_suffix(b"\r\n").unwrap();
        let message: RxJsonRpcMessage<RoleServer> = serde_json::from_slice(line).unwrap();
        serde_json::to_value(message).unwrap()
    }

    #[test]
    fn plain_calls_are_read_ahead_as_rmcp_reads_them() {
        let (mut lines, ahead) = ahead_lines();
        let line = call_line(&new_era_meta());
        assert!(matches!(offer(&mut lines, &line), Line::Consume));
        let taken = ahead.take().expect("the call was read ahead");
        assert_eq!(serde_json::to_value(&taken).unwrap(), rmcp_reads(&line));
        assert!(
            matches!(&taken, rmcp::model::JsonRpcMessage::Request(request)
                if rmcp::model::GetExtensions::extensions(&request.request).get::<rmcp::model::RequestMetaObject>().is_some()),
            "the `_meta` is in the request's extensions, as rmcp puts it"
        );
        // A call asking for progress or logs is read ahead too (rmcp's own
        // loop serves it, and its peer sends them): as rmcp's SDK asks, with
        // a `progressToken` in every request.
        for (key, asked) in [
            ("progressToken", json!(1)),
            ("progressToken", json!("p")),
            ("io.modelcontextprotocol/logLevel", json!("info")),
        ] {
            let mut meta = new_era_meta();
            meta[key] = asked;
            let line = call_line(&meta);
            assert!(matches!(offer(&mut lines, &line), Line::Consume), "{meta}");
            let taken = ahead.take().expect("the call was read ahead");
            assert_eq!(serde_json::to_value(&taken).unwrap(), rmcp_reads(&line));
        }
        // Anything but a call is left to rmcp.
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        assert!(matches!(offer(&mut lines, ping), Line::Pass));
        assert!(ahead.take().is_none());
    }

    #[test]
    fn calls_of_a_connection_opened_with_initialize_are_left_to_rmcp() {
        for capabilities in [
            json!({}),
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        ] {
            let (mut lines, ahead) = ahead_lines();
            let mut open = initialize(&capabilities).to_string().into_bytes();
            open.push(b'\n');
            assert!(matches!(offer(&mut lines, &open), Line::Pass));
            assert!(matches!(
                offer(&mut lines, &call_line(&new_era_meta())),
                Line::Pass
            ));
            assert!(ahead.take().is_none());
        }
    }

    #[tokio::test]
    async fn nothing_passes_a_call_read_ahead_until_it_is_taken() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let (lines, ahead) = ahead_lines();
        let (mut write, read) = tokio::io::duplex(1 << 16);
        let mut reader = FilteredReader::new(read, lines);
        let cancel = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n";
        // A line too long to show the filter waits its turn too.
        let long = [
            vec![b' '; crate::stdio::MAX_INSPECTED_LINE + 1],
            b"{}\n".to_vec(),
        ]
        .concat();
        let input = [call_line(&new_era_meta()), cancel.to_vec(), long.clone()].concat();
        let writer = tokio::spawn(async move { write.write_all(&input).await });
        let mut first = [0u8; 64];
        let waiting =
            tokio::time::timeout(Duration::from_millis(50), reader.read(&mut first)).await;
        assert!(waiting.is_err(), "a line passed a call read ahead");
        assert!(ahead.take().is_some(), "the call was read ahead");
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        writer.await.unwrap().unwrap();
        assert_eq!(rest, [cancel.to_vec(), long].concat());
    }
}
