//! The server half: a task runtime for rmcp servers.
//!
//! An rmcp `ServerHandler` keeps a [`TaskRuntime`], advertises the
//! extension (`ServerCapabilities::builder().enable_tasks()`), and
//! delegates to it: `call_tool` to [`TaskRuntime::call_tool`] with the
//! tool's [`ToolTasks`] policy and its code, and `get_task`, `update_task`,
//! `cancel_task` to the methods of the same names
//! ([`delegate_task_methods!`](crate::delegate_task_methods) writes those three). The runtime decides
//! between a synchronous run and a task, creates the task in the store
//! before answering, runs the tool with a [`TaskContext`], records its
//! outcome, binds every task to the principal that created it, and sweeps
//! expired tasks in the background.
//!
//! ```no_run
//! use mcp_tasks::server::{TaskRuntime, ToolTasks};
//! use mcp_tasks::store::MemoryStore;
//! use rmcp::model::*;
//! use rmcp::service::{RequestContext, RoleServer};
//! use rmcp::{ErrorData, ServerHandler};
//!
//! #[derive(Clone)]
//! struct Server {
//!     runtime: TaskRuntime, // TaskRuntime::new(MemoryStore::new()), inside tokio
//! }
//!
//! impl ServerHandler for Server {
//!     fn get_info(&self) -> ServerConfig {
//!         ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
//!     }
//!     async fn call_tool(
//!         &self,
//!         request: CallToolRequestParams,
//!         context: RequestContext<RoleServer>,
//!     ) -> Result<CallToolResponse, ErrorData> {
//!         self.runtime
//!             .call_tool(&request, &context, &ToolTasks::optional(), |task| async move {
//!                 task.set_status_message("exporting").await?;
//!                 // ... the work; `task.request_input(..)` asks the client ...
//!                 Ok(CallToolResult::success(vec![ContentBlock::text("exported")]))
//!             })
//!             .await
//!     }
//!     mcp_tasks::delegate_task_methods!(runtime);
//! }
//! ```
//!
//! Over Streamable HTTP, serve with rmcp's `StreamableHttpService`
//! configured stateless with `with_json_response(true)` and set
//! `TCP_NODELAY` on accepted sockets: `tasks/*` answers then go out as one
//! plain JSON write instead of several SSE writes held back by delayed ACKs.

mod context;
#[cfg(feature = "http")]
pub mod http;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::FutureExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, CreateTaskResult,
    DetailedTask, Extensions, GetTaskResult, InputRequests, JsonObject, Task, TaskPayload,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use sha2::Digest;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

pub use context::TaskContext;

use crate::store::{Change, DynStore, Modified, SharedStore, StoreError, TaskRecord, modify};
use crate::task::TaskStatus;

/// Writes the `get_task`, `update_task` and `cancel_task` methods of an rmcp
/// `ServerHandler` impl, delegating to the [`TaskRuntime`] in the named field.
///
/// ```ignore
/// impl ServerHandler for MyServer {
///     // get_info, call_tool, ...
///     mcp_tasks::delegate_task_methods!(runtime);
/// }
/// ```
#[macro_export]
macro_rules! delegate_task_methods {
    ($runtime:ident) => {
        async fn get_task(
            &self,
            request: $crate::__rmcp::model::GetTaskParams,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<$crate::__rmcp::model::GetTaskResult, $crate::__rmcp::ErrorData>
        {
            self.$runtime.get_task(&request.task_id, &context).await
        }

        async fn update_task(
            &self,
            request: $crate::__rmcp::model::UpdateTaskParams,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<(), $crate::__rmcp::ErrorData> {
            self.$runtime
                .update_task(&request.task_id, request.input_responses, &context)
                .await
        }

        async fn cancel_task(
            &self,
            request: $crate::__rmcp::model::CancelTaskParams,
            context: $crate::__rmcp::service::RequestContext<$crate::__rmcp::RoleServer>,
        ) -> ::std::result::Result<(), $crate::__rmcp::ErrorData> {
            self.$runtime.cancel_task(&request.task_id, &context).await
        }
    };
}

/// Wall-clock time for task timestamps and TTLs, injectable for tests.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
            })
    }
}

