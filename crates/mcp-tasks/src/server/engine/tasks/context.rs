//! What tool code gets: [`TaskContext`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, CustomRequest, ElicitationSchema, InputRequest, RequestId, ServerRequest,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::{OriginatingRequestId, RequestContext, ServiceError};
use rmcp::{Peer, RoleServer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::SetOnce;
use tokio_util::sync::CancellationToken;

use crate::form::Elicited;
use crate::server::engine::era::is_old_tasks_era;
use crate::server::engine::lease::{Lease, LeaseError, lost_lease};
use crate::server::engine::progress::ProgressSink;
use crate::server::engine::state::Inner;
use crate::server::engine::wire::store_failure;
use crate::store::{Change, Modified, StoreErrorKind, TaskRecord, TransitionError};
use crate::task::{TaskId, TaskStatus};

/// The handle tool code uses while it runs: progress and status messages,
/// input requests, cancellation and TTL heartbeats.
///
/// * **Progress**: [`TaskContext::progress`]`(done, total)` sets the status
///   message (`"3 of 20"`) and sends `notifications/progress` to a caller
///   that asked for it, where its era allows (it says which);
///   [`TaskContext::set_status_message`] sets free text.
/// * **Cancellation**: when the task is cancelled (`tasks/cancel` in either
///   era, an operator's `admin cancel`), the runtime running it hears it at
///   once (the store's change feed), drops the tool's future and records the
///   task `cancelled`, its status message "cancelled by the caller" (or "by
///   an operator") in place of the tool's last. The tool stops at the
///   `.await` where it is suspended: code after it never runs, and its
///   `Drop`s run. The same happens when the task expires (it ends `failed`,
///   "task expired"). [`TaskContext::cancellation_token`] and
///   [`TaskContext::cancelled`] fire then too, and when the tool has ended:
///   they are for work the tool spawned outside its own future (a
///   `tokio::spawn`, a thread, a child process), so that it stops and
///   cleans up; the tool's own code needs neither to stop.
///
/// When the tool runs synchronously (no task: the client did not declare
/// the extension, or the tool's policy forbids tasks), status messages and
/// heartbeats do nothing (progress notifications still go to a caller that
/// asked for them), and asking for input fails with -32021 so the
/// client learns that the tool needs the Tasks extension; but on a session
/// opened with `initialize` (2025-11-25 and before), whose clients answer
/// the server's own requests, the input is asked for on the session (an
/// `elicitation/create`, `sampling/createMessage` or `roots/list` request,
/// as that era does it) and the answer returned.
#[derive(Clone)]
pub struct TaskContext {
    task: Option<(TaskId, Arc<Inner>)>,
    /// A synchronous call's initialize-era session, where input is asked for.
    session: Option<Session>,
    /// The lease the task runs under, on a store shared by several servers.
    lease: Option<Arc<Lease>>,
    token: CancellationToken,
    /// Set once the task is in the store: the tool's first step runs before
    /// (see `engine/calls/create.rs`), and what touches the task waits.
    stored: Option<Arc<SetOnce<()>>>,
    /// Whether the task keeps its call, to run again if its server stops.
    resumable: bool,
    /// A drain waits for the task before it hands it off: its checkpoints
    /// do not hand it off.
    drain_wait: bool,
    /// This run is a resumed one: the task's last checkpoint, if any.
    resumed: Option<Option<Arc<Value>>>,
    /// Where [`TaskContext::progress`] sends `notifications/progress`
    /// (shared: a context is cloned into every tool argument).
    progress: Option<Arc<ProgressSink>>,
}

/// The most bytes of JSON one checkpoint may take
/// ([`TaskContext::checkpoint`]): a checkpoint is written with the task's
/// record at every call, so it stays small (a position, a cursor, the ids
/// of what is done), not the work itself.
pub const MAX_CHECKPOINT_BYTES: usize = 64 * 1024;

impl std::fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskContext")
            .field("is_task", &self.task.is_some())
            .field("cancelled", &self.token.is_cancelled())
            .finish()
    }
}

