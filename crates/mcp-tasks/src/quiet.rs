//! Task ids kept out of logs, whatever `tracing` subscriber the program
//! installs: the *quiet scope*.
//!
//! A task id is a bearer token: where the server binds nothing to callers,
//! whoever holds one can read and cancel the task. rmcp logs whole JSON-RPC
//! messages through `tracing`, and those carry task ids: its service loop
//! (target `rmcp::service`) logs each event at `trace` (every message in and
//! out), each request received and each result sent at `debug`, each
//! notification received at `info` (`notifications/tasks` names its task)
//! and a handler's error at `warn`; its Streamable HTTP server
//! (`rmcp::transport::streamable_http_server::tower`) logs each answer at
//! `trace`; its line transport (`rmcp::transport::async_rw`) an unreadable
//! line, whole, at `debug`; its client (`rmcp::service::client`) whatever a
//! server sends before the handshake ends at `warn`. A program that logs at
//! `debug` would write down every id of every task it makes or awaits. This
//! module stops that for the library's own types, without asking the
//! program to filter rmcp:
//!
//! * What runs **in the quiet scope** dispatches its `tracing` calls to a
//!   subscriber of ours that passes everything on to the subscriber the
//!   program had there (the thread's default, else the global one: where
//!   it would have gone anyway), except rmcp's events (targets `rmcp` and
//!   `rmcp::*`): below `warn` they are dropped; at `warn` and `error` they
//!   are passed on with every quoted string (`"..."`, `` `...` ``) in their
//!   message and fields replaced by `"…"`, and every id-shaped word (16 or
//!   more letters, digits, `-` and `_`, a digit among them) by `…`. Every
//!   other event and every span, the program's own included, reaches the
//!   program's subscriber as it was, under the same parents.
//! * rmcp runs its service loop, and each request's handler, on tasks of
//!   their own (`tokio::spawn`), which do not inherit a thread's default
//!   subscriber; but it instruments them with its `serve_inner` span, made
//!   before it spawns them. A span made in the quiet scope is ours, and our
//!   subscriber opens the scope again around every poll that enters it, on
//!   whatever thread: a service started in the scope stays in it for its
//!   whole life.
//! * The library starts its own rmcp services in the scope: the clients
//!   `TasksClient::connect` makes (feature `client`) and the gateway's
//!   upstream connections ([`gateway`][gateway]), which are built on
//!   it; the Streamable HTTP
//!   recipe (`server::http::StreamableHttpServer`, its router, and
//!   `server::http::serve*` for any router) runs each request and each
//!   streamed answer in it, with the service rmcp makes for each 2026-07-28
//!   request; and rmcp's sessions of initialize-era clients there, whose
//!   loop rmcp spawns with no span around it, are put in it at the end of
//!   their handshake.
//!
//! # What a program does
//!
//! A service the program starts with rmcp's own calls (`serve_client*`,
//! `ServiceExt::serve`) runs where the program runs it, so the program
//! starts it in the scope, with [`scope`]. A client:
//!
//! ```no_run
//! # async fn run(transport: tokio::io::DuplexStream) -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_tasks::TasksClient;
//! use rmcp::model::ProtocolVersion;
//! use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
//!
//! let lifecycle = ClientLifecycleMode::Discover {
//!     preferred_versions: vec![ProtocolVersion::V_2026_07_28],
//! };
//! let running = mcp_tasks::quiet::scope(serve_client_with_lifecycle((), transport, lifecycle)).await?;
//! let client = TasksClient::new(running);
//! # Ok(()) }
//! ```
//!
//! and a server on stdio, or on any rmcp transport:
//! `mcp_tasks::quiet::scope(server.serve(transport)).await?`. The calls of
//! a [`TasksClient`][TasksClient] need no scope of their own: rmcp
//! logs messages in its service loop, not in the caller's task. [`in_scope`]
//! does the same for a synchronous step.
//!
//! # Limits
//!
//! * A service started outside the scope logs what rmcp logs, as before;
//!   so does a program's own use of rmcp outside our types.
//! * rmcp's transport workers (the Streamable HTTP client's, a server
//!   session's) make their span inside the task they spawn, so they run
//!   outside the scope, and so does the handshake of a server session.
//!   What they log carries a message rarely: a server's message that comes
//!   before its answer to `initialize` (`debug`), and the error of a broken
//!   stream (`warn`).
//! * The scope needs rmcp's `serve_inner` span (at `info`) whatever the
//!   program's filter, so it asks for it: the process's maximum level is
//!   `info` at least (callsites no subscriber wants still cost one cached
//!   check). A program built with `tracing`'s static level features below
//!   `info` (`max_level_warn`, ...) removes that span, and rmcp's loops
//!   then run outside the scope: their events at the levels still compiled
//!   in (`warn`, `error`) reach the program unmasked.
//! * No subscriber at all: until the program installs one the scope does
//!   nothing, so that `tracing`'s fallback to the `log` crate keeps working
//!   for the rest of the program; rmcp's events then go to `log` as
//!   before. `tracing`'s `log-always` feature sends every event to `log`
//!   besides, out of any subscriber's reach. Install the subscriber before
//!   starting services.
//! * An event of rmcp's at `warn` or `error` that prints a peer's text
//!   unquoted (an error's `Display`) keeps that text but its id-shaped
//!   words.
//! * Our own events carry no task id: [`TaskId`](crate::TaskId) prints
//!   `<redacted>`, and no log line of ours prints a message.
//!
//! [gateway]: https://docs.rs/mcp-tasks/latest/mcp_tasks/gateway/index.html
//! [TasksClient]: https://docs.rs/mcp-tasks/latest/mcp_tasks/client/struct.TasksClient.html

