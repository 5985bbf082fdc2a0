//! The open connections of the serving recipe ([`serve`](super::serve) and
//! its kin): which are idle, which one to close to make room at the bound,
//! and when a connection has waited too long for a request.
//!
//! Each connection is in one of four states, one atomic word it shares
//! with the registry ([`Connections`]):
//!
//! | state | from | until | closed after |
//! |---|---|---|---|
//! | fresh | its accept | the first byte of its first request | the read timeout, from the accept |
//! | reading | the first byte of a request | its headers are read | the read timeout, from that byte (from the accept for a first request) |
//! | busy | its headers are read | its answer is written (a listen stream: until it ends) | never by a timer |
//! | idle | its answer is written | the first byte of the next request | the idle timeout |
//!
//! At the bound a new connection makes room as nginx does: the connection
//! idle (or fresh) for the longest is closed and the new one admitted in
//! its place; only when every open connection is busy or reading is the new
//! one refused (503, see [`serve_with_limits`](super::serve_with_limits)).
//! A connection in the middle of a request is never closed for another.
//!
//! Why by hand: hyper 1's only timer, `header_read_timeout`, runs from the
//! moment a kept-alive connection goes idle to the end of the next
//! request's headers, so it cannot tell an idle connection from a slow
//! request, and hyper has no registry of connections to pick one to close.
//! The timers here are lazy (one sleep per connection, armed again only
//! when it fires, at the latest after the shorter of the two timeouts;
//! never reset per request), and the cost on the hot path is
//! three relaxed atomic stores and two clock reads per request; the
//! registry's lock is taken when a connection opens and when it closes.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a connection's timer sleeps at least before it looks again
/// (a zero timeout would otherwise spin).
const LEAST_NAP: Duration = Duration::from_millis(10);

/// A connection's state, with the millisecond (since the registry's epoch)
/// it entered it: packed into one `u64`, the state in the top two bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Busy,
    Fresh(u64),
    Reading(u64),
    Idle(u64),
}

const STAMP: u64 = (1 << 62) - 1;

impl State {
    fn pack(self) -> u64 {
        match self {
            State::Busy => 0,
            State::Fresh(at) => (1 << 62) | (at & STAMP),
            State::Reading(at) => (2 << 62) | (at & STAMP),
            State::Idle(at) => (3 << 62) | (at & STAMP),
        }
    }

    fn unpack(word: u64) -> Self {
        let at = word & STAMP;
        match word >> 62 {
            0 => State::Busy,
            1 => State::Fresh(at),
            2 => State::Reading(at),
            _ => State::Idle(at),
        }
    }

    /// Since when it may be closed to make room, if it may.
    fn idle_since(self) -> Option<u64> {
        match self {
            State::Fresh(at) | State::Idle(at) => Some(at),
            State::Busy | State::Reading(_) => None,
        }
    }
}

/// What one connection shares with the registry.
#[derive(Debug)]
pub(super) struct Connection {
    state: AtomicU64,
    /// Told when the connection is closed to make room.
    evicted: Notify,
    epoch: Instant,
}

impl Connection {
    fn state(&self) -> State {
        State::unpack(self.state.load(Ordering::Relaxed))
    }

    fn set(&self, state: State) {
        self.state.store(state.pack(), Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        millis(self.epoch.elapsed())
    }

    /// A request's headers are read: it is answered from now on.
    pub(super) fn busy(&self) {
        self.set(State::Busy);
    }

    /// Its answer is written (or dropped).
    fn answered(&self) {
        self.set(State::Idle(self.now()));
    }

    /// Bytes arrived: a fresh or idle connection is reading a request.
    fn bytes_arrived(&self) {
        match self.state() {
            State::Fresh(at) => self.set(State::Reading(at)),
            State::Idle(_) => self.set(State::Reading(self.now())),
            State::Busy | State::Reading(_) => {}
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(STAMP)
}

/// The open connections, at most `max`, with their timeouts.
#[derive(Debug)]
pub(super) struct Connections {
    max: usize,
    idle_timeout: Duration,
    read_timeout: Duration,
    epoch: Instant,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    next: u64,
    by_id: HashMap<u64, Arc<Connection>>,
}

impl Connections {
    /// At most `max` connections (at least one), each closed once idle for
    /// `idle_timeout`, or once a request's headers have taken
    /// `read_timeout`.
    pub(super) fn new(max: usize, idle_timeout: Duration, read_timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            idle_timeout,
            read_timeout,
            epoch: Instant::now(),
            open: Mutex::default(),
        })
    }

    /// A seat for a connection accepted now: a free one, or the one of the
    /// connection idle for the longest, which is told to close; `None`
    /// when every open connection is busy or reading a request.
    pub(super) fn admit(self: &Arc<Self>) -> Option<Seat> {
        let connection = Arc::new(Connection {
            state: AtomicU64::new(State::Fresh(millis(self.epoch.elapsed())).pack()),
            evicted: Notify::new(),
            epoch: self.epoch,
        });
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.by_id.len() >= self.max && !evict_the_longest_idle(&mut open.by_id) {
            return None;
        }
        let id = open.next;
        open.next += 1;
        open.by_id.insert(id, Arc::clone(&connection));
        drop(open);
        Some(Seat {
            connections: Arc::clone(self),
            id,
            connection,
        })
    }

    /// How many connections hold a seat.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_id
            .len()
    }
}

