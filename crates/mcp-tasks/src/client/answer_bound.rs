//! The client's bound on one answer of the server
//! ([`ConnectOptions::max_answer_bytes`](super::ConnectOptions::max_answer_bytes)):
//! an answer past it ends its request with
//! [`Error::AnswerTooLarge`](super::Error::AnswerTooLarge) instead of being
//! read whole into memory, or being dropped while its request waits.
//!
//! rmcp 3.11 bounds what it reads (16 MiB by default: a stdio line, an HTTP
//! body, an SSE event), but it drops a stdio line past its bound without a
//! word to the request it answered, which then waits for an answer that
//! never comes, and an HTTP answer past its bound fails as any transport
//! failure would. So the layers this crate puts under rmcp turn such an
//! answer into the answer rmcp can hand to the request: a JSON-RPC error
//! for the request's id (marked in its `data`: `{"mcpTasksClient":
//! "answerTooLarge", "maxAnswerBytes", "answerBytes"}`) that the client
//! reads back as `AnswerTooLarge`:
//!
//! * on a newline-delimited transport, a reader under rmcp passes each line
//!   through as it comes until it is past the bound, then counts the rest
//!   without keeping it; at its end it hands on the error for the id of the
//!   response the line was (read from its first and last few KiB, where
//!   servers write the id: rmcp and most SDKs before the result, the
//!   TypeScript SDK after it). A response whose id cannot be told is
//!   counted as an unusable line instead ([`LineCheck`]), which ends a
//!   `tasks/*` request that waits; a request or a notification past the
//!   bound is dropped (it answers nothing);
//! * on Streamable HTTP, the tap's client (`legacy/tap/http.rs`) answers a
//!   POST whose JSON body or SSE event is past the bound with the same error
//!   for the POST's request.
//!
//! Either way the connection goes on: the rest of the line is read and
//! dropped, the HTTP response closed. Delete this the day rmcp reports an
//! oversized answer to the request it answered.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::ErrorData;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

use super::line_check::LineCheck;
use crate::task::grouped;

/// The client's bound on one answer unless [`ConnectOptions`] says
/// otherwise: 64 MiB, four times rmcp's own default, eight times a server's
/// default result budget ([`DEFAULT_MAX_RESULT_BYTES`][budget]), so that real
/// results pass while one answer cannot take the client's memory.
///
/// [`ConnectOptions`]: super::ConnectOptions
/// [budget]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/constant.DEFAULT_MAX_RESULT_BYTES.html
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 64 << 20;

/// The key of `data` that marks the error this module makes.
const MARK: &str = "mcpTasksClient";
const TOO_LARGE: &str = "answerTooLarge";

/// How much of a line's start and end is kept to find its id.
const KEPT: usize = 4096;

/// The error a too large answer becomes: `bound` bytes, and the answer's
/// size when it is known.
pub(crate) fn too_large_error(bound: usize, size: Option<u64>) -> ErrorData {
    let message = match size {
        Some(size) => format!(
            "the answer is {} bytes, past this client's limit of {} bytes",
            grouped(size),
            grouped(bound as u64)
        ),
        None => format!(
            "the answer is past this client's limit of {} bytes",
            grouped(bound as u64)
        ),
    };
    ErrorData::internal_error(
        message,
        Some(json!({MARK: TOO_LARGE, "maxAnswerBytes": bound, "answerBytes": size})),
    )
}

/// The bound and size an error made by [`too_large_error`] carries.
pub(crate) fn too_large_of(error: &ErrorData) -> Option<(u64, Option<u64>)> {
    let data = error.data.as_ref()?;
    if data.get(MARK)?.as_str()? != TOO_LARGE {
        return None;
    }
    let bound = data.get("maxAnswerBytes")?.as_u64()?;
    Some((bound, data.get("answerBytes").and_then(Value::as_u64)))
}