/// Where a synchronous call on an initialize-era session asks for input.
#[derive(Clone)]
struct Session {
    peer: Peer<RoleServer>,
    /// The call's request: over HTTP, the requests go on its stream.
    request: RequestId,
}

impl TaskContext {
    /// The context of a tool that runs synchronously for the request of
    /// `context`.
    pub(crate) fn synchronous(context: &RequestContext<RoleServer>) -> Self {
        let session = is_old_tasks_era(context).then(|| Session {
            peer: context.peer.clone(),
            request: context.id.clone(),
        });
        Self {
            task: None,
            session,
            lease: None,
            token: CancellationToken::new(),
            stored: None,
            resumable: false,
            drain_wait: false,
            resumed: None,
            progress: ProgressSink::for_call(context).map(Arc::new),
        }
    }

    /// The context of the tool of task `id`, run under `lease` on a store
    /// shared by several servers.
    pub(crate) fn task(
        id: TaskId,
        inner: Arc<Inner>,
        token: CancellationToken,
        lease: Option<Arc<Lease>>,
    ) -> Self {
        Self {
            task: Some((id, inner)),
            session: None,
            lease,
            token,
            stored: None,
            resumable: false,
            drain_wait: false,
            resumed: None,
            progress: None,
        }
    }

    /// This context, sending [`TaskContext::progress`] to `sink` too.
    pub(crate) fn with_progress(mut self, sink: Option<ProgressSink>) -> Self {
        self.progress = sink.map(Arc::new);
        self
    }

    /// This context, for a tool whose task is stored only once `stored`
    /// is set: until then, what touches the task waits.
    pub(crate) fn stored_when(mut self, stored: Arc<SetOnce<()>>) -> Self {
        self.stored = Some(stored);
        self
    }

    /// This context, for the tool of a task that keeps its call (`yes`).
    pub(crate) fn resumable(mut self, yes: bool) -> Self {
        self.resumable = yes;
        self
    }

    /// This context, for the tool of a task a drain waits for before it
    /// hands it off (`yes`): its checkpoints hand nothing off.
    pub(crate) fn drain_waits(mut self, yes: bool) -> Self {
        self.drain_wait = yes;
        self
    }

    /// This context, for a resumed run of the tool, from `checkpoint`.
    pub(crate) fn resuming(mut self, checkpoint: Option<Value>) -> Self {
        self.resumable = true;
        self.resumed = Some(checkpoint.map(Arc::new));
        self
    }

    /// Waits until the task is in the store.
    async fn until_stored(&self) {
        if let Some(stored) = &self.stored {
            stored.wait().await;
        }
    }

    /// True when the tool runs as a task.
    pub fn is_task(&self) -> bool {
        self.task.is_some()
    }

    /// Fired by `tasks/cancel` (and an operator's cancel) and by expiry (the
    /// runtime then also drops the tool's future, which stops at its current
    /// `.await`), and when the task has ended: use it to stop work the tool
    /// spawned outside its future.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Completes when the task is cancelled, expires or has ended.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// The hash that names this task in logs, metrics and traces (see
    /// [`TaskHasher`](crate::server::TaskHasher)): what a tool writes in its own log
    /// lines instead of the task id, which is a bearer token. `None` when
    /// the tool runs synchronously, or the store's key cannot be read.
    pub async fn task_hash(&self) -> Option<String> {
        let (id, inner) = self.task.as_ref()?;
        let hasher = inner
            .hasher
            .get_or_try_init(|| async {
                Ok::<_, crate::store::StoreError>(crate::telemetry::task_hash::TaskHasher::new(
                    &inner.store.hash_key().await?,
                ))
            })
            .await
            .inspect_err(|error| tracing::warn!(%error, "the task hash key could not be read"))
            .ok()?;
        Some(hasher.hash(id))
    }

