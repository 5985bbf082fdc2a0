//! Awaiting a task: polling `tasks/get`, or listening for its
//! notifications where the client and the server can (see [`listen`](super::listen)).
//!
//! This file holds what a wait is given ([`AwaitOptions`], [`AwaitFrom`]),
//! its entry points, and [`Wait`]: the deadline-bounded steps every loop
//! takes (a request retried with backoff, [`Retries`], a pause, a state
//! observed). The wait itself is the state machine of `machine.rs`, in
//! either era; the era is told once, at the start, and picks what feeds it:
//! in the extension's, `listening.rs` (or a set's stream,
//! [`many`](super::many)); in the 2025-11-25 era's, the feed of
//! [`legacy`](super::legacy). The requests they send are `wire.rs`'s.
//!
//! Cancel safety: dropping the future stops the wait and closes its listen
//! stream, and nothing else; the task keeps running on the server and can
//! be awaited again by id.

mod listening;
mod machine;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ClientHandler;
use tokio::time::Instant;

pub(crate) use listening::{Heard, is_stale};
pub(crate) use machine::{Feed, Machine};

use self::machine::{Alone, await_extension};
use super::deadline::Deadline;
use super::error::{Error, ProtocolViolation, Retry, Stage};
use super::listen::ListenMode;
use super::state::{Era, TaskOutcome, TaskState};
use super::wire::TaskRequests;
use super::{InputMode, TasksClient};
use crate::task::TaskId;

/// How many answers in a row that are not JSON-RPC messages a wait takes
/// before it gives up on the server with a protocol error.
pub(crate) const UNUSABLE_ANSWERS: u32 = 3;

/// How many `tasks/get` answers in a row may lack the payload their status
/// requires before the wait gives up with a protocol error.
pub(crate) const INCOMPLETE_POLLS: u32 = 3;

/// Called with every task state the wait reads, for progress displays (see
/// [`AwaitOptions::with_observer`] for what it sees).
pub type StateObserver = Arc<dyn Fn(&TaskState) + Send + Sync>;

/// How [`TasksClient::await_task`] waits.
#[derive(Clone)]
#[non_exhaustive]
pub struct AwaitOptions {
    /// Give up after this long (default 60 s; `None`: wait without limit).
    pub deadline: Option<Duration>,
    /// The interval when the server suggests none (default 1 s).
    pub default_interval: Duration,
    /// The shortest interval, whatever the server suggests (default 50 ms).
    pub min_interval: Duration,
    /// The longest interval, whatever the server suggests (default 30 s).
    pub max_interval: Duration,
    /// The longest time one request may take (default 30 s); the time left
    /// before the deadline is used when that is shorter.
    pub request_timeout: Duration,
    /// The first pause before retrying a transient failure (default 100 ms),
    /// doubled on each further failure up to `max_interval`.
    pub retry_backoff: Duration,
    /// How input requests are answered (default: the client's handler).
    pub input: InputMode,
    /// End the wait after this many consecutive polls that stay
    /// `input_required` with nothing new to answer (default 60).
    pub stall_polls: u32,
    /// Send `tasks/cancel` before giving up on a stalled task (default: no).
    pub cancel_on_stall: bool,
    /// The most MRTR rounds `call_and_await` answers before a task exists (default 8).
    pub mrtr_max_rounds: usize,
    /// Called with every state read.
    pub observer: Option<StateObserver>,
    /// Whether the wait listens for notifications (default
    /// [`ListenMode::Auto`]: when the client has a listen channel).
    pub listen: ListenMode,
}

impl Default for AwaitOptions {
    fn default() -> Self {
        Self {
            deadline: Some(Duration::from_secs(60)),
            default_interval: Duration::from_secs(1),
            min_interval: Duration::from_millis(50),
            max_interval: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(100),
            input: InputMode::Handlers,
            stall_polls: 60,
            cancel_on_stall: false,
            mrtr_max_rounds: 8,
            observer: None,
            listen: ListenMode::Auto,
        }
    }
}

impl fmt::Debug for AwaitOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwaitOptions")
            .field("deadline", &self.deadline)
            .field("default_interval", &self.default_interval)
            .field("min_interval", &self.min_interval)
            .field("max_interval", &self.max_interval)
            .field("request_timeout", &self.request_timeout)
            .field("retry_backoff", &self.retry_backoff)
            .field("input", &self.input)
            .field("stall_polls", &self.stall_polls)
            .field("cancel_on_stall", &self.cancel_on_stall)
            .field("mrtr_max_rounds", &self.mrtr_max_rounds)
            .field("observer", &self.observer.as_ref().map(|_| ".."))
            .field("listen", &self.listen)
            .finish()
    }
}

