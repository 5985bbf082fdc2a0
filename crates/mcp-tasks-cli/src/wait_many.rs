//! `wait ID ID ...` and `wait --all`: several tasks of one server awaited
//! together by the library's `await_each` (one listen stream, one poll
//! queue, one deadline, one input policy), each reported as it finishes;
//! the exit code is the worst outcome's ([`worse`]). `--all` and `--last`
//! are the library's resume (`client::resume`): the journal's unfinished
//! tasks of one server (or its newest one), each outcome written back, a
//! task the server no longer knows marked gone in the journal.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use indicatif::ProgressBar;
use mcp_tasks::client::journal::{Journal, ServerRef, TaskRef};
use mcp_tasks::client::{ResumedTasks, TaskOutcomes, Unfinished};
use mcp_tasks::{Error, TaskId, TaskOutcome, TaskState};

use crate::connect::{self, Target};
use crate::output::{Report, code, worse};
use crate::prompt::InputPolicy;
use crate::watch::{self, input_mode, plain_line, short_id, status_bar};
use crate::{WaitArgs, await_options, connect_to, http_options, journal, target, usage};

/// Awaits the tasks `args` names and reports each as it finishes.
pub(crate) async fn run(args: WaitArgs) -> ExitCode {
    let (options, policy) = match await_options(&args.input) {
        Ok(options) => options,
        Err(exit) => return exit,
    };
    let json = args.server.json;
    let Tasks {
        target,
        ids,
        unplaced,
        order,
        resume,
    } = match tasks(&args).await {
        Ok(found) => found,
        Err(exit) => return exit,
    };
    let display = Display::new(json, &order);
    let mut exit = code::COMPLETED;
    // Ids the journal cannot place end first, each on its own line; the
    // others are awaited all the same.
    for (id, report) in &unplaced {
        display.finished(id, &report.status, ids.len(), report, json);
        exit = worse(exit, report.exit);
    }
    let Some(target) = target else {
        display.clear();
        if ids.is_empty() && unplaced.is_empty() && !json {
            eprintln!("no unfinished tasks in the journal for that server");
        }
        return ExitCode::from(exit);
    };
    let http = match http_options(&args.server, &target) {
        Ok(http) => http,
        Err(code) => {
            display.clear();
            return code;
        }
    };
    let http = args.journal.beside(http);
    let journal = args.journal.open_or_warn().await;
    let client = match connect_to(
        &target,
        &http,
        journal.map(|journal| journal as Arc<dyn Journal>),
        json,
    )
    .await
    {
        Ok(client) => client,
        Err(code) => {
            display.clear();
            return code;
        }
    };
    let options = display
        .observe(options)
        .with_input(input_mode(&policy, display.bar.clone()));
    let mut outcomes = match &resume {
        Some(tasks) => Outcomes::Resumed(client.resume(tasks, &options)),
        None => Outcomes::Each(client.await_each(&ids, &options)),
    };
    loop {
        tokio::select! {
            finished = outcomes.next() => {
                let Some((id, outcome, gone)) = finished else { break };
                let report = match outcome {
                    Ok(outcome) => Report::outcome(&outcome, Some(&id)),
                    Err(error) => {
                        let mut report = Report::error(&error);
                        report.task_id = Some(id.expose().to_owned());
                        report
                    }
                };
                let status = if gone { GONE } else { report.status.as_str() };
                display.finished(&id, status, outcomes.remaining(), &report, json);
                exit = worse(exit, report.exit);
            }
            _ = tokio::signal::ctrl_c() => {
                display.clear();
                eprintln!(
                    "stopped waiting; {} unfinished tasks left running (`mcp-tasks wait --all` resumes them)",
                    outcomes.remaining()
                );
                exit = code::INTERRUPTED;
                break;
            }
        }
    }
    display.clear();
    drop(outcomes);
    client.close().await;
    ExitCode::from(exit)
}

/// `wait --last`: the journal's newest unfinished task (of the server of
/// --url or --stdio, when given), awaited as `wait ID` awaits one task, by
/// the library's resume (its outcome journaled, the task marked gone when
/// its server no longer knows it).
pub(crate) async fn last(
    args: WaitArgs,
    options: mcp_tasks::AwaitOptions,
    policy: &InputPolicy,
) -> ExitCode {
    let (client, last) = match last_client(&args).await {
        Ok(found) => found,
        Err(exit) => return exit,
    };
    let watch = watch::Watch::new(args.server.json);
    let options = watch.options(options, policy);
    let waiting = async {
        match client.resume(&last, &options).next().await {
            Some(resumed) => resumed.outcome,
            None => Err(Error::Usage("the journal's task was not awaited")),
        }
    };
    let exit = watch
        .run(&client, waiting)
        .await
        .finish(&watch, args.server.json);
    client.close().await;
    exit
}