    /// True when the tool runs as a task that runs again if its server
    /// stops: its tool was registered resumable
    /// ([`ToolTasks::with_resumable`](crate::server::ToolTasks::with_resumable)) on
    /// a runtime with a resume hook
    /// ([`TaskRuntimeBuilder::with_resume`](crate::server::TaskRuntimeBuilder::with_resume)).
    pub fn is_resumable(&self) -> bool {
        self.resumable
    }

    /// True when the tool is stopped (or about to be) because this server
    /// stops running its task, not because the task ends: a drain leaves
    /// it for the next start or hands it to another server, or another
    /// server took it over. False while it runs on, and when it is
    /// stopped because it was cancelled, expired, deleted or ended. A
    /// resumable tool that drives work elsewhere (the gateway: an upstream
    /// server's task) reads it as its future is dropped, and leaves that
    /// work running for the resumed run to take up, where a cancel would
    /// stop it.
    pub async fn is_left_to_resume(&self) -> bool {
        let Some((id, inner)) = &self.task else {
            return false;
        };
        let record = match inner.store.get(id).await {
            Ok(Some(record)) => record,
            _ => return false,
        };
        if record.cancel_requested() || record.status().is_terminal() {
            return false;
        }
        if let Some(lease) = &self.lease
            && (lease.is_lost() || record.runner() != Some(lease.runner()))
        {
            return true;
        }
        self.resumable
            && inner.resumes
            && (inner.draining.is_ending() || (!self.drain_wait && inner.draining.is_handing_off()))
    }

    /// True when this run of the tool is a resumed one: its task was
    /// started by a server that stopped before it finished.
    pub fn is_resumed(&self) -> bool {
        self.resumed.is_some()
    }

    /// The last checkpoint ([`TaskContext::checkpoint`]) of a resumed run,
    /// read as a `T`: where the tool continues from. `None` on a first
    /// run, or when the stopped run made no checkpoint.
    ///
    /// # Errors
    ///
    /// -32603 when the checkpoint does not read as a `T` (a state of
    /// another shape, written by another version of the tool).
    pub fn resumed<T: DeserializeOwned>(&self) -> Result<Option<T>, ErrorData> {
        let Some(state) = self.resumed.as_ref().and_then(Option::as_deref) else {
            return Ok(None);
        };
        T::deserialize(state).map(Some).map_err(|error| {
            ErrorData::internal_error(
                format!(
                    "the task's checkpoint does not read as {}: {error}",
                    std::any::type_name::<T>()
                ),
                None,
            )
        })
    }

    /// Keeps `state` with the task: if the task's server stops before the
    /// tool finishes, a resumed run gets the last one from
    /// [`TaskContext::resumed`] (on a shared store, on another server; on
    /// SQLite, on the same server started again). Write it after each unit
    /// of work, so a resumed run does none twice. A no-op when the tool runs
    /// synchronously.
    ///
    /// # Errors
    ///
    /// -32603 when `state` does not serialize or takes more than
    /// [`MAX_CHECKPOINT_BYTES`] of JSON; when the task has ended or is gone;
    /// a store failure.
    pub async fn checkpoint<T: Serialize + ?Sized>(&self, state: &T) -> Result<(), ErrorData> {
        self.save_checkpoint(state, None).await
    }

    /// [`TaskContext::checkpoint`] and the status message `tasks/get` shows,
    /// in one write: a client never sees the message of a step whose state
    /// was not kept.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::checkpoint`].
    pub async fn checkpoint_with_message<T: Serialize + ?Sized>(
        &self,
        state: &T,
        message: impl Into<String>,
    ) -> Result<(), ErrorData> {
        self.save_checkpoint(state, Some(message.into())).await
    }

