//! A journal of the tasks a client created, so that a restarted client can
//! find them again: the extension has no `tasks/list`, and a task id that
//! lived only in the memory of a crashed process is gone for good.
//!
//! A [`TasksClient`](super::TasksClient) given a journal
//! ([`TasksClient::with_journal`](super::TasksClient::with_journal)) records
//! every task it creates before `call_tool` returns it (a write the journal
//! refuses is logged as a warning and the task returned all the same: it
//! exists, and its caller must get it), and each status it learns afterwards
//! (from `tasks/get`, a listen notification or a cancel); a wait's updates
//! are written before the wait returns. [`Journal::list`]
//! gives the entries back, newest first; [`resume`](super::resume) lists the
//! unfinished ones by server, with the endpoint to connect to, and awaits
//! them, each outcome written back (a task its server no longer knows is
//! marked [gone](TaskRef::is_gone), so that it is not listed again).
//!
//! [`MemoryJournal`] is here; the crate `mcp-tasks-sqlite` has a file
//! journal that several processes may share.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::state::{Era, TaskState};
use crate::idempotency::IdempotencyKey;
use crate::task::{TaskId, TaskStatus, Ttl, UnixMillis};

/// How long a finished entry is kept after it was last seen, when the
/// server gave the task no limited TTL.
pub const FINISHED_KEPT: Duration = Duration::from_secs(24 * 3600);
/// How long an unfinished entry is kept without any news of it.
pub const UNFINISHED_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where a task's server is, as a journal keeps it: what it takes to reach
/// it again, never a credential (headers and tokens are the caller's to
/// give again).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "at", rename_all = "lowercase")]
#[non_exhaustive]
pub enum ServerRef {
    /// A Streamable HTTP endpoint.
    Url(String),
    /// A command line that speaks MCP on stdio.
    Stdio(String),
}

impl fmt::Display for ServerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) => f.write_str(url),
            Self::Stdio(command) => write!(f, "stdio: {command}"),
        }
    }
}

/// A task as a journal keeps it: enough to find it again after a restart.
///
/// It holds the task id, a bearer token: `Debug` does not print it, and
/// its serialized form is as secret as the id.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskRef {
    /// The server the task lives on.
    pub server: ServerRef,
    /// The task id.
    pub task_id: TaskId,
    /// The era of the task.
    pub era: Era,
    /// The tool whose call made the task.
    pub tool: String,
    /// When the client created it (the client's clock).
    pub created_at: UnixMillis,
    /// Its TTL, as the server last said.
    pub ttl: Option<Ttl>,
    /// Its status, as the client last saw it.
    pub status: TaskStatus,
    /// When the client last saw it (the client's clock).
    pub seen_at: UnixMillis,
    /// When its server answered that it does not know the task (expired
    /// and purged, or not this caller's), the client's clock; `None` while
    /// the server knows it. See [`TaskRef::is_gone`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_at: Option<UnixMillis>,
}

impl fmt::Debug for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRef")
            .field("server", &self.server)
            .field("task_id", &self.task_id)
            .field("tool", &self.tool)
            .field("status", &self.status)
            .field("gone", &self.is_gone())
            .finish_non_exhaustive()
    }
}

impl TaskRef {
    /// The entry of a task just created by a call of `tool` on `server`.
    pub fn new(
        server: ServerRef,
        tool: impl Into<String>,
        state: &TaskState,
        now: UnixMillis,
    ) -> Self {
        Self {
            server,
            task_id: state.id.clone(),
            era: state.era(),
            tool: tool.into(),
            created_at: now,
            ttl: state.ttl,
            status: state.status.clone(),
            seen_at: now,
            gone_at: None,
        }
    }

    /// True when there is nothing more to learn of the task: its last seen
    /// status is terminal, or it is [gone](TaskRef::is_gone).
    pub fn is_finished(&self) -> bool {
        self.status.is_terminal() || self.is_gone()
    }

