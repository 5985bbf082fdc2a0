//! Resuming from a journal: a process started again (after a crash, a
//! `kill -9`, a laptop that slept) awaits the tasks an earlier one created
//! and never saw finish.
//!
//! [`unfinished`] lists the journal's unfinished tasks, by server, each
//! group with what it takes to connect again ([`Unfinished::endpoint`]: the
//! URL, or the command line as `sh` reads it back). A journal keeps no
//! header and no token, so the caller adds them to that endpoint, as it did
//! for the first connection. [`TasksClient::resume`] then awaits every task
//! of a group together on that one connection ([`TasksClient::await_each`]:
//! one listen stream, one poll queue, one deadline) and yields each
//! [`Resumed`] task as it finishes, its outcome written back to the journal
//! first, so that a finished task is not listed again. A task the server
//! answers it does not know ([`Error::UnknownTask`]: it expired and was
//! purged, or the server lost it), and still does not know when a
//! `tasks/get` asks again (a `-32602` may also refuse one request, such as
//! a `tasks/update`), is reported [gone](Resumed::is_gone) and marked so in
//! the journal ([`Journal::mark_gone`]), not retried at every start; a
//! status its server gives of it later takes the mark off.
//!
//! ```no_run
//! # async fn run(token: &str) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use mcp_tasks::client::journal::MemoryJournal;
//! use mcp_tasks::client::resume;
//! use mcp_tasks::{AwaitOptions, ConnectOptions, TasksClient};
//!
//! # let journal = Arc::new(MemoryJournal::new());
//! // `journal`: the one the first run connected with (a file: `mcp_tasks_sqlite::SqliteJournal`).
//! for server in resume::unfinished(journal.clone()).await? {
//!     let mut endpoint = server.endpoint()?;
//!     // Headers and tokens are never journaled: give a server its own
//!     // again, and never to another server the journal names (a child
//!     // process has none).
//!     if server.url() == Some("https://tasks.example.com/mcp") {
//!         endpoint = endpoint.with_header("Authorization", format!("Bearer {token}"))?;
//!     }
//!     let options = ConnectOptions::default().with_journal(journal.clone());
//!     let client = TasksClient::connect(endpoint, (), options).await?;
//!     let mut resumed = client.resume(&server, &AwaitOptions::default());
//!     while let Some(task) = resumed.next().await {
//!         let tool = &task.task.tool;
//!         if task.is_gone() {
//!             println!("{tool}: gone (marked so in the journal)");
//!             continue;
//!         }
//!         match task.outcome {
//!             Ok(outcome) => println!("{tool}: {:?}", outcome.text()),
//!             Err(error) => println!("{tool}: {error}"),
//!         }
//!     }
//!     client.close().await;
//! }
//! # Ok(()) }
//! ```
//!
//! Calls whose answer never came ([`Journal::pending_calls`]) are not
//! resumed here: sending a creation again is a decision of its own.
//!
//! Cancel safety: dropping a [`ResumedTasks`] ends the waits (the tasks
//! keep running on the server and stay unfinished in the journal, to be
//! resumed again); the statuses already learned are in the journal.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::ClientHandler;

use super::journal::{Journal, JournalError, ServerRef, TaskRef};
use super::{AwaitOptions, Endpoint, Error, TaskOutcome, TasksClient};
use crate::task::{TaskId, UnixMillis};

/// The unfinished tasks of one server, as a journal holds them: what
/// [`TasksClient::resume`] awaits. Made by [`unfinished`].
#[derive(Clone)]
#[non_exhaustive]
pub struct Unfinished {
    /// Where the tasks are.
    pub server: ServerRef,
    /// The tasks, newest first. Keep only those to await (for example
    /// `tasks.truncate(1)`: the newest).
    pub tasks: Vec<TaskRef>,
    journal: Arc<dyn Journal>,
}

impl std::fmt::Debug for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unfinished")
            .field("server", &self.server)
            .field("tasks", &self.tasks)
            .finish_non_exhaustive()
    }
}

impl Unfinished {
    /// Where to connect to await them ([`Endpoint::from_journal_ref`]): the
    /// URL, with no headers (add the ones the first connection had, such
    /// as a bearer token, with [`Endpoint::with_header`]), or the command
    /// line, run with `sh -c`. Fails with [`Error::Usage`] for a URL when
    /// the crate is built without the `http-client` feature.
    pub fn endpoint(&self) -> Result<Endpoint, Error> {
        Endpoint::from_journal_ref(&self.server).ok_or(Error::Usage(
            "the journal names a URL, and this build has no HTTP client (feature http-client)",
        ))
    }