/// The JSON-RPC response, one line, that answers the request `id` (raw
/// JSON: a number or a string) with [`too_large_error`].
fn error_line(id: &[u8], bound: usize, size: u64) -> Option<Vec<u8>> {
    let id: Value = serde_json::from_slice(id).ok()?;
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return None;
    }
    let error = too_large_error(bound, Some(size));
    let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "error": error})).ok()?;
    line.push(b'\n');
    Some(line)
}

/// A newline-delimited reader whose lines are at most `bound` bytes: a
/// longer one is handed on up to the bound, then ended, and followed by the
/// error for the request it answered; see the [module](self) docs.
pub(crate) struct BoundedReader<R> {
    inner: R,
    bound: usize,
    lines: LineCheck,
    chunk: Box<[u8]>,
    start: usize,
    end: usize,
    /// Bytes of the current line so far, its newline left out.
    line: usize,
    /// The first [`KEPT`] bytes of the current line.
    head: Vec<u8>,
    /// Past the bound: the line's last [`KEPT`] bytes so far.
    tail: Vec<u8>,
    discarding: bool,
    /// Bytes to hand on before any other.
    out: Vec<u8>,
    out_at: usize,
    eof: bool,
}

impl<R> BoundedReader<R> {
    /// Bounds `inner`'s lines to `bound` bytes; a too large one whose
    /// request cannot be told is counted on `lines`.
    pub(crate) fn new(inner: R, bound: usize, lines: LineCheck) -> Self {
        Self {
            inner,
            bound,
            lines,
            chunk: vec![0; 8192].into_boxed_slice(),
            start: 0,
            end: 0,
            line: 0,
            head: Vec::new(),
            tail: Vec::new(),
            discarding: false,
            out: Vec::new(),
            out_at: 0,
            eof: false,
        }
    }

    /// Hands on what of the chunk may go, into `buf`; counts what may not.
    fn pass(&mut self, buf: &mut ReadBuf<'_>) {
        let data = &self.chunk[self.start..self.end];
        let newline = data.iter().position(|&byte| byte == b'\n');
        if self.discarding {
            let skipped = newline.unwrap_or(data.len());
            keep_tail(&mut self.tail, &data[..skipped]);
            self.line += skipped;
            self.start += newline.map_or(skipped, |at| at + 1);
            if newline.is_some() {
                self.ended();
            }
            return;
        }
        let content = newline.unwrap_or(data.len());
        let room = self.bound - self.line;
        let (take, past) = if content > room {
            (room.min(buf.remaining()), true)
        } else {
            let segment = content + usize::from(newline.is_some());
            (segment.min(buf.remaining()), false)
        };
        let taken = &data[..take];
        if self.head.len() < KEPT {
            let keep = (KEPT - self.head.len()).min(take);
            self.head.extend_from_slice(&taken[..keep]);
        }
        buf.put_slice(taken);
        self.start += take;
        if past {
            self.line += take;
            self.discarding = self.line == self.bound;
        } else if newline.is_some_and(|at| take == at + 1) {
            self.line = 0;
            self.head.clear();
        } else {
            self.line += take;
        }
    }

    /// A line past the bound ended: what goes on in its place.
    fn ended(&mut self) {
        let size = self.line as u64;
        tracing::warn!(
            bytes = size,
            bound = self.bound,
            "the server's answer is past this client's bound; it was not read"
        );
        // The part handed on ends here, unparsable: rmcp drops it.
        self.out.clear();
        self.out.push(b'\n');
        let error = match response_id(&self.head, &self.tail) {
            Some(id) => error_line(id, self.bound, size),
            None => None,
        };
        match error {
            Some(line) => self.out.extend_from_slice(&line),
            None if starts_a_response(&self.head) != Some(false) => self.lines.count_unusable(),
            None => {}
        }
        self.out_at = 0;
        self.discarding = false;
        self.line = 0;
        self.head.clear();
        self.tail.clear();
    }
}