use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};

use tracing::dispatcher::{self, DefaultGuard, Dispatch};
use tracing::field::{DisplayValue, Field, Value, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{Interest, Subscriber};
use tracing::{Event, Level, Metadata};
use tracing_core::span::Current;

pin_project_lite::pin_project! {
    /// A future whose every poll runs in the quiet scope; see [`scope`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        #[pin]
        future: F,
    }
}

impl<F> std::fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoped").finish_non_exhaustive()
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _scope = Activation::begin();
        self.project().future.poll(cx)
    }
}

/// Runs `future` in the quiet scope: rmcp's events below `warn` go
/// nowhere, its others lose their quoted strings and id-shaped words, and
/// what rmcp starts meanwhile (a service loop, a transport worker) stays in
/// the scope for its whole life. See the [module docs](self).
pub fn scope<F: Future>(future: F) -> Scoped<F> {
    Scoped { future }
}

/// Runs `step` in the quiet scope (see [`scope`]), for a synchronous step
/// that starts an rmcp task, such as making a
/// `StreamableHttpClientTransport`.
pub fn in_scope<R>(step: impl FnOnce() -> R) -> R {
    let _scope = Activation::begin();
    step()
}

/// Opens the scope on this thread until the next span of ours entered
/// here takes it over, and ends it at that span's exit: for the moment
/// between a future of ours that rmcp polls and the span rmcp creates right
/// after, synchronously, on a task it spawned without a span (the service
/// loop of an HTTP session, see `server::http`). Should no span of ours
/// follow, the next one entered on this thread ends it; meanwhile the
/// thread's events go on to the subscriber they went to before.
#[cfg(feature = "http-server")]
pub(crate) fn arm() {
    if activate(None) {
        let _ = THREAD.try_with(|thread| {
            if let Ok(mut thread) = thread.try_borrow_mut() {
                thread.armed += 1;
            }
        });
    }
}

/// Takes over an activation [`arm`] left open, if there is one.
fn disarm() -> bool {
    THREAD
        .try_with(|thread| {
            let Ok(mut thread) = thread.try_borrow_mut() else {
                return false;
            };
            let armed = thread.armed > 0;
            thread.armed = thread.armed.saturating_sub(1);
            armed
        })
        .unwrap_or(false)
}