/// Whether a tool's calls become tasks. The protocol has no per-tool
/// policy; this is the server's private configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TaskPolicy {
    /// Always run synchronously.
    Forbidden,
    /// A task when the request declared the extension, else synchronous.
    #[default]
    Optional,
    /// Always a task; without the declaration the call fails with -32021.
    Required,
}

/// Decides the policy of one call from its request.
pub type PolicySelector = Arc<dyn Fn(&CallToolRequestParams) -> TaskPolicy + Send + Sync>;

/// How one tool uses tasks.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ToolTasks {
    /// The policy (default optional).
    pub policy: TaskPolicy,
    /// Decides the policy per call instead of `policy`.
    pub selector: Option<PolicySelector>,
    /// The TTL of this tool's tasks: `None` uses the runtime's default,
    /// `Some(None)` is unlimited.
    pub ttl: Option<Option<Duration>>,
}

impl fmt::Debug for ToolTasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolTasks")
            .field("policy", &self.policy)
            .field("selector", &self.selector.as_ref().map(|_| ".."))
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl ToolTasks {
    /// Never a task.
    pub fn forbidden() -> Self {
        Self::with_policy(TaskPolicy::Forbidden)
    }

    /// A task when the client declared the extension.
    pub fn optional() -> Self {
        Self::with_policy(TaskPolicy::Optional)
    }

    /// Always a task.
    pub fn required() -> Self {
        Self::with_policy(TaskPolicy::Required)
    }

    fn with_policy(policy: TaskPolicy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// Decides the policy per call.
    pub fn with_selector(
        mut self,
        selector: impl Fn(&CallToolRequestParams) -> TaskPolicy + Send + Sync + 'static,
    ) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }

    /// This tool's TTL (`None`: unlimited).
    pub fn with_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// Finds the principal (the authorization context) of a request from its
/// extensions (over HTTP they hold the request's `http::request::Parts`).
pub type PrincipalExtractor = Arc<dyn Fn(&Extensions) -> String + Send + Sync>;

/// The default principal: over HTTP a hash of the `Authorization` header
/// (`http:anonymous` without one); elsewhere (stdio) the process itself.
pub fn default_principal(extensions: &Extensions) -> String {
    match extensions.get::<::http::request::Parts>() {
        Some(parts) => match parts.headers.get(::http::header::AUTHORIZATION) {
            Some(value) => {
                let digest = sha2::Sha256::digest(value.as_bytes());
                let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
                format!("authorization:{hex}")
            }
            None => "http:anonymous".to_owned(),
        },
        None => "process".to_owned(),
    }
}

/// The runtime's settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// The TTL of tasks whose tool sets none (default 1 h; `None`: unlimited).
    pub default_ttl: Option<Duration>,
    /// The `pollIntervalMs` suggested to clients (default 1 s).
    pub poll_interval: Duration,
    /// How long finished tasks are kept (default 1 h).
    pub retention: Duration,
    /// How often the sweeper looks for expired tasks (default 1 s).
    pub sweep_interval: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            default_ttl: Some(Duration::from_secs(3600)),
            poll_interval: Duration::from_secs(1),
            retention: Duration::from_secs(3600),
            sweep_interval: Duration::from_secs(1),
        }
    }
}

impl RuntimeConfig {
    /// The default TTL (`None`: unlimited).
    pub fn with_default_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// The suggested poll interval.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// How long finished tasks are kept.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How often the sweeper runs.
    pub fn with_sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = interval;
        self
    }
}

