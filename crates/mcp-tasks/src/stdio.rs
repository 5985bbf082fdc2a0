//! Newline-delimited JSON-RPC, the framing of the stdio transport (also
//! used over sockets and in-process pipes): a reader that shows every
//! complete line to a filter before rmcp's transport reads it.
//!
//! rmcp 3.11 parses each line into its typed messages, and its types drop
//! what they do not model (the `taskIds` of a listen filter, on both
//! sides). The listen layers of the client and the server use this reader
//! to see those lines as JSON first. Lines pass through byte for byte
//! unless the filter consumes or replaces them; a line longer than
//! [`MAX_INSPECTED_LINE`] passes through without being shown.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Lines longer than this pass through without being shown to the filter.
pub(crate) const MAX_INSPECTED_LINE: usize = 4 << 20;

/// The most capacity a buffer keeps between lines: one long line does not
/// hold its memory for the rest of the connection.
const KEPT_CAPACITY: usize = 64 << 10;

/// What to do with one line.
#[derive(Debug)]
pub(crate) enum Line {
    /// Hand it on unchanged.
    Pass,
    /// Keep it from the reader behind.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    Consume,
    /// Hand this on instead (a complete line, with its newline).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    Replace(Vec<u8>),
    /// Not now: offer it again when the filter wakes the given waker.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    Hold,
}

/// Decides, line by line, what the reader behind sees.
pub(crate) trait LineFilter: Send + Unpin {
    /// One complete line, newline included.
    fn filter(&mut self, line: &[u8], cx: &mut Context<'_>) -> Line;
    /// The stream ended (end of file or an error).
    fn closed(&mut self) {}
    /// True while no line may pass, shown or not (a line too long to show
    /// included): the filter wakes `cx`'s waker once one may.
    fn blocked(&mut self, _cx: &mut Context<'_>) -> bool {
        false
    }
}

/// True when `needle` occurs in `line`: the cheap test a filter makes
/// before it parses a line.
pub(crate) fn contains(line: &[u8], needle: &[u8]) -> bool {
    let Some((&first, _)) = needle.split_first() else {
        return true;
    };
    line.iter()
        .enumerate()
        .filter(|(_, byte)| **byte == first)
        .any(|(at, _)| line[at..].starts_with(needle))
}

/// An [`AsyncRead`] that runs every complete line through a [`LineFilter`].
#[derive(Debug)]
pub(crate) struct FilteredReader<R, F> {
    inner: R,
    filter: F,
    /// Bytes read and not yet split into lines.
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no newline.
    scanned: usize,
    /// Bytes ready for the reader behind, from `ready_at` on.
    ready: Vec<u8>,
    ready_at: usize,
    /// A line the filter asked to hold.
    held: Option<Vec<u8>>,
    /// Inside a line too long to inspect: pass bytes on up to its newline.
    passthrough: bool,
    eof: bool,
    /// What the reader behind reads into, made at the first read.
    chunk: Option<Box<[u8]>>,
}

impl<R, F> FilteredReader<R, F> {
    pub(crate) fn new(inner: R, filter: F) -> Self {
        Self {
            inner,
            filter,
            pending: Vec::new(),
            scanned: 0,
            ready: Vec::new(),
            ready_at: 0,
            held: None,
            passthrough: false,
            eof: false,
            chunk: None,
        }
    }
}

impl<R, F: LineFilter> FilteredReader<R, F> {
    /// Offers `line` to the filter; false when it is held.
    fn offer(&mut self, line: Vec<u8>, cx: &mut Context<'_>) -> bool {
        match self.filter.filter(&line, cx) {
            Line::Pass => self.ready.extend_from_slice(&line),
            Line::Consume => {}
            Line::Replace(replacement) => self.ready.extend_from_slice(&replacement),
            Line::Hold => {
                self.held = Some(line);
                return false;
            }
        }
        true
    }