/// Takes the seat of the connection idle (or fresh) for the longest and
/// tells it to close; false when none is.
fn evict_the_longest_idle(by_id: &mut HashMap<u64, Arc<Connection>>) -> bool {
    // A candidate that starts a request meanwhile is passed over, and the
    // search starts again; a few rounds are plenty.
    for _ in 0..8 {
        let Some((id, word)) = by_id
            .iter()
            .filter_map(|(id, connection)| {
                let word = connection.state.load(Ordering::Relaxed);
                State::unpack(word).idle_since().map(|at| (at, *id, word))
            })
            .min()
            .map(|(_, id, word)| (id, word))
        else {
            return false;
        };
        let Some(connection) = by_id.get(&id) else {
            continue;
        };
        if connection
            .state
            .compare_exchange(
                word,
                State::Busy.pack(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            connection.evicted.notify_one();
            by_id.remove(&id);
            return true;
        }
    }
    false
}

/// A connection's place among the open ones; given back when dropped.
#[derive(Debug)]
pub(super) struct Seat {
    connections: Arc<Connections>,
    id: u64,
    connection: Arc<Connection>,
}

impl Seat {
    /// The connection's shared state.
    pub(super) fn connection(&self) -> &Arc<Connection> {
        &self.connection
    }

    /// Completes when the connection is to close to make room for another
    /// (see [`Connections::admit`]).
    pub(super) async fn evicted(&self) {
        self.connection.evicted.notified().await;
    }

    /// Completes when the connection has waited too long: idle past the
    /// idle timeout, or its request's headers past the read timeout.
    pub(super) async fn timed_out(&self) {
        let limits = &self.connections;
        let nap = limits.idle_timeout.min(limits.read_timeout).max(LEAST_NAP);
        loop {
            let due = match self.connection.state() {
                State::Busy => None,
                State::Fresh(at) | State::Reading(at) => Some((at, limits.read_timeout)),
                State::Idle(at) => Some((at, limits.idle_timeout)),
            };
            let Some((at, timeout)) = due else {
                tokio::time::sleep(nap).await;
                continue;
            };
            let deadline = limits.epoch + Duration::from_millis(at) + timeout;
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            // A new state may bring its deadline closer (a request read
            // and answered within the read timeout, idle for less): never
            // longer than the shorter timeout without looking again.
            tokio::time::sleep_until(deadline.min(now + nap)).await;
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Already gone when it was closed to make room.
        open.by_id.remove(&self.id);
    }
}

/// A connection's socket, which notes when a request's first bytes arrive.
#[derive(Debug)]
pub(super) struct Watched<S> {
    stream: S,
    connection: Arc<Connection>,
}

impl<S> Watched<S> {
    pub(super) fn new(stream: S, connection: Arc<Connection>) -> Self {
        Self { stream, connection }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.connection.bytes_arrived();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// An answer's body, which marks its connection idle once written (or
/// dropped).
#[derive(Debug)]
pub(super) struct Answered {
    body: Body,
    connection: Arc<Connection>,
}

impl Answered {
    pub(super) fn new(body: Body, connection: Arc<Connection>) -> Self {
        Self { body, connection }
    }
}

impl HttpBody for Answered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Answered {
    fn drop(&mut self) {
        self.connection.answered();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(75);
    const READ: Duration = Duration::from_secs(30);

    #[test]
    fn a_state_packs_into_one_word_and_back() {
        for state in [
            State::Busy,
            State::Fresh(0),
            State::Fresh(STAMP),
            State::Reading(12_345),
            State::Idle(1),
        ] {
            assert_eq!(State::unpack(state.pack()), state);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_the_longest_idle_connection_makes_room() {
        let connections = Connections::new(3, IDLE, READ);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        let third = connections.admit().unwrap();
        for seat in [&first, &second, &third] {
            seat.connection().busy();
        }
        // The first is answered at 1 s, the third at 2 s; the second stays busy.
        tokio::time::advance(Duration::from_secs(1)).await;
        first.connection().answered();
        tokio::time::advance(Duration::from_secs(1)).await;
        third.connection().answered();
        tokio::time::advance(Duration::from_secs(1)).await;

        let fourth = connections.admit().expect("room made");
        assert_eq!(connections.len(), 3);
        tokio::time::timeout(Duration::ZERO, first.evicted())
            .await
            .expect("the longest idle is told to close");
        assert!(
            tokio::time::timeout(Duration::ZERO, third.evicted())
                .await
                .is_err(),
            "the others stay"
        );
        // Fresh since 3 s, the fourth has been idle less long than the third.
        tokio::time::advance(Duration::from_secs(1)).await;
        let fifth = connections.admit().expect("room made");
        tokio::time::timeout(Duration::ZERO, third.evicted())
            .await
            .expect("then the next longest idle");
        // Left: the busy second, the fourth reading a request, the fifth
        // busy: none is closed for another.
        fourth.connection().bytes_arrived();
        fifth.connection().busy();
        assert!(connections.admit().is_none(), "none idle: refused");
        fifth.connection().answered();
        let sixth = connections.admit().expect("the fifth, idle, makes room");
        tokio::time::timeout(Duration::ZERO, fifth.evicted())
            .await
            .expect("told to close");
        assert_eq!(connections.len(), 3);
        drop((second, sixth));
        assert_eq!(
            connections.len(),
            1,
            "a closed connection gives its seat back"
        );
        drop(first);
        assert_eq!(connections.len(), 1, "an evicted one had given it already");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_closes_after_the_idle_timeout_from_its_last_answer() {
        let connections = Connections::new(8, IDLE, READ);
        let seat = connections.admit().unwrap();
        let connection = Arc::clone(seat.connection());
        connection.busy();
        let started = Instant::now();
        let closing = tokio::spawn(async move {
            seat.timed_out().await;
            Instant::now()
        });
        // Busy for ten minutes: no timer closes it.
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(!closing.is_finished());
        connection.answered();
        // A second request 70 s later, answered in 1 s: idle again from then.
        tokio::time::sleep(Duration::from_secs(70)).await;
        assert!(!closing.is_finished());
        connection.bytes_arrived();
        connection.busy();
        tokio::time::sleep(Duration::from_secs(1)).await;
        connection.answered();
        let answered = Instant::now();
        let closed = closing.await.unwrap();
        assert_eq!(closed - answered, IDLE, "75 s after its last answer");
        assert_eq!(closed - started, Duration::from_secs(600 + 70 + 1) + IDLE);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_timeout_shorter_than_the_read_timeout_counts_from_the_answer() {
        const SHORT: Duration = Duration::from_secs(1);
        let connections = Connections::new(8, SHORT, READ);
        let seat = connections.admit().unwrap();
        let connection = Arc::clone(seat.connection());
        // Its timer looks first while it is fresh (30 s to go)...
        let closing = tokio::spawn(async move {
            seat.timed_out().await;
            Instant::now()
        });
        tokio::task::yield_now().await;
        // ...then its first request is read and answered at once.
        connection.bytes_arrived();
        connection.busy();
        connection.answered();
        let answered = Instant::now();
        assert_eq!(closing.await.unwrap() - answered, SHORT);
    }

    #[tokio::test(start_paused = true)]
    async fn headers_must_arrive_within_the_read_timeout() {
        let connections = Connections::new(8, IDLE, READ);
        // Fresh: from its accept, whether bytes came or not.
        let silent = connections.admit().unwrap();
        let slow = connections.admit().unwrap();
        tokio::time::advance(Duration::from_secs(10)).await;
        slow.connection().bytes_arrived();
        let accepted = Instant::now() - Duration::from_secs(10);
        silent.timed_out().await;
        assert_eq!(accepted.elapsed(), READ);
        slow.timed_out().await;
        assert_eq!(accepted.elapsed(), READ);
        // Kept alive: idle, then a request's first bytes start the clock.
        let kept = connections.admit().unwrap();
        kept.connection().busy();
        kept.connection().answered();
        tokio::time::advance(Duration::from_secs(60)).await;
        kept.connection().bytes_arrived();
        let first_byte = Instant::now();
        kept.timed_out().await;
        assert_eq!(first_byte.elapsed(), READ);
    }
}
