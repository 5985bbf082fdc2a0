//! The upstream server: the connection to it in whichever era it speaks
//! (each connection is made in [`connection`](super::connection)), and
//! keeping one open: a connection that closes
//! (a stdio child that exited or crashed) is made again with backoff, in
//! the background and by the next call, and the tool list is read again
//! after each connect and on `notifications/tools/list_changed`.
//!
//! **The era** ([`Eras`]) is found at start: `server/discover` first, else
//! `initialize` (a 2025-era server). An upstream that answers
//! `server/discover` without the Tasks extension is asked `initialize` too,
//! on a connection of its own: one that accepts it speaks both eras, and
//! its plain calls go on 2025-era connections, where it can ask for input
//! the way most servers do (a server-initiated request: fastmcp refuses
//! those on 2026-07-28 connections) and read the gateway's roots for its
//! session, while a tool that asks the 2026-07-28 way (an MRTR round,
//! which fastmcp refuses on 2025-era connections with -32602) is called on
//! a 2026-07-28 connection (see [`rounds`](super::rounds)). An upstream
//! that advertises the extension is reached on 2026-07-28 only: its tasks
//! need it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::Tool;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::breaker::{Health, the_upstream};
use super::connection::{
    CallEra, Connection, Eras, Lifecycle, Shared, Upstream, UpstreamClient, backoff,
    cannot_connect, connect, handshake_too,
};
use super::pool::Pool;
use super::relay::Calls;
use super::roots::SessionRoots;
use super::{Error, GatewayOptions};
use crate::client::answer_bound::too_large_of;
use crate::client::{DEFAULT_REQUEST_TIMEOUT, Era};
use crate::server::TaskPolicy;
use crate::task::grouped;

/// The upstream's tools as last read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tools {
    pub(crate) list: Arc<Vec<Tool>>,
    /// The task policy a 2025-11-25 upstream marks a tool with
    /// (`execution.taskSupport` `optional` or `required`, and `forbidden`
    /// from an upstream that leaves some tools unmarked), by name.
    pub(crate) marked: HashMap<String, TaskPolicy>,
}

/// Reads every tool, following `nextCursor`. From a 2025-11-25 upstream the
/// raw JSON is read too, for each tool's `execution.taskSupport`.
async fn list_tools(upstream: &str, client: &UpstreamClient) -> Result<Tools, ErrorData> {
    if client.era() == Era::Extension {
        let list = client
            .running()
            .peer()
            .list_all_tools()
            .await
            .map_err(|error| upstream_failure(upstream, "tools/list", &error))?;
        return Ok(Tools {
            list: Arc::new(list),
            marked: HashMap::new(),
        });
    }
    let mut list = Vec::new();
    let mut marked = HashMap::new();
    let mut forbidden = Vec::new();
    // Whether some tool carries no `execution.taskSupport` at all.
    let mut some_unmarked = false;
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let page = client
            .send_legacy(
                "tools/list",
                params,
                &serde_json::Map::new(),
                Some(DEFAULT_REQUEST_TIMEOUT),
            )
            .await
            .map_err(|error| crate::gateway::client_failure("tools/list", &error))?;
        for raw in page
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Ok(tool) = serde_json::from_value::<Tool>(raw.clone()) else {
                tracing::warn!("the upstream listed a tool that does not read as one; left out");
                continue;
            };
            let mark = raw.pointer("/execution/taskSupport");
            let policy = match mark.and_then(Value::as_str) {
                Some("optional") => Some(TaskPolicy::Optional),
                Some("required") => Some(TaskPolicy::Required),
                Some("forbidden") => {
                    forbidden.push(tool.name.to_string());
                    None
                }
                _ => None,
            };
            some_unmarked |= mark.is_none();
            if let Some(policy) = policy {
                marked.insert(tool.name.to_string(), policy);
            }
            list.push(tool);
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    // `forbidden` is also what an absent mark means, and the TypeScript SDK
    // v1 writes it on every tool not registered as a task tool: from an
    // upstream that marks every tool, `forbidden` is its default and says
    // nothing about the tool. It is kept only from an upstream that leaves
    // some tools unmarked, where it is a choice made for that tool.
    if some_unmarked {
        marked.extend(
            forbidden
                .into_iter()
                .map(|name| (name, TaskPolicy::Forbidden)),
        );
    }
    Ok(Tools {
        list: Arc::new(list),
        marked,
    })
}