    /// True when its server answered that it does not know the task (it
    /// expired and was purged, the server lost it, or it is not the
    /// caller's: a resume with other credentials than the call's looks the
    /// same); [`Journal::mark_gone`] marks it, and a status the server gives
    /// of it later ([`Journal::update`]) takes the mark off.
    pub fn is_gone(&self) -> bool {
        self.gone_at.is_some()
    }

    /// True when the entry is no longer worth keeping at `now`: gone for
    /// [`FINISHED_KEPT`]; finished and past its TTL (or [`FINISHED_KEPT`])
    /// since it was last seen; or unfinished with no news for
    /// [`UNFINISHED_KEPT`].
    pub fn is_stale(&self, now: UnixMillis) -> bool {
        if let Some(gone) = self.gone_at {
            return gone.saturating_add(FINISHED_KEPT) <= now;
        }
        let kept = if self.is_finished() {
            match self.ttl {
                Some(Ttl::Limited(ttl)) => ttl,
                _ => FINISHED_KEPT,
            }
        } else {
            UNFINISHED_KEPT
        };
        self.seen_at.saturating_add(kept) <= now
    }
}

/// A `tools/call` sent (or about to be) whose answer has not come back
/// yet, as a journal keeps it: enough to send the same creation again, with
/// the same idempotency key, after a crash between the send and the answer
/// (the server then answers with the task the first send made, if it made
/// one). Recorded before the call is sent, removed once its task is
/// journaled or the server answered without one.
///
/// Its arguments are the caller's; a journal keeps them as it keeps task
/// ids (a file only its owner may read).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PendingCall {
    /// The server the call went to.
    pub server: ServerRef,
    /// The call's idempotency key (`_meta` [`IDEMPOTENCY_KEY_META`](crate::IDEMPOTENCY_KEY_META)).
    pub key: IdempotencyKey,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// When the client sent it (the client's clock).
    pub sent_at: UnixMillis,
}

impl fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingCall")
            .field("server", &self.server)
            .field("key", &self.key)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

impl PendingCall {
    /// The call of `tool` with `arguments` to `server` under `key`, sent at `now`.
    pub fn new(
        server: ServerRef,
        key: IdempotencyKey,
        tool: impl Into<String>,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
        now: UnixMillis,
    ) -> Self {
        Self {
            server,
            key,
            tool: tool.into(),
            arguments,
            sent_at: now,
        }
    }

    /// True when it is no longer worth keeping at `now`: sent
    /// [`UNFINISHED_KEPT`] ago.
    pub fn is_stale(&self, now: UnixMillis) -> bool {
        self.sent_at.saturating_add(UNFINISHED_KEPT) <= now
    }
}

/// Why a journal could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the task journal failed: {message}")]
pub struct JournalError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl JournalError {
    /// An error with `message` (it must not name a task id).
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// An error with `message`, caused by `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

/// Where a client keeps the tasks it created. Implementations must be safe
/// to use from several clients at once; a file-backed one, from several
/// processes.
pub trait Journal: Send + Sync + 'static {
    /// Records `task`, replacing an entry with the same server and id.
    fn record(&self, task: &TaskRef) -> BoxFuture<'_, Result<(), JournalError>>;