/// Per-task wake-ups from the store's change feed: one listener for the
/// process, so a change wakes only the waiters of its own task.
#[derive(Default)]
struct Waiters {
    by_id: Mutex<HashMap<String, Weak<watch::Sender<u64>>>>,
}

/// A registration in [`Waiters`]. It remembers which changes it has seen,
/// so a change that lands between a read and the next wait is not missed.
struct Waiter {
    _sender: Arc<watch::Sender<u64>>,
    changes: watch::Receiver<u64>,
}

impl Waiter {
    /// Waits for a change not seen yet, or `at_most` (a safety net for a
    /// lossy feed).
    async fn wait(&mut self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.changes.changed()).await;
    }
}

impl Waiters {
    fn register(&self, id: &str) -> Waiter {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let sender = match by_id.get(id).and_then(Weak::upgrade) {
            Some(sender) => sender,
            None => {
                let sender = Arc::new(watch::channel(0).0);
                by_id.insert(id.to_owned(), Arc::downgrade(&sender));
                sender
            }
        };
        let changes = sender.subscribe();
        Waiter {
            _sender: sender,
            changes,
        }
    }

    fn wake(&self, id: &str) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        match by_id.get(id).map(Weak::upgrade) {
            Some(Some(sender)) => sender.send_modify(|seen| *seen = seen.wrapping_add(1)),
            Some(None) => {
                by_id.remove(id);
            }
            None => {}
        }
    }

    fn wake_all(&self) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        by_id.retain(|_, weak| match weak.upgrade() {
            Some(sender) => {
                sender.send_modify(|seen| *seen = seen.wrapping_add(1));
                true
            }
            None => false,
        });
    }
}

pub(crate) struct Inner {
    store: SharedStore,
    config: RuntimeConfig,
    clock: Arc<dyn Clock>,
    principal: PrincipalExtractor,
    waiters: Waiters,
}

impl Inner {
    fn retention_ms(&self) -> u64 {
        millis(self.config.retention)
    }

    async fn read(&self, id: &str) -> Result<TaskRecord, ErrorData> {
        self.store
            .get(id)
            .await
            .map_err(store_failure)?
            .ok_or_else(|| ErrorData::internal_error("the task is gone", None))
    }
}

/// The task runtime. Cheap to clone; clones share the store and the sweeper.
#[derive(Clone)]
pub struct TaskRuntime {
    inner: Arc<Inner>,
}

impl fmt::Debug for TaskRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRuntime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl TaskRuntime {
    /// A runtime on `store` with the default settings, system clock and
    /// principal extractor. Must be called inside a tokio runtime: it
    /// starts the sweeper and the change listener, which stop when the
    /// last clone of the runtime is dropped.
    pub fn new(store: impl DynStore) -> Self {
        Self::builder(Arc::new(store)).build()
    }

    /// A runtime with chosen settings.
    pub fn builder(store: SharedStore) -> RuntimeBuilder {
        RuntimeBuilder {
            store,
            config: RuntimeConfig::default(),
            clock: Arc::new(SystemClock),
            principal: Arc::new(default_principal),
        }
    }

    /// The store.
    pub fn store(&self) -> &SharedStore {
        &self.inner.store
    }

