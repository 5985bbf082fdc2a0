//! The CLI's journal of the tasks it created: `--journal PATH`,
//! `MCP_TASKS_JOURNAL`, or a file in the user's data directory; `ls` lists
//! it, `wait`, `get` and `cancel` find a task's server in it, and `wait
//! --last` and `wait --all` resume its unfinished tasks with the library's
//! `client::resume`.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use mcp_tasks::client::journal::{Journal, PendingCall, ServerRef, TaskRef};
use mcp_tasks::client::{Unfinished, resume};
use mcp_tasks::{Endpoint, TaskId, UnixMillis};
use mcp_tasks_sqlite::SqliteJournal;

use crate::connect::Target;
use crate::output::code;

/// Where the journal is.
#[derive(Debug, Args, Clone)]
pub(crate) struct JournalArgs {
    /// The journal of the tasks this CLI created (default: journal.sqlite3
    /// in the user's data directory).
    #[arg(long, value_name = "PATH", env = "MCP_TASKS_JOURNAL")]
    pub(crate) journal: Option<PathBuf>,
    /// Do not use the journal.
    #[arg(long, conflicts_with = "journal")]
    pub(crate) no_journal: bool,
}

impl JournalArgs {
    fn path(&self) -> anyhow::Result<PathBuf> {
        match &self.journal {
            Some(path) => Ok(path.clone()),
            None => {
                let data = dirs::data_dir()
                    .ok_or_else(|| anyhow::anyhow!("this system has no user data directory"))?;
                Ok(data.join("mcp-tasks").join("journal.sqlite3"))
            }
        }
    }

    /// Opens the journal (pruning what is stale), or `None` with
    /// `--no-journal`.
    pub(crate) async fn open(&self) -> anyhow::Result<Option<Arc<SqliteJournal>>> {
        if self.no_journal {
            return Ok(None);
        }
        let path = self.path()?;
        let journal = SqliteJournal::open(&path)
            .map_err(|error| anyhow::anyhow!("{error} ({})", path.display()))?;
        if let Err(error) = journal.prune(UnixMillis::now()).await {
            tracing::warn!(%error, "the journal could not be pruned");
        }
        Ok(Some(Arc::new(journal)))
    }

    /// `http` with its token file beside this journal, unless
    /// `--oauth-tokens` placed it (or no journal place can be found).
    pub(crate) fn beside(
        &self,
        mut http: crate::connect::HttpOptions,
    ) -> crate::connect::HttpOptions {
        if let (Some(oauth), Ok(path)) = (http.oauth.take(), self.path()) {
            http.oauth = Some(oauth.beside_journal(&path));
        }
        http
    }

    /// [`JournalArgs::open`] for a command that works without one: a
    /// journal that cannot be opened is a warning.
    pub(crate) async fn open_or_warn(&self) -> Option<Arc<SqliteJournal>> {
        match self.open().await {
            Ok(journal) => journal,
            Err(error) => {
                eprintln!("warning: tasks are not journaled: {error}");
                None
            }
        }
    }
}

/// Where the journal says `target` is, as the library records it for the
/// connections it opens ([`Endpoint::journal_ref`]).
pub(crate) fn server_ref(target: &Target) -> ServerRef {
    match target {
        Target::Url(url) => Endpoint::url(url.clone()).journal_ref(),
        Target::Stdio(command) => Endpoint::shell(command.clone()).journal_ref(),
    }
}

/// The target of a journal entry.
pub(crate) fn target_of(server: &ServerRef) -> Option<Target> {
    match server {
        ServerRef::Url(url) => Some(Target::Url(url.clone())),
        ServerRef::Stdio(command) => Some(Target::Stdio(command.clone())),
        _ => None,
    }
}