    async fn save_checkpoint<T: Serialize + ?Sized>(
        &self,
        state: &T,
        message: Option<String>,
    ) -> Result<(), ErrorData> {
        if self.task.is_none() {
            return Ok(());
        }
        let state = checkpoint_state(state)?;
        self.change(Change::Checkpoint { state, message }).await?;
        self.hand_off_if_draining().await
    }

    /// While a drain hands resumable tasks to other replicas, hands this
    /// one off right after the checkpoint it just wrote, and ends the tool
    /// with an error (not recorded: the task is another runner's now).
    async fn hand_off_if_draining(&self) -> Result<(), ErrorData> {
        let (Some((id, inner)), Some(lease)) = (&self.task, &self.lease) else {
            return Ok(());
        };
        if !self.resumable || self.drain_wait || !inner.draining.is_handing_off() {
            return Ok(());
        }
        // In a task of its own: the write wakes this task's supervision,
        // which stops the tool (this future) as it sees the task go.
        let handing = {
            let (inner, id, lease) = (inner.clone(), id.clone(), lease.clone());
            tokio::spawn(async move { super::handoff::hand_off(&inner, &id, &lease).await })
        };
        if handing.await.unwrap_or(false) {
            return Err(ErrorData::internal_error(
                "this server is shutting down: the task was handed to another server at this \
                 checkpoint",
                None,
            ));
        }
        Ok(())
    }

    /// Sets the status message `tasks/get` shows (and `notifications/tasks`
    /// pushes): free text, as "waiting for the build farm". For counted
    /// steps, [`TaskContext::progress`] writes the message and also reaches
    /// callers that asked for progress notifications. A no-op when the tool
    /// runs synchronously (there is no task to show it).
    pub async fn set_status_message(&self, message: impl Into<String>) -> Result<(), ErrorData> {
        self.change(Change::StatusMessage(message.into())).await
    }