    /// Notes that task `id` of `server` was seen with `status` at `at`
    /// (and its TTL, when the server said); an entry marked gone is gone no
    /// more (its server knows it). Unknown tasks are ignored.
    fn update(
        &self,
        server: &ServerRef,
        id: &TaskId,
        status: &TaskStatus,
        ttl: Option<Ttl>,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>>;

    /// Every entry, newest first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<TaskRef>, JournalError>>;

    /// Marks task `id` of `server` [gone](TaskRef::is_gone) at `at`: its
    /// server answered that it does not know it. Unknown tasks are ignored.
    ///
    /// The default reads the entry with [`Journal::list`] and writes it back
    /// with [`Journal::record`]: a status written in between is lost. A
    /// journal that several clients or processes share overrides it with
    /// one atomic change, as [`MemoryJournal`] and the SQLite journal do.
    fn mark_gone(
        &self,
        server: &ServerRef,
        id: &TaskId,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        let (server, id) = (server.clone(), id.clone());
        Box::pin(async move {
            let entries = self.list().await?;
            let Some(mut entry) = entries
                .into_iter()
                .find(|entry| entry.server == server && entry.task_id == id)
            else {
                return Ok(());
            };
            entry.gone_at = Some(at);
            self.record(&entry).await
        })
    }

    /// Removes the entry of task `id` of `server`, if any.
    fn remove(&self, server: &ServerRef, id: &TaskId) -> BoxFuture<'_, Result<(), JournalError>>;

    /// Removes the entries [`TaskRef::is_stale`] at `now` (and the
    /// pending calls [`PendingCall::is_stale`]); returns how many entries.
    fn prune(&self, now: UnixMillis) -> BoxFuture<'_, Result<usize, JournalError>>;

    /// Records `call` before it is sent, replacing one with the same server
    /// and key. The default, for a journal that keeps no calls, keeps
    /// nothing (then a crash between a call's send and its answer loses
    /// the call, as before).
    fn record_call(&self, call: &PendingCall) -> BoxFuture<'_, Result<(), JournalError>> {
        let _ = call;
        Box::pin(async { Ok(()) })
    }

    /// Removes the pending call with `key` to `server`, if any.
    fn remove_call(
        &self,
        server: &ServerRef,
        key: &IdempotencyKey,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        let _ = (server, key);
        Box::pin(async { Ok(()) })
    }

    /// Every pending call, newest first (the default: none).
    fn pending_calls(&self) -> BoxFuture<'_, Result<Vec<PendingCall>, JournalError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A journal in memory: for tests, and for a process that only wants to
/// list what it started.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    entries: Mutex<HashMap<(ServerRef, TaskId), TaskRef>>,
    calls: Mutex<HashMap<(ServerRef, IdempotencyKey), PendingCall>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<(ServerRef, TaskId), TaskRef>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn calls(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(ServerRef, IdempotencyKey), PendingCall>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Journal for MemoryJournal {
    fn record(&self, task: &TaskRef) -> BoxFuture<'_, Result<(), JournalError>> {
        let key = (task.server.clone(), task.task_id.clone());
        self.entries().insert(key, task.clone());
        Box::pin(async { Ok(()) })
    }

    fn update(
        &self,
        server: &ServerRef,
        id: &TaskId,
        status: &TaskStatus,
        ttl: Option<Ttl>,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        if let Some(entry) = self.entries().get_mut(&(server.clone(), id.clone())) {
            entry.status = status.clone();
            entry.seen_at = at.max(entry.seen_at);
            if ttl.is_some() {
                entry.ttl = ttl;
            }
            entry.gone_at = None;
        }
        Box::pin(async { Ok(()) })
    }

    fn mark_gone(
        &self,
        server: &ServerRef,
        id: &TaskId,
        at: UnixMillis,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        if let Some(entry) = self.entries().get_mut(&(server.clone(), id.clone())) {
            entry.gone_at = Some(at);
        }
        Box::pin(async { Ok(()) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<TaskRef>, JournalError>> {
        let mut entries: Vec<TaskRef> = self.entries().values().cloned().collect();
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.created_at));
        Box::pin(async { Ok(entries) })
    }

    fn remove(&self, server: &ServerRef, id: &TaskId) -> BoxFuture<'_, Result<(), JournalError>> {
        self.entries().remove(&(server.clone(), id.clone()));
        Box::pin(async { Ok(()) })
    }

    fn prune(&self, now: UnixMillis) -> BoxFuture<'_, Result<usize, JournalError>> {
        let mut entries = self.entries();
        let before = entries.len();
        entries.retain(|_, entry| !entry.is_stale(now));
        let pruned = before - entries.len();
        self.calls().retain(|_, call| !call.is_stale(now));
        Box::pin(async move { Ok(pruned) })
    }

