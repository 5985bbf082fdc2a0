//! Awaiting many tasks of one server at once: [`TasksClient::await_each`]
//! (a stream of outcomes, each as its task finishes), and on it
//! [`TasksClient::await_all`] and [`TasksClient::await_any`].
//!
//! Each task is awaited as [`TasksClient::await_task`] awaits it: the same
//! decisions on every state read (the outcome, input answered through
//! `tasks/update` with each key answered once, stall detection, incomplete
//! states, retries inside the deadline), the same observer and journal. What
//! the set shares is what twenty separate waits would each hold:
//!
//! * **one listen stream** for all its tasks, where the client has a
//!   [`ListenChannel`](super::ListenChannel) and `options.listen` allows it,
//!   read by one dispatcher that hands each notification to its task's
//!   wait. Our server reports on at most 1,024 tasks per stream, so a set
//!   is split into streams of [`TASKS_PER_STREAM`] (2,500 tasks: three
//!   streams). A task the acknowledgement leaves out is polled (or fails
//!   with [`Error::ListenDeclined`] in [`ListenMode::Required`]); tasks
//!   whose stream ends or breaks before they do are polled from then on,
//!   and a stream that lost notifications has each of its tasks read once;
//! * **one poll queue**: every `tasks/get` of the set (the read of each
//!   seeded task once its stream is open, the polls where the server cannot
//!   listen, the fallbacks) waits for its turn, and at most
//!   [`POLLS_IN_FLIGHT`] go out at once, in the order the tasks fall due,
//!   each task at its own interval (its `pollIntervalMs`, clamped): a
//!   thousand tasks polled every second are a steady round of requests,
//!   never a thousand at once;
//! * **one deadline**: [`AwaitOptions::deadline`] counts from the call for
//!   the whole set; at the deadline every task not finished yet ends with
//!   [`Error::Timeout`] (its last state read), after the finished ones;
//! * **one input mode**: [`AwaitOptions::input`] answers every task's input
//!   requests, as for one task; a [resolver](super::InputMode::Resolver) is
//!   called for one task at a time, so that a resolver that asks a person
//!   never asks two things at once.
//!
//! On a 2025-11-25 connection there is no listen stream: each task is
//! awaited by [`TasksClient::await_task`]'s wait of that era, all of them
//! concurrently (each polls `tasks/get` and keeps its own `tasks/result`
//! open), with the deadline counted from the same moment and the resolver
//! called for one task at a time.
//!
//! Cancel safety: dropping the stream (or the future of `await_all` or
//! `await_any`) ends every wait of the set and closes its listen streams;
//! the tasks keep running on the server and can be awaited again by id.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, FuturesUnordered, SelectAll};
use futures::{FutureExt, StreamExt};
use rmcp::ClientHandler;
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};

use super::deadline::Deadline;
use super::error::Stage;
use super::listen::{self, Event, ListenMode, Refusal};
use super::state::Era;
use super::wait::{Feed, Heard, Machine, Wait, is_stale};
use super::wire::TaskRequests;
use super::{AwaitFrom, AwaitOptions, Error, InputMode, TaskOutcome, TaskState, TasksClient};
use crate::task::TaskId;

/// The most tasks one listen stream of a set names: our server's bound
/// (it leaves further ids out of its acknowledgement).
pub const TASKS_PER_STREAM: usize = 1024;

/// The most `tasks/get` requests of one set in flight at once.
pub const POLLS_IN_FLIGHT: usize = 8;

/// One task's outcome, as [`TasksClient::await_each`] yields it: the task
/// and how its wait ended.
pub type Finished = (TaskId, Result<TaskOutcome, Error>);

/// The outcomes of a set of tasks, each as its task finishes: a
/// [`Stream`](futures::Stream) made by [`TasksClient::await_each`]. It
/// ends when every task has been reported; it does the waiting only while
/// it is polled. Dropping it ends the waits (see the [module docs](self)).
#[must_use = "a stream does nothing unless polled"]
pub struct TaskOutcomes {
    /// Everything the set runs; `None` once it is over.
    driver: Option<BoxFuture<'static, ()>>,
    finished: mpsc::UnboundedReceiver<Finished>,
    remaining: usize,
}

