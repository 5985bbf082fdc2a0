//! The wait's loop, as one state machine: from the state in hand (if any)
//! to the task's outcome, in either era (what differs is the [`Feed`]'s).
//!
//! A [`Machine`] holds what the loop remembers from one state to the next
//! (the input keys it answered, the polls with nothing new to answer, the
//! polls whose state lacked its payload, whether the state in hand came
//! from the server) and the task requests of its connection, whose era was
//! told once before it started. [`Machine::decide`] reads the state in hand
//! and names the [`Next`] step; each step is one transition:
//!
//! * done: the state carries the task's outcome;
//! * poll: read `tasks/get` now (there is no state yet, or the caller's
//!   lacks what its status promises);
//! * listen: wait the pause for a notification, or sleep it and poll
//!   ([`Machine::listen`]; where the next state comes from is the [`Feed`]'s);
//! * answer input: the requests in hand not answered yet (those of an
//!   `input_required` state, or those the feed brought apart from the
//!   states), answered in one go ([`Machine::answer`]), and the stall that
//!   ends a task asking for nothing new ([`Machine::stalled`]); input left
//!   unanswered hands the task back ([`Machine::unanswered`]);
//! * incomplete: a polled state without its payload, read again a few
//!   times ([`Machine::incomplete`]).
//!
//! Every request and every pause runs inside the deadline, and transient
//! failures back off and retry inside it ([`Wait::retrying`], [`Wait::sleep`]):
//! the deadline ends the machine from within whichever step it reaches.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::InputResponses;
use serde_json::Value;

use super::listening::{Heard, Listening};
use super::{AwaitOptions, INCOMPLETE_POLLS, Wait};
use crate::client::error::{Error, ProtocolViolation};
use crate::client::listen::ListenMode;
use crate::client::state::{TaskOutcome, TaskState};
use crate::client::unanswered::Unanswered;
use crate::client::wire::TaskRequests;
use crate::task::TaskStatus;

/// Where a wait's next state comes from, for [`Machine::run`]: a wait of
/// its own ([`Alone`]), one of a set sharing a listen stream and a poll
/// queue ([`many`](crate::client::many)), or an era's feed whose input and
/// payload come apart from the task's states (requests of the server's
/// own, a result request kept open).
pub(crate) trait Feed {
    /// Where the poll loop would sleep `pause` and then read `tasks/get`.
    /// A feed that reads a state on the way to the one it hands over
    /// records it ([`Wait::observe`]).
    async fn wait(&mut self, wait: &mut Wait<'_>, pause: Duration) -> Result<Heard, Error>;

    /// Reads the task's state now (`tasks/get`, retried as
    /// [`Wait::retrying`] does).
    async fn read(&mut self, wait: &Wait<'_>) -> Result<TaskState, Error>;

    /// The input requests that reached the wait apart from the task's
    /// states and wait for an answer, by key; `None` (the default) when the
    /// task's input requests and payload come inside its states, as
    /// `tasks/get` must carry them. A feed that brings them apart has its
    /// requests answered whatever the status in hand (through
    /// [`Feed::respond`]), and brings the payload as a state that carries
    /// it: a state without it is waited on, not read again.
    fn apart(&mut self) -> Option<BTreeMap<String, Value>> {
        None
    }

    /// Sends `responses` to requests [`Feed::apart`] gave.
    fn respond(&mut self, responses: InputResponses) {
        drop(responses);
    }

    /// The task's state read once (one request, no retry), when input
    /// that came apart was left unanswered before a state said the task
    /// asks for it; `None` (the default) when the feed cannot or the read
    /// failed: the state in hand is handed back.
    async fn reread(&mut self, wait: &Wait<'_>) -> Option<TaskState> {
        let _ = wait;
        None
    }

    /// `state`, finished without its payload, with the payload the feed
    /// brings apart from the states (for
    /// [`cancel_and_settle`](super::cancel_and_settle));
    /// `None` (the default) when it brings none: `tasks/get` must carry it.
    async fn payload(
        &mut self,
        wait: &Wait<'_>,
        state: &TaskState,
    ) -> Result<Option<TaskState>, Error> {
        let _ = (wait, state);
        Ok(None)
    }
}

/// The feed of a wait on one task: its own listen stream, its own polls.
pub(super) struct Alone<'c, H: ClientHandler> {
    requests: TaskRequests<'c, H>,
    listening: Listening<'c, H>,
}

impl<'c, H: ClientHandler> Alone<'c, H> {
    /// A feed that only polls, with `requests`.
    pub(super) fn polling(requests: TaskRequests<'c, H>) -> Self {
        Self {
            requests,
            listening: Listening::new(requests.client(), ListenMode::Poll),
        }
    }
}

impl<H: ClientHandler> Feed for Alone<'_, H> {
    async fn wait(&mut self, wait: &mut Wait<'_>, pause: Duration) -> Result<Heard, Error> {
        self.listening.wait(wait, pause).await
    }

    async fn read(&mut self, wait: &Wait<'_>) -> Result<TaskState, Error> {
        let requests = self.requests;
        wait.retrying("tasks/get", |timeout| requests.get(&wait.id, Some(timeout)))
            .await
    }
}