    fn record_call(&self, call: &PendingCall) -> BoxFuture<'_, Result<(), JournalError>> {
        let key = (call.server.clone(), call.key.clone());
        self.calls().insert(key, call.clone());
        Box::pin(async { Ok(()) })
    }

    fn remove_call(
        &self,
        server: &ServerRef,
        key: &IdempotencyKey,
    ) -> BoxFuture<'_, Result<(), JournalError>> {
        self.calls().remove(&(server.clone(), key.clone()));
        Box::pin(async { Ok(()) })
    }

    fn pending_calls(&self) -> BoxFuture<'_, Result<Vec<PendingCall>, JournalError>> {
        let mut calls: Vec<PendingCall> = self.calls().values().cloned().collect();
        calls.sort_by_key(|call| std::cmp::Reverse(call.sent_at));
        Box::pin(async { Ok(calls) })
    }
}

/// A client's tie to its journal: creations are written at once; statuses
/// seen during a wait go through a queue, written in order by one task and
/// flushed before the wait returns.
pub(crate) struct JournalLink {
    journal: Arc<dyn Journal>,
    server: ServerRef,
    updates: mpsc::UnboundedSender<Update>,
}

enum Update {
    Seen(TaskId, TaskStatus, Option<Ttl>, UnixMillis),
    Flush(oneshot::Sender<()>),
}