    /// The URL of their server, when it is a Streamable HTTP endpoint:
    /// what to compare with the server a token or header belongs to before
    /// giving it again (a journal may name several servers, and a token for
    /// one must never go to another).
    pub fn url(&self) -> Option<&str> {
        match &self.server {
            ServerRef::Url(url) => Some(url),
            _ => None,
        }
    }

    /// The journal the tasks were listed from, where their outcomes go.
    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }
}

/// The unfinished tasks of `journal` (neither finished nor
/// [gone](TaskRef::is_gone)), by server: the server of the newest task
/// first, each server's tasks newest first (so the first task of the first
/// group is the newest of all). Empty when there is nothing to resume.
pub async fn unfinished(journal: Arc<dyn Journal>) -> Result<Vec<Unfinished>, JournalError> {
    let mut groups: Vec<Unfinished> = Vec::new();
    for task in journal.list().await? {
        if task.is_finished() {
            continue;
        }
        match groups.iter_mut().find(|group| group.server == task.server) {
            Some(group) => group.tasks.push(task),
            None => groups.push(Unfinished {
                server: task.server.clone(),
                tasks: vec![task],
                journal: journal.clone(),
            }),
        }
    }
    Ok(groups)
}

/// A task [`TasksClient::resume`] awaited, and how its wait ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct Resumed {
    /// The task, as the journal had it when it was listed (its status is
    /// the one seen before this wait; the journal now has the newer one).
    pub task: TaskRef,
    /// What [`TasksClient::await_task`] would have returned for it.
    pub outcome: Result<TaskOutcome, Error>,
    gone: bool,
}

impl Resumed {
    /// True when the server does not know the task: the wait ended with
    /// [`Error::UnknownTask`] and a `tasks/get` sent to make sure was
    /// refused alike (the task expired and was purged, the server lost it,
    /// or it is not this caller's, as when the headers given again are not
    /// the first connection's). The journal has it marked
    /// [gone](TaskRef::is_gone).
    pub fn is_gone(&self) -> bool {
        self.gone
    }
}

/// The tasks [`TasksClient::resume`] awaits, each yielded as it finishes:
/// a [`Stream`](futures::Stream) of [`Resumed`]. It does the waiting only
/// while it is polled; dropping it ends the waits (see the
/// [module docs](self)).
#[must_use = "a stream does nothing unless polled"]
pub struct ResumedTasks {
    inner: BoxStream<'static, Resumed>,
    remaining: usize,
}

