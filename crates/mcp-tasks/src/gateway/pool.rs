//! The connections that carry calls of plain tools, one call each: a
//! [`Pool`] of upstream connections. The gateway's own connection (which
//! lists the tools and hears `list_changed`) is one of them, unless the
//! upstream makes tasks itself: then it carries the calls that await the
//! upstream's tasks (their input names their task), and the pool's
//! connections are further ones.
//!
//! An upstream's request (elicitation, sampling) names no call; on a
//! connection that carries one call at a time it can only belong to it,
//! so it is relayed to it exactly, never guessed. A call
//! [leases](Pool::lease) a connection for as long as it runs: an idle one,
//! else a new one (a further child process for a stdio upstream, a further
//! session for an HTTP one), up to
//! [`GatewayOptions::max_upstream_connections`]; past the bound it waits
//! for one to come free (a task stays `working`, its status message saying
//! so). A connection goes back to the pool only when the upstream answered
//! its call: one whose call was cancelled (the upstream may still ask on
//! its behalf) is closed once `notifications/cancelled` is sent, and one
//! that died is dropped. A further connection idle for
//! [`GatewayOptions::idle_connection_timeout`] is closed (the gateway's own
//! stays open). New connections follow the same backoff as the
//! gateway's own after failures (an attempt that fails, or a connection
//! that closes soon after it opened), and an HTTP upstream's are pinged
//! like the gateway's own ([`GatewayOptions::health_check`]).
//!
//! An upstream that speaks both eras ([`Eras::Both`]) has connections of
//! each in the pool, and a call [leases](Pool::lease) one of the era it
//! needs ([`Pool::era_for`]): 2025-era, unless it carries MRTR answers or
//! its tool asked by MRTR before.

use std::collections::HashSet;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CancelledNotificationParam, RequestId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::GatewayOptions;
use super::connection::{
    CallEra, Connection, Eras, Lifecycle, Shared, Upstream, backoff, cannot_connect, connect,
};