impl JournalLink {
    /// Starts the writer; needs a tokio runtime.
    pub(crate) fn start(journal: Arc<dyn Journal>, server: ServerRef) -> Arc<Self> {
        let (updates, mut queue) = mpsc::unbounded_channel();
        let writer = journal.clone();
        let at = server.clone();
        tokio::spawn(async move {
            while let Some(update) = queue.recv().await {
                match update {
                    Update::Seen(id, status, ttl, when) => {
                        if let Err(error) = writer.update(&at, &id, &status, ttl, when).await {
                            tracing::warn!(%error, "a task's status could not be journaled");
                        }
                    }
                    Update::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Arc::new(Self {
            journal,
            server,
            updates,
        })
    }

    /// Records a task just created by a call of `tool`. A failure is
    /// logged, not returned: the task exists, and its caller must get it.
    pub(crate) async fn created(&self, tool: &str, state: &TaskState) {
        let entry = TaskRef::new(self.server.clone(), tool, state, UnixMillis::now());
        if let Err(error) = self.journal.record(&entry).await {
            tracing::warn!(%error, "a new task could not be journaled");
        }
    }

    /// Records a call of `tool` about to be sent under `key`. A failure is
    /// logged, not returned: the call is made all the same.
    pub(crate) async fn calling(
        &self,
        key: &IdempotencyKey,
        tool: &str,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) {
        let call = PendingCall::new(
            self.server.clone(),
            key.clone(),
            tool,
            arguments.cloned(),
            UnixMillis::now(),
        );
        if let Err(error) = self.journal.record_call(&call).await {
            tracing::warn!(%error, "a call could not be journaled before it was sent");
        }
    }

    /// Forgets the pending call under `key`: its answer came (and its task,
    /// if any, is journaled).
    pub(crate) async fn answered(&self, key: &IdempotencyKey) {
        if let Err(error) = self.journal.remove_call(&self.server, key).await {
            tracing::warn!(%error, "an answered call could not be taken out of the journal");
        }
    }

    /// Queues the status of `state` for the journal.
    pub(crate) fn seen(&self, state: &TaskState) {
        let update = Update::Seen(
            state.id.clone(),
            state.status.clone(),
            state.ttl,
            UnixMillis::now(),
        );
        // The writer lives as long as this link.
        let _ = self.updates.send(update);
    }

    /// Waits until every queued status is written.
    pub(crate) async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.updates.send(Update::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    pub(crate) fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    pub(crate) fn server(&self) -> &ServerRef {
        &self.server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(status: TaskStatus, ttl: Option<Ttl>, seen: u64) -> TaskRef {
        TaskRef {
            server: ServerRef::Url("http://127.0.0.1:1/mcp".into()),
            task_id: TaskId::new("secret-id"),
            era: Era::Extension,
            tool: "build".into(),
            created_at: UnixMillis::new(seen),
            ttl,
            status,
            seen_at: UnixMillis::new(seen),
            gone_at: None,
        }
    }

    #[test]
    fn a_reference_does_not_print_its_id_and_round_trips() {
        let task = entry(TaskStatus::Working, Some(Ttl::from_millis(1000)), 5);
        assert!(!format!("{task:?}").contains("secret-id"));
        let json = serde_json::to_value(&task).unwrap();
        assert_eq!(
            json["server"],
            serde_json::json!({"kind": "url", "at": "http://127.0.0.1:1/mcp"})
        );
        assert_eq!(json["era"], "extension");
        assert_eq!(serde_json::from_value::<TaskRef>(json).unwrap(), task);
    }

    #[test]
    fn staleness_follows_the_ttl_of_finished_tasks() {
        let hour = 3_600_000;
        let done = entry(TaskStatus::Completed, Some(Ttl::from_millis(hour)), 0);
        assert!(!done.is_stale(UnixMillis::new(hour - 1)));
        assert!(done.is_stale(UnixMillis::new(hour)));
        let unlimited = entry(TaskStatus::Failed, Some(Ttl::Unlimited), 0);
        assert!(!unlimited.is_stale(UnixMillis::new(hour)));
        assert!(unlimited.is_stale(UnixMillis::new(24 * hour)));
        let running = entry(TaskStatus::Working, Some(Ttl::from_millis(1)), 0);
        assert!(!running.is_stale(UnixMillis::new(24 * hour)));
        assert!(running.is_stale(UnixMillis::new(7 * 24 * hour)));
        // Gone: kept a day from when it went, whatever its TTL.
        let mut gone = entry(TaskStatus::Working, Some(Ttl::from_millis(1)), 0);
        gone.gone_at = Some(UnixMillis::new(hour));
        assert!(gone.is_finished());
        assert!(!gone.is_stale(UnixMillis::new(25 * hour - 1)));
        assert!(gone.is_stale(UnixMillis::new(25 * hour)));
    }

    /// A journal that keeps the trait's own `mark_gone`.
    struct Plain(MemoryJournal);

    impl Journal for Plain {
        fn record(&self, task: &TaskRef) -> BoxFuture<'_, Result<(), JournalError>> {
            self.0.record(task)
        }

        fn update(
            &self,
            server: &ServerRef,
            id: &TaskId,
            status: &TaskStatus,
            ttl: Option<Ttl>,
            at: UnixMillis,
        ) -> BoxFuture<'_, Result<(), JournalError>> {
            self.0.update(server, id, status, ttl, at)
        }

        fn list(&self) -> BoxFuture<'_, Result<Vec<TaskRef>, JournalError>> {
            self.0.list()
        }

        fn remove(
            &self,
            server: &ServerRef,
            id: &TaskId,
        ) -> BoxFuture<'_, Result<(), JournalError>> {
            self.0.remove(server, id)
        }

        fn prune(&self, now: UnixMillis) -> BoxFuture<'_, Result<usize, JournalError>> {
            self.0.prune(now)
        }
    }

    #[tokio::test]
    async fn a_gone_mark_is_kept_until_the_server_reports_on_the_task() {
        for journal in [
            Box::new(MemoryJournal::new()) as Box<dyn Journal>,
            Box::new(Plain(MemoryJournal::new())),
        ] {
            let task = entry(TaskStatus::Working, None, 5);
            journal.record(&task).await.unwrap();
            let other = TaskId::new("other-id");
            journal
                .mark_gone(&task.server, &other, UnixMillis::new(6))
                .await
                .unwrap();
            assert!(!journal.list().await.unwrap()[0].is_gone(), "another id");
            journal
                .mark_gone(&task.server, &task.task_id, UnixMillis::new(7))
                .await
                .unwrap();
            let listed = journal.list().await.unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!(listed[0].gone_at, Some(UnixMillis::new(7)));
            assert_eq!(listed[0].status, TaskStatus::Working);
            journal
                .update(
                    &task.server,
                    &task.task_id,
                    &TaskStatus::InputRequired,
                    None,
                    UnixMillis::new(8),
                )
                .await
                .unwrap();
            let listed = journal.list().await.unwrap();
            assert!(!listed[0].is_gone() && !listed[0].is_finished());
        }
    }
}
