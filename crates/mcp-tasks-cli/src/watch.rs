//! Watching a wait: a live status line on a terminal (plain lines on stderr
//! otherwise), input answered by the prompt module, Ctrl-C to cancel.

use std::future::Future;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use mcp_tasks::client::InputError;
use mcp_tasks::{AwaitOptions, Error, InputMode, TaskId, TaskOutcome, TaskState};

use crate::connect::Client;
use crate::layout::human_duration;
use crate::output::{Report, code};
use crate::prompt::{self, InputPolicy};

/// How long to wait for the cancelled state after Ctrl-C or `cancel`.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// The display of one wait.
pub(crate) struct Watch {
    bar: Option<ProgressBar>,
    quiet: bool,
    started: Instant,
    seen: Arc<Mutex<Seen>>,
    detach: bool,
}

#[derive(Default)]
struct Seen {
    id: Option<TaskId>,
    last_line: String,
}

/// The last eight characters of a task id, for people: `…1f3a9c2e`.
///
/// The end, because ids that carry a time put it first and their random
/// part last: ours are the creation time in milliseconds (12 hex digits)
/// then 128 random bits, so their first characters are alike for every
/// task of the same minute, while the last eight tell tasks apart. (So do
/// a UUID's and a ULID's.) An id is a bearer token, and these are 32 of
/// its random bits: shown on the terminal of the user who holds the whole
/// id anyway (`--no-wait` and `ls` print it), they leave 96 bits unknown to
/// anyone who sees only the short id, which is as unguessable as ever. The
/// CLI showed eight characters before; never more.
pub(crate) fn short_id(id: &TaskId) -> String {
    let text = id.expose();
    let chars = text.chars().count();
    if chars <= SHORT_ID_CHARS {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(chars - SHORT_ID_CHARS).collect();
    format!("…{tail}")
}

/// How many characters of a task id [`short_id`] shows.
const SHORT_ID_CHARS: usize = 8;

/// The live status line, on a terminal only (`None` elsewhere): a spinner,
/// the message, and the time since the call or the wait started, which
/// counts on by itself between changes (`⠙ working step 2 of 3  [12s,
/// task …1f3a9c2e]`, the task in the bar's prefix).
pub(crate) fn status_bar() -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new_spinner();
        let since = |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&human_duration(state.elapsed()));
        };
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}  [{since}{prefix}]")
                .map(|style| style.with_key("since", since))
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    })
}

/// A status line where there is no terminal (a line each change, on
/// stderr), after the time since the wait started: `[  1.2s] working`.
pub(crate) fn plain_line(elapsed: Duration, line: &str) -> String {
    format!("[{:>6}] {line}", human_duration(elapsed))
}

impl Watch {
    /// A spinner on a terminal; plain status lines on stderr otherwise
    /// (none with `--json`, whose stdout is for the one object).
    pub(crate) fn new(json: bool) -> Self {
        Self {
            bar: status_bar(),
            quiet: json,
            started: Instant::now(),
            seen: Arc::default(),
            detach: false,
        }
    }

    /// With `detach`, Ctrl-C leaves the task running instead of cancelling it.
    pub(crate) fn detached(mut self, detach: bool) -> Self {
        self.detach = detach;
        self
    }

    /// `options` with the status display and the input policy wired in.
    pub(crate) fn options(&self, options: AwaitOptions, policy: &InputPolicy) -> AwaitOptions {
        let seen = self.seen.clone();
        let bar = self.bar.clone();
        let quiet = self.quiet;
        let started = self.started;
        let options = options.with_observer(move |state: &TaskState| {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.id = Some(state.id.clone());
            let line =
                crate::output::status_text(state.status.as_str(), state.status_message.as_deref());
            match &bar {
                Some(bar) => {
                    bar.set_message(line.clone());
                    bar.set_prefix(format!(", task {}", short_id(&state.id)));
                }
                None if !quiet && line != seen.last_line => {
                    eprintln!("{}", plain_line(started.elapsed(), &line));
                }
                None => {}
            }
            seen.last_line = line;
        });
        options.with_input(input_mode(policy, self.bar.clone()))
    }

