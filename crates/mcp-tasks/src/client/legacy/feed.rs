//! Awaiting a 2025-11-25 task with the extension's options and outcomes:
//! the wait's state machine ([`Machine`]), fed by [`LegacyFeed`] with
//! `tasks/get` at the task's interval for its status, one `tasks/result`
//! kept open for its payload (and the input requests that travel on it),
//! and early wake-ups on `notifications/tasks/status`. What the wait makes
//! of each state (the outcome, input answered, the stall, retries and the
//! deadline) is the machine's and [`Wait`]'s, as in the extension.
//!
//! `cancel_and_wait` settles with the same feed: `tasks/get` at the
//! settling interval, and the payload of a task that completed or failed
//! first from `tasks/result`.
//!
//! Cancel safety as in the extension: dropping the future stops the wait
//! and nothing else; input requests it had not answered are kept for the
//! next wait on the same connection.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{InputResponses, JsonObject};
use serde_json::Value;
use tokio::time::Instant;

use super::wire::ended_by_payload;
use super::{Event, Route};
use crate::client::error::{Error, Retry};
use crate::client::state::{Era, TaskOutcome, TaskState};
use crate::client::wait::{Feed, Heard, Machine, Retries, Wait, cancel_and_settle};
use crate::client::wire::TaskRequests;
use crate::client::{AwaitOptions, TasksClient};
use crate::task::TaskStatus;

type PayloadCall<'a> = Pin<Box<dyn Future<Output = Result<JsonObject, Error>> + Send + 'a>>;

impl<H: ClientHandler> TasksClient<H> {
    /// [`TasksClient::await_task`] on a 2025-11-25 connection: the machine,
    /// fed by [`LegacyFeed`], from `seed` (when the caller had a state).
    pub(crate) async fn await_legacy(
        &self,
        wait: &mut Wait<'_>,
        seed: Option<TaskState>,
    ) -> Result<TaskOutcome, Error> {
        let requests = self.requests();
        // Routed before tasks/result is sent: its input requests come on it.
        let route = self.legacy.as_ref().map(|link| link.route(&wait.id));
        let mut feed = LegacyFeed::new(requests, route, wait.options);
        if let Some(seed) = seed {
            wait.observe(carried(None, seed));
        }
        Machine::new(requests).run(wait, &mut feed).await
    }

    /// [`TasksClient::cancel_and_wait`] on a 2025-11-25 connection: the
    /// outcome of a task that completed or failed first comes from its
    /// `tasks/result` payload.
    pub(crate) async fn cancel_and_wait_legacy(
        &self,
        wait: &mut Wait<'_>,
    ) -> Result<TaskOutcome, Error> {
        let requests = self.requests();
        // Not routed: the task's input is for a wait on it, not for this.
        let mut feed = LegacyFeed::new(requests, None, wait.options);
        cancel_and_settle(requests, wait, &mut feed).await
    }
}

/// The feed of a wait on a 2025-11-25 task: its states from `tasks/get`
/// (polled while it works) and `notifications/tasks/status`, its payload
/// from `tasks/result`, its input requests from the server's own requests
/// tied to it (apart from its states, see [`Feed::apart`]).
struct LegacyFeed<'c, H: ClientHandler> {
    requests: TaskRequests<'c, H>,
    /// The task's input requests and status notifications (none when the
    /// client was built without [`Handler`](super::Handler)).
    route: Option<Route>,
    /// The `tasks/result` in flight.
    payload: Option<PayloadCall<'c>>,
    /// When to send `tasks/result` again after it failed.
    payload_again: Option<Instant>,
    /// The retries of `tasks/result`, over the whole wait.
    retries: Retries,
    /// When the next `tasks/get` is due; `None`: at the end of the next
    /// pause the machine asks for.
    next_poll: Option<Instant>,
}

