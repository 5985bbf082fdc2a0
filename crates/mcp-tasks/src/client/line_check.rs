//! Answers that are not JSON-RPC messages on a newline-delimited transport
//! (stdio, a socket, an in-process pipe): what rmcp 3.11 does not report.
//! Delete it the day rmcp's transport tells the service about a line it
//! could not read.
//!
//! rmcp's newline-delimited transport drops a line it cannot read as a
//! JSON-RPC message (not JSON, not UTF-8, not a message): it logs it and
//! reads on, and the request the line answered waits for an answer that
//! never comes. A server that answers `tasks/get` with garbage looks like
//! one that does not answer at all, and a wait without a deadline never
//! ends. [`LineCheck::stdio`] wraps the reader rmcp reads the server from,
//! reads each line as rmcp would, and counts those it would drop;
//! [`TasksClient::with_line_check`](super::TasksClient::with_line_check)
//! lets the client's requests hear of them.
//!
//! A line rmcp drops while a `tasks/get`, `tasks/update` or `tasks/cancel`
//! awaits its answer is taken as that answer: the request ends as an
//! unusable answer, the wait sends it again at its interval, and
//! [`ProtocolViolation::UnusableAnswers`](super::error::ProtocolViolation::UnusableAnswers)
//! ends the wait after three in a row. A `tools/call` (or a 2025-11-25
//! `tasks/result`, which lasts as long as the task) is not ended by such a
//! line: a tool that prints to stdout while it runs is a common fault, the
//! answer may still follow, and a `tools/call` cannot be sent again
//! safely; its timeout and the deadline bound it. A malformed request or
//! notification from the server (a line with a `method`) is not an answer
//! and is not counted. Lines longer than 4 MiB are not read (rmcp reads
//! them, up to its own limit of 16 MiB): an unusable one is bounded by the
//! deadline only.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rmcp::model::ServerJsonRpcMessage;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

use crate::stdio::{FilteredReader, Line, LineFilter};

/// Counts the lines of a newline-delimited transport that rmcp drops
/// unread; see the [module docs](self). Cheap to clone.
#[derive(Clone)]
pub struct LineCheck(Arc<watch::Sender<u64>>);

impl std::fmt::Debug for LineCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineCheck")
            .field("unusable_lines", &self.unusable_lines())
            .finish()
    }
}

impl LineCheck {
    /// Wraps `reader`, the half rmcp reads the server's messages from, and
    /// returns the check and the reader to give rmcp instead.
    ///
    /// ```no_run
    /// # async fn run() -> anyhow::Result<()> {
    /// use mcp_tasks::TasksClient;
    /// use mcp_tasks::client::LineCheck;
    /// use rmcp::ServiceExt;
    ///
    /// let mut child = tokio::process::Command::new("my-server")
    ///     .stdin(std::process::Stdio::piped())
    ///     .stdout(std::process::Stdio::piped())
    ///     .kill_on_drop(true)
    ///     .spawn()?;
    /// let stdout = child.stdout.take().expect("piped");
    /// let stdin = child.stdin.take().expect("piped");
    /// let (check, stdout) = LineCheck::stdio(stdout);
    /// let running = ().serve((stdout, stdin)).await?;
    /// let client = TasksClient::new(running).with_line_check(check);
    /// # Ok(()) }
    /// ```
    pub fn stdio<R>(reader: R) -> (Self, CheckedReader<R>) {
        let (count, _) = watch::channel(0);
        let count = Arc::new(count);
        let reader = CheckedReader(FilteredReader::new(reader, Checker(count.clone())));
        (Self(count), reader)
    }

    /// How many lines rmcp could not read as JSON-RPC messages so far.
    pub fn unusable_lines(&self) -> u64 {
        *self.0.borrow()
    }

    /// Counts one more line rmcp will not read (one past the client's
    /// bound, whose request could not be told: see `answer_bound.rs`).
    pub(crate) fn count_unusable(&self) {
        self.0.send_modify(|count| *count += 1);
    }

    /// A watch on the lines to come, for one request.
    pub(crate) fn watch(&self) -> UnusableLine {
        UnusableLine(self.0.subscribe())
    }
}

/// The lines that come after it was made.
pub(crate) struct UnusableLine(watch::Receiver<u64>);

impl UnusableLine {
    /// Ends when an unusable line comes; never when none does.
    pub(crate) async fn arrived(&mut self) {
        if self.0.changed().await.is_err() {
            // The reader is gone: no line will come.
            std::future::pending::<()>().await;
        }
    }
}

/// The reader rmcp reads the server's messages from, unchanged, with each
/// line checked on the way. Made by [`LineCheck::stdio`].
pub struct CheckedReader<R>(FilteredReader<R, Checker>);

impl<R> std::fmt::Debug for CheckedReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedReader").finish_non_exhaustive()
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CheckedReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

/// Passes every line on, counting those rmcp will drop.
pub(crate) struct Checker(Arc<watch::Sender<u64>>);

impl LineFilter for Checker {
    fn filter(&mut self, line: &[u8], _cx: &mut Context<'_>) -> Line {
        if is_unusable_answer(line) {
            tracing::debug!(
                bytes = line.len(),
                "the server wrote a line that is not a JSON-RPC message"
            );
            self.0.send_modify(|count| *count += 1);
        }
        Line::Pass
    }
}