/// Whether `metadata` is rmcp's.
fn from_rmcp(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    target == "rmcp" || target.starts_with("rmcp::")
}

/// Whether an rmcp event is passed on (masked) rather than dropped.
fn loud(metadata: &Metadata<'_>) -> bool {
    matches!(*metadata.level(), Level::WARN | Level::ERROR)
}

// ===== the thread's scope =====

/// What the scope is on one thread.
struct ThreadScope {
    /// How many activations are open (scopes polled, our spans entered).
    depth: usize,
    /// The subscriber events go on to: the thread's default before the
    /// first activation (or the one that made the span entered first).
    outer: Option<Dispatch>,
    /// Our subscriber as the thread's default, until the last activation ends.
    guard: Option<DefaultGuard>,
    /// Our spans entered on this thread, innermost last.
    entered: Vec<(u64, &'static Metadata<'static>)>,
    /// Activations opened by `arm` that the next span entered takes over.
    armed: usize,
}

thread_local! {
    static THREAD: RefCell<ThreadScope> = const {
        RefCell::new(ThreadScope {
            depth: 0,
            outer: None,
            guard: None,
            entered: Vec::new(),
            armed: 0,
        })
    };
}

/// Our subscriber, one per process (a subscriber's creation costs a pass
/// over every callsite).
fn quiet_dispatch() -> &'static Dispatch {
    static QUIET: OnceLock<Dispatch> = OnceLock::new();
    QUIET.get_or_init(|| Dispatch::new(Quiet::new()))
}

/// One open activation of the scope on this thread, ended when dropped.
struct Activation(bool);

impl Activation {
    /// Activates the scope, passing events on to the thread's current
    /// subscriber; nothing when no subscriber was ever installed.
    fn begin() -> Self {
        Self(activate(None))
    }
}

impl Drop for Activation {
    fn drop(&mut self) {
        if self.0 {
            deactivate();
        }
    }
}

/// Opens an activation; the first on the thread makes our subscriber its
/// default, passing events on to `outer` (else the current default).
/// Returns whether an activation was opened.
fn activate(outer: Option<Dispatch>) -> bool {
    if outer.is_none() && !dispatcher::has_been_set() {
        return false;
    }
    THREAD
        .try_with(|thread| {
            let Ok(mut thread) = thread.try_borrow_mut() else {
                return false;
            };
            thread.depth += 1;
            if thread.depth == 1 {
                let outer = outer.unwrap_or_else(current);
                thread.outer = Some(if outer.is::<Quiet>() {
                    Dispatch::none()
                } else {
                    outer
                });
                thread.guard = Some(dispatcher::set_default(quiet_dispatch()));
            }
            true
        })
        .unwrap_or(false)
}

/// Closes an activation; the last on the thread puts the thread's default
/// back.
fn deactivate() {
    let ended = THREAD.try_with(|thread| {
        let mut thread = thread.try_borrow_mut().ok()?;
        thread.depth = thread.depth.checked_sub(1)?;
        if thread.depth > 0 {
            return None;
        }
        Some((thread.guard.take(), thread.outer.take()))
    });
    // Dropped outside the borrow: putting the default back drops a
    // subscriber, which may log.
    drop(ended);
}

/// The thread's current default subscriber (the global one when it has
/// none).
fn current() -> Dispatch {
    dispatcher::get_default(Dispatch::clone)
}

/// The subscriber events go on to on this thread, while the scope is open.
fn outer() -> Option<Dispatch> {
    THREAD
        .try_with(|thread| thread.try_borrow().ok()?.outer.clone())
        .ok()
        .flatten()
}

/// The subscriber a span id that is not ours belongs to: the one events go
/// on to, else the thread's current default (unless that is ours).
fn foreign() -> Option<Dispatch> {
    outer().or_else(|| {
        let current = current();
        (!current.is::<Quiet>()).then_some(current)
    })
}