impl<H: ClientHandler> Feed for LegacyFeed<'_, H> {
    async fn wait(&mut self, wait: &mut Wait<'_>, pause: Duration) -> Result<Heard, Error> {
        let Some(current) = wait.current.clone() else {
            return Ok(Heard::ReadNow);
        };
        // Polls keep their own time: what wakes the machine between two of
        // them (a notification, input) does not put the next one off.
        let next_poll = *self.next_poll.get_or_insert_with(|| Instant::now() + pause);
        loop {
            self.send_payload(wait)?;
            let wake = self.payload_again.map_or(next_poll, |at| at.min(next_poll));
            let pause = wake.saturating_duration_since(Instant::now());
            tokio::select! {
                answered = in_flight(&mut self.payload) => {
                    self.payload = None;
                    match answered {
                        Ok(result) => {
                            let ended = self.ended(wait, current, result).await;
                            return Ok(Heard::State(Box::new(ended)));
                        }
                        Err(error) if error.retry() == Retry::No => {
                            return self.refused(wait, current, error).await;
                        }
                        Err(error) => {
                            let again = self.retries.after(wait, error)?;
                            self.payload_again = Some(Instant::now() + again);
                        }
                    }
                }
                event = next_event(&mut self.route) => match event {
                    Event::Status(state) => {
                        if let Some(state) = believed(Some(&current), *state) {
                            return Ok(Heard::State(Box::new(state)));
                        }
                    }
                    Event::Input(pending) => {
                        if let Some(route) = self.route.as_mut() {
                            route.pending.insert(pending.key.clone(), pending);
                        }
                        return Ok(Heard::Input);
                    }
                },
                slept = wait.sleep(pause) => {
                    slept?;
                    if Instant::now() >= next_poll {
                        self.next_poll = None;
                        return self.poll(wait, &current).await;
                    }
                }
            }
        }
    }

    async fn read(&mut self, wait: &Wait<'_>) -> Result<TaskState, Error> {
        // Never asked while the task has ended (its payload is on its way):
        // the machine reads only without a state in hand, `poll` and the
        // settling loop only while the task works.
        let requests = self.requests;
        let read = wait
            .retrying("tasks/get", |timeout| requests.get(&wait.id, Some(timeout)))
            .await?;
        Ok(carried(wait.current.as_ref(), read))
    }

    fn apart(&mut self) -> Option<BTreeMap<String, Value>> {
        Some(self.route.as_mut().map(Route::requests).unwrap_or_default())
    }

    fn respond(&mut self, responses: InputResponses) {
        let Some(route) = self.route.as_mut() else {
            return;
        };
        for (key, response) in responses {
            if let Some(pending) = route.pending.remove(&key) {
                // The server may have given up on the request meanwhile.
                let _ = pending.respond.send(Ok(response));
            }
        }
    }

    async fn reread(&mut self, wait: &Wait<'_>) -> Option<TaskState> {
        let requests = self.requests;
        let read = wait
            .request("tasks/get", |timeout| requests.get(&wait.id, Some(timeout)))
            .await
            .ok()?;
        believed(wait.current.as_ref(), read)
    }

    async fn payload(
        &mut self,
        wait: &Wait<'_>,
        state: &TaskState,
    ) -> Result<Option<TaskState>, Error> {
        let client = self.requests.client();
        let mut state = state.clone();
        // A finished task's tasks/result answers at once.
        let answered = wait
            .retrying("tasks/result", |timeout| {
                client.result_legacy(&state.id, Some(timeout))
            })
            .await;
        match answered {
            Ok(result) => state.result = Some(result),
            // A failed task's is the JSON-RPC error of the original request.
            Err(error) if state.status == TaskStatus::Failed && error.rpc_error().is_some() => {
                state.error = error.rpc_error().cloned();
            }
            Err(error) => return Err(error),
        }
        Ok(Some(state))
    }
}

impl<'c, H: ClientHandler> LegacyFeed<'c, H> {
    fn new(requests: TaskRequests<'c, H>, route: Option<Route>, options: &AwaitOptions) -> Self {
        Self {
            requests,
            route,
            payload: None,
            payload_again: None,
            retries: Retries::blocking("tasks/result", options),
            next_poll: None,
        }
    }