/// True when rmcp's newline-delimited transport will drop `line` (a line,
/// its newline included) without reading a message from it, and it is not
/// a request or a notification (an object with a `method` and neither
/// `result` nor `error`): an answer that cannot be used. Read as rmcp reads it: without
/// a UTF-8 byte order mark and a carriage return; an empty line is skipped.
pub(crate) fn is_unusable_answer(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.is_empty()
        || is_plain_response(line)
        || serde_json::from_slice::<ServerJsonRpcMessage>(line).is_ok()
    {
        return false;
    }
    // A request or a notification rmcp cannot read (or ignores) is not an answer.
    !serde_json::from_slice::<Value>(line).is_ok_and(|message| {
        message.get("method").is_some()
            && message.get("result").is_none()
            && message.get("error").is_none()
    })
}

/// True when `line` is surely a message rmcp reads: a response with an
/// integer or string id, a result, and no other member (most answers). Any
/// result will do, since rmcp's result type ends with a catch-all
/// (`CustomResult`). Checked without building rmcp's message, which costs
/// several times more (its result type is an untagged union, tried variant
/// by variant); `false` leaves the decision to that parse.
pub(crate) fn is_plain_response(line: &[u8]) -> bool {
    /// An id rmcp reads (`NumberOrString`): a string, or an integer in
    /// `i64` (rmcp also takes `1.0`: left to the full parse).
    struct Id;
    impl<'de> Deserialize<'de> for Id {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl serde::de::Visitor<'_> for Visitor {
                type Value = Id;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an integer or a string")
                }
                fn visit_i64<E>(self, _: i64) -> Result<Id, E> {
                    Ok(Id)
                }
                fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Id, E> {
                    i64::try_from(n)
                        .map(|_| Id)
                        .map_err(|_| E::custom("too large"))
                }
                fn visit_str<E>(self, _: &str) -> Result<Id, E> {
                    Ok(Id)
                }
            }
            deserializer.deserialize_any(Visitor)
        }
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Plain<'a> {
        jsonrpc: &'a str,
        #[serde(rename = "id")]
        _id: Id,
        #[serde(rename = "result")]
        _result: IgnoredAny,
    }
    // serde_json reads a `Value` (the result, inside rmcp) at most 128
    // levels deep, and skips an ignored one at any depth: lines that could
    // nest deeper go to the full parse. Skipping does not check UTF-8 either.
    if line.iter().filter(|&&b| b == b'{' || b == b'[').count() > 64 {
        return false;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        return false;
    };
    serde_json::from_str::<Plain<'_>>(text).is_ok_and(|plain| plain.jsonrpc == "2.0")
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn lines_rmcp_drops_are_unusable_answers() {
        let usable: [&[u8]; 8] = [
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n",
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32602,\"message\":\"no\"}}\n",
            br#"{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"a"}}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}}"#,
            // A notification rmcp ignores, and one it cannot read: not answers.
            br#"{"jsonrpc":"2.0","method":"window/logMessage","params":{}}"#,
            br#"{"jsonrpc":"2.0","method":5}"#,
            b"\n",
        ];
        for line in usable {
            assert!(
                !is_unusable_answer(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        let unusable: [&[u8]; 7] = [
            b"<html>surprise</html>\n",
            b"Starting server...\n",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"\xff\xfe\"}}\n",
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
            br#"{"id":1,"result":{}"#,
            b"[1,2]\n",
        ];
        for line in unusable {
            assert!(
                is_unusable_answer(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn a_plain_response_is_one_rmcp_reads() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}1{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let lines: [&[u8]; 16] = [
            br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#,
            br#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"hi"}]}}"#,
            br#"{"jsonrpc":"2.0","id":-7,"result":[1,"two",null]}"#,
            br#"{"id":9223372036854775807,"result":true,"jsonrpc":"2.0"}"#,
            // Not plain (left to the full parse), read by rmcp or not.
            br#"{"jsonrpc":"2.0","id":9223372036854775808,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1.0,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            br#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            br#"{"jsonrpc":"2\u002e0","id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"x":1}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":\"\xff\xfe\"}}",
            deep.as_bytes(),
        ];
        let plain: Vec<bool> = lines.iter().map(|line| is_plain_response(line)).collect();
        assert_eq!(plain[..4], [true; 4]);
        assert_eq!(plain[4..], [false; 12]);
        for line in lines {
            if is_plain_response(line) {
                assert!(
                    serde_json::from_slice::<ServerJsonRpcMessage>(line).is_ok(),
                    "rmcp drops {}",
                    String::from_utf8_lossy(line)
                );
            }
        }
        // rmcp reads some the check leaves to it, and drops the deep one.
        assert!(serde_json::from_slice::<ServerJsonRpcMessage>(lines[5]).is_ok());
        assert!(serde_json::from_slice::<ServerJsonRpcMessage>(deep.as_bytes()).is_err());
    }

    #[tokio::test]
    async fn the_reader_passes_everything_and_counts_what_rmcp_drops() {
        let (mut server, client) = tokio::io::duplex(1 << 16);
        let (check, mut reader) = LineCheck::stdio(client);
        let mut arrived = check.watch();
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nnot json\n\n{\"id\":2}\n";
        server.write_all(input).await.unwrap();
        drop(server);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, input, "byte for byte");
        assert_eq!(check.unusable_lines(), 2);
        arrived.arrived().await;
        assert!(format!("{check:?}").contains("unusable_lines: 2"));
    }
}
