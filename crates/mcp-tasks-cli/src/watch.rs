//! Watching a wait: a live status line on a terminal (plain lines on stderr
//! otherwise), input answered by the prompt module, Ctrl-C to cancel.

use std::future::Future;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use mcp_tasks::{AwaitOptions, Error, InputMode, TaskId, TaskOutcome, TaskState, TasksClient};

use crate::connect::CliHandler;
use crate::output::{Report, code};
use crate::prompt::{self, InputPolicy};

/// How long to wait for the cancelled state after Ctrl-C or `cancel`.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// The display of one wait.
pub(crate) struct Watch {
    bar: Option<ProgressBar>,
    quiet: bool,
    started: Instant,
    seen: Arc<Mutex<Seen>>,
}

#[derive(Default)]
struct Seen {
    id: Option<TaskId>,
    last_line: String,
}

/// A few characters of a task id, for people.
pub(crate) fn short_id(id: &TaskId) -> String {
    let text: String = id.expose().chars().take(8).collect();
    format!("{text}…")
}

impl Watch {
    /// A spinner on a terminal; plain status lines on stderr otherwise
    /// (none with `--json`, whose stdout is for the one object).
    pub(crate) fn new(json: bool) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            bar,
            quiet: json,
            started: Instant::now(),
            seen: Arc::default(),
        }
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
            let message = state.status_message.as_deref().unwrap_or("");
            let line = format!("{} {message}", state.status);
            let elapsed = started.elapsed().as_secs_f64();
            match &bar {
                Some(bar) => bar.set_message(format!(
                    "{line}  [{elapsed:.1}s, task {}]",
                    short_id(&state.id)
                )),
                None if !quiet && line != seen.last_line => {
                    eprintln!("[{elapsed:6.1}s] {line}");
                }
                None => {}
            }
            seen.last_line = line;
        });
        let input = match policy {
            InputPolicy::Fail => InputMode::Return,
            other => {
                let policy = Arc::new(other.clone());
                let bar = self.bar.clone();
                InputMode::resolver(move |requests| {
                    let policy = policy.clone();
                    let bar = bar.clone();
                    async move {
                        let answered = tokio::task::spawn_blocking(move || {
                            let ask = || {
                                prompt::answer_all(&requests, &policy)
                                    .unwrap_or_else(|error| fail_input(&format!("{error:#}")))
                            };
                            match &bar {
                                Some(bar) => bar.suspend(ask),
                                None => ask(),
                            }
                        })
                        .await;
                        answered.unwrap_or_default()
                    }
                })
            }
        };
        options.with_input(input)
    }

    /// Runs `waiting` to its end; the first Ctrl-C cancels the task and
    /// waits briefly for the cancelled state, a second one exits at once.
    pub(crate) async fn run(
        &self,
        client: &TasksClient<CliHandler>,
        waiting: impl Future<Output = Result<TaskOutcome, Error>>,
    ) -> Result<TaskOutcome, Error> {
        tokio::pin!(waiting);
        tokio::select! {
            outcome = &mut waiting => outcome,
            _ = tokio::signal::ctrl_c() => {
                let id = self.seen.lock().unwrap_or_else(|p| p.into_inner()).id.clone();
                self.clear();
                let Some(id) = id else {
                    eprintln!("interrupted before a task existed");
                    std::process::exit(i32::from(code::INTERRUPTED));
                };
                eprintln!("cancelling the task (Ctrl-C again to quit at once)…");
                tokio::select! {
                    ended = async {
                        client.cancel(&id).await?;
                        let state = settle_after_cancel(client, &id).await?;
                        match state.outcome() {
                            Ok(outcome) => Ok(outcome),
                            Err(_) => Err(Error::Timeout { task_id: id.clone(), waited: CANCEL_GRACE, last_status: Some(state.status) }),
                        }
                    } => ended,
                    _ = tokio::signal::ctrl_c() => std::process::exit(i32::from(code::INTERRUPTED)),
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

/// An input request that cannot be answered as asked: a usage error.
fn fail_input(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(i32::from(code::USAGE));
}

/// After `tasks/cancel`, polls briefly until the task is finished and
/// returns the last state read.
pub(crate) async fn settle_after_cancel(
    client: &TasksClient<CliHandler>,
    id: &TaskId,
) -> Result<TaskState, Error> {
    let started = Instant::now();
    loop {
        let state = client.get(id).await?;
        if state.status.is_terminal() || started.elapsed() >= CANCEL_GRACE {
            return Ok(state);
        }
        let pause = state
            .poll_interval
            .unwrap_or(Duration::from_millis(200))
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::time::sleep(pause).await;
    }
}