    /// Reports how far the tool got: `done` units of `total` (`None` when
    /// the total is not known), in the way each caller can hear it.
    ///
    /// * **The status message** of the task becomes `"3 of 20"` (`"3 done"`
    ///   without a total), what `tasks/get`, `notifications/tasks` and the
    ///   CLI show, in both eras.
    /// * **`notifications/progress`** (`progress: done`, `total`) goes to a
    ///   caller that put a `progressToken` in its `tools/call`'s `_meta`:
    ///   for a synchronous call, in either era, on the call's own response
    ///   stream (HTTP) or the connection (stdio); for a task of a 2025-11-25
    ///   session (whose token stays valid for the task's life), on the
    ///   session, tagged with the related-task `_meta`. Never for a task of
    ///   2026-07-28: the Tasks extension does not support progress for
    ///   tasks, so such a caller reads the status message. Progress must
    ///   increase: a `done` not past the last one sent updates the status
    ///   message but sends no notification. A notification that cannot be
    ///   delivered (the caller went away) is dropped, not an error.
    ///
    /// Counts, not a fraction, because a tool counts things (files, rows,
    /// steps) and a caller shows "3 of 20"; `total` takes a plain number or
    /// `None` (`impl Into<Option<u64>>`): `task.progress(3, 20)`,
    /// `task.progress(3, None)`. [`TaskContext::progress_with_message`]
    /// says what the step is too.
    ///
    /// ```no_run
    /// # use mcp_tasks::server::TaskContext;
    /// # async fn copy(_file: &str) {}
    /// # async fn tool(task: TaskContext, files: Vec<String>) -> Result<(), rmcp::ErrorData> {
    /// let total = files.len() as u64;
    /// for (done, file) in files.iter().enumerate() {
    ///     task.progress(done as u64, total).await?; // "0 of 20", "1 of 20", ...
    ///     copy(file).await;
    /// }
    /// task.progress(total, total).await?; // "20 of 20"
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`TaskContext::set_status_message`]: -32603 when the task has
    /// ended or is gone, or the store failed. Never for a synchronous call.
    pub async fn progress(
        &self,
        done: u64,
        total: impl Into<Option<u64>>,
    ) -> Result<(), ErrorData> {
        self.report_progress(done, total.into(), None).await
    }

    /// [`TaskContext::progress`] with what the step is: the status message
    /// becomes `"3 of 20: copying a.txt"`, and a progress notification
    /// carries `message` as its own.
    ///
    /// # Errors
    ///
    /// As [`TaskContext::progress`].
    pub async fn progress_with_message(
        &self,
        done: u64,
        total: impl Into<Option<u64>>,
        message: impl Into<String>,
    ) -> Result<(), ErrorData> {
        let message = message.into();
        self.report_progress(done, total.into(), Some(&message))
            .await
    }

    async fn report_progress(
        &self,
        done: u64,
        total: Option<u64>,
        message: Option<&str>,
    ) -> Result<(), ErrorData> {
        if self.task.is_some() {
            self.change(Change::StatusMessage(progress_message(
                done, total, message,
            )))
            .await?;
        }
        if let Some(sink) = &self.progress {
            let task = self.task.as_ref().map(|(id, _)| id);
            sink.send(done, total, message, task).await;
        }
        Ok(())
    }

    /// Keeps a working task alive: its TTL now ends no earlier than `by` from now.
    pub async fn extend_ttl(&self, by: Duration) -> Result<(), ErrorData> {
        self.change(Change::ExtendTtl(by)).await
    }

    /// Asks the client for input and waits for the answer: the task is
    /// `input_required` until `tasks/update` answers `key`. Keys must be
    /// unique for the task's lifetime. Fails if the task is cancelled or
    /// expires while waiting.
    pub async fn request_input(
        &self,
        key: impl Into<String>,
        request: InputRequest,
    ) -> Result<Value, ErrorData> {
        let key = key.into();
        let mut answers = self
            .request_inputs(BTreeMap::from([(key.clone(), request)]))
            .await?;
        answers
            .remove(&key)
            .ok_or_else(|| ErrorData::internal_error("the input answer went missing", None))
    }

    /// Asks the user to fill in a form made from `T`'s JSON schema (a
    /// `#[derive(JsonSchema)]` struct of flat fields, as rmcp's
    /// [`ElicitationSchema::from_type`] takes it) and waits for the answer,
    /// typed: [`Elicited::Accept`] with a `T`, [`Elicited::Decline`] or
    /// [`Elicited::Cancel`]. `key` names the request, as in
    /// [`TaskContext::request_input`]. An accepted answer that does not
    /// read as a `T` is -32602 (a client of this crate checks it against the
    /// form before sending it).
    pub async fn elicit<T>(
        &self,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Result<Elicited<T>, ErrorData>
    where
        T: JsonSchema + DeserializeOwned,
    {
        let schema = ElicitationSchema::from_type::<T>().map_err(|error| {
            ErrorData::internal_error(
                format!("{} cannot be a form: {error}", std::any::type_name::<T>()),
                None,
            )
        })?;
        self.elicit_form(key, message, schema).await
    }

    /// [`TaskContext::elicit`] with a form built by hand with rmcp's
    /// [`ElicitationSchema`] builder; the answer reads as any `T` (a struct,
    /// or a `serde_json::Map` to take it as it comes).
    pub async fn elicit_form<T>(
        &self,
        key: impl Into<String>,
        message: impl Into<String>,
        schema: ElicitationSchema,
    ) -> Result<Elicited<T>, ErrorData>
    where
        T: DeserializeOwned,
    {
        let key = key.into();
        let request = serde_json::from_value(serde_json::json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": message.into(), "requestedSchema": schema},
        }))
        .map_err(|error| {
            ErrorData::internal_error(format!("input request {key:?}: {error}"), None)
        })?;
        let answer = self.request_input(key.clone(), request).await?;
        Elicited::from_wire(&answer).map_err(|error| {
            ErrorData::invalid_params(
                format!("the answer to input request {key:?} does not fit its form: {error}"),
                None,
            )
        })
    }

    /// Asks for several inputs at once and waits until every key is
    /// answered (the client may answer them in several `tasks/update`s).
    pub async fn request_inputs(
        &self,
        requests: BTreeMap<String, InputRequest>,
    ) -> Result<BTreeMap<String, Value>, ErrorData> {
        let Some((id, inner)) = &self.task else {
            return match &self.session {
                Some(session) => session.ask(requests).await,
                None => Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                )),
            };
        };
        self.until_stored().await;
        let keys: Vec<String> = requests.keys().cloned().collect();
        let mut waiter = inner.waiters.register(id);
        // A task run again after its server stopped asks only for what was
        // never asked: the answers (or the outstanding requests) are kept.
        let asked = match &self.resumed {
            Some(_) => Some(inner.read(id).await?).filter(|record| record.resumed() > 0),
            None => None,
        };
        let requests = requests.into_iter().filter(|(key, _)| {
            asked
                .as_ref()
                .is_none_or(|record| !record.issued_keys().contains(key))
        });
        for (key, request) in requests {
            let request = serde_json::to_value(request).map_err(|error| {
                ErrorData::internal_error(format!("input request {key:?}: {error}"), None)
            })?;
            self.change(Change::RequestInput { key, request }).await?;
        }
        loop {
            let record = read_patiently(inner, id).await?;
            let answers = record.input_responses();
            if keys.iter().all(|key| answers.contains_key(key)) {
                return Ok(keys
                    .iter()
                    .filter_map(|key| answers.get(key).map(|answer| (key.clone(), answer.clone())))
                    .collect());
            }
            if record.cancel_requested() || record.status().is_terminal() {
                // The runtime ends this tool on the same change: wait for it
                // rather than finish first with an error, which would make a
                // cancelled task a failed one.
                self.cancelled().await;
                return Err(ErrorData::internal_error(
                    "the task ended while waiting for input",
                    None,
                ));
            }
            if let Some(lease) = &self.lease
                && record.runner() != Some(lease.runner())
            {
                return Err(lost_lease());
            }
            waiter.wait(Duration::from_secs(5)).await;
        }
    }

    async fn change(&self, change: Change) -> Result<(), ErrorData> {
        let Some((id, inner)) = &self.task else {
            return Ok(());
        };
        self.until_stored().await;
        let modified = inner
            .modify_as_runner(id, &change, self.lease.as_ref())
            .await
            .map_err(LeaseError::into_error_data)?;
        match modified {
            Modified::Applied(_) => Ok(()),
            Modified::Refused(_, TransitionError::NotRunner) => Err(lost_lease()),
            Modified::Refused(record, refused) => {
                if matches!(
                    record.status(),
                    TaskStatus::Working | TaskStatus::InputRequired
                ) {
                    Err(ErrorData::invalid_params(refused.to_string(), None))
                } else {
                    Err(ErrorData::internal_error("the task has ended", None))
                }
            }
            Modified::Missing => Err(ErrorData::internal_error("the task is gone", None)),
        }
    }
}