/// For `wait --last`: the journal's newest unfinished task (on the server
/// of --url or --stdio, when given) and a client connected to its server.
async fn last_client(args: &WaitArgs) -> Result<(connect::Client, Unfinished), ExitCode> {
    let opened = match args.journal.open().await {
        Ok(Some(opened)) => opened,
        Ok(None) => return Err(usage("--last needs the journal")),
        Err(error) => return Err(usage(format!("--last: {error}"))),
    };
    let given = match (&args.server.url, &args.server.stdio) {
        (None, None) => None,
        _ => Some(target(&args.server)?),
    };
    let last = journal::last(&opened, given.as_ref().map(|(target, _)| target)).await?;
    let (target, options) = match given {
        Some(given) => given,
        None => {
            let target = journal::target_of(&last.server)
                .ok_or_else(|| usage("the journal names a server this CLI cannot reach"))?;
            let options = http_options(&args.server, &target)?;
            (target, options)
        }
    };
    let options = args.journal.beside(options);
    let client = connect_to(&target, &options, Some(opened as _), args.server.json).await?;
    Ok((client, last))
}

/// How a task the server no longer knows is shown to people (`--json`
/// has its -32602 error).
const GONE: &str = "gone (the server does not know it any more; marked so in the journal)";

/// The outcomes of the ids given (`await_each`), or of the journal's
/// unfinished tasks (the library's resume, which journals each).
enum Outcomes {
    Each(TaskOutcomes),
    Resumed(ResumedTasks),
}

impl Outcomes {
    /// The next task to finish, its outcome, and whether the server no
    /// longer knows it (said only of a resumed task).
    async fn next(&mut self) -> Option<(TaskId, Result<TaskOutcome, Error>, bool)> {
        match self {
            Self::Each(outcomes) => {
                let (id, outcome) = outcomes.next().await?;
                Some((id, outcome, false))
            }
            Self::Resumed(resumed) => {
                let task = resumed.next().await?;
                let gone = task.is_gone();
                Some((task.task.task_id, task.outcome, gone))
            }
        }
    }

    fn remaining(&self) -> usize {
        match self {
            Self::Each(outcomes) => outcomes.remaining(),
            Self::Resumed(resumed) => resumed.remaining(),
        }
    }
}

/// What `wait` with several ids or `--all` awaits.
struct Tasks {
    /// The server; `None` when there is nothing to await.
    target: Option<Target>,
    /// The tasks to await there.
    ids: Vec<TaskId>,
    /// Ids the journal cannot place on a server, each with its error line.
    unplaced: Vec<(TaskId, Report)>,
    /// Every task, in the order given (for --all, the journal's).
    order: Vec<TaskId>,
    /// With --all: the journal's unfinished tasks there, to resume.
    resume: Option<Unfinished>,
}

/// The server and the tasks to await: the ids given (their server from
/// --url or --stdio, else the one the journal has them on), or with --all
/// the journal's unfinished tasks on that server.
async fn tasks(args: &WaitArgs) -> Result<Tasks, ExitCode> {
    let given = args.server.url.is_some() || args.server.stdio.is_some();
    let mut ids = Vec::new();
    for text in args.task_id.iter().chain(&args.more_task_ids) {
        ids.push(journal::task_id(text)?);
    }
    if given && !args.all {
        let (target, _) = target(&args.server)?;
        return Ok(Tasks {
            target: Some(target),
            order: ids.clone(),
            ids,
            unplaced: Vec::new(),
            resume: None,
        });
    }
    let opened = match args.journal.open().await {
        Ok(Some(opened)) => opened,
        Ok(None) if args.all => return Err(usage("--all needs the journal")),
        Ok(None) => return Err(usage("give --url or --stdio (the journal is off)")),
        Err(error) => return Err(usage(format!("the journal: {error}"))),
    };
    if !args.all {
        let entries = opened
            .list()
            .await
            .map_err(|error| usage(format!("cannot read the journal: {error}")))?;
        return placed(&ids, &entries);
    }
    let given = if given {
        Some(target(&args.server)?.0)
    } else {
        None
    };
    let mut servers = journal::unfinished(&opened, given.as_ref()).await?;
    let resume = match servers.len() {
        0 | 1 => servers.pop(),
        several => {
            return Err(usage(format!(
                "the journal's unfinished tasks are on {several} servers: give --url or --stdio"
            )));
        }
    };
    let Some(resume) = resume else {
        return Ok(Tasks {
            target: None,
            ids: Vec::new(),
            unplaced: Vec::new(),
            order: Vec::new(),
            resume: None,
        });
    };
    let target = match given {
        Some(target) => target,
        None => journal::target_of(&resume.server)
            .ok_or_else(|| usage("the journal names a server this CLI cannot reach"))?,
    };
    let ids: Vec<TaskId> = resume
        .tasks
        .iter()
        .map(|task| task.task_id.clone())
        .collect();
    Ok(Tasks {
        target: Some(target),
        order: ids.clone(),
        ids,
        unplaced: Vec::new(),
        resume: Some(resume),
    })
}