    /// Sends `tasks/result` when none is in flight and it is due.
    fn send_payload(&mut self, wait: &Wait<'_>) -> Result<(), Error> {
        if self.payload.is_some() || self.payload_again.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        self.payload_again = None;
        let timeout = wait.request_timeout("tasks/result")?;
        let (client, id) = (self.requests.client(), wait.id.clone());
        self.payload = Some(Box::pin(async move {
            client.result_legacy(&id, Some(timeout)).await
        }));
        Ok(())
    }

    /// The poll that fell due: `tasks/get`, unless the task has ended (its
    /// payload is on its way): then the state in hand holds.
    async fn poll(&mut self, wait: &Wait<'_>, current: &TaskState) -> Result<Heard, Error> {
        if current.status.is_terminal() {
            return Ok(Heard::Quiet);
        }
        let read = self.read(wait).await?;
        Ok(Heard::State(Box::new(read)))
    }

    /// `tasks/result` answered: the task ended with this payload. When
    /// `current`, the state in hand, lags behind, the task is read once
    /// more first: the ended state is worth showing.
    async fn ended(
        &mut self,
        wait: &mut Wait<'_>,
        mut current: TaskState,
        result: JsonObject,
    ) -> TaskState {
        if !current.status.is_terminal() {
            let requests = self.requests;
            let read = wait
                .request("tasks/get", |timeout| requests.get(&wait.id, Some(timeout)))
                .await;
            if let Ok(read) = read
                && let Some(read) = believed(Some(&current), read)
            {
                current = wait.observe(read).clone();
            }
        }
        ended_by_payload(&mut current);
        current.result = Some(result);
        current
    }

    /// `tasks/result` answered with a JSON-RPC error: for a failed task that
    /// is the error of the original request; otherwise `tasks/result` failed.
    async fn refused(
        &mut self,
        wait: &mut Wait<'_>,
        current: TaskState,
        error: Error,
    ) -> Result<Heard, Error> {
        let requests = self.requests;
        let read = wait
            .retrying("tasks/get", |timeout| requests.get(&wait.id, Some(timeout)))
            .await;
        let Ok(read) = read else {
            return Err(error);
        };
        let mut state = match believed(Some(&current), read) {
            Some(read) => wait.observe(read).clone(),
            None => current,
        };
        match (&state.status, error.rpc_error()) {
            (TaskStatus::Failed, Some(rpc)) => {
                state.error = Some(rpc.clone());
                Ok(Heard::State(Box::new(state)))
            }
            // The machine ends the wait on the cancelled state in hand.
            (TaskStatus::Cancelled, _) => Ok(Heard::Quiet),
            _ => Err(error),
        }
    }
}

/// `state`, read in this era after `current`, as it is believed: a
/// terminal status never changes (a server that reports another one after
/// it is not believed: `None`), and a `ttl` or `pollInterval` that could
/// not be read keeps the value read before.
fn believed(current: Option<&TaskState>, state: TaskState) -> Option<TaskState> {
    if let Some(current) = current
        && current.status.is_terminal()
        && state.status != current.status
    {
        tracing::debug!(
            kept = %current.status,
            reported = %state.status,
            "a finished task reported another status; kept the finished one"
        );
        return None;
    }
    Some(carried(current, state))
}

/// `state`, made in this era, with the `ttl` and `pollInterval` of
/// `current` where it has none that could be read.
fn carried(current: Option<&TaskState>, state: TaskState) -> TaskState {
    let mut state = state.in_era(Era::Legacy);
    if let Some(current) = current {
        state.ttl = state.ttl.or(current.ttl);
        state.poll_interval = state.poll_interval.or(current.poll_interval);
    }
    state
}

async fn in_flight(payload: &mut Option<PayloadCall<'_>>) -> Result<JsonObject, Error> {
    match payload {
        Some(call) => call.await,
        None => std::future::pending().await,
    }
}

async fn next_event(route: &mut Option<Route>) -> Event {
    match route {
        Some(route) => route.next().await,
        None => std::future::pending().await,
    }
}