impl<R> std::fmt::Debug for BoundedReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedReader")
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.out_at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_at);
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                return Poll::Ready(Ok(()));
            }
            if this.start < this.end {
                let before = buf.filled().len();
                this.pass(buf);
                if buf.filled().len() > before {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    (this.start, this.end) = (0, n);
                    this.eof = n == 0;
                }
            }
        }
    }
}

/// Keeps the last [`KEPT`] bytes of a line in `tail`, with `bytes` added.
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() >= KEPT {
        tail.clear();
        tail.extend_from_slice(&bytes[bytes.len() - KEPT..]);
        return;
    }
    tail.extend_from_slice(bytes);
    if tail.len() > KEPT {
        tail.drain(..tail.len() - KEPT);
    }
}

/// The raw id of the response a line is, from its first bytes (`head`) or
/// its last (`tail`): only when its head shows a response (`result` or
/// `error` before any `method`).
fn response_id<'a>(head: &'a [u8], tail: &'a [u8]) -> Option<&'a [u8]> {
    if starts_a_response(head) != Some(true) {
        return None;
    }
    head_id(head).or_else(|| tail_id(tail))
}

/// Whether the top-level members at the start of a line show a response
/// (`result` or `error` first) or a request or notification (`method`
/// first); `None` when the head does not tell.
fn starts_a_response(head: &[u8]) -> Option<bool> {
    let mut found = None;
    top_members(head, |key, _| match key {
        b"result" | b"error" => {
            found = Some(true);
            false
        }
        b"method" => {
            found = Some(false);
            false
        }
        _ => true,
    });
    found
}

/// The raw `id` among the top-level members at the start of a line.
fn head_id(head: &[u8]) -> Option<&[u8]> {
    let mut id = None;
    top_members(head, |key, value| {
        if key == b"id" {
            id = value;
            return false;
        }
        true
    });
    id
}

/// Walks the top-level members of the JSON object `text` starts with, as
/// far as `text` goes: `visit` gets each key, and its value when it is a
/// scalar (`None` for an object or an array), and says whether to go on.
fn top_members<'a>(text: &'a [u8], mut visit: impl FnMut(&[u8], Option<&'a [u8]>) -> bool) {
    let mut at = skip_space(text, 0);
    if text.get(at) != Some(&b'{') {
        return;
    }
    at += 1;
    loop {
        at = skip_space(text, at);
        let Some(key_end) = string_end(text, at) else {
            return;
        };
        let key = &text[at + 1..key_end - 1];
        at = skip_space(text, key_end);
        if text.get(at) != Some(&b':') {
            return;
        }
        at = skip_space(text, at + 1);
        let value_end = match text.get(at) {
            Some(b'"') => string_end(text, at),
            Some(b'{' | b'[') => {
                if !visit(key, None) {
                    return;
                }
                nested_end(text, at)
            }
            Some(_) => Some(scalar_end(text, at)),
            None => None,
        };
        let Some(value_end) = value_end else {
            return;
        };
        if !matches!(text.get(at), Some(b'{' | b'[')) && !visit(key, Some(&text[at..value_end])) {
            return;
        }
        at = skip_space(text, value_end);
        if text.get(at) != Some(&b',') {
            return;
        }
        at += 1;
    }
}