    /// Runs one `tools/call`: synchronously or as a task, as `tasks` and
    /// the request's declaration decide. A task is in the store before this
    /// returns its `CreateTaskResult`.
    pub async fn call_tool<F, Fut>(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        tasks: &ToolTasks,
        run: F,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let declared = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let policy = match &tasks.selector {
            Some(select) => select(request),
            None => tasks.policy,
        };
        let as_task = match policy {
            TaskPolicy::Forbidden => false,
            TaskPolicy::Optional => declared,
            TaskPolicy::Required if declared => true,
            TaskPolicy::Required => return Err(tasks_required()),
        };
        if !as_task {
            let context = TaskContext {
                task: None,
                token: CancellationToken::new(),
            };
            return match tokio::spawn(run(context)).await {
                Ok(outcome) => outcome.map(CallToolResponse::from),
                Err(_) => Err(tool_panicked()),
            };
        }
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        let ttl = tasks.ttl.unwrap_or(inner.config.default_ttl).map(millis);
        let record = TaskRecord::new(
            new_task_id()?,
            (inner.principal)(&context.extensions),
            now,
            ttl,
            Some(millis(inner.config.poll_interval)),
        );
        let id = record.id.clone();
        let created = wire_task(&record);
        // Durable before we answer: a tasks/get right after finds it.
        inner.store.create(record).await.map_err(store_failure)?;
        let token = CancellationToken::new();
        let future = run(TaskContext {
            task: Some((id.clone(), inner.clone())),
            token: token.clone(),
        });
        tokio::spawn(supervise(inner.clone(), id, token, future));
        Ok(CallToolResponse::Task(CreateTaskResult::new(created)))
    }

    /// `tasks/get`: the task, if it exists and belongs to the caller.
    pub async fn get_task(
        &self,
        task_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.get_task_as(task_id, &self.principal_of(&context.extensions))
            .await
    }

    /// `tasks/update`: records answers for outstanding keys; other keys are
    /// ignored, partial sets are accepted. Acks at once.
    pub async fn update_task(
        &self,
        task_id: &str,
        input_responses: rmcp::model::InputResponses,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.principal_of(&context.extensions);
        self.update_task_as(task_id, input_responses, &principal)
            .await
    }

    /// `tasks/cancel`: records the request and stops the tool; acks at once,
    /// also for a finished task (which does not change).
    pub async fn cancel_task(
        &self,
        task_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel_task_as(task_id, &self.principal_of(&context.extensions))
            .await
    }

    /// The principal of a request, by the runtime's extractor.
    pub fn principal_of(&self, extensions: &Extensions) -> String {
        (self.inner.principal)(extensions)
    }

    /// [`TaskRuntime::get_task`] for a principal found elsewhere.
    pub async fn get_task_as(
        &self,
        task_id: &str,
        principal: &str,
    ) -> Result<GetTaskResult, ErrorData> {
        let mut record = self.owned(task_id, principal).await?;
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        // The sweeper may not have run yet: a working task past its TTL reads as expired.
        if !record.status.is_terminal()
            && record.expires_at_ms.is_some_and(|at| at <= now)
            && let Modified::Applied(next) | Modified::Refused(next, _) = modify(
                &*inner.store,
                task_id,
                &Change::Expire,
                now,
                inner.retention_ms(),
            )
            .await
            .map_err(store_failure)?
        {
            record = next;
        }
        Ok(GetTaskResult::new(detailed_task(&record)?))
    }

    /// [`TaskRuntime::update_task`] for a principal found elsewhere.
    pub async fn update_task_as(
        &self,
        task_id: &str,
        input_responses: rmcp::model::InputResponses,
        principal: &str,
    ) -> Result<(), ErrorData> {
        self.owned(task_id, principal).await?;
        let change = Change::ProvideInput(input_responses.into_iter().collect());
        self.change(task_id, &change).await
    }

    /// [`TaskRuntime::cancel_task`] for a principal found elsewhere.
    pub async fn cancel_task_as(&self, task_id: &str, principal: &str) -> Result<(), ErrorData> {
        self.owned(task_id, principal).await?;
        self.change(task_id, &Change::RequestCancel).await
    }

    async fn change(&self, task_id: &str, change: &Change) -> Result<(), ErrorData> {
        let inner = &self.inner;
        match modify(
            &*inner.store,
            task_id,
            change,
            inner.clock.now_ms(),
            inner.retention_ms(),
        )
        .await
        .map_err(store_failure)?
        {
            Modified::Missing => Err(task_not_found()),
            Modified::Applied(_) | Modified::Refused(..) => Ok(()),
        }
    }

