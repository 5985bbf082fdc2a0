//! A wait that listens: where the poll loop would sleep and read
//! `tasks/get`, [`Listening::wait`] opens the stream once, then waits for
//! its next notification instead, and falls back to polling when the
//! stream cannot serve the task. The stream itself is
//! [`listen`]'s; this is the wait's use of it.

use std::time::Duration;

use rmcp::ClientHandler;

use super::Wait;
use crate::client::TasksClient;
use crate::client::error::{Error, Stage};
use crate::client::listen::{self, Event, ListenMode, Refusal, Stream};
use crate::client::state::TaskState;

/// What the wait does next, as [`Listening::wait`] (or another
/// [`Feed`](super::Feed)) decides.
#[derive(Debug)]
pub(crate) enum Heard {
    /// A notification: act on it as on a poll result.
    State(Box<TaskState>),
    /// Nothing within the pause: the state in hand still holds (a poll
    /// would have read it again).
    Quiet,
    /// Read `tasks/get` now: the stream just opened (a change before it is
    /// not missed), or it broke and the wait falls back to polling.
    ReadNow,
    /// Not listening: sleep the pause and poll.
    Sleep,
    /// Input requests came apart from the task's states (a feed's, never a
    /// listen stream's): decide again on the state in hand, answering them.
    Input,
}

enum State {
    Untried,
    Open(Box<Stream>),
    Off,
}

/// The listening part of one wait. Dropping it closes the stream.
pub(crate) struct Listening<'c, H: ClientHandler> {
    client: &'c TasksClient<H>,
    mode: ListenMode,
    state: State,
}

impl<'c, H: ClientHandler> Listening<'c, H> {
    pub(crate) fn new(client: &'c TasksClient<H>, mode: ListenMode) -> Self {
        let state = if mode == ListenMode::Poll {
            State::Off
        } else {
            State::Untried
        };
        Self {
            client,
            mode,
            state,
        }
    }

    /// Where the poll loop would sleep `pause` and then read `tasks/get`.
    pub(crate) async fn wait(&mut self, wait: &Wait<'_>, pause: Duration) -> Result<Heard, Error> {
        if matches!(self.state, State::Untried) {
            return self.open(wait).await;
        }
        let State::Open(stream) = &mut self.state else {
            return Ok(Heard::Sleep);
        };
        let sleep = wait.sleep(pause);
        tokio::pin!(sleep);
        let broke = loop {
            tokio::select! {
                event = stream.next() => match event {
                    Event::Task(params) => {
                        let state = TaskState::from_json(params)?;
                        if state.id != wait.id || is_stale(&state, wait.current.as_ref()) {
                            continue;
                        }
                        return Ok(Heard::State(Box::new(state)));
                    }
                    // A second acknowledgement says nothing new.
                    Event::Acknowledged(_) => continue,
                    other => break other,
                },
                slept = &mut sleep => {
                    slept?;
                    return Ok(Heard::Quiet);
                }
            }
        };
        // The stream ended before the task, or lost events: poll from now on.
        tracing::debug!(event = broke.kind(), "the listen stream broke; polling");
        self.state = State::Off;
        Ok(Heard::ReadNow)
    }

    /// Opens the stream: `ReadNow` once it covers the task, `Sleep` when
    /// the wait falls back to polling, an error when the mode requires
    /// listening and the server cannot.
    async fn open(&mut self, wait: &Wait<'_>) -> Result<Heard, Error> {
        self.state = State::Off;
        let timeout = wait.request_timeout(listen::LISTEN)?;
        let refusal = match self.client.open_listen(&wait.id, timeout).await {
            Ok(stream) => {
                self.state = State::Open(Box::new(stream));
                return Ok(Heard::ReadNow);
            }
            Err(refusal) => refusal,
        };
        if wait.deadline_passed() {
            return Err(wait.timeout(Stage::Request {
                method: listen::LISTEN,
            }));
        }
        // A client without a channel says so once, not at every wait.
        if !matches!(refusal, Refusal::NoChannel) {
            tracing::debug!(%refusal, "not listening");
        }
        if self.mode != ListenMode::Required {
            return Ok(Heard::Sleep);
        }
        Err(match refusal {
            Refusal::NoChannel => Error::Usage(listen::NO_CHANNEL),
            Refusal::Unavailable(why) => Error::Usage(why),
            Refusal::Refused(error) => Error::Rpc {
                method: listen::LISTEN,
                error: Box::new(error),
            },
            Refusal::Declined => Error::ListenDeclined,
            // The server serves listen; this stream did not work out, or
            // it has none left for now.
            Refusal::Failed(_) | Refusal::Busy => return Ok(Heard::Sleep),
        })
    }
}

/// A state older than the one in hand (a notification sent before the
/// `tasks/get` answer that overtook it): its `lastUpdatedAt` sorts before.
/// Timestamps are compared as text, which orders RFC 3339 times of one
/// format (as one server sends them); other pairs are never stale.
pub(crate) fn is_stale(state: &TaskState, current: Option<&TaskState>) -> bool {
    let (Some(new), Some(old)) = (
        state.last_updated_at.as_ref(),
        current.and_then(|current| current.last_updated_at.as_ref()),
    ) else {
        return false;
    };
    new.as_str().len() == old.as_str().len() && new.as_str() < old.as_str()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(updated: &str) -> TaskState {
        TaskState::from_json(json!({"taskId": "a", "status": "working", "lastUpdatedAt": updated}))
            .unwrap()
    }

    #[test]
    fn older_states_are_stale() {
        let current = at("2026-07-28T10:30:00.200Z");
        assert!(is_stale(&at("2026-07-28T10:30:00.100Z"), Some(&current)));
        assert!(!is_stale(&at("2026-07-28T10:30:00.200Z"), Some(&current)));
        assert!(!is_stale(&at("2026-07-28T10:30:01.000Z"), Some(&current)));
        assert!(
            !is_stale(&at("2026-07-28T10:30:00Z"), Some(&current)),
            "another format"
        );
        assert!(!is_stale(&at("2026-07-28T10:30:00.100Z"), None));
    }
}
