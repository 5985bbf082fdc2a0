//! Awaiting a 2025-11-25 task with the extension's options and outcomes:
//! `tasks/get` at the task's interval for its status, one `tasks/result`
//! kept open for its payload (and the input requests that travel on it),
//! early wake-ups on `notifications/tasks/status`.
//!
//! Cancel safety as in the extension: dropping the future stops the wait
//! and nothing else; input requests it had not answered are kept for the
//! next wait on the same connection.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::JsonObject;
use serde_json::Value;
use tokio::time::Instant;

use super::wire::ended_by_payload;
use super::{Event, Route};
use crate::client::TasksClient;
use crate::client::error::{Error, ProtocolViolation, Retry};
use crate::client::state::{Era, TaskOutcome, TaskState};
use crate::client::wait::{UNUSABLE_ANSWERS, Wait};
use crate::task::TaskStatus;

type PayloadCall<'a> = Pin<Box<dyn Future<Output = Result<JsonObject, Error>> + Send + 'a>>;

impl<H: ClientHandler> TasksClient<H> {
    /// [`TasksClient::await_task`] on a 2025-11-25 connection.
    pub(crate) async fn await_legacy(
        &self,
        wait: &mut Wait<'_>,
        seed: Option<TaskState>,
    ) -> Result<TaskOutcome, Error> {
        let options = wait.options;
        let id = wait.id.clone();
        // Routed before tasks/result is sent: its input requests come on it.
        let mut route = self.legacy.as_ref().map(|link| link.route(&id));
        let seed = match seed {
            Some(state) => state,
            None => {
                wait.retrying("tasks/get", |timeout| self.get_legacy(&id, Some(timeout)))
                    .await?
            }
        };
        observe(wait, seed);
        let mut payload: Option<PayloadCall<'_>> = None;
        // When to send tasks/result again after a transport failure.
        let mut payload_again: Option<Instant> = None;
        let mut backoff = options.retry_backoff;
        // Answers to tasks/result in a row that were not JSON-RPC messages.
        let mut unusable = 0u32;
        // Offer the held input requests at once, and after every poll.
        let mut offer = true;
        let mut answered_since_poll = false;
        let mut idle_polls = 0u32;
        let mut next_poll = Instant::now() + options.interval_for(wait.current.as_ref());
        loop {
            let current = current(wait);
            if current.status == TaskStatus::Cancelled {
                return Ok(TaskOutcome::Cancelled(current));
            }
            if current.has_outcome() {
                return current.outcome();
            }
            if offer && let Some(route) = route.as_mut() {
                offer = false;
                let requests = route.requests();
                if !requests.is_empty() {
                    let responses = match self
                        .answer_input(&requests, options, &wait.deadline, None)
                        .await
                        .map_err(|error| wait.owned(error))?
                    {
                        Ok(responses) => responses,
                        Err(unanswered) => {
                            // The request may have come before a poll saw the task ask.
                            if current.status != TaskStatus::InputRequired
                                && let Ok(state) = wait
                                    .request("tasks/get", |timeout| {
                                        self.get_legacy(&id, Some(timeout))
                                    })
                                    .await
                            {
                                observe(wait, state);
                            }
                            let state = with_requests(self::current(wait), requests);
                            return Ok(TaskOutcome::InputRequired { state, unanswered });
                        }
                    };
                    for (key, response) in responses {
                        if let Some(pending) = route.pending.remove(&key) {
                            // The server may have given up on the request meanwhile.
                            let _ = pending.respond.send(Ok(response));
                            answered_since_poll = true;
                        }
                    }
                }
            }
            if payload.is_none() && payload_again.is_none_or(|at| Instant::now() >= at) {
                payload_again = None;
                let timeout = wait.request_timeout("tasks/result")?;
                let id = id.clone();
                payload = Some(Box::pin(async move {
                    self.result_legacy(&id, Some(timeout)).await
                }));
            }
            let wake = payload_again.map_or(next_poll, |at| at.min(next_poll));
            let pause = wake.saturating_duration_since(Instant::now());
            tokio::select! {
                answered = call_payload(&mut payload) => {
                    payload = None;
                    match answered {
                        Ok(result) => return self.ended(wait, result).await,
                        Err(error) if error.retry() != Retry::No => {
                            if error.retry() == Retry::Garbage {
                                unusable += 1;
                                if unusable >= UNUSABLE_ANSWERS {
                                    return Err(Error::protocol(
                                        ProtocolViolation::UnusableAnswers {
                                            method: "tasks/result",
                                            attempts: unusable,
                                        },
                                        None,
                                    ));
                                }
                            } else {
                                unusable = 0;
                            }
                            // A blocking tasks/result that ran out of time is sent again
                            // at once; a failed send after a pause.
                            let pause = if error.is_request_timeout() {
                                Duration::ZERO
                            } else {
                                backoff
                            };
                            tracing::debug!(%error, ?pause, "tasks/result failed; sending it again");
                            payload_again = Some(Instant::now() + pause);
                            if !pause.is_zero() {
                                backoff = (backoff * 2).min(options.max_interval);
                            }
                        }
                        Err(error) => return self.refused(wait, error).await,
                    }
                }
                event = next_event(&mut route) => match event {
                    Event::Status(state) => observe(wait, *state),
                    Event::Input(pending) => {
                        if let Some(route) = route.as_mut() {
                            route.pending.insert(pending.key.clone(), pending);
                        }
                        offer = true;
                    }
                },
                slept = wait.sleep(pause) => {
                    slept?;
                    if Instant::now() < next_poll {
                        continue;
                    }
                    if !current.status.is_terminal() {
                        let state = wait
                            .retrying("tasks/get", |timeout| self.get_legacy(&id, Some(timeout)))
                            .await?;
                        observe(wait, state);
                    }
                    let current = self::current(wait);
                    if current.status == TaskStatus::InputRequired && !answered_since_poll {
                        idle_polls += 1;
                        if idle_polls >= options.stall_polls {
                            let cancel_sent = options.cancel_on_stall
                                && wait
                                    .retrying("tasks/cancel", |timeout| {
                                        self.cancel_legacy(&id, Some(timeout))
                                    })
                                    .await
                                    .is_ok();
                            let requests = route.as_mut().map(Route::requests).unwrap_or_default();
                            return Err(Error::Stalled {
                                state: Box::new(with_requests(current, requests)),
                                polls: idle_polls,
                                cancel_sent,
                            });
                        }
                    } else {
                        idle_polls = 0;
                    }
                    answered_since_poll = false;
                    offer = true;
                    next_poll = Instant::now() + options.interval_for(Some(&current));
                }
            }
        }
    }