    /// The record, if it exists and `principal` owns it; the same -32602 otherwise.
    async fn owned(&self, task_id: &str, principal: &str) -> Result<TaskRecord, ErrorData> {
        match self.inner.store.get(task_id).await.map_err(store_failure)? {
            Some(record) if record.owner == principal => Ok(record),
            _ => Err(task_not_found()),
        }
    }

    /// Runs one sweep now: working tasks past their TTL fail, finished ones
    /// past their retention are deleted. Returns how many records it touched.
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        sweep(&self.inner).await
    }
}

/// Builds a [`TaskRuntime`].
#[must_use]
pub struct RuntimeBuilder {
    store: SharedStore,
    config: RuntimeConfig,
    clock: Arc<dyn Clock>,
    principal: PrincipalExtractor,
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// The settings.
    pub fn config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// The clock for timestamps and TTLs.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// How a request's principal is found (default: [`default_principal`]).
    pub fn principal(
        mut self,
        extract: impl Fn(&Extensions) -> String + Send + Sync + 'static,
    ) -> Self {
        self.principal = Arc::new(extract);
        self
    }

    /// Starts the runtime (inside a tokio runtime).
    pub fn build(self) -> TaskRuntime {
        let inner = Arc::new(Inner {
            store: self.store,
            config: self.config,
            clock: self.clock,
            principal: self.principal,
            waiters: Waiters::default(),
        });
        tokio::spawn(listen_for_changes(
            Arc::downgrade(&inner),
            inner.store.changes(),
        ));
        tokio::spawn(run_sweeper(
            Arc::downgrade(&inner),
            inner.config.sweep_interval,
        ));
        TaskRuntime { inner }
    }
}

/// Wakes the waiters of each changed task.
async fn listen_for_changes(inner: Weak<Inner>, mut feed: broadcast::Receiver<String>) {
    loop {
        let next = feed.recv().await;
        let Some(inner) = inner.upgrade() else { return };
        match next {
            Ok(id) => inner.waiters.wake(&id),
            Err(broadcast::error::RecvError::Lagged(_)) => inner.waiters.wake_all(),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

async fn run_sweeper(inner: Weak<Inner>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(error) = sweep(&inner).await {
            tracing::warn!(%error, "task sweep failed");
        }
    }
}

async fn sweep(inner: &Inner) -> Result<usize, StoreError> {
    let now = inner.clock.now_ms();
    let due = inner.store.expired(now, 1024).await?;
    let count = due.len();
    let retention = inner.retention_ms();
    for id in due {
        match modify(&*inner.store, &id, &Change::Expire, now, retention).await {
            // Working past its TTL: now failed, kept for the retention window.
            Ok(Modified::Applied(_) | Modified::Missing) => {}
            // Finished and past its retention: gone.
            Ok(Modified::Refused(record, _)) => {
                if record.expires_at_ms.is_some_and(|at| at <= now) {
                    inner.store.delete(&id).await?;
                }
            }
            // A record that cannot be read (corrupt) must not block the
            // others behind it in the index: it is past its time, drop it.
            Err(error) => {
                tracing::warn!(%error, "an expired task could not be read; deleting it");
                inner.store.delete(&id).await?;
            }
        }
    }
    Ok(count)
}

/// Runs the tool to its outcome and records it; stops it on cancel or expiry.
async fn supervise<Fut>(inner: Arc<Inner>, id: String, token: CancellationToken, future: Fut)
where
    Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
{
    let mut waiter = inner.waiters.register(&id);
    // The tool runs inside this task (no second spawn); a panic in it is
    // caught here and fails the task.
    let tool = std::panic::AssertUnwindSafe(future).catch_unwind();
    tokio::pin!(tool);
    let change = loop {
        tokio::select! {
            finished = &mut tool => break match finished {
                Ok(Ok(result)) => Change::Complete(result_json(&result)),
                Ok(Err(error)) => Change::Fail(error_json(&error)),
                Err(_panic) => Change::Fail(error_json(&tool_panicked())),
            },
            // Every change of this task wakes us (the fallback only covers a
            // store whose change feed is gone).
            () = waiter.wait(Duration::from_secs(30)) => {
                match inner.store.get(&id).await {
                    Ok(Some(record)) if !record.cancel_requested && !record.status.is_terminal() => {}
                    // Cancelled, expired, finished elsewhere or deleted: drop the tool.
                    Ok(_) => break Change::Cancel,
                    Err(error) => tracing::warn!(%error, "reading a running task failed"),
                }
            }
        }
    };
    token.cancel();
    let now = inner.clock.now_ms();
    if let Err(error) = modify(&*inner.store, &id, &change, now, inner.retention_ms()).await {
        tracing::error!(%error, "recording a task outcome failed");
    }
}

fn new_task_id() -> Result<String, ErrorData> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| ErrorData::internal_error(format!("no randomness: {error}"), None))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn timestamp(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned())
}