/// The connections for calls, idle and leased (see the [module](self) docs).
pub(crate) struct Pool {
    upstream: Upstream,
    shared: Shared,
    options: GatewayOptions,
    eras: Eras,
    /// The tools that asked by MRTR on a 2026-07-28 connection after a
    /// 2025-era one refused them (with [`Eras::Both`]): called on
    /// 2026-07-28 from then on.
    mrtr_tools: Mutex<HashSet<String>>,
    /// One permit per connection that may carry a call.
    permits: Arc<Semaphore>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Idle connections, with when each came back.
    idle: Vec<(Arc<Connection>, Instant)>,
    /// Failed attempts (or connections that closed soon after they
    /// opened) in a row, and when the next attempt may be made.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Pool {
    pub(crate) fn new(
        upstream: Upstream,
        shared: Shared,
        options: GatewayOptions,
        eras: Eras,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(options.max_upstream_connections.max(1)));
        Self {
            upstream,
            shared,
            options,
            eras,
            mrtr_tools: Mutex::default(),
            permits,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The bound on connections that carry calls.
    pub(crate) fn bound(&self) -> usize {
        self.options.max_upstream_connections.max(1)
    }

    /// Whether no connection is leased or idle.
    pub(crate) fn is_unused(&self) -> bool {
        self.permits.available_permits() == self.bound() && self.lock().idle.is_empty()
    }

    /// The eras the upstream speaks.
    pub(crate) fn eras(&self) -> Eras {
        self.eras
    }

    /// The era of the connection `request` starts on: with [`Eras::Both`],
    /// 2026-07-28 for a retry carrying MRTR answers and for a tool that
    /// asked by MRTR before, 2025-era otherwise.
    pub(crate) fn era_for(&self, request: &CallToolRequestParams) -> CallEra {
        match self.eras {
            Eras::Handshake => CallEra::Handshake,
            Eras::Modern => CallEra::Modern,
            Eras::Both => {
                if request.input_responses.is_some()
                    || request.request_state.is_some()
                    || self.asks_by_mrtr(&request.name)
                {
                    CallEra::Modern
                } else {
                    CallEra::Handshake
                }
            }
        }
    }

    fn asks_by_mrtr(&self, tool: &str) -> bool {
        self.mrtr_tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(tool)
    }

    /// Notes that `tool`, refused on a 2025-era connection, asked by MRTR
    /// on a 2026-07-28 one: its calls start there from now on.
    pub(crate) fn learn_mrtr(&self, tool: &str) {
        let learned = self
            .mrtr_tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(tool.to_owned());
        if learned {
            tracing::debug!(tool, "asks by MRTR: called on 2026-07-28 from now on");
        }
    }

    /// A connection's place if one is free now, without waiting.
    pub(crate) fn try_permit(self: &Arc<Self>) -> Option<Permit> {
        self.permits.clone().try_acquire_owned().ok().map(Permit)
    }

    /// Waits for a connection's place.
    pub(crate) async fn permit(self: &Arc<Self>) -> Permit {
        match self.permits.clone().acquire_owned().await {
            Ok(permit) => Permit(permit),
            // The semaphore is never closed.
            Err(_) => unreachable!("the pool's semaphore is never closed"),
        }
    }

    /// Waits for a free connection of `era`: an idle one, else a new one.
    pub(crate) async fn lease(self: &Arc<Self>, era: CallEra) -> Result<Lease, ErrorData> {
        let permit = self.permit().await;
        self.lease_with(permit, era).await
    }

    /// A connection of `era` for the place `permit`: an idle one, else a
    /// new one (an idle one of the other era is closed to make room when
    /// the pool is full).
    pub(crate) async fn lease_with(
        self: &Arc<Self>,
        permit: Permit,
        era: CallEra,
    ) -> Result<Lease, ErrorData> {
        // Only an upstream of both eras has connections of each.
        let fits = |connection: &Connection| self.eras != Eras::Both || connection.era() == era;
        let retry_at = {
            let mut state = self.lock();
            let mut closed = Vec::new();
            state.idle.retain(|(connection, _)| {
                let open = !connection.is_closed();
                if !open {
                    closed.push(connection.clone());
                }
                open
            });
            for connection in closed {
                self.note_closed(&mut state, &connection);
            }
            if let Some(at) = state
                .idle
                .iter()
                .rposition(|(connection, _)| fits(connection))
            {
                let (connection, _) = state.idle.remove(at);
                return Ok(self.leased(connection, permit));
            }
            // A new one is about to open: past the bound (the leased ones,
            // this one among them, and the idle ones), the oldest idle one
            // of the other era that is not the gateway's own is closed.
            let leased = self.bound() - self.permits.available_permits();
            if state.idle.len() + leased > self.bound()
                && let Some(at) = state.idle.iter().position(|(connection, _)| {
                    !connection.own.load(std::sync::atomic::Ordering::Acquire)
                })
            {
                let (connection, _) = state.idle.remove(at);
                connection
                    .retired
                    .store(true, std::sync::atomic::Ordering::Release);
                drop(connection);
            }
            state.retry_at
        };
        if let Some(at) = retry_at {
            tokio::time::sleep_until(at).await;
        }
        let lifecycle = Lifecycle::of(self.eras, era);
        match connect(&self.upstream, &self.shared, &self.options, lifecycle).await {
            Ok(connection) => {
                let connection = Arc::new(connection);
                self.lock().retry_at = None;
                if matches!(self.upstream, Upstream::Url { .. })
                    && !self.options.health_check.is_zero()
                {
                    tokio::spawn(watch(
                        Arc::downgrade(&connection),
                        self.options.health_check,
                    ));
                }
                Ok(self.leased(connection, permit))
            }
            Err(error) => {
                let mut state = self.lock();
                state.failures = state.failures.saturating_add(1);
                let pause = self.backoff(state.failures);
                state.retry_at = Some(Instant::now() + pause);
                tracing::warn!(%error, retry_in = ?pause, "cannot open a further connection to the upstream server");
                Err(cannot_connect(&self.shared.health.name, &error))
            }
        }
    }

    fn leased(self: &Arc<Self>, connection: Arc<Connection>, permit: Permit) -> Lease {
        metrics::gauge!(
            crate::telemetry::names::UPSTREAM_IN_USE,
            "upstream" => self.shared.health.name.to_string()
        )
        .increment(1.0);
        Lease {
            connection: Some(connection),
            pool: self.clone(),
            outstanding: Mutex::new(None),
            _permit: permit,
        }
    }

    fn backoff(&self, failures: u32) -> Duration {
        backoff(
            self.options.restart_backoff_min,
            self.options.restart_backoff_max,
            failures,
        )
    }

    /// A connection that closed: one that closed soon after it opened
    /// counts as a failure, one that ran a while clears the count.
    fn note_closed(&self, state: &mut State, connection: &Connection) {
        if connection
            .retired
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        if connection.opened.elapsed() < self.options.restart_backoff_max {
            state.failures = state.failures.saturating_add(1);
            state.retry_at = Some(Instant::now() + self.backoff(state.failures));
        } else {
            state.failures = 0;
        }
    }

    fn release(self: &Arc<Self>, connection: Arc<Connection>) {
        let mut state = self.lock();
        if connection.is_closed() {
            self.note_closed(&mut state, &connection);
        } else if state.idle.len() < self.bound() {
            state.idle.push((connection, Instant::now()));
            let timeout = self.options.idle_connection_timeout;
            if !timeout.is_zero() {
                tokio::spawn(reap(Arc::downgrade(self), timeout));
            }
        }
    }

    /// Takes a further connection in as idle (closed when idle too long).
    pub(crate) fn keep(self: &Arc<Self>, connection: Arc<Connection>) {
        self.release(connection);
    }

    /// Takes the gateway's own connection into the pool, unless the
    /// upstream makes tasks (see the [module](self) docs).
    pub(crate) fn adopt(&self, connection: &Arc<Connection>) {
        if !connection.makes_tasks() {
            connection
                .own
                .store(true, std::sync::atomic::Ordering::Release);
            let mut state = self.lock();
            state.idle.retain(|(idle, _)| !idle.is_closed());
            if state.idle.len() < self.bound() {
                state.idle.push((connection.clone(), Instant::now()));
            }
        }
    }

    /// Closes the further connections idle for `timeout` or longer (the
    /// gateway's own stays).
    fn close_idle(&self, timeout: Duration) {
        let idle = {
            let mut state = self.lock();
            let (keep, close): (Vec<_>, Vec<_>) = std::mem::take(&mut state.idle)
                .into_iter()
                .partition(|(connection, since)| {
                    connection.own.load(std::sync::atomic::Ordering::Acquire)
                        || since.elapsed() < timeout
                });
            state.idle = keep;
            close
        };
        if !idle.is_empty() {
            tracing::debug!(
                closed = idle.len(),
                "closing idle connections to the upstream server"
            );
        }
        for (connection, _) in idle {
            connection
                .retired
                .store(true, std::sync::atomic::Ordering::Release);
            drop(connection);
        }
    }
}

/// A place for one connection in the [`Pool`].
pub(crate) struct Permit(#[allow(dead_code, reason = "held for its drop")] OwnedSemaphorePermit);

/// A connection leased to one call; dropped, it goes back to the pool
/// (see the [module](self) docs).
pub(crate) struct Lease {
    connection: Option<Arc<Connection>>,
    pool: Arc<Pool>,
    /// The upstream request of the call that has not been answered yet.
    outstanding: Mutex<Option<RequestId>>,
    _permit: Permit,
}

impl Lease {
    /// The connection failed under the call (a request could not be
    /// sent): it is given up, so the next call opens another, and the
    /// upstream's breaker counts it.
    pub(crate) fn connection_failed(&self) {
        if let Some(connection) = &self.connection {
            connection.closed.cancel();
        }
        self.pool.shared.health.failed();
    }

    /// The call sent request `id`, not answered yet: if the lease is
    /// dropped before [`Lease::answered`], the request is cancelled and the
    /// connection closed.
    pub(crate) fn sent(&self, id: RequestId) {
        *self
            .outstanding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(id);
    }

    /// The upstream answered the call's request (or the connection closed).
    pub(crate) fn answered(&self) {
        *self
            .outstanding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

impl Deref for Lease {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match &self.connection {
            Some(connection) => connection,
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        metrics::gauge!(
            crate::telemetry::names::UPSTREAM_IN_USE,
            "upstream" => self.pool.shared.health.name.to_string()
        )
        .decrement(1.0);
        let Some(connection) = self.connection.take() else {
            return;
        };
        let outstanding = self
            .outstanding
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(id) = outstanding else {
            self.pool.release(connection);
            return;
        };
        // The call was dropped before the upstream answered: cancel its
        // request, then close the connection (the upstream may still ask
        // on the cancelled call's behalf, and a request on a connection
        // cannot be told apart from the next call's).
        if connection.is_closed() {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the gateway's call was cancelled".into()),
                );
                let peer = connection.client.running().peer().clone();
                let _ = tokio::time::timeout(Duration::from_secs(5), peer.notify_cancelled(params))
                    .await;
                // Given up, also where the gateway holds it as its own
                // connection (which is then made again, at once).
                connection
                    .retired
                    .store(true, std::sync::atomic::Ordering::Release);
                connection.closed.cancel();
                drop(connection);
            });
        }
    }
}

/// Closes the connections that are still idle `timeout` from now.
async fn reap(pool: Weak<Pool>, timeout: Duration) {
    tokio::time::sleep(timeout).await;
    if let Some(pool) = pool.upgrade() {
        pool.close_idle(timeout);
    }
}

/// Pings the connection every `interval` while it lives, and gives it up
/// as lost when a ping goes unanswered that long.
async fn watch(connection: Weak<Connection>, interval: Duration) {
    let mut check = tokio::time::interval(interval);
    check.tick().await;
    loop {
        check.tick().await;
        let Some(connection) = connection.upgrade() else {
            return;
        };
        if connection.is_closed() {
            return;
        }
        if !connection.answers_ping(interval).await {
            tracing::warn!("a connection to the upstream server does not answer; given up");
            connection.closed.cancel();
            return;
        }
    }
}