/// The failure of `what` (a request to an upstream) whose answer was past
/// the gateway's `bound` on one (`size` bytes, when counted).
pub(crate) fn answer_too_large(what: &str, bound: u64, size: Option<u64>) -> ErrorData {
    let shown = size
        .map(|size| format!(" {} bytes,", grouped(size)))
        .unwrap_or_default();
    ErrorData::internal_error(
        format!(
            "{what}: the answer is{shown} past what this gateway reads of one upstream answer \
             ({} bytes: its max-result-bytes and 64 KiB for the message around the result); \
             it was not read",
            grouped(bound)
        ),
        Some(
            serde_json::json!({"reason": "resultTooLarge", "maxAnswerBytes": bound, "answerBytes": size}),
        ),
    )
}

/// An rmcp failure of a request to the upstream `upstream` (its name), as
/// the JSON-RPC error the gateway answers with: the upstream's own error as
/// it sent it, a failed connection said plainly and by name (the transport's
/// own words go to the log).
pub(crate) fn upstream_failure(
    upstream: &str,
    method: &str,
    error: &rmcp::service::ServiceError,
) -> ErrorData {
    use rmcp::service::ServiceError;
    match error {
        ServiceError::McpError(error) => match too_large_of(error) {
            Some((bound, size)) => answer_too_large(
                &format!("{method} to {}", the_upstream(upstream)),
                bound,
                size,
            ),
            None => error.clone(),
        },
        ServiceError::TransportClosed => ErrorData::internal_error(
            format!(
                "the connection to {} was lost during {method} (it exited or crashed, or \
                 stopped answering)",
                the_upstream(upstream)
            ),
            None,
        ),
        ServiceError::TransportSend(error) => {
            tracing::warn!(upstream, method, %error, "a request could not be sent upstream");
            ErrorData::internal_error(
                format!(
                    "{method} could not reach {}: its connection failed (the next call opens \
                     a new one)",
                    the_upstream(upstream)
                ),
                None,
            )
        }
        other => ErrorData::internal_error(
            format!("{method} to {} failed: {other}", the_upstream(upstream)),
            None,
        ),
    }
}

/// Keeps the gateway's own connection to the upstream open (it lists the
/// tools and carries the calls of an upstream that makes tasks), beside the
/// [`Pool`] of connections for calls of plain tools.
pub(crate) struct Link {
    pub(crate) upstream: Upstream,
    pub(crate) calls: Arc<Calls>,
    pub(crate) roots: Arc<SessionRoots>,
    pub(crate) health: Arc<Health>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) options: GatewayOptions,
    state: tokio::sync::Mutex<State>,
    tools: RwLock<Tools>,
    /// Counts the changes of the tool list read (not its first reading).
    tools_version: tokio::sync::watch::Sender<u64>,
    /// Fired when the gateway is dropped: the supervisor stops.
    stop: CancellationToken,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[derive(Default)]