fn wire_task(record: &TaskRecord) -> Task {
    let status = match record.status {
        TaskStatus::InputRequired => rmcp::model::TaskStatus::InputRequired,
        TaskStatus::Completed => rmcp::model::TaskStatus::Completed,
        TaskStatus::Failed => rmcp::model::TaskStatus::Failed,
        TaskStatus::Cancelled => rmcp::model::TaskStatus::Cancelled,
        _ => rmcp::model::TaskStatus::Working,
    };
    let mut task = Task::new(
        record.id.clone(),
        status,
        timestamp(record.created_at_ms),
        timestamp(record.updated_at_ms),
    );
    task.ttl_ms = record.ttl_ms;
    task.poll_interval_ms = record.poll_interval_ms;
    task.status_message = record.status_message.clone();
    task
}

fn detailed_task(record: &TaskRecord) -> Result<DetailedTask, ErrorData> {
    let object = |value: &Option<Value>, what: &str| match value {
        Some(Value::Object(object)) => Ok(object.clone()),
        _ => Err(ErrorData::internal_error(
            format!("the stored task has no {what}"),
            None,
        )),
    };
    let payload = match record.status {
        TaskStatus::InputRequired => {
            let mut requests = InputRequests::new();
            for (key, request) in &record.input_requests {
                let request = serde_json::from_value(request.clone()).map_err(|error| {
                    ErrorData::internal_error(format!("stored input request: {error}"), None)
                })?;
                requests.insert(key.clone(), request);
            }
            TaskPayload::InputRequired {
                input_requests: requests,
            }
        }
        TaskStatus::Completed => TaskPayload::Completed {
            result: object(&record.result, "result")?,
        },
        TaskStatus::Failed => TaskPayload::Failed {
            error: object(&record.error, "error")?,
        },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    Ok(DetailedTask::new(wire_task(record), payload))
}

fn result_json(result: &CallToolResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or_else(|_| json!({"content": []}));
    if let Value::Object(fields) = &mut value {
        fields.insert("resultType".into(), json!("complete"));
    }
    value
}

fn error_json(error: &ErrorData) -> Value {
    let mut fields = JsonObject::new();
    fields.insert("code".into(), json!(error.code.0));
    fields.insert("message".into(), json!(error.message));
    if let Some(data) = &error.data {
        fields.insert("data".into(), data.clone());
    }
    Value::Object(fields)
}

fn tasks_required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn task_not_found() -> ErrorData {
    ErrorData::invalid_params("Failed to retrieve task: Task not found", None)
}

fn tool_panicked() -> ErrorData {
    ErrorData::internal_error("internal error: the tool panicked", None)
}

#[expect(
    clippy::needless_pass_by_value,
    reason = "used as a `map_err` function"
)]
pub(crate) fn store_failure(error: StoreError) -> ErrorData {
    tracing::error!(%error, "task store failure");
    ErrorData::internal_error("internal error: the task store failed", None)
}