fn push_entered(id: u64, metadata: &'static Metadata<'static>) {
    let _ = THREAD.try_with(|thread| {
        if let Ok(mut thread) = thread.try_borrow_mut() {
            thread.entered.push((id, metadata));
        }
    });
}

fn pop_entered(id: u64) {
    let _ = THREAD.try_with(|thread| {
        if let Ok(mut thread) = thread.try_borrow_mut()
            && let Some(at) = thread
                .entered
                .iter()
                .rposition(|(entered, _)| *entered == id)
        {
            thread.entered.remove(at);
        }
    });
}

fn innermost_entered() -> Option<(u64, &'static Metadata<'static>)> {
    THREAD
        .try_with(|thread| thread.try_borrow().ok()?.entered.last().copied())
        .ok()
        .flatten()
}

// ===== the subscriber =====

/// A span created in the scope: ours, mirrored in the subscriber it was
/// created for when that one wants it.
struct Entry {
    inner: Dispatch,
    inner_id: Option<Id>,
    metadata: &'static Metadata<'static>,
    refs: usize,
}

/// The scope's subscriber: passes everything on but rmcp's events, and
/// keeps the scope around every poll of a span made in it.
struct Quiet {
    spans: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

/// Where an event or a span sits, as the subscriber it goes on to reads it.
enum Parent {
    /// As it came: contextual, a root, or a parent that is not ours.
    AsIs,
    /// Under this span of the outer subscriber (`None`: a root there).
    Explicit(Option<Id>),
}

impl Quiet {
    fn new() -> Self {
        // Ids of ours start at a random point with the top bit set, so that
        // an id of another subscriber that reaches us (a parent named
        // explicitly) is hardly ever taken for ours.
        let start = RandomState::new().hash_one(0x6d63_7074_u64) | (1 << 63);
        Self {
            spans: Mutex::new(HashMap::new()),
            next: AtomicU64::new(start),
        }
    }

    fn spans(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The span `id` if it is ours: its subscriber, its id there, its metadata.
    fn lookup(&self, id: &Id) -> Option<(Dispatch, Option<Id>, &'static Metadata<'static>)> {
        self.spans()
            .get(&id.into_u64())
            .map(|entry| (entry.inner.clone(), entry.inner_id.clone(), entry.metadata))
    }

    /// How a parent named explicitly reads in the outer subscriber.
    fn parent(&self, parent: Option<&Id>) -> Parent {
        let Some(parent) = parent else {
            return Parent::AsIs;
        };
        match self.lookup(parent) {
            Some((_, inner_id, _)) => Parent::Explicit(inner_id),
            None => Parent::AsIs,
        }
    }
}

impl Subscriber for Quiet {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        // rmcp's callsites are asked about each time (its spans are wanted
        // in the scope whatever the program's filter); the others are for
        // the program's subscriber alone to want.
        if from_rmcp(metadata) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        if from_rmcp(metadata) && metadata.is_span() {
            return true;
        }
        if from_rmcp(metadata) && !loud(metadata) {
            return false;
        }
        outer().is_some_and(|outer| outer.enabled(metadata))
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // rmcp's `serve_inner` span is at info.
        Some(LevelFilter::INFO)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let metadata = span.metadata();
        let inner = outer().unwrap_or_else(Dispatch::none);
        let inner_id = inner.enabled(metadata).then(|| {
            match self.parent(span.parent()) {
                Parent::AsIs => inner.new_span(span),
                Parent::Explicit(Some(parent)) => {
                    inner.new_span(&Attributes::child_of(parent, metadata, span.values()))
                }
                // A parent of ours the outer subscriber does not have.
                Parent::Explicit(None) => inner.new_span(&Attributes::new(metadata, span.values())),
            }
        });
        let id = self.next.fetch_add(1, Ordering::Relaxed).max(1);
        self.spans().insert(
            id,
            Entry {
                inner,
                inner_id,
                metadata,
                refs: 1,
            },
        );
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        match self.lookup(span) {
            Some((inner, Some(inner_id), _)) => inner.record(&inner_id, values),
            Some(_) => {}
            None => {
                if let Some(foreign) = foreign() {
                    foreign.record(span, values);
                }
            }
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        let follows = match self.lookup(follows) {
            Some((_, Some(inner_id), _)) => inner_id,
            Some(_) => return,
            None => follows.clone(),
        };
        match self.lookup(span) {
            Some((inner, Some(inner_id), _)) => inner.record_follows_from(&inner_id, &follows),
            Some(_) => {}
            None => {
                if let Some(foreign) = foreign() {
                    foreign.record_follows_from(span, &follows);
                }
            }
        }
    }