impl AwaitOptions {
    /// Give up after `deadline` (`None`: wait without limit).
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The interval when the server suggests none.
    pub fn with_default_interval(mut self, interval: Duration) -> Self {
        self.default_interval = interval;
        self
    }

    /// The bounds every interval is clamped to.
    pub fn with_interval_bounds(mut self, min: Duration, max: Duration) -> Self {
        self.min_interval = min;
        self.max_interval = max;
        self
    }

    /// The longest time one request may take.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The first pause before retrying a transient failure.
    pub fn with_retry_backoff(mut self, backoff: Duration) -> Self {
        self.retry_backoff = backoff;
        self
    }

    /// How input requests are answered.
    pub fn with_input(mut self, input: InputMode) -> Self {
        self.input = input;
        self
    }

    /// Stall detection: give up after `polls` polls with nothing new to
    /// answer, sending `tasks/cancel` first when `cancel` is set.
    pub fn with_stall_detection(mut self, polls: u32, cancel: bool) -> Self {
        self.stall_polls = polls;
        self.cancel_on_stall = cancel;
        self
    }

    /// The most MRTR rounds answered before a task exists.
    pub fn with_mrtr_max_rounds(mut self, rounds: usize) -> Self {
        self.mrtr_max_rounds = rounds;
        self
    }

    /// Whether the wait listens for the task's notifications instead of
    /// polling (see [`ListenMode`]).
    pub fn with_listen(mut self, mode: ListenMode) -> Self {
        self.listen = mode;
        self
    }

    /// Calls `observer` with every state the wait reads, in order: the seed
    /// state it starts from, each `tasks/get` answer and, when the wait
    /// listens, each `notifications/tasks` it hears. A polling wait sees only
    /// what polling samples: a status message set and replaced within one
    /// poll interval (the server's `pollIntervalMs`, clamped; the runtime
    /// suggests 1 s unless told otherwise) is never seen. A listening wait
    /// sees every change the server sends (a server may coalesce changes
    /// that land faster than it can send them). The observer runs on the
    /// wait's task: keep it quick.
    pub fn with_observer(mut self, observer: impl Fn(&TaskState) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// The interval to wait after reading `state`.
    pub fn interval_for(&self, state: Option<&TaskState>) -> Duration {
        let suggested = state
            .and_then(|state| state.poll_interval)
            .unwrap_or(self.default_interval);
        suggested.clamp(self.min_interval, self.max_interval.max(self.min_interval))
    }

    /// The interval before poll `n + 1` (from 0) after a `tasks/cancel`:
    /// a cooperative tool usually stops in moments, so the polls back off
    /// from the minimum interval, doubling, up to
    /// [`interval_for`](Self::interval_for) (a handful of polls more than
    /// the server's interval alone: at most 10 with the default clamps).
    pub fn settling_interval(&self, n: u32, state: Option<&TaskState>) -> Duration {
        let quick = self
            .min_interval
            .saturating_mul(2u32.saturating_pow(n.min(16)));
        self.interval_for(state).min(quick)
    }
}

/// What to await: a task state (from `call_tool` or `get`) or just an id.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AwaitFrom {
    /// A state already read; the wait starts from it.
    State(Box<TaskState>),
    /// An id; the wait starts with a `tasks/get`.
    Id(TaskId),
}

impl From<TaskState> for AwaitFrom {
    fn from(state: TaskState) -> Self {
        Self::State(Box::new(state))
    }
}

impl From<&TaskState> for AwaitFrom {
    fn from(state: &TaskState) -> Self {
        Self::State(Box::new(state.clone()))
    }
}

impl From<TaskId> for AwaitFrom {
    fn from(id: TaskId) -> Self {
        Self::Id(id)
    }
}

impl From<&TaskId> for AwaitFrom {
    fn from(id: &TaskId) -> Self {
        Self::Id(id.clone())
    }
}

/// The running state of one wait: its deadline and the last state read.
pub(crate) struct Wait<'a> {
    pub(crate) options: &'a AwaitOptions,
    pub(crate) id: TaskId,
    pub(crate) deadline: Deadline,
    pub(crate) current: Option<TaskState>,
}

impl<'a> Wait<'a> {
    /// A wait on `id` that ends at `deadline`.
    pub(crate) fn new(options: &'a AwaitOptions, id: TaskId, deadline: Deadline) -> Self {
        Self {
            options,
            id,
            deadline,
            current: None,
        }
    }