/// [`TasksClient::await_task`](crate::client::TasksClient::await_task) in
/// the extension's era: the machine, fed by the wait's own polls and
/// listen stream, from `seed` (when the caller had a state).
pub(super) async fn await_extension<H: ClientHandler>(
    requests: TaskRequests<'_, H>,
    wait: &mut Wait<'_>,
    seed: Option<TaskState>,
) -> Result<TaskOutcome, Error> {
    if let Some(state) = seed {
        wait.observe(state);
    }
    let mut feed = Alone {
        requests,
        listening: Listening::new(requests.client(), wait.options.listen),
    };
    Machine::new(requests).run(wait, &mut feed).await
}

/// What the wait does next, as [`Machine::decide`] reads the state in hand.
enum Next {
    /// The task's outcome: the wait is over.
    Done(Box<TaskOutcome>),
    /// Input left unanswered: the wait hands the task back, asking (the
    /// state in hand, with the requests in hand).
    Unanswered(Box<TaskState>, Unanswered),
    /// Read `tasks/get` at once.
    Poll,
    /// Wait this pause for the next state (listening, or sleeping and then
    /// polling).
    Listen(Duration),
}

/// The wait's loop (see the [module docs](self)).
pub(crate) struct Machine<'c, H: ClientHandler> {
    /// The task requests, in the era told before the machine started.
    requests: TaskRequests<'c, H>,
    /// Input keys answered during this wait.
    answered: BTreeSet<String>,
    /// Polls in a row, `input_required`, with nothing new to answer.
    idle_polls: u32,
    /// Polls in a row whose state lacked the payload its status requires.
    incomplete: u32,
    /// Whether the state in hand came from the server (else from the caller).
    polled: bool,
}

impl<'c, H: ClientHandler> Machine<'c, H> {
    /// A machine at the start of a wait, sending `requests`.
    pub(crate) fn new(requests: TaskRequests<'c, H>) -> Self {
        Self {
            requests,
            answered: BTreeSet::new(),
            idle_polls: 0,
            incomplete: 0,
            polled: false,
        }
    }

    /// Runs the wait from the state in hand (if any) to the task's outcome;
    /// the next state comes from `feed`.
    pub(crate) async fn run(
        mut self,
        wait: &mut Wait<'_>,
        feed: &mut impl Feed,
    ) -> Result<TaskOutcome, Error> {
        loop {
            let next = match &wait.current {
                None => Next::Poll,
                Some(current) => self.decide(wait, feed, current).await?,
            };
            let state = match next {
                Next::Done(outcome) => return Ok(*outcome),
                Next::Unanswered(state, unanswered) => {
                    return Ok(Self::unanswered(wait, feed, *state, unanswered).await);
                }
                Next::Poll => feed.read(wait).await?,
                Next::Listen(pause) => match Self::listen(wait, feed, pause).await? {
                    Some(state) => state,
                    // Nothing new within the pause: decide again on the
                    // state in hand, as after a poll that read it again.
                    None => continue,
                },
            };
            wait.observe(state);
            self.polled = true;
        }
    }

    /// What to do with `current`, the state in hand; answers the input in
    /// hand on the way.
    async fn decide(
        &mut self,
        wait: &Wait<'_>,
        feed: &mut impl Feed,
        current: &TaskState,
    ) -> Result<Next, Error> {
        if current.has_outcome() {
            return current
                .outcome()
                .map(|outcome| Next::Done(Box::new(outcome)));
        }
        let apart = feed.apart();
        if apart.is_none() && lacks_payload(current) {
            return self.incomplete(wait.options, current);
        }
        self.incomplete = 0;
        let asking = current.status == TaskStatus::InputRequired;
        let answered = match (&apart, asking) {
            (Some(requests), _) => self.answer(wait, feed, requests, true).await?,
            (None, true) => {
                self.answer(wait, feed, &current.input_requests, false)
                    .await?
            }
            (None, false) => Ok(false),
        };
        match answered {
            Err(unanswered) => Ok(Next::Unanswered(
                Box::new(in_hand(current, apart)),
                unanswered,
            )),
            Ok(answered) if asking => self.input_required(wait, current, apart, answered).await,
            Ok(_) => Ok(self.working(wait.options, current)),
        }
    }

    /// Terminal without its payload, or `input_required` without its
    /// requests: a creation result may be so (read it at once); `tasks/get`
    /// must not be (read again at the interval, a few times, then give up
    /// on the server).
    fn incomplete(&mut self, options: &AwaitOptions, current: &TaskState) -> Result<Next, Error> {
        if !self.polled {
            return Ok(Next::Poll);
        }
        self.incomplete += 1;
        if self.incomplete >= INCOMPLETE_POLLS {
            return Err(Error::protocol(
                ProtocolViolation::IncompleteTask {
                    status: current.status.clone(),
                    polls: self.incomplete,
                },
                Some(current.raw.clone()),
            ));
        }
        Ok(Next::Listen(options.interval_for(Some(current))))
    }