impl std::fmt::Debug for ResumedTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResumedTasks")
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl ResumedTasks {
    /// How many tasks have not been yielded yet.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// The next task to finish; `None` once every task has been yielded
    /// (`StreamExt::next`, without importing it). Cancel safe.
    pub async fn next(&mut self) -> Option<Resumed> {
        std::future::poll_fn(|cx| futures::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }
}

impl futures::Stream for ResumedTasks {
    type Item = Resumed;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Resumed>> {
        let polled = self.inner.poll_next_unpin(cx);
        if let Poll::Ready(Some(_)) = &polled {
            self.remaining = self.remaining.saturating_sub(1);
        }
        polled
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<H: ClientHandler> TasksClient<H> {
    /// Awaits every task of `tasks` on this client's connection, which
    /// must go to their server (connect to [`Unfinished::endpoint`], with
    /// the headers it needs), and yields each as it finishes:
    /// [`TasksClient::await_each`] with `options` (one deadline for the
    /// set, one input mode), each status it learns written to the journal
    /// the tasks came from ([`Unfinished::journal`], whether or not this
    /// client was connected with it) before the task is yielded. A task the
    /// server does not know is marked gone in the journal first (see
    /// [`Resumed::is_gone`]); a journal that cannot be written is logged,
    /// and the task yielded all the same.
    ///
    /// A client whose own journal names another server (it was connected
    /// elsewhere) awaits nothing: each task ends with [`Error::Usage`], and
    /// the journal is left as it was.
    pub fn resume(&self, tasks: &Unfinished, options: &AwaitOptions) -> ResumedTasks {
        let remaining = tasks.tasks.len();
        let mut entries: HashMap<TaskId, TaskRef> = tasks
            .tasks
            .iter()
            .map(|task| (task.task_id.clone(), task.clone()))
            .collect();
        if self
            .journal_server()
            .is_some_and(|server| *server != tasks.server)
        {
            let refused = tasks.tasks.clone().into_iter().map(|task| Resumed {
                task,
                outcome: Err(Error::Usage(
                    "the client is connected to another server than the tasks'",
                )),
                gone: false,
            });
            return ResumedTasks {
                inner: futures::stream::iter(refused).boxed(),
                remaining,
            };
        }
        let ids: Vec<TaskId> = tasks
            .tasks
            .iter()
            .map(|task| task.task_id.clone())
            .collect();
        let (journal, server) = (tasks.journal.clone(), tasks.server.clone());
        let client = self.clone().with_journal(journal.clone(), server.clone());
        let inner = client
            .await_each(ids, options)
            .filter_map(move |(id, outcome)| {
                let task = entries.remove(&id);
                let (client, journal, server) = (client.clone(), journal.clone(), server.clone());
                async move {
                    let gone = match &outcome {
                        Err(error) if error.is_unknown_task() => unknown(&client, &id).await,
                        _ => false,
                    };
                    if gone
                        && let Err(error) = journal.mark_gone(&server, &id, UnixMillis::now()).await
                    {
                        tracing::warn!(%error, "a task its server does not know could not be marked in the journal");
                    }
                    let task = task?;
                    Some(Resumed {
                        task,
                        outcome,
                        gone,
                    })
                }
            })
            .boxed();
        ResumedTasks { inner, remaining }
    }

    /// Awaits every task of `tasks` and returns them in the order given
    /// (newest first, as [`unfinished`] lists them):
    /// [`TasksClient::resume`], collected.
    pub async fn resume_all(&self, tasks: &Unfinished, options: &AwaitOptions) -> Vec<Resumed> {
        let mut finished: HashMap<TaskId, Resumed> = self
            .resume(tasks, options)
            .map(|resumed| (resumed.task.task_id.clone(), resumed))
            .collect()
            .await;
        tasks
            .tasks
            .iter()
            .filter_map(|task| finished.remove(&task.task_id))
            .collect()
    }
}

/// Whether the server answers a `tasks/get` of `id` that it does not know
/// the task (a status it gives instead goes to the client's journal).
async fn unknown<H: ClientHandler>(client: &TasksClient<H>, id: &TaskId) -> bool {
    client
        .get(id)
        .await
        .is_err_and(|error| error.is_unknown_task())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::journal::MemoryJournal;
    use crate::task::TaskStatus;

    fn entry(server: &ServerRef, id: &str, status: &str, created: u64) -> TaskRef {
        serde_json::from_value(serde_json::json!({
            "server": server,
            "taskId": id,
            "era": "extension",
            "tool": "build",
            "createdAt": created,
            "ttl": null,
            "status": status,
            "seenAt": created,
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn unfinished_tasks_come_by_server_newest_first_with_where_to_connect() {
        let journal = Arc::new(MemoryJournal::new());
        let http = ServerRef::Url("http://127.0.0.1:1/mcp".into());
        let stdio = Endpoint::command("/opt/my server", ["--flag", "it's"]).journal_ref();
        for task in [
            entry(&http, "a1", "working", 1),
            entry(&stdio, "b1", "input_required", 2),
            entry(&http, "a2", "working", 3),
            entry(&http, "done", "completed", 4),
            entry(&stdio, "b2", "working", 5),
            entry(&http, "lost", "working", 6),
        ] {
            journal.record(&task).await.unwrap();
        }
        journal
            .mark_gone(&http, &TaskId::new("lost"), UnixMillis::new(7))
            .await
            .unwrap();

        let groups = unfinished(journal.clone()).await.unwrap();
        let listed: Vec<(ServerRef, Vec<&str>)> = groups
            .iter()
            .map(|group| {
                let ids = group
                    .tasks
                    .iter()
                    .map(|task| task.task_id.expose())
                    .collect();
                (group.server.clone(), ids)
            })
            .collect();
        assert_eq!(
            listed,
            [
                (stdio.clone(), vec!["b2", "b1"]),
                (http.clone(), vec!["a2", "a1"]),
            ],
            "neither the finished task nor the gone one"
        );
        // What a caller compares with its token's server before giving it.
        assert_eq!(groups[0].url(), None, "a child process has no URL");
        assert_eq!(groups[1].url(), Some("http://127.0.0.1:1/mcp"));
        assert_eq!(
            groups[0].endpoint().unwrap(),
            Endpoint::shell(r"'/opt/my server' --flag 'it'\''s'")
        );
        #[cfg(feature = "http-client")]
        assert_eq!(
            groups[1].endpoint().unwrap(),
            Endpoint::url("http://127.0.0.1:1/mcp")
        );
        #[cfg(not(feature = "http-client"))]
        assert_eq!(
            groups[1].endpoint().unwrap_err().kind(),
            crate::client::ErrorKind::Usage
        );
        assert!(!format!("{groups:?}").contains("a1"), "no task id in Debug");

        // A status from the server takes the gone mark off.
        journal
            .update(
                &http,
                &TaskId::new("lost"),
                &TaskStatus::Working,
                None,
                UnixMillis::new(8),
            )
            .await
            .unwrap();
        let groups = unfinished(journal).await.unwrap();
        assert_eq!(groups[0].server, http);
        assert_eq!(groups[0].tasks[0].task_id.expose(), "lost");
    }
}