    /// [`Error::Timeout`]: the deadline passed during `stage`.
    pub(crate) fn timeout(&self, stage: Stage) -> Error {
        self.deadline
            .timeout(stage, Some(&self.id), self.current.as_ref())
    }

    /// `error`, with this wait's task and last state when it is a
    /// [`Error::Timeout`] made without them (by an input handler's step).
    pub(crate) fn owned(&self, error: Error) -> Error {
        match error {
            Error::Timeout {
                task_id: None,
                stage,
                ..
            } => self.timeout(stage),
            other => other,
        }
    }

    /// Sleeps `pause`, or until the deadline; `Err(Timeout)` in `stage`
    /// if it is reached.
    async fn sleep_in(&self, pause: Duration, stage: Stage) -> Result<(), Error> {
        match self.deadline.at() {
            Some(deadline) if Instant::now() + pause >= deadline => {
                tokio::time::sleep_until(deadline).await;
                Err(self.timeout(stage))
            }
            _ => {
                tokio::time::sleep(pause).await;
                Ok(())
            }
        }
    }

    /// Sleeps `pause` between two reads of the task, or until the
    /// deadline; `Err(Timeout)` if it is reached.
    pub(crate) async fn sleep(&self, pause: Duration) -> Result<(), Error> {
        self.sleep_in(pause, Stage::Pause).await
    }

    /// The timeout of the next `method` request: the time left, at most
    /// `request_timeout`; `Err(Timeout)` when no time is left.
    pub(crate) fn request_timeout(&self, method: &'static str) -> Result<Duration, Error> {
        match self.deadline.cut(Some(self.options.request_timeout)) {
            Ok(timeout) => Ok(timeout.unwrap_or(self.options.request_timeout)),
            Err(()) => Err(self.timeout(Stage::Request { method })),
        }
    }

    /// True once the deadline has passed.
    pub(crate) fn deadline_passed(&self) -> bool {
        self.deadline.passed()
    }

    /// Runs one `method` request (given its timeout: the time left, at most
    /// `request_timeout`) until the deadline. A request that runs out of
    /// time at the deadline is [`Error::Timeout`] in [`Stage::Request`].
    pub(crate) async fn request<T, Fut>(
        &self,
        method: &'static str,
        request: impl FnOnce(Duration) -> Fut,
    ) -> Result<T, Error>
    where
        Fut: Future<Output = Result<T, Error>>,
    {
        let timeout = self.request_timeout(method)?;
        match self.deadline.within(request(timeout)).await {
            Some(Err(error)) if error.is_request_timeout() && self.deadline_passed() => {
                Err(self.timeout(Stage::Request { method }))
            }
            Some(answered) => answered,
            None => Err(self.timeout(Stage::Request { method })),
        }
    }

    /// Runs `request` (given its timeout), retrying transient failures
    /// with doubling backoff until the deadline. An answer that is not a
    /// JSON-RPC message is retried too, at most [`UNUSABLE_ANSWERS`] times in
    /// a row, deadline or not: a server that keeps answering garbage is not
    /// worth waiting for (see [`Retries`]).
    pub(super) async fn retrying<T, F, Fut>(
        &self,
        method: &'static str,
        mut request: F,
    ) -> Result<T, Error>
    where
        F: FnMut(Duration) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut retries = Retries::new(method, self.options);
        loop {
            match self.request(method, &mut request).await {
                Err(error) => {
                    let pause = retries.after(self, error)?;
                    self.sleep_in(pause, Stage::Request { method }).await?;
                }
                answered => return answered,
            }
        }
    }

    /// Records `state` as the latest and shows it to the observer.
    pub(super) fn observe(&mut self, state: TaskState) -> &TaskState {
        if let Some(observer) = &self.options.observer {
            observer(&state);
        }
        self.current.insert(state)
    }
}

/// The retries of one request of a wait: the pause before each further
/// attempt (from `retry_backoff`, doubling up to `max_interval`), and the
/// answers that were not JSON-RPC messages, at most [`UNUSABLE_ANSWERS`] in
/// a row. [`Wait::retrying`] runs a request with it; a request kept open
/// beside the wait's reads, one that blocks until the task ends, runs it by
/// hand ([`Retries::blocking`]).
pub(crate) struct Retries {
    method: &'static str,
    backoff: Duration,
    unusable: u32,
    blocking: bool,
}