    /// Runs `waiting` to its end. The first Ctrl-C cancels the task (once
    /// one exists) and waits up to [`CANCEL_GRACE`] for it to settle; a
    /// second one gives up at once. Detached, Ctrl-C leaves the task be.
    pub(crate) async fn run<T>(
        &self,
        client: &Client,
        waiting: impl Future<Output = Result<T, Error>>,
    ) -> Watched<T> {
        tokio::pin!(waiting);
        tokio::select! {
            outcome = &mut waiting => Watched::Finished(outcome),
            _ = tokio::signal::ctrl_c() => {
                let id = self.seen.lock().unwrap_or_else(|p| p.into_inner()).id.clone();
                self.clear();
                let Some(id) = id else {
                    eprintln!("interrupted before a task existed");
                    return Watched::Interrupted;
                };
                if self.detach {
                    eprintln!(
                        "left task {} running; `mcp-tasks wait --last` resumes it",
                        short_id(&id)
                    );
                    return Watched::Interrupted;
                }
                eprintln!("cancelling the task (Ctrl-C again to quit at once)…");
                let grace = AwaitOptions::default().with_deadline(Some(CANCEL_GRACE));
                tokio::select! {
                    ended = client.cancel_and_wait(&id, &grace) => {
                        Watched::Cancelled(Box::new(ended))
                    }
                    _ = tokio::signal::ctrl_c() => Watched::Interrupted,
                }
            }
        }
    }

    /// Removes the status line.
    pub(crate) fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// The report of a wait, with the task id seen during it.
    pub(crate) fn report(&self, outcome: Result<TaskOutcome, Error>) -> Report {
        self.clear();
        let id = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .id
            .clone();
        match outcome {
            Ok(outcome) => Report::outcome(&outcome, id.as_ref()),
            Err(error) => {
                let mut report = Report::error(&error);
                if report.task_id.is_none() {
                    report.task_id = id.map(|id| id.expose().to_owned());
                }
                report
            }
        }
    }
}

/// How a wait answers input under `policy`: prompts (with `bar`, the
/// status line, out of the way) or canned answers, or not at all.
pub(crate) fn input_mode(policy: &InputPolicy, bar: Option<ProgressBar>) -> InputMode {
    match policy {
        InputPolicy::Fail => InputMode::Return,
        other => {
            let policy = Arc::new(other.clone());
            InputMode::resolver(move |requests| {
                let policy = policy.clone();
                let bar = bar.clone();
                async move {
                    let first = requests.keys().next().cloned().unwrap_or_default();
                    tokio::task::spawn_blocking(move || {
                        let ask = || prompt::answer_all(&requests, &policy);
                        match &bar {
                            Some(bar) => bar.suspend(ask),
                            None => ask(),
                        }
                    })
                    .await
                    .map_err(|panicked| InputError::new(first, panicked))?
                }
            })
        }
    }
}

/// How a watched step ended.
pub(crate) enum Watched<T> {
    /// It ran to its end.
    Finished(Result<T, Error>),
    /// Ctrl-C cancelled the task; how it settled.
    Cancelled(Box<Result<TaskOutcome, Error>>),
    /// Ctrl-C before a task existed, or a second Ctrl-C: nothing to report.
    Interrupted,
}

impl<T> Watched<T> {
    /// Maps what a finished step returned.
    pub(crate) fn and_then<U>(self, next: impl FnOnce(T) -> Result<U, Error>) -> Watched<U> {
        match self {
            Self::Finished(outcome) => Watched::Finished(outcome.and_then(next)),
            Self::Cancelled(outcome) => Watched::Cancelled(outcome),
            Self::Interrupted => Watched::Interrupted,
        }
    }
}

impl Watched<TaskOutcome> {
    /// How the wait ended, or `None` when it was interrupted.
    pub(crate) fn outcome(self) -> Option<Result<TaskOutcome, Error>> {
        match self {
            Self::Finished(outcome) => Some(outcome),
            Self::Cancelled(outcome) => Some(*outcome),
            Self::Interrupted => None,
        }
    }

    /// Prints how the wait ended and returns the exit code.
    pub(crate) fn finish(self, watch: &Watch, json: bool) -> ExitCode {
        match self {
            Self::Finished(outcome) => watch.report(outcome).print(json),
            Self::Cancelled(outcome) => watch.report(*outcome).print(json),
            Self::Interrupted => ExitCode::from(code::INTERRUPTED),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_id_shows_the_random_part_that_tells_tasks_apart() {
        // Two ids of our format made in the same millisecond: the time
        // prefix is the same, the short ids are not.
        let a = TaskId::new("019ad3f2c8a1".to_owned() + "5e0b7c1d2f3a4b5c6d7e8f9012345678");
        let b = TaskId::new("019ad3f2c8a1".to_owned() + "9f8e7d6c5b4a39281706f5e4d3c2b1a0");
        assert_eq!(short_id(&a), "…12345678");
        assert_eq!(short_id(&b), "…d3c2b1a0");
        // Never more than eight characters of the id.
        assert_eq!(short_id(&a).chars().filter(|c| *c != '…').count(), 8);
        // A short id of another server is shown whole.
        assert_eq!(short_id(&TaskId::new("t-1")), "t-1");
    }
}