/// The raw `id` when it is the last member of the object `tail` ends with.
fn tail_id(tail: &[u8]) -> Option<&[u8]> {
    let end = trim_space_back(tail, tail.len());
    if end == 0 || tail[end - 1] != b'}' {
        return None;
    }
    let value_end = trim_space_back(tail, end - 1);
    let value_start = if value_end > 0 && tail[value_end - 1] == b'"' {
        string_start_back(tail, value_end - 1)?
    } else {
        let mut start = value_end;
        while start > 0 && (tail[start - 1].is_ascii_digit() || tail[start - 1] == b'-') {
            start -= 1;
        }
        (start < value_end).then_some(start)?
    };
    let colon = trim_space_back(tail, value_start);
    if colon == 0 || tail[colon - 1] != b':' {
        return None;
    }
    let key_end = trim_space_back(tail, colon - 1);
    let key_start = key_end.checked_sub(4)?;
    if &tail[key_start..key_end] != b"\"id\"" {
        return None;
    }
    let before = trim_space_back(tail, key_start);
    (before > 0 && matches!(tail[before - 1], b',' | b'{')).then_some(&tail[value_start..value_end])
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

fn trim_space_back(text: &[u8], mut end: usize) -> usize {
    while end > 0 && text[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end
}

/// The end (past its closing quote) of the string starting at `at`.
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The start of the string whose closing quote is at `close`.
fn string_start_back(text: &[u8], close: usize) -> Option<usize> {
    let mut i = close;
    while i > 0 {
        i -= 1;
        if text[i] == b'"' {
            let slashes = text[..i].iter().rev().take_while(|&&b| b == b'\\').count();
            if slashes.is_multiple_of(2) {
                return Some(i);
            }
        }
    }
    None
}

/// The end of the number or literal starting at `at`.
fn scalar_end(text: &[u8], mut at: usize) -> usize {
    while text
        .get(at)
        .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
    {
        at += 1;
    }
    at
}

/// The end of the object or array starting at `at`.
fn nested_end(text: &[u8], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = at;
    while i < text.len() {
        match text[i] {
            b'"' => {
                i = string_end(text, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn the_id_is_found_before_or_after_the_result() {
        /// A line's head, its tail, and the id found.
        type Case = (&'static [u8], &'static [u8], Option<&'static [u8]>);
        let cases: [Case; 8] = [
            (
                br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"te"#,
                b"",
                Some(b"7"),
            ),
            (
                br#"{ "id" : "a\"b" , "result" : {"x"#,
                b"",
                Some(br#""a\"b""#),
            ),
            (
                br#"{"result":{"content":[{"type":"text","text":"xx"#,
                br#"xxx"}]},"jsonrpc":"2.0","id":12}"#,
                Some(b"12"),
            ),
            (
                br#"{"result":{"a":"#,
                br#"x","id":5}},"jsonrpc":"2.0","id":"q\"}"}"#,
                Some(br#""q\"}""#),
            ),
            // The last member is not the id: not guessed from inside the result.
            (br#"{"result":{"a":"#, br#"x","id":5}}}"#, None),
            (
                br#"{"result":{"a":"#,
                br#"x"},"id":5,"jsonrpc":"2.0"}"#,
                None,
            ),
            // Requests and notifications are not answers.
            (
                br#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"x"#,
                b"",
                None,
            ),
            (
                br#"{"method":"notifications/tasks","params":{"x"#,
                br#"x"}},"jsonrpc":"2.0","id":4}"#,
                None,
            ),
        ];
        for (head, tail, id) in cases {
            assert_eq!(
                response_id(head, tail),
                id,
                "{} .. {}",
                String::from_utf8_lossy(head),
                String::from_utf8_lossy(tail)
            );
        }
        assert_eq!(starts_a_response(br#"{"jsonrpc":"2.0","#), None);
        assert_eq!(starts_a_response(br#"{"error":{"#), Some(true));
    }

    #[test]
    fn the_error_reads_back() {
        let error = too_large_error(1 << 20, Some(5_000_000));
        assert_eq!(
            error.message,
            "the answer is 5,000,000 bytes, past this client's limit of 1,048,576 bytes"
        );
        assert_eq!(too_large_of(&error), Some((1 << 20, Some(5_000_000))));
        assert_eq!(too_large_of(&too_large_error(9, None)), Some((9, None)));
        assert_eq!(too_large_of(&ErrorData::internal_error("x", None)), None);
        assert!(error_line(b"[1]", 1, 2).is_none() && error_line(b"1.5", 1, 2).is_none());
    }

    /// `input` written in `pieces`, read through a reader of `bound`.
    async fn through(input: Vec<u8>, bound: usize, pieces: usize) -> (Vec<u8>, LineCheck) {
        let (mut write, read) = tokio::io::duplex(pieces);
        let writer = tokio::spawn(async move {
            write.write_all(&input).await.unwrap();
        });
        let (check, _) = LineCheck::stdio(tokio::io::empty());
        let mut reader = BoundedReader::new(read, bound, check.clone());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        (out, check)
    }

    #[tokio::test]
    async fn a_line_past_the_bound_becomes_the_error_of_its_request() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{{\"text\":\"{}\"}}}}\n",
            "x".repeat(100_000)
        );
        let small = "{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{}}\n";
        for pieces in [7, 1 << 16] {
            let input = [small, &big, small].concat().into_bytes();
            let (out, check) = through(input, 1000, pieces).await;
            let out = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 4, "{:?}", &out[..200.min(out.len())]);
            assert_eq!(lines[0], small.trim_end());
            assert_eq!(lines[1].len(), 1000, "handed on up to the bound");
            assert!(serde_json::from_str::<Value>(lines[1]).is_err());
            let error: Value = serde_json::from_str(lines[2]).unwrap();
            assert_eq!(error["id"], 9);
            let data: ErrorData = serde_json::from_value(error["error"].clone()).unwrap();
            assert_eq!(
                too_large_of(&data),
                Some((1000, Some(big.len() as u64 - 1)))
            );
            assert_eq!(lines[3], small.trim_end(), "the next line is whole");
            assert!(out.ends_with('\n'));
            assert_eq!(check.unusable_lines(), 0);
        }
    }

    #[tokio::test]
    async fn a_line_past_the_bound_without_an_id_is_an_unusable_line() {
        let big = format!("{{\"result\":{{\"t\":\"{}\"}}}}\n", "y".repeat(50_000));
        let note = format!(
            "{{\"method\":\"notifications/x\",\"params\":{{\"t\":\"{}\"}}}}\n",
            "z".repeat(50_000)
        );
        let (out, check) = through([big, note].concat().into_bytes(), 100, 1 << 12).await;
        assert_eq!(out.len(), 2 * 101, "two cut lines, nothing else");
        assert_eq!(check.unusable_lines(), 1, "a notification is not counted");
        // At the bound exactly: whole.
        let line = format!("{{\"t\":\"{}\"}}\n", "w".repeat(92));
        let (out, _) = through(line.clone().into_bytes(), 100, 64).await;
        assert_eq!(out, line.into_bytes());
    }

    #[tokio::test]
    async fn any_bytes_pass_without_a_panic_and_no_line_past_the_bound() {
        // A small xorshift over the bytes JSON is made of.
        let alphabet = b"{}[]\":,. \r\n0-9aeidrsult";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for round in 0..400 {
            let mut input = Vec::new();
            for _ in 0..(round % 97) * 7 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                input.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let heads: [&[u8]; 3] = [
                br#"{"jsonrpc":"2.0","id":1,"result":"#,
                br#"{"result":{"#,
                b"",
            ];
            let mut line = heads[round % 3].to_vec();
            line.extend_from_slice(&input);
            let tails: [&[u8]; 2] = [br#"},"id":"x\"y"}"#, b""];
            line.extend_from_slice(tails[round % 2]);
            line.push(b'\n');
            let bound = 16 + round % 40;
            let (out, _) = through(line.clone(), bound, 1 + round % 13).await;
            for piece in out.split(|&b| b == b'\n') {
                // The error that stands for a cut line is whole.
                let is_error = crate::stdio::contains(piece, MARK.as_bytes());
                assert!(
                    piece.len() <= bound || is_error,
                    "{}",
                    String::from_utf8_lossy(piece)
                );
            }
            let _ = response_id(&line, &line);
            let _ = starts_a_response(&line);
            let _ = tail_id(&line[..line.len() - 1]);
        }
    }
}