impl Retries {
    /// The retries of a `method` request that answers at once.
    pub(crate) fn new(method: &'static str, options: &AwaitOptions) -> Self {
        Self {
            method,
            backoff: options.retry_backoff,
            unusable: 0,
            blocking: false,
        }
    }

    /// The retries of a `method` request that blocks until the task ends:
    /// running out of its own time is how it says "not yet", so it is sent
    /// again at once, and that breaks a row of unusable answers.
    pub(crate) fn blocking(method: &'static str, options: &AwaitOptions) -> Self {
        Self {
            blocking: true,
            ..Self::new(method, options)
        }
    }

    /// After an attempt failed with `error`: the pause before the next
    /// one, or the error that ends the request (one not worth retrying, or
    /// the last of [`UNUSABLE_ANSWERS`] unusable answers).
    pub(crate) fn after(&mut self, wait: &Wait<'_>, error: Error) -> Result<Duration, Error> {
        let method = self.method;
        match error.retry() {
            Retry::No => return Err(error),
            Retry::Garbage => {
                self.unusable += 1;
                if self.unusable >= UNUSABLE_ANSWERS {
                    tracing::debug!(%error, method, "the server keeps answering garbage");
                    return Err(Error::protocol(
                        ProtocolViolation::UnusableAnswers {
                            method,
                            attempts: self.unusable,
                        },
                        None,
                    ));
                }
            }
            Retry::Fault if self.blocking && error.is_request_timeout() => {
                tracing::debug!(method, "ran out of its time; sending it again");
                self.unusable = 0;
                return Ok(Duration::ZERO);
            }
            Retry::Fault => {}
        }
        let backoff = self.backoff;
        tracing::debug!(%error, ?backoff, method, "failed in transport; retrying");
        // An answer, however wrong, never makes the wait send faster than
        // its interval; a lost one is retried sooner.
        let pause = if error.retry() == Retry::Garbage {
            backoff.max(wait.options.interval_for(wait.current.as_ref()))
        } else {
            backoff
        };
        self.backoff = (backoff * 2).min(wait.options.max_interval);
        Ok(pause)
    }
}

impl<H: ClientHandler> TasksClient<H> {
    /// Polls `tasks/get` until the task is terminal, answering input as
    /// `options.input` says, and returns its outcome. Where the client has
    /// a [`ListenChannel`](super::ListenChannel) and `options.listen`
    /// allows it, the wait listens for the task's notifications instead of
    /// sleeping between polls (see [`listen`](super::listen)); input
    /// handling, stall detection and the deadline are the same.
    ///
    /// The interval is the task's latest `pollIntervalMs` (else
    /// `default_interval`) clamped to `[min_interval, max_interval]`. At the
    /// deadline the wait returns [`Error::Timeout`] with the time waited and
    /// the last state read; the task keeps running. Every request of the
    /// wait (`tasks/get`, and the `tasks/update` that answers input) gets the
    /// time left as its timeout, and transient transport failures are
    /// retried with backoff inside the deadline; JSON-RPC errors are
    /// returned at once. A finished state that carries its result or error
    /// returns at once, with no request.
    ///
    /// On a 2025-11-25 connection the same options and outcomes apply; the
    /// payload comes from one `tasks/result` kept open (see [`super::legacy`]).
    pub async fn await_task(
        &self,
        task: impl Into<AwaitFrom>,
        options: &AwaitOptions,
    ) -> Result<TaskOutcome, Error> {
        self.await_within(task.into(), options, Deadline::start(options.deadline))
            .await
    }

    /// [`TasksClient::await_task`] inside `deadline`, which may have started
    /// before (with the MRTR rounds that made the task).
    pub(crate) async fn await_within(
        &self,
        task: AwaitFrom,
        options: &AwaitOptions,
        deadline: Deadline,
    ) -> Result<TaskOutcome, Error> {
        let journaled = self.journaled(options);
        let options = journaled.as_ref().unwrap_or(options);
        let (id, seed) = match task {
            AwaitFrom::State(state) => (state.id.clone(), Some(*state)),
            AwaitFrom::Id(id) => (id, None),
        };
        // The era, told once: each era feeds the machine its own way.
        let requests = self.requests();
        let mut wait = Wait::new(options, id, deadline);
        let outcome = match requests.era() {
            Era::Legacy => self.await_legacy(&mut wait, seed).await,
            Era::Extension => await_extension(requests, &mut wait, seed).await,
        };
        self.flushed(&wait, outcome).await
    }