    fn event_enabled(&self, _event: &Event<'_>) -> bool {
        // Decided in `event`, and by the outer subscriber's `Dispatch::event`.
        true
    }

    fn event(&self, event: &Event<'_>) {
        let Some(outer) = outer() else {
            return;
        };
        let metadata = event.metadata();
        let rmcp = from_rmcp(metadata);
        if rmcp && !loud(metadata) {
            return;
        }
        let parent = if event.is_contextual() {
            Parent::AsIs
        } else {
            self.parent(event.parent())
        };
        if !rmcp && matches!(parent, Parent::AsIs) {
            outer.event(event);
            return;
        }
        rebuilt(event, parent, rmcp, |event| outer.event(event));
    }

    fn enter(&self, span: &Id) {
        match self.lookup(span) {
            Some((inner, inner_id, metadata)) => {
                if !disarm() {
                    activate(Some(inner.clone()));
                }
                push_entered(span.into_u64(), metadata);
                if let Some(inner_id) = inner_id {
                    inner.enter(&inner_id);
                }
            }
            None => {
                activate(foreign());
                if let Some(outer) = outer() {
                    outer.enter(span);
                }
            }
        }
    }

    fn exit(&self, span: &Id) {
        match self.lookup(span) {
            Some((inner, inner_id, _)) => {
                if let Some(inner_id) = inner_id {
                    inner.exit(&inner_id);
                }
                pop_entered(span.into_u64());
            }
            None => {
                if let Some(outer) = outer() {
                    outer.exit(span);
                }
            }
        }
        deactivate();
    }

    fn clone_span(&self, span: &Id) -> Id {
        let ours = self.spans().get_mut(&span.into_u64()).map(|entry| {
            entry.refs += 1;
            (entry.inner.clone(), entry.inner_id.clone())
        });
        match ours {
            Some((inner, inner_id)) => {
                if let Some(inner_id) = inner_id {
                    inner.clone_span(&inner_id);
                }
                span.clone()
            }
            None => foreign().map_or_else(|| span.clone(), |foreign| foreign.clone_span(span)),
        }
    }

    fn try_close(&self, span: Id) -> bool {
        let ours = {
            let mut spans = self.spans();
            let key = span.into_u64();
            match spans.get_mut(&key) {
                Some(entry) => {
                    entry.refs = entry.refs.saturating_sub(1);
                    let closed = entry.refs == 0;
                    let inner = (entry.inner.clone(), entry.inner_id.clone());
                    let removed = if closed { spans.remove(&key) } else { None };
                    Some((inner, closed, removed))
                }
                None => None,
            }
        };
        match ours {
            Some(((inner, inner_id), closed, removed)) => {
                drop(removed);
                if let Some(inner_id) = inner_id {
                    inner.try_close(inner_id);
                }
                closed
            }
            None => foreign().is_some_and(|foreign| foreign.try_close(span)),
        }
    }