    /// `input_required`, its input in hand answered (`answered`: some was
    /// sent now): a poll with nothing new to answer counts towards a stall.
    async fn input_required(
        &mut self,
        wait: &Wait<'_>,
        current: &TaskState,
        apart: Option<BTreeMap<String, Value>>,
        answered: bool,
    ) -> Result<Next, Error> {
        let options = wait.options;
        if answered {
            self.idle_polls = 0;
        } else {
            self.idle_polls += 1;
            if self.idle_polls >= options.stall_polls {
                return Err(self.stalled(wait, in_hand(current, apart)).await);
            }
        }
        Ok(Next::Listen(options.interval_for(Some(current))))
    }

    /// Answers the `requests` in hand not answered yet, as
    /// `wait.options.input` says, and sends the responses: back where they
    /// came from when they came `apart` from the states, else with
    /// `tasks/update`. `Ok(true)` when it sent some, `Err` with why the
    /// input was left unanswered when the wait hands it back.
    async fn answer(
        &mut self,
        wait: &Wait<'_>,
        feed: &mut impl Feed,
        requests: &BTreeMap<String, Value>,
        apart: bool,
    ) -> Result<Result<bool, Unanswered>, Error> {
        let pending: BTreeMap<String, Value> = requests
            .iter()
            .filter(|(key, _)| !self.answered.contains(*key))
            .map(|(key, request)| (key.clone(), request.clone()))
            .collect();
        if pending.is_empty() {
            return Ok(Ok(false));
        }
        let requests = self.requests;
        let responses = match requests
            .client()
            .answer_input(&pending, wait.options, &wait.deadline, None)
            .await
            .map_err(|error| wait.owned(error))?
        {
            Ok(responses) => responses,
            Err(unanswered) => return Ok(Err(unanswered)),
        };
        if responses.is_empty() {
            return Ok(Ok(false));
        }
        let keys: Vec<String> = responses.keys().cloned().collect();
        if apart {
            feed.respond(responses);
        } else {
            wait.retrying("tasks/update", |timeout| {
                requests.update(&wait.id, responses.clone(), Some(timeout))
            })
            .await?;
        }
        self.answered.extend(keys);
        Ok(Ok(true))
    }

    /// The task keeps asking for nothing new: [`Error::Stalled`] with
    /// `state`, after a `tasks/cancel` when the options say so.
    async fn stalled(&self, wait: &Wait<'_>, state: TaskState) -> Error {
        let requests = self.requests;
        let cancel_sent = wait.options.cancel_on_stall
            && wait
                .retrying("tasks/cancel", |timeout| {
                    requests.cancel(&wait.id, Some(timeout))
                })
                .await
                .is_ok();
        Error::Stalled {
            state: Box::new(state),
            polls: self.idle_polls,
            cancel_sent,
        }
    }

    /// Any other status: the task works (or resumed), and keys it issues
    /// again are offered again.
    fn working(&mut self, options: &AwaitOptions, current: &TaskState) -> Next {
        self.idle_polls = 0;
        self.answered.clear();
        Next::Listen(options.interval_for(Some(current)))
    }

    /// Input left unanswered: [`TaskOutcome::InputRequired`] with `state`.
    /// Input that came apart from the states may have come before a state
    /// said the task asks for it: then the state is read once more, for the
    /// outcome to show the task asking.
    async fn unanswered(
        wait: &mut Wait<'_>,
        feed: &mut impl Feed,
        mut state: TaskState,
        unanswered: Unanswered,
    ) -> TaskOutcome {
        if state.status != TaskStatus::InputRequired
            && let Some(read) = feed.reread(wait).await
        {
            let requests = std::mem::take(&mut state.input_requests);
            state = wait.observe(read).clone();
            state.input_requests = requests;
        }
        TaskOutcome::InputRequired { state, unanswered }
    }

    /// Waits `pause` for the next state: a notification where the feed
    /// listens, else a sleep and a poll. `None`: nothing new within the
    /// pause (the state in hand still holds), or input came apart from the
    /// states (decide again on the state in hand).
    async fn listen(
        wait: &mut Wait<'_>,
        feed: &mut impl Feed,
        pause: Duration,
    ) -> Result<Option<TaskState>, Error> {
        match feed.wait(wait, pause).await? {
            Heard::State(state) => Ok(Some(*state)),
            Heard::Quiet | Heard::Input => Ok(None),
            Heard::ReadNow => feed.read(wait).await.map(Some),
            Heard::Sleep => {
                wait.sleep(pause).await?;
                feed.read(wait).await.map(Some)
            }
        }
    }
}

/// `current` with the requests in hand: its own, or those that came
/// `apart` from the states.
fn in_hand(current: &TaskState, apart: Option<BTreeMap<String, Value>>) -> TaskState {
    let mut state = current.clone();
    if let Some(requests) = apart {
        state.input_requests = requests;
    }
    state
}

/// A state that is terminal, or asks for input, without what its status
/// promises (its result or error, its input requests), when it has no
/// outcome.
fn lacks_payload(state: &TaskState) -> bool {
    state.status.is_terminal()
        || (state.status == TaskStatus::InputRequired
            && state.input_requests.is_empty()
            && state.raw.get("inputRequests").is_none())
}