    /// `outcome`, once the journal has every status the wait queued; if
    /// it has not by the deadline, [`Error::Timeout`] in
    /// [`Stage::Journal`], whose last state is the task's final one (an
    /// outcome that is an error is returned as it is).
    pub(crate) async fn flushed<T>(
        &self,
        wait: &Wait<'_>,
        outcome: Result<T, Error>,
    ) -> Result<T, Error> {
        if wait.deadline.within(self.flush_journal()).await.is_some() {
            return outcome;
        }
        tracing::debug!("the journal did not confirm the wait's statuses by the deadline");
        outcome.and(Err(wait.timeout(Stage::Journal)))
    }

    /// Sends `tasks/cancel`, then polls until the task is finished (from
    /// the minimum interval, doubling up to the server's:
    /// [`AwaitOptions::settling_interval`]), and returns its outcome, as
    /// [`TasksClient::call_and_await`] does: [`TaskOutcome::Cancelled`], or
    /// [`TaskOutcome::Completed`] or [`TaskOutcome::Failed`] when the work
    /// ended first (cancellation is cooperative). `options` gives the
    /// deadline (past it, [`Error::Timeout`] carries the last state read),
    /// the intervals, the retries and the observer; its input settings are
    /// not used.
    pub async fn cancel_and_wait(
        &self,
        id: &TaskId,
        options: &AwaitOptions,
    ) -> Result<TaskOutcome, Error> {
        let journaled = self.journaled(options);
        let options = journaled.as_ref().unwrap_or(options);
        let requests = self.requests();
        let mut wait = Wait::new(options, id.clone(), Deadline::start(options.deadline));
        let state = match requests.era() {
            Era::Legacy => self.cancel_and_wait_legacy(&mut wait).await,
            Era::Extension => {
                cancel_and_settle(requests, &mut wait, &mut Alone::polling(requests)).await
            }
        };
        self.flushed(&wait, state).await
    }
}

/// [`TasksClient::cancel_and_wait`] in either era: `tasks/cancel`, then the
/// task read by `feed` at the settling interval until it has its outcome,
/// starting from the state `tasks/cancel` answered with where the era's
/// does. A finished state without its payload gets it from `feed` where it
/// comes apart from the states, else it is read again, a few times.
pub(crate) async fn cancel_and_settle<H: ClientHandler>(
    requests: TaskRequests<'_, H>,
    wait: &mut Wait<'_>,
    feed: &mut impl Feed,
) -> Result<TaskOutcome, Error> {
    let id = wait.id.clone();
    let mut read = wait
        .retrying("tasks/cancel", |timeout| {
            requests.cancel(&id, Some(timeout))
        })
        .await?;
    let mut settling = 0;
    // Finished states in a row that lacked their payload.
    let mut incomplete = 0u32;
    loop {
        let state = match read.take() {
            Some(state) => state,
            None => feed.read(wait).await?,
        };
        let current = wait.observe(state);
        if current.has_outcome() {
            return current.outcome();
        }
        if current.status.is_terminal() {
            let finished = current.clone();
            if let Some(state) = feed.payload(wait, &finished).await? {
                return wait.observe(state).outcome();
            }
            // As in a wait: tasks/get must carry the payload; read again
            // a few times before giving up on the server.
            incomplete += 1;
            if incomplete >= INCOMPLETE_POLLS {
                return Err(Error::protocol(
                    ProtocolViolation::IncompleteTask {
                        status: finished.status,
                        polls: incomplete,
                    },
                    Some(finished.raw),
                ));
            }
        }
        let pause = wait
            .options
            .settling_interval(settling, wait.current.as_ref());
        settling += 1;
        wait.sleep(pause).await?;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn intervals_are_clamped() {
        let options = AwaitOptions::default();
        let with = |v: Value| {
            TaskState::from_json(json!({"taskId": "a", "status": "working", "pollIntervalMs": v}))
                .unwrap()
        };
        assert_eq!(options.interval_for(None), Duration::from_secs(1));
        assert_eq!(
            options.interval_for(Some(&with(json!(0)))),
            Duration::from_millis(50)
        );
        assert_eq!(
            options.interval_for(Some(&with(json!(-1)))),
            Duration::from_millis(50)
        );
        assert_eq!(
            options.interval_for(Some(&with(json!(5000.0)))),
            Duration::from_secs(5)
        );
        assert_eq!(
            options.interval_for(Some(&with(json!(1e12)))),
            Duration::from_secs(30)
        );
        assert_eq!(
            options.interval_for(Some(&with(json!("x")))),
            Duration::from_secs(1)
        );
    }
}