    fn current_span(&self) -> Current {
        if let Some((id, metadata)) = innermost_entered() {
            return Current::new(Id::from_u64(id), metadata);
        }
        outer().map_or_else(Current::none, |outer| outer.current_span())
    }
}

// ===== passing an event on =====

/// A value of an event passed on again.
enum Kept {
    I64(i64),
    U64(u64),
    I128(i128),
    U128(u128),
    F64(f64),
    Bool(bool),
    Str(String),
    Text(DisplayValue<String>),
}

impl Kept {
    fn as_value(&self) -> &dyn Value {
        match self {
            Self::I64(value) => value,
            Self::U64(value) => value,
            Self::I128(value) => value,
            Self::U128(value) => value,
            Self::F64(value) => value,
            Self::Bool(value) => value,
            Self::Str(value) => value,
            Self::Text(value) => value,
        }
    }
}

/// Reads an event's values, masked or not.
struct Collect {
    mask: bool,
    values: Vec<(Field, Kept)>,
}

impl Collect {
    fn text(&self, text: String) -> String {
        if self.mask { mask(&text) } else { text }
    }
}

impl Visit for Collect {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.values.push((field.clone(), Kept::I64(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.values.push((field.clone(), Kept::U64(value)));
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.values.push((field.clone(), Kept::I128(value)));
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.values.push((field.clone(), Kept::U128(value)));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.values.push((field.clone(), Kept::F64(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.values.push((field.clone(), Kept::Bool(value)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        let value = self.text(value.to_owned());
        self.values.push((field.clone(), Kept::Str(value)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let value = self.text(format!("{value:?}"));
        self.values
            .push((field.clone(), Kept::Text(tracing::field::display(value))));
    }
}

/// The most values an event passed on again keeps (rmcp's have a few).
const MAX_VALUES: usize = 32;

/// Passes `event` on as a new event with the same metadata: its values
/// read (and masked, with `mask`), its parent as the outer subscriber
/// knows it.
fn rebuilt(event: &Event<'_>, parent: Parent, mask: bool, pass: impl FnOnce(&Event<'_>)) {
    let metadata = event.metadata();
    let mut collect = Collect {
        mask,
        values: Vec::new(),
    };
    event.record(&mut collect);
    let Some(first) = metadata.fields().iter().next() else {
        // No fields, nothing to mask: only the parent to set.
        let none: [(&Field, Option<&dyn Value>); 0] = [];
        let values = metadata.fields().value_set(&none);
        return pass(&with_parent(parent, metadata, &values));
    };
    let mut slots: [(&Field, Option<&dyn Value>); MAX_VALUES] = [(&first, None); MAX_VALUES];
    for (slot, (field, kept)) in slots.iter_mut().zip(&collect.values) {
        *slot = (field, Some(kept.as_value()));
    }
    let values = metadata.fields().value_set(&slots);
    pass(&with_parent(parent, metadata, &values));
}

fn with_parent<'a>(
    parent: Parent,
    metadata: &'static Metadata<'static>,
    values: &'a tracing::field::ValueSet<'a>,
) -> Event<'a> {
    match parent {
        Parent::AsIs => Event::new(metadata, values),
        Parent::Explicit(parent) => Event::new_child_of(parent, metadata, values),
    }
}

/// `text` with every quoted string (`"..."`, `` `...` ``, escapes read)
/// replaced by `"…"` (`` `…` ``), and every id-shaped word (16 or more
/// ASCII letters, digits, `-` and `_`, at least one a digit) by `…`.
fn mask(text: &str) -> String {
    let mut masked = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, masked: &mut String| {
        if word.len() >= 16 && word.bytes().any(|byte| byte.is_ascii_digit()) {
            masked.push('…');
        } else {
            masked.push_str(word);
        }
        word.clear();
    };
    while let Some(c) = chars.next() {
        if c == '"' || c == '`' {
            flush(&mut word, &mut masked);
            // Skip to the closing quote (a backslash escapes the next character).
            while let Some(inner) = chars.next() {
                if inner == '\\' {
                    chars.next();
                } else if inner == c {
                    break;
                }
            }
            masked.push(c);
            masked.push('…');
            masked.push(c);
        } else if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut masked);
            masked.push(c);
        }
    }
    flush(&mut word, &mut masked);
    masked
}

#[cfg(test)]
mod tests;