struct State {
    current: Option<Arc<Connection>>,
    /// Connection attempts that failed (or connections that closed soon
    /// after they opened) in a row, and when the next attempt may be made.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Link {
    /// Connects (the first attempt must succeed), finds the eras the
    /// upstream speaks (see the [module](self) docs) and reads the tools.
    pub(crate) async fn start(
        upstream: Upstream,
        options: GatewayOptions,
        health: Arc<Health>,
    ) -> Result<Arc<Self>, Error> {
        let shared = Shared {
            calls: Arc::new(Calls::default()),
            roots: Arc::new(SessionRoots::new(options.roots.clone())),
            health,
        };
        let probe = connect(&upstream, &shared, &options, Lifecycle::Probe).await?;
        let (connection, eras, spare) = match probe.era() {
            CallEra::Handshake => (probe, Eras::Handshake, None),
            CallEra::Modern if probe.client.server_supports() => (probe, Eras::Modern, None),
            CallEra::Modern => match handshake_too(&upstream, &shared, &options).await {
                Some(session) => (session, Eras::Both, Some(probe)),
                None => (probe, Eras::Modern, None),
            },
        };
        tracing::info!(?eras, "connected to the upstream server");
        let tools = list_tools(&connection.upstream, &connection.client)
            .await
            .map_err(|error| Error::ListTools {
                message: error.message.to_string(),
            })?;
        let pool = Arc::new(Pool::new(
            upstream.clone(),
            shared.clone(),
            options.clone(),
            eras,
        ));
        let connection = Arc::new(connection);
        pool.adopt(&connection);
        if let Some(spare) = spare {
            // The 2026-07-28 connection of the probe: kept for the first
            // call that needs one, closed when idle as any further one.
            pool.keep(Arc::new(spare));
        }
        let link = Arc::new(Self {
            upstream,
            calls: shared.calls,
            roots: shared.roots,
            health: shared.health,
            pool,
            options,
            state: tokio::sync::Mutex::new(State {
                current: Some(connection),
                ..State::default()
            }),
            tools: RwLock::new(tools),
            tools_version: tokio::sync::watch::Sender::new(0),
            stop: CancellationToken::new(),
        });
        let health = matches!(link.upstream, Upstream::Url { .. })
            .then_some(link.options.health_check)
            .filter(|interval| !interval.is_zero());
        tokio::spawn(supervise(Arc::downgrade(&link), link.stop.clone(), health));
        tokio::spawn(follow_tools(Arc::downgrade(&link), link.stop.clone()));
        Ok(link)
    }

    pub(crate) fn shared(&self) -> Shared {
        Shared {
            calls: self.calls.clone(),
            roots: self.roots.clone(),
            health: self.health.clone(),
        }
    }

    /// The open connection, made again if it closed (after the backoff
    /// since the last failed attempt).
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>, ErrorData> {
        let mut state = self.state.lock().await;
        if let Some(current) = state.current.take() {
            if !current.is_closed() {
                state.current = Some(current.clone());
                return Ok(current);
            }
            // An upstream that keeps exiting soon after it starts is started
            // again ever more slowly; one that ran a while, or that the
            // gateway closed itself, at once.
            if current.retired.load(std::sync::atomic::Ordering::Acquire) {
                state.retry_at = None;
            } else if current.opened.elapsed() < self.options.restart_backoff_max {
                state.failures = state.failures.saturating_add(1);
                state.retry_at = Some(Instant::now() + self.backoff(state.failures));
            } else {
                state.failures = 0;
            }
        }
        if let Some(at) = state.retry_at {
            tokio::time::sleep_until(at).await;
        }
        // The gateway's own connection is a 2025-era one where the upstream
        // speaks both eras.
        let lifecycle = Lifecycle::of(self.pool.eras(), CallEra::Handshake);
        let attempt = connect(&self.upstream, &self.shared(), &self.options, lifecycle).await;
        match attempt {
            Ok(connection) => {
                let connection = Arc::new(connection);
                state.current = Some(connection.clone());
                state.retry_at = None;
                drop(state);
                self.pool.adopt(&connection);
                tracing::info!("connected to the upstream server again");
                metrics::counter!(
                    crate::telemetry::names::UPSTREAM_RESTARTS,
                    "upstream" => self.health.name.to_string()
                )
                .increment(1);
                self.refresh_tools(&connection).await;
                Ok(connection)
            }
            Err(error) => {
                state.current = None;
                state.failures = state.failures.saturating_add(1);
                let backoff = self.backoff(state.failures);
                state.retry_at = Some(Instant::now() + backoff);
                tracing::warn!(%error, retry_in = ?backoff, "cannot reach the upstream server");
                Err(cannot_connect(&self.health.name, &error))
            }
        }
    }

