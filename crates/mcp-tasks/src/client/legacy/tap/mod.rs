//! The tap: it reads the server's answers as the transport received them and
//! keeps the JSON of those the 2025-11-25 era needs (the `InitializeResult`,
//! `tools/list`, `tools/call`, `tasks/*`), because rmcp's typed model drops
//! `capabilities.tasks`, `execution.taskSupport`, `ttl` and `pollInterval`. It
//! stops reading as soon as the server turns out to speak 2026-07-28 (it
//! answers `server/discover`).
//!
//! On a byte stream (stdio) it sees every line rmcp reads ([`TapRead`]); on
//! Streamable HTTP every SSE event, and the plain JSON bodies of the requests
//! whose answers the era needs ([`TapHttp`], in `http.rs`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};

use super::Link;

/// The longest message the tap reads; a longer one is passed on unread.
const MAX_MESSAGE: usize = 32 << 20;

/// Puts a transport's incoming messages where the connection's
/// [`Handler`](super::Handler) and `TasksClient` can read them. Get one from
/// [`Handler::tap`](super::Handler::tap) and wrap the transport with it before
/// building the rmcp client.
#[derive(Debug, Clone)]
pub struct Tap {
    pub(super) link: Arc<Link>,
}

impl Tap {
    /// Wraps the reading half of a byte-stream transport (a child's stdout,
    /// one half of a socket or duplex) that carries newline-delimited JSON-RPC.
    pub fn read<R: AsyncRead + Unpin>(&self, reader: R) -> TapRead<R> {
        TapRead {
            inner: reader,
            link: self.link.clone(),
            line: Vec::new(),
            overflow: false,
        }
    }

    /// Wraps the `reqwest::Client` of a Streamable HTTP transport, for
    /// `StreamableHttpClientTransport::with_client`. The server's answers are
    /// read whether they come as SSE events or as plain JSON bodies; see
    /// [`TapHttp`] for how.
    #[cfg(feature = "http-client")]
    pub fn http(&self, client: reqwest::Client) -> TapHttp {
        TapHttp::new(client, self.link.clone())
    }
}

/// A reader that passes everything through and shows each complete line to
/// the tap. Made by [`Tap::read`].
pub struct TapRead<R> {
    inner: R,
    link: Arc<Link>,
    line: Vec<u8>,
    overflow: bool,
}

impl<R> std::fmt::Debug for TapRead<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapRead").finish_non_exhaustive()
    }
}

impl<R> TapRead<R> {
    /// The wrapped reader.
    pub fn into_inner(self) -> R {
        self.inner
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, rest, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            if !self.overflow {
                if self.line.len() + part.len() > MAX_MESSAGE {
                    self.overflow = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if ended {
                if !self.overflow && !self.line.is_empty() {
                    self.link.observe_message(&self.line);
                }
                self.line.clear();
                // A long line's memory is not kept for the next ones.
                self.line.shrink_to(64 << 10);
                self.overflow = false;
            }
            bytes = rest;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapRead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if this.link.tapping() {
            this.feed(&buf.filled()[before..]);
        }
        Poll::Ready(Ok(()))
    }
}

/// The events of an SSE answer, as rmcp's HTTP client reads them.
#[cfg(feature = "http-client")]
type Events = futures::stream::BoxStream<
    'static,
    Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
>;

#[cfg(feature = "http-client")]
mod http;
#[cfg(feature = "http-client")]
mod renumber;
#[cfg(feature = "http-client")]
pub use self::http::TapHttp;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fed(chunks: &[&[u8]]) -> Arc<Link> {
        let link = Arc::new(Link::default());
        let mut reader = Tap { link: link.clone() }.read(tokio::io::empty());
        for chunk in chunks {
            reader.feed(chunk);
        }
        link
    }

    #[test]
    fn keeps_the_initialize_result_then_answers_by_id_across_chunks() {
        let init = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}}, "serverInfo": {"name": "s", "version": "0"}}})
        .to_string();
        let answer =
            json!({"jsonrpc": "2.0", "id": 7, "result": {"taskId": "t", "ttl": null}}).to_string();
        let (head, tail) = answer.split_at(10);
        let link = fed(&[
            init.as_bytes(),
            b"\n",
            head.as_bytes(),
            tail.as_bytes(),
            b"\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n",
        ]);
        assert_eq!(
            link.server_tasks(),
            Some(Some(super::super::ServerTasks {
                tools_call: true,
                list: false,
                cancel: false
            }))
        );
        let id = rmcp::model::RequestId::Number(7);
        assert_eq!(
            link.take_answer(&id),
            Some(json!({"taskId": "t", "ttl": null}))
        );
        assert_eq!(link.take_answer(&id), None, "an answer is taken once");
    }

    #[test]
    fn a_modern_server_turns_the_tap_off() {
        let discover =
            json!({"jsonrpc": "2.0", "id": 0, "result": {"supportedVersions": ["2026-07-28"]}});
        let later = json!({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}});
        let link = fed(&[format!("{discover}\n{later}\n").as_bytes()]);
        assert!(!link.tapping());
        assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(1)), None);
        assert_eq!(link.server_tasks(), None);
    }

    #[test]
    fn garbage_and_oversized_lines_are_passed_over() {
        let link = Arc::new(Link::default());
        let mut reader = Tap { link: link.clone() }.read(tokio::io::empty());
        reader.feed(b"not json\n[1,2]\n");
        reader.feed(&vec![b'x'; MAX_MESSAGE + 1]);
        reader.feed(b"\n");
        assert!(reader.line.is_empty() && !reader.overflow);
        assert!(link.tapping());
    }
}