impl std::fmt::Debug for TaskOutcomes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskOutcomes")
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl TaskOutcomes {
    /// How many tasks have not been reported yet.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// The next task to finish and its outcome; `None` once every task
    /// has been reported (`StreamExt::next`, without importing it). Cancel
    /// safe: an outcome not taken yet stays for the next call.
    pub async fn next(&mut self) -> Option<Finished> {
        std::future::poll_fn(|cx| futures::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }
}

impl futures::Stream for TaskOutcomes {
    type Item = Finished;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Finished>> {
        let this = &mut *self;
        if let Some(driver) = this.driver.as_mut()
            && driver.as_mut().poll(cx).is_ready()
        {
            // Its sender is gone with it: the receiver ends after the last one.
            this.driver = None;
        }
        match this.finished.poll_recv(cx) {
            Poll::Ready(Some(finished)) => {
                this.remaining = this.remaining.saturating_sub(1);
                Poll::Ready(Some(finished))
            }
            other => other,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<H: ClientHandler> TasksClient<H> {
    /// Awaits every task of `tasks` (states or ids of this client's
    /// server) and yields each one's outcome as it finishes, the earliest
    /// first: the shape a host that fanned out many calls wants, acting on
    /// each result as it comes. One listen stream (one per
    /// [`TASKS_PER_STREAM`] tasks), one poll queue, one deadline and one
    /// input mode serve the whole set; see the [module docs](self). Each
    /// outcome is what [`TasksClient::await_task`] would return for that
    /// task (a task that is not this caller's, or is gone, ends with
    /// [`Error::UnknownTask`] and the others go on). A task given twice is
    /// awaited and reported once.
    ///
    /// The stream owns a clone of the client, so it can be moved to
    /// another task. `options.observer` sees the states of every task
    /// (each carries its id).
    ///
    /// ```no_run
    /// # async fn run(client: mcp_tasks::TasksClient<()>, tasks: Vec<mcp_tasks::TaskState>) {
    /// use mcp_tasks::AwaitOptions;
    ///
    /// let mut outcomes = client.await_each(&tasks, &AwaitOptions::default());
    /// while let Some((id, outcome)) = outcomes.next().await {
    ///     match outcome {
    ///         Ok(outcome) => { /* act on this task's result */ }
    ///         Err(error) if error.is_timeout() => { /* the deadline ended the set */ }
    ///         Err(error) => { /* this task failed, was cancelled, ... */ }
    ///     }
    /// #   let _ = id;
    /// }
    /// # }
    /// ```
    pub fn await_each<I>(&self, tasks: I, options: &AwaitOptions) -> TaskOutcomes
    where
        I: IntoIterator,
        I::Item: Into<AwaitFrom>,
    {
        let members = distinct(tasks);
        let (sender, finished) = mpsc::unbounded_channel();
        let remaining = members.len();
        let driver = drive(self.clone(), members, options.clone(), sender).boxed();
        TaskOutcomes {
            driver: Some(driver),
            finished,
            remaining,
        }
    }

    /// Awaits every task of `tasks` and returns their outcomes in the
    /// order given (each task once): [`TasksClient::await_each`],
    /// collected. At the deadline the tasks not finished yet are
    /// [`Error::Timeout`], the others keep their outcomes.
    pub async fn await_all<I>(&self, tasks: I, options: &AwaitOptions) -> Vec<Finished>
    where
        I: IntoIterator,
        I::Item: Into<AwaitFrom>,
    {
        let members = distinct(tasks);
        let order: Vec<TaskId> = members.iter().map(|(id, _)| id.clone()).collect();
        let mut outcomes: HashMap<TaskId, Result<TaskOutcome, Error>> = self
            .await_each(members.into_iter().map(|(_, from)| from), options)
            .collect()
            .await;
        order
            .into_iter()
            .filter_map(|id| {
                let outcome = outcomes.remove(&id)?;
                Some((id, outcome))
            })
            .collect()
    }

    /// Awaits `tasks` until the first of them finishes, and returns its
    /// outcome (`None` when `tasks` is empty); the others keep running on
    /// the server and can be awaited again. At the deadline it is the
    /// [`Error::Timeout`] of one of them.
    pub async fn await_any<I>(&self, tasks: I, options: &AwaitOptions) -> Option<Finished>
    where
        I: IntoIterator,
        I::Item: Into<AwaitFrom>,
    {
        self.await_each(tasks, options).next().await
    }
}

/// Each task once, by id, in the order given (the first of a repeated one).
fn distinct<I>(tasks: I) -> Vec<(TaskId, AwaitFrom)>
where
    I: IntoIterator,
    I::Item: Into<AwaitFrom>,
{
    let mut seen = HashSet::new();
    tasks
        .into_iter()
        .map(Into::into)
        .filter_map(|from| {
            let id = match &from {
                AwaitFrom::State(state) => state.id.clone(),
                AwaitFrom::Id(id) => id.clone(),
            };
            seen.insert(id.clone()).then_some((id, from))
        })
        .collect()
}

/// A resolver called for one task of the set at a time; other modes as they are.
fn one_at_a_time(input: &InputMode) -> InputMode {
    let InputMode::Resolver(resolve) = input else {
        return input.clone();
    };
    let resolve = resolve.clone();
    let turn = Arc::new(tokio::sync::Mutex::new(()));
    InputMode::Resolver(Arc::new(move |requests| {
        let (resolve, turn) = (resolve.clone(), turn.clone());
        Box::pin(async move {
            let _turn = turn.lock_owned().await;
            resolve(requests).await
        })
    }))
}

/// Runs the set: opens its listen streams, then runs every task's wait and
/// the dispatcher together, sending each outcome as it comes.
async fn drive<H: ClientHandler>(
    client: TasksClient<H>,
    members: Vec<(TaskId, AwaitFrom)>,
    options: AwaitOptions,
    sender: mpsc::UnboundedSender<Finished>,
) {
    // One deadline for the whole set, started before anything is sent.
    let deadline = Deadline::start(options.deadline);
    let shared = options.clone().with_input(one_at_a_time(&options.input));
    // Each task's own options: the journal's observer keeps a last status per task.
    let members: Vec<(TaskId, Option<TaskState>, AwaitOptions)> = members
        .into_iter()
        .map(|(id, from)| {
            let seed = match from {
                AwaitFrom::State(state) => Some(*state),
                AwaitFrom::Id(_) => None,
            };
            let options = client.journaled(&shared).unwrap_or_else(|| shared.clone());
            (id, seed, options)
        })
        .collect();
    let (client, sender) = (&client, &sender);
    // Each outcome is sent once the journal has the statuses its wait
    // queued, or the deadline passed (then a timeout in the journal's stage).
    let report = move |(id, outcome): Finished| async move {
        let outcome = match deadline.within(client.flush_journal()).await {
            Some(()) => outcome,
            None => outcome.and(Err(deadline.timeout(Stage::Journal, Some(&id), None))),
        };
        sender.send((id, outcome)).is_ok()
    };

    // The era, told once for the whole set.
    let requests = client.requests();
    if requests.era() == Era::Legacy {
        // No stream to share: the era's own wait for each, concurrently.
        let mut waits: FuturesUnordered<_> = members
            .into_iter()
            .map(|(id, seed, options)| async move {
                let mut wait = Wait::new(&options, id.clone(), deadline);
                let outcome = client.await_legacy(&mut wait, seed).await;
                (id, outcome)
            })
            .collect();
        while let Some(finished) = waits.next().await {
            if !report(finished).await {
                return;
            }
        }
        return;
    }

    let listened = listen(client, &members, &shared, deadline).await;
    let Listened {
        events,
        mailboxes,
        mut mail,
        mut refused,
    } = listened;
    let turns = Semaphore::new(POLLS_IN_FLIGHT);
    let turns = &turns;
    let mut waits: FuturesUnordered<_> = members
        .iter()
        .map(|(id, seed, options)| {
            let mail = mail.remove(id.expose());
            let refused = refused.remove(id.expose());
            async move {
                if let Some(error) = refused {
                    return (id.clone(), Err(error));
                }
                let mut wait = Wait::new(options, id.clone(), deadline);
                // A seed predates the stream: read once after it opened.
                let fresh = seed.is_some();
                if let Some(seed) = seed {
                    wait.observe(seed.clone());
                }
                let mut feed = Member {
                    requests,
                    turns,
                    mail,
                    fresh,
                };
                let outcome = Machine::new(requests).run(&mut wait, &mut feed).await;
                (id.clone(), outcome)
            }
        })
        .collect();
    let dispatching = dispatch(events, mailboxes);
    tokio::pin!(dispatching);
    let mut dispatched = false;
    loop {
        tokio::select! {
            finished = waits.next() => match finished {
                Some(finished) => {
                    if !report(finished).await {
                        return;
                    }
                }
                None => return,
            },
            () = &mut dispatching, if !dispatched => dispatched = true,
        }
    }
}

/// What listening gave the set.
struct Listened {
    /// The events of every open stream, tagged with the stream's index.
    events: SelectAll<BoxStream<'static, (usize, Event)>>,
    /// Where each covered task's notifications go, by id.
    mailboxes: HashMap<String, Mailbox>,
    /// Each covered task's end of its mailbox, by id.
    mail: HashMap<String, mpsc::UnboundedReceiver<Mail>>,
    /// The tasks whose wait fails at once ([`ListenMode::Required`]), by id.
    refused: HashMap<String, Error>,
}

/// What the dispatcher hands a task's wait.
#[derive(Debug)]
enum Mail {
    /// A `notifications/tasks` for the task (its params).
    Task(Value),
    /// Its stream lost notifications: read the task again.
    Resync,
}

struct Mailbox {
    stream: usize,
    sender: mpsc::UnboundedSender<Mail>,
}

/// Opens the set's streams (one per [`TASKS_PER_STREAM`] tasks not
/// finished in hand) as `options.listen` says.
async fn listen<H: ClientHandler>(
    client: &TasksClient<H>,
    members: &[(TaskId, Option<TaskState>, AwaitOptions)],
    options: &AwaitOptions,
    deadline: Deadline,
) -> Listened {
    let mut listened = Listened {
        events: SelectAll::new(),
        mailboxes: HashMap::new(),
        mail: HashMap::new(),
        refused: HashMap::new(),
    };
    if options.listen == ListenMode::Poll {
        return listened;
    }
    let required = options.listen == ListenMode::Required;
    let open: Vec<TaskId> = members
        .iter()
        .filter(|(_, seed, _)| !seed.as_ref().is_some_and(TaskState::has_outcome))
        .map(|(id, _, _)| id.clone())
        .collect();
    for (n, chunk) in open.chunks(TASKS_PER_STREAM).enumerate() {
        let Ok(Some(timeout)) = deadline.cut(Some(options.request_timeout)) else {
            // The waits end at once, with their timeouts.
            break;
        };
        let refusal = match client.open_listen_for(chunk, timeout).await {
            Ok((stream, covered)) => {
                let index = listened.events.len();
                listened.events.push(events(index, stream));
                for id in chunk {
                    if covered.contains(id.expose()) {
                        let (sender, receiver) = mpsc::unbounded_channel();
                        let key = id.expose().to_owned();
                        listened.mailboxes.insert(
                            key.clone(),
                            Mailbox {
                                stream: index,
                                sender,
                            },
                        );
                        listened.mail.insert(key, receiver);
                    } else if required {
                        listened
                            .refused
                            .insert(id.expose().to_owned(), Error::ListenDeclined);
                    }
                }
                continue;
            }
            Err(refusal) => refusal,
        };
        // A client without a channel says so once, not at every wait.
        if !matches!(refusal, Refusal::NoChannel) {
            tracing::debug!(%refusal, tasks = chunk.len(), "not listening");
        }
        // No channel, a server that refuses listen, or one with no stream
        // left: no further stream will do.
        let hopeless = matches!(
            refusal,
            Refusal::NoChannel | Refusal::Unavailable(_) | Refusal::Refused(_) | Refusal::Busy
        );
        if required {
            let rest = if hopeless {
                &open[n * TASKS_PER_STREAM..]
            } else {
                chunk
            };
            for id in rest {
                if let Some(error) = required_error(&refusal) {
                    listened.refused.insert(id.expose().to_owned(), error);
                }
            }
        }
        if hopeless {
            break;
        }
    }
    listened
}

/// How a refused stream ends a wait that requires listening, as
/// [`TasksClient::await_task`] ends it; `None`: poll (the server serves
/// listen, this stream did not work out).
fn required_error(refusal: &Refusal) -> Option<Error> {
    Some(match refusal {
        Refusal::NoChannel => Error::Usage(listen::NO_CHANNEL),
        Refusal::Unavailable(why) => Error::Usage(why),
        Refusal::Refused(error) => Error::Rpc {
            method: listen::LISTEN,
            error: Box::new(error.clone()),
        },
        Refusal::Declined => Error::ListenDeclined,
        Refusal::Failed(_) | Refusal::Busy => return None,
    })
}

/// The events of stream `index`, until it ends.
fn events(index: usize, stream: listen::Stream) -> BoxStream<'static, (usize, Event)> {
    futures::stream::unfold(Some(stream), move |stream| async move {
        let mut stream = stream?;
        let event = stream.next().await;
        let open = !matches!(event, Event::Ended | Event::Refused(_));
        Some(((index, event), open.then_some(stream)))
    })
    .boxed()
}

/// Hands each notification to its task's wait until every stream has
/// ended; a task whose stream ends sees its mailbox close, and polls.
async fn dispatch(
    mut events: SelectAll<BoxStream<'static, (usize, Event)>>,
    mut mailboxes: HashMap<String, Mailbox>,
) {
    while let Some((index, event)) = events.next().await {
        match event {
            Event::Task(params) => {
                let Some(id) = params.get("taskId").and_then(Value::as_str) else {
                    continue;
                };
                let id = id.to_owned();
                if let Some(mailbox) = mailboxes.get(&id)
                    && mailbox.stream == index
                    && mailbox.sender.send(Mail::Task(params)).is_err()
                {
                    // That wait is over.
                    mailboxes.remove(&id);
                }
            }
            // A second acknowledgement says nothing new.
            Event::Acknowledged(_) => {}
            Event::Gap => {
                tracing::debug!("a listen stream lost notifications; reading its tasks again");
                mailboxes.retain(|_, mailbox| {
                    mailbox.stream != index || mailbox.sender.send(Mail::Resync).is_ok()
                });
            }
            Event::Ended | Event::Refused(_) => {
                tracing::debug!("a listen stream ended; its tasks are polled");
                mailboxes.retain(|_, mailbox| mailbox.stream != index);
            }
        }
    }
}

/// The feed of one task of a set: its mailbox on the set's stream (or
/// none: polling), and its turn in the set's poll queue for every read.
struct Member<'s, H: ClientHandler> {
    requests: TaskRequests<'s, H>,
    turns: &'s Semaphore,
    mail: Option<mpsc::UnboundedReceiver<Mail>>,
    /// The state in hand may predate the stream: read before listening.
    fresh: bool,
}

impl<H: ClientHandler> Feed for Member<'_, H> {
    async fn wait(&mut self, wait: &mut Wait<'_>, pause: Duration) -> Result<Heard, Error> {
        let Some(mail) = self.mail.as_mut() else {
            return Ok(Heard::Sleep);
        };
        if std::mem::take(&mut self.fresh) {
            return Ok(Heard::ReadNow);
        }
        let sleep = wait.sleep(pause);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                mail = mail.recv() => match mail {
                    Some(Mail::Task(params)) => {
                        let state = TaskState::from_json(params)?;
                        if state.id != wait.id || is_stale(&state, wait.current.as_ref()) {
                            continue;
                        }
                        return Ok(Heard::State(Box::new(state)));
                    }
                    Some(Mail::Resync) => return Ok(Heard::ReadNow),
                    // The stream is over: poll from now on.
                    None => break,
                },
                slept = &mut sleep => {
                    slept?;
                    return Ok(Heard::Quiet);
                }
            }
        }
        self.mail = None;
        Ok(Heard::ReadNow)
    }

    async fn read(&mut self, wait: &Wait<'_>) -> Result<TaskState, Error> {
        // The deadline bounds the wait for a turn as it bounds a request.
        let _turn = loop {
            let left = wait.request_timeout("tasks/get")?;
            if let Ok(turn) = tokio::time::timeout(left, self.turns.acquire()).await {
                break turn.ok();
            }
        };
        let requests = self.requests;
        wait.retrying("tasks/get", |timeout| requests.get(&wait.id, Some(timeout)))
            .await
    }
}