/// A task id from the command line: `-` reads it from stdin (so it need
/// not appear in a process list or a shell history).
pub(crate) fn task_id(text: &str) -> Result<TaskId, ExitCode> {
    if text != "-" {
        return Ok(TaskId::new(text));
    }
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(_) if !line.trim().is_empty() => Ok(TaskId::new(line.trim())),
        _ => Err(crate::usage("no task id on stdin")),
    }
}

/// The journal's entry for `id`, when exactly one server has it.
pub(crate) async fn find(journal: &SqliteJournal, id: &TaskId) -> Result<TaskRef, ExitCode> {
    let entries = journal
        .list()
        .await
        .map_err(|error| crate::usage(format!("cannot read the journal: {error}")))?;
    let mut found = entries.into_iter().filter(|entry| &entry.task_id == id);
    match (found.next(), found.next()) {
        (Some(entry), None) => Ok(entry),
        (Some(_), Some(_)) => Err(crate::usage(
            "the journal has this task id on several servers: give --url or --stdio",
        )),
        (None, _) => Err(crate::usage(
            "give --url or --stdio: the task is not in the journal",
        )),
    }
}

/// The journal's unfinished tasks by server, the newest first (the
/// library's `resume::unfinished`); with `on`, those of that server only.
pub(crate) async fn unfinished(
    journal: &Arc<SqliteJournal>,
    on: Option<&Target>,
) -> Result<Vec<Unfinished>, ExitCode> {
    let mut servers = resume::unfinished(journal.clone())
        .await
        .map_err(|error| crate::usage(format!("cannot read the journal: {error}")))?;
    if let Some(target) = on {
        let server = server_ref(target);
        servers.retain(|tasks| tasks.server == server);
    }
    Ok(servers)
}

/// The newest unfinished task (of the server `on`, when given), as the
/// only task of its server's [`Unfinished`].
pub(crate) async fn last(
    journal: &Arc<SqliteJournal>,
    on: Option<&Target>,
) -> Result<Unfinished, ExitCode> {
    let Some(mut newest) = unfinished(journal, on).await?.into_iter().next() else {
        eprintln!("error: the journal has no unfinished task");
        return Err(ExitCode::from(code::USAGE));
    };
    newest.tasks.truncate(1);
    Ok(newest)
}

/// How `ls` shows the status of `entry`: as last seen, or `gone` when its
/// server said it does not know the task any more.
pub(crate) fn status_of(entry: &TaskRef) -> &str {
    if entry.is_gone() {
        "gone"
    } else {
        entry.status.as_str()
    }
}

/// What `call --resume` sends again: the newest pending call of the
/// journal (to the server of `--url` or `--stdio`, when given), its
/// server, and the journal.
pub(crate) async fn resume(
    args: &JournalArgs,
    url: Option<&str>,
    stdio: Option<&str>,
) -> Result<(PendingCall, Target, Arc<SqliteJournal>), ExitCode> {
    let opened = match args.open().await {
        Ok(Some(opened)) => opened,
        Ok(None) => return Err(crate::usage("--resume needs the journal")),
        Err(error) => return Err(crate::usage(format!("--resume needs the journal: {error}"))),
    };
    let wanted = match (url, stdio) {
        (Some(url), _) => Some(server_ref(&Target::Url(url.to_owned()))),
        (_, Some(command)) => Some(server_ref(&Target::Stdio(command.to_owned()))),
        _ => None,
    };
    let pending = opened
        .pending_calls()
        .await
        .map_err(|error| crate::usage(format!("cannot read the journal: {error}")))?
        .into_iter()
        .find(|call| wanted.as_ref().is_none_or(|server| *server == call.server))
        .ok_or_else(|| crate::usage("the journal has no call whose answer never came"))?;
    let target = target_of(&pending.server)
        .ok_or_else(|| crate::usage("the journal names a server this CLI cannot reach"))?;
    Ok((pending, target, opened))
}

/// How long ago `at` was, for people.
pub(crate) fn age(at: UnixMillis, now: UnixMillis) -> String {
    let secs = now.saturating_since(at).as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}