    fn backoff(&self, failures: u32) -> Duration {
        backoff(
            self.options.restart_backoff_min,
            self.options.restart_backoff_max,
            failures,
        )
    }
    /// The tools as last read; read again first when the upstream said its
    /// list changed.
    pub(crate) async fn tools(&self) -> Tools {
        if self.calls.take_tools_stale()
            && let Ok(connection) = self.connection().await
        {
            self.refresh_tools(&connection).await;
        }
        self.tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The tools as last read, without reading them again.
    pub(crate) fn cached_tools(&self) -> Tools {
        self.tools
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Tells of every change of the tool list read from now on.
    pub(crate) fn watch_tools(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tools_version.subscribe()
    }

    async fn refresh_tools(&self, connection: &Connection) {
        match list_tools(&connection.upstream, &connection.client).await {
            Ok(tools) => {
                let changed = {
                    let mut current = self
                        .tools
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let changed = current.list != tools.list || current.marked != tools.marked;
                    *current = tools;
                    changed
                };
                if changed {
                    self.tools_version.send_modify(|version| *version += 1);
                }
            }
            Err(error) => {
                // The next list_changed, call or reconnect tries again.
                self.calls.tools_still_stale();
                tracing::warn!(message = %error.message, "cannot read the upstream's tools");
            }
        }
    }
}

/// Reads the tool list again as soon as the upstream says it changed (and
/// so tells the gateway's clients, see [`Link::watch_tools`]), until the
/// gateway is dropped.
async fn follow_tools(link: Weak<Link>, stop: CancellationToken) {
    let Some(calls) = link.upgrade().map(|link| link.calls.clone()) else {
        return;
    };
    loop {
        tokio::select! {
            () = calls.tools_change() => {}
            () = stop.cancelled() => return,
        }
        let Some(link) = link.upgrade() else { return };
        if link.calls.take_tools_stale()
            && let Ok(connection) = link.connection().await
        {
            link.refresh_tools(&connection).await;
        }
    }
}

/// Restarts the upstream as soon as its connection closes (with the
/// backoff of [`Link::connection`]), until the gateway is dropped. With
/// `health`, pings the upstream that often and gives a connection up as
/// lost when a ping goes unanswered that long: an HTTP upstream that
/// restarted has lost its session, and rmcp never answers a request that
/// its error response names no id for (server-everything's "No valid
/// session ID provided"), so without this the calls would hang.
async fn supervise(link: Weak<Link>, stop: CancellationToken, health: Option<Duration>) {
    loop {
        let Some(strong) = link.upgrade() else { return };
        let connection = tokio::select! {
            connection = strong.connection() => connection,
            () = stop.cancelled() => return,
        };
        drop(strong);
        // On failure `connection` waits out the backoff before its next attempt.
        if let Ok(connection) = connection {
            let mut check = tokio::time::interval(health.unwrap_or(Duration::from_secs(1)));
            check.tick().await;
            loop {
                tokio::select! {
                    () = connection.closed() => break,
                    _ = check.tick() => {
                        if connection.is_closed() {
                            break;
                        }
                        if let Some(timeout) = health
                            && !connection.answers_ping(timeout).await
                        {
                            tracing::warn!("the upstream server does not answer; connecting again");
                            connection.closed.cancel();
                            break;
                        }
                    }
                    () = stop.cancelled() => return,
                }
            }
            tracing::warn!("the upstream server closed the connection; connecting again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_bound() {
        let (min, max) = (Duration::from_millis(250), Duration::from_secs(10));
        let pauses: Vec<u128> = (1..=8).map(|n| backoff(min, max, n).as_millis()).collect();
        assert_eq!(pauses, [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
        assert_eq!(backoff(min, max, u32::MAX), max);
    }
}