impl Session {
    /// Asks the client each request in turn on its session; the answers by key.
    async fn ask(
        &self,
        requests: BTreeMap<String, InputRequest>,
    ) -> Result<BTreeMap<String, Value>, ErrorData> {
        let mut answers = BTreeMap::new();
        for (key, request) in requests {
            let wire = serde_json::to_value(&request).map_err(|error| {
                ErrorData::internal_error(format!("input request {key:?}: {error}"), None)
            })?;
            let method = wire
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let mut sent = CustomRequest::new(method, wire.get("params").cloned());
            sent.extensions
                .insert(OriginatingRequestId(self.request.clone()));
            let answer = self
                .peer
                .send_request(ServerRequest::CustomRequest(sent))
                .await
                .map_err(|error| match error {
                    ServiceError::McpError(error) => error,
                    other => ErrorData::internal_error(
                        format!("the client did not answer input request {key:?}: {other}"),
                        None,
                    ),
                })?;
            let answer = serde_json::to_value(answer)
                .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
            answers.insert(key, answer);
        }
        Ok(answers)
    }
}

/// The status message of [`TaskContext::progress`]: `3 of 20`, `3 done`,
/// then `: message` when there is one.
fn progress_message(done: u64, total: Option<u64>, message: Option<&str>) -> String {
    let mut text = match total {
        Some(total) => format!("{done} of {total}"),
        None => format!("{done} done"),
    };
    if let Some(message) = message {
        text.push_str(": ");
        text.push_str(message);
    }
    text
}