/// The ids given without --url or --stdio, on the server the journal has
/// them on. An id the journal does not have (or has on several servers)
/// gets its error line, as `wait ID` would end, and the others are awaited;
/// ids the journal has on different servers are a usage error.
fn placed(ids: &[TaskId], entries: &[TaskRef]) -> Result<Tasks, ExitCode> {
    let mut servers: HashMap<&TaskId, Vec<&ServerRef>> = HashMap::new();
    for entry in entries {
        servers
            .entry(&entry.task_id)
            .or_default()
            .push(&entry.server);
    }
    let mut server: Option<&ServerRef> = None;
    let mut found = Vec::new();
    let mut unplaced = Vec::new();
    for id in ids {
        let on = match servers.get(id).map(Vec::as_slice) {
            Some([one]) => *one,
            Some([_, _, ..]) => {
                let message =
                    "the journal has this task id on several servers: give --url or --stdio";
                unplaced.push((id.clone(), unplaced_report(id, message)));
                continue;
            }
            _ => {
                let message = "give --url or --stdio: the task is not in the journal";
                unplaced.push((id.clone(), unplaced_report(id, message)));
                continue;
            }
        };
        match server {
            None => server = Some(on),
            Some(first) if first == on => {}
            Some(_) => {
                return Err(usage(
                    "the journal has these tasks on several servers: wait for each server's apart",
                ));
            }
        }
        found.push(id.clone());
    }
    let target = match server {
        None => None,
        Some(server) => Some(
            journal::target_of(server)
                .ok_or_else(|| usage("the journal names a server this CLI cannot reach"))?,
        ),
    };
    Ok(Tasks {
        target,
        ids: found,
        unplaced,
        order: ids.to_vec(),
        resume: None,
    })
}

/// The error line of a task `wait` cannot even ask about: a usage error,
/// as `wait ID` alone ends for it.
fn unplaced_report(id: &TaskId, message: &str) -> Report {
    Report {
        status: "error".to_owned(),
        task_id: Some(id.expose().to_owned()),
        status_message: None,
        result: None,
        error: Some(serde_json::json!({ "message": message })),
        exit: code::USAGE,
        no_task: false,
    }
}

/// The display of a wait on several tasks: on a terminal a status line
/// (how many finished, the latest change); otherwise a line on stderr per
/// change of a task (none with --json, whose stdout has one object per
/// task).
struct Display {
    bar: Option<ProgressBar>,
    quiet: bool,
    started: Instant,
    total: usize,
    /// How each task is named for people: its place in the order given
    /// and the end of its id ([`short_id`]).
    labels: std::sync::Arc<HashMap<TaskId, String>>,
}

impl Display {
    fn new(json: bool, order: &[TaskId]) -> Self {
        let total = order.len();
        let mut labels = HashMap::new();
        for (place, id) in order.iter().enumerate() {
            labels
                .entry(id.clone())
                .or_insert_with(|| format!("#{} {}", place + 1, short_id(id)));
        }
        let bar = status_bar();
        if let Some(bar) = &bar {
            bar.set_message(format!("waiting for {total} tasks"));
        }
        Self {
            bar,
            quiet: json,
            started: Instant::now(),
            total,
            labels: std::sync::Arc::new(labels),
        }
    }

    /// The name of `id` for people.
    fn label(labels: &HashMap<TaskId, String>, id: &TaskId) -> String {
        labels.get(id).cloned().unwrap_or_else(|| short_id(id))
    }

    /// `options` with an observer that shows each task's changes.
    fn observe(&self, options: mcp_tasks::AwaitOptions) -> mcp_tasks::AwaitOptions {
        let bar = self.bar.clone();
        let quiet = self.quiet;
        let started = self.started;
        let total = self.total;
        let labels = self.labels.clone();
        let last: std::sync::Mutex<HashMap<TaskId, String>> = Default::default();
        options.with_observer(move |state: &TaskState| {
            let line = format!(
                "{} {}",
                Self::label(&labels, &state.id),
                crate::output::status_text(state.status.as_str(), state.status_message.as_deref())
            );
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            if last.get(&state.id) == Some(&line) {
                return;
            }
            match &bar {
                Some(bar) => bar.set_message(format!("{total} tasks; {line}")),
                None if !quiet => eprintln!("{}", plain_line(started.elapsed(), &line)),
                None => {}
            }
            last.insert(state.id.clone(), line);
        })
    }

    /// Prints how the task `id` finished: with `--json` its object, for
    /// people `task #2 …1f3a9c2e: completed` then its result, if any (on
    /// stdout: the outcome; why it failed on stderr).
    fn finished(&self, id: &TaskId, status: &str, remaining: usize, report: &Report, json: bool) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{remaining} of {} tasks to go", self.total));
        }
        // Its status message too ("cancelled by an operator"), when the
        // report is of that status.
        let status = if status == report.status {
            report.status_line()
        } else {
            status.to_owned()
        };
        let heading = format!("task {}: {status}", Self::label(&self.labels, id));
        let print = || {
            if json {
                report.print(true);
            } else {
                report.print_under(&heading);
            }
        };
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