    /// `tasks/result` answered: the task ended with this payload.
    async fn ended(&self, wait: &mut Wait<'_>, result: JsonObject) -> Result<TaskOutcome, Error> {
        if !current(wait).status.is_terminal() {
            // The last state read lags behind; the ended one is worth showing.
            let id = wait.id.clone();
            if let Ok(state) = wait
                .request("tasks/get", |timeout| self.get_legacy(&id, Some(timeout)))
                .await
            {
                observe(wait, state);
            }
        }
        let mut state = current(wait);
        ended_by_payload(&mut state);
        state.result = Some(result);
        wait.observe(state).outcome()
    }

    /// `tasks/result` answered with a JSON-RPC error: for a failed task that
    /// is the error of the original request; otherwise `tasks/result` failed.
    async fn refused(&self, wait: &mut Wait<'_>, error: Error) -> Result<TaskOutcome, Error> {
        let read = wait
            .retrying("tasks/get", |timeout| {
                self.get_legacy(&wait.id, Some(timeout))
            })
            .await;
        let Ok(state) = read else {
            return Err(error);
        };
        observe(wait, state);
        let mut state = current(wait);
        match (&state.status, error.rpc_error()) {
            (TaskStatus::Failed, Some(rpc)) => {
                state.error = Some(rpc.clone());
                wait.observe(state).outcome()
            }
            (TaskStatus::Cancelled, _) => Ok(TaskOutcome::Cancelled(state)),
            _ => Err(error),
        }
    }

    /// [`TasksClient::cancel_and_wait`] on a 2025-11-25 connection: the
    /// outcome of a task that completed or failed first comes from its
    /// `tasks/result` payload.
    pub(crate) async fn cancel_and_wait_legacy(
        &self,
        wait: &mut Wait<'_>,
    ) -> Result<TaskOutcome, Error> {
        let id = wait.id.clone();
        let state = wait
            .retrying("tasks/cancel", |timeout| {
                self.cancel_legacy(&id, Some(timeout))
            })
            .await?;
        observe(wait, state);
        let mut settling = 0;
        loop {
            let current = current(wait);
            if current.status.is_terminal() {
                let state = self.with_payload(wait, current).await?;
                return wait.observe(state).outcome();
            }
            wait.sleep(wait.options.settling_interval(settling, Some(&current)))
                .await?;
            settling += 1;
            let state = wait
                .retrying("tasks/get", |timeout| self.get_legacy(&id, Some(timeout)))
                .await?;
            observe(wait, state);
        }
    }

    /// A completed or failed state with its `tasks/result` payload (for a
    /// failed task, the JSON-RPC error `tasks/result` answers with); the
    /// error of `tasks/result` when it has neither.
    async fn with_payload(
        &self,
        wait: &Wait<'_>,
        mut state: TaskState,
    ) -> Result<TaskState, Error> {
        if !matches!(state.status, TaskStatus::Completed | TaskStatus::Failed)
            || state.has_outcome()
        {
            return Ok(state);
        }
        match wait
            .retrying("tasks/result", |timeout| {
                self.result_legacy(&state.id, Some(timeout))
            })
            .await
        {
            Ok(result) => state.result = Some(result),
            Err(error) if state.status == TaskStatus::Failed && error.rpc_error().is_some() => {
                state.error = error.rpc_error().cloned();
            }
            Err(error) => return Err(error),
        }
        Ok(state)
    }
}

/// Records a state read in this era. A terminal status never changes (a
/// server that reports another one after it is not believed), and a `ttl`
/// or `pollInterval` that could not be read keeps the value read before.
fn observe(wait: &mut Wait<'_>, state: TaskState) {
    let mut state = state.in_era(Era::Legacy);
    if let Some(current) = &wait.current {
        if current.status.is_terminal() && state.status != current.status {
            tracing::debug!(
                kept = %current.status,
                reported = %state.status,
                "a finished task reported another status; kept the finished one"
            );
            return;
        }
        state.ttl = state.ttl.or(current.ttl);
        state.poll_interval = state.poll_interval.or(current.poll_interval);
    }
    wait.observe(state);
}

/// The state in hand (one is read before the loop starts).
fn current(wait: &Wait<'_>) -> TaskState {
    match &wait.current {
        Some(state) => state.clone(),
        None => unreachable!("a legacy wait reads a state before anything else"),
    }
}

fn with_requests(mut state: TaskState, requests: BTreeMap<String, Value>) -> TaskState {
    state.input_requests = requests;
    state
}

async fn call_payload(payload: &mut Option<PayloadCall<'_>>) -> Result<JsonObject, Error> {
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