/// `state` as JSON, within [`MAX_CHECKPOINT_BYTES`].
fn checkpoint_state<T: Serialize + ?Sized>(state: &T) -> Result<Value, ErrorData> {
    let bytes = serde_json::to_vec(state).map_err(|error| {
        ErrorData::internal_error(format!("the checkpoint does not serialize: {error}"), None)
    })?;
    if bytes.len() > MAX_CHECKPOINT_BYTES {
        return Err(ErrorData::internal_error(
            format!(
                "a checkpoint of {} bytes is more than the {MAX_CHECKPOINT_BYTES} bytes a task \
                 keeps: keep a position or the ids of what is done, not the work itself",
                bytes.len()
            ),
            None,
        ));
    }
    serde_json::from_slice(&bytes).map_err(|error| {
        ErrorData::internal_error(format!("the checkpoint does not serialize: {error}"), None)
    })
}

/// How long a tool waiting for input rides out a store that cannot be
/// reached before it fails.
const READ_RETRY_FOR: Duration = Duration::from_secs(600);

/// Task `id` as the store holds it, read again (with growing pauses, for at
/// most [`READ_RETRY_FOR`]) while the store cannot be reached: a tool that
/// waits for input survives a short outage of the store (a Redis restart)
/// instead of failing its task the moment it is woken during one.
async fn read_patiently(inner: &Inner, id: &TaskId) -> Result<TaskRecord, ErrorData> {
    let give_up = tokio::time::Instant::now() + READ_RETRY_FOR;
    let mut pause = Duration::from_millis(50);
    loop {
        match inner.store.get(id).await {
            Ok(Some(record)) => return Ok(record),
            Ok(None) => return Err(ErrorData::internal_error("the task is gone", None)),
            Err(error)
                if error.kind() == StoreErrorKind::Unavailable
                    && tokio::time::Instant::now() + pause < give_up =>
            {
                tracing::warn!(%error, "reading a task that waits for input failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(error) => return Err(store_failure(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_counts() {
        assert_eq!(progress_message(3, Some(20), None), "3 of 20");
        assert_eq!(progress_message(3, None, None), "3 done");
        assert_eq!(
            progress_message(3, Some(20), Some("copying a.txt")),
            "3 of 20: copying a.txt"
        );
    }

    #[test]
    fn a_checkpoint_is_bounded_with_a_clear_error() {
        // `"` + n bytes + `"`: exactly at the bound, then one past it.
        let at_bound = "x".repeat(MAX_CHECKPOINT_BYTES - 2);
        assert_eq!(
            checkpoint_state(&at_bound).expect("at the bound"),
            Value::String(at_bound.clone())
        );
        let error = checkpoint_state(&format!("{at_bound}x")).expect_err("past the bound");
        assert_eq!(error.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert!(
            error.message.contains("65537 bytes") && error.message.contains("65536"),
            "{}",
            error.message
        );
        let map: BTreeMap<Vec<u8>, u8> = BTreeMap::from([(vec![1], 1)]);
        let error = checkpoint_state(&map).expect_err("not JSON");
        assert!(
            error.message.contains("does not serialize"),
            "{}",
            error.message
        );
    }
}