    /// The next complete line of `pending`, if there is one.
    fn next_line(&mut self) -> Option<Vec<u8>> {
        let at = self.pending[self.scanned..]
            .iter()
            .position(|byte| *byte == b'\n')
            .map(|offset| self.scanned + offset);
        match at {
            Some(end) => {
                self.scanned = 0;
                Some(self.pending.drain(..=end).collect())
            }
            None => {
                self.scanned = self.pending.len();
                None
            }
        }
    }
}

impl<R: AsyncRead + Unpin, F: LineFilter> AsyncRead for FilteredReader<R, F> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.ready_at < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.ready_at);
                buf.put_slice(&this.ready[this.ready_at..this.ready_at + n]);
                this.ready_at += n;
                return Poll::Ready(Ok(()));
            }
            this.ready.clear();
            this.ready_at = 0;
            if this.ready.capacity() > KEPT_CAPACITY {
                this.ready.shrink_to(KEPT_CAPACITY);
            }
            if this.pending.is_empty() && this.pending.capacity() > KEPT_CAPACITY {
                this.pending.shrink_to(KEPT_CAPACITY);
            }
            if this.filter.blocked(cx) {
                return Poll::Pending;
            }
            if let Some(line) = this.held.take() {
                if !this.offer(line, cx) {
                    return Poll::Pending;
                }
                continue;
            }
            if let Some(line) = this.next_line() {
                if std::mem::take(&mut this.passthrough) || line.len() > MAX_INSPECTED_LINE {
                    this.ready.extend_from_slice(&line);
                } else if !this.offer(line, cx) {
                    return Poll::Pending;
                }
                continue;
            }
            if this.pending.len() > MAX_INSPECTED_LINE
                || (this.passthrough && !this.pending.is_empty())
            {
                this.passthrough = true;
                this.scanned = 0;
                this.ready.append(&mut this.pending);
                continue;
            }
            if this.eof {
                if !this.pending.is_empty() {
                    this.scanned = 0;
                    this.ready.append(&mut this.pending);
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            // One buffer for every read: zeroing 8 KiB per poll showed in profiles.
            let chunk = this
                .chunk
                .get_or_insert_with(|| vec![0u8; 8192].into_boxed_slice());
            let mut read = ReadBuf::new(chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => {
                    this.filter.closed();
                    return Poll::Ready(Err(error));
                }
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    this.eof = true;
                    this.filter.closed();
                }
                Poll::Ready(Ok(())) => this.pending.extend_from_slice(read.filled()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Drops lines holding "drop", doubles lines holding "twice", holds
    /// the first line holding "hold" once.
    #[derive(Default)]
    struct Script {
        held_once: bool,
        closed: bool,
    }

    impl LineFilter for Script {
        fn filter(&mut self, line: &[u8], cx: &mut Context<'_>) -> Line {
            let text = String::from_utf8_lossy(line);
            if text.contains("drop") {
                Line::Consume
            } else if text.contains("twice") {
                Line::Replace([line, line].concat())
            } else if text.contains("hold") && !self.held_once {
                self.held_once = true;
                cx.waker().wake_by_ref();
                Line::Hold
            } else {
                Line::Pass
            }
        }
        fn closed(&mut self) {
            self.closed = true;
        }
    }

    async fn through(input: &[u8], tiny_reads: bool) -> (Vec<u8>, bool) {
        let (mut write, read) = tokio::io::duplex(if tiny_reads { 3 } else { 1 << 16 });
        let input = input.to_vec();
        let writer = tokio::spawn(async move {
            write.write_all(&input).await.unwrap();
        });
        let mut reader = FilteredReader::new(read, Script::default());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        (out, reader.filter.closed)
    }

    #[test]
    fn needles_are_found() {
        assert!(contains(b"abc", b"bc") && contains(b"abc", b""));
        assert!(!contains(b"abc", b"cd") && !contains(b"", b"a"));
    }

    #[tokio::test]
    async fn lines_pass_drop_are_replaced_or_held() {
        for tiny in [false, true] {
            let (out, closed) =
                through(b"one\ndrop me\ntwice\nhold\nlast without newline", tiny).await;
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "one\ntwice\ntwice\nhold\nlast without newline"
            );
            assert!(closed, "the filter learns that the stream ended");
        }
    }

    #[tokio::test]
    async fn an_overlong_line_passes_through_uninspected() {
        let mut input = vec![b'd'; MAX_INSPECTED_LINE + 10];
        input.extend_from_slice(b"rop\nnext drop\nkept\n");
        let (out, _) = through(&input, false).await;
        let mut expected = vec![b'd'; MAX_INSPECTED_LINE + 10];
        expected.extend_from_slice(b"rop\nkept\n");
        assert_eq!(out, expected);
    }
}
