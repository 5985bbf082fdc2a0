//! Cancelling a 2025-11-25 task and waiting for it to settle
//! ([`TasksClient::cancel_and_wait`]); awaiting one is `feed.rs`'s.

use rmcp::ClientHandler;

use crate::client::TasksClient;
use crate::client::error::Error;
use crate::client::state::{Era, TaskOutcome, TaskState};
use crate::client::wait::Wait;
use crate::task::TaskStatus;

impl<H: ClientHandler> TasksClient<H> {
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
