//! [`TaskRuntimeBuilder`]: a runtime's settings, and starting it
//! ([`TaskRuntime::builder`] is here too: the runtime's file does not
//! import its builder). The top of the runtime's files: it makes the shared
//! state (`state.rs`) and starts the background work that reads it.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult, Extensions};

use super::admission::queue::{Admission, AdmissionLimits};
use super::admission::rate::{self, CreationRate};
use super::admission::shared;
use super::asked::AskedNow;
use super::budget::DEFAULT_MAX_RESULT_BYTES;
use super::clock::{Clock, SystemClock};
use super::draining::Draining;
use super::lease::{DEFAULT_LEASE_PERIOD, Leasing, fresh_runner};
use super::policy::Advertised;
use super::policy::TaskTools;
use super::state::{Inner, Settings};
use super::waiters::Waiters;
use crate::server::auth::principal::{Principal, PrincipalExtractor, default_principal};
use crate::server::engine::admission::limits::Listeners;
use crate::server::engine::tasks::context::TaskContext;
use crate::server::engine::tasks::runtime::{
    DEFAULT_MAX_LIFETIME, DEFAULT_MAX_TASKS_PER_CALLER, TaskRuntime,
};
use crate::server::engine::tasks::supervise::{listen_for_changes, run_sweeper};
use crate::server::engine::tasks::takeover::{
    ResumeTool, resume_left_unfinished, run_reaper, run_renewals,
};
use crate::store::{IntoSharedStore, SharedStore};
use crate::task::Ttl;
use crate::telemetry;
use crate::telemetry::observe::{Observers, TaskObserver};
use crate::telemetry::task_spans::TaskSpans;

/// The most listen streams open at once in a runtime, all callers
/// together, unless its builder says otherwise: half the HTTP serving
/// recipe's default connection bound (1024), so a server full of listeners
/// keeps the other half for `tasks/get`, creations and cancels.
pub const DEFAULT_MAX_LISTEN_STREAMS: usize = 512;

/// The most listen streams one caller may have open at once, unless the
/// runtime's builder says otherwise.
pub const DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER: usize = 64;

impl TaskRuntime {
    /// A builder for a runtime on `store` (any [`TaskStore`](crate::store::TaskStore),
    /// or a [`SharedStore`] chosen at run time).
    pub fn builder(store: impl IntoSharedStore) -> TaskRuntimeBuilder {
        TaskRuntimeBuilder::new(store.into_shared())
    }
}

/// Builds a [`TaskRuntime`]: `TaskRuntime::builder(store).with_…(..).build()`.
#[must_use]
pub struct TaskRuntimeBuilder {
    store: SharedStore,
    settings: Settings,
    clock: Arc<dyn Clock>,
    principal: PrincipalExtractor,
    /// Whether `principal` is the program's, not [`default_principal`].
    custom_principal: bool,
    resume: Option<ResumeTool>,
    admission: AdmissionLimits,
    observers: Vec<Arc<dyn TaskObserver>>,
}

impl fmt::Debug for TaskRuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRuntimeBuilder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TaskRuntimeBuilder {
    /// A builder for a runtime on `store`, with the defaults.
    pub(crate) fn new(store: SharedStore) -> Self {
        Self {
            store,
            settings: Settings {
                default_ttl: Ttl::Limited(Duration::from_secs(3600)),
                poll_interval: Duration::from_secs(1),
                retention: Duration::from_secs(3600),
                sweep_interval: Duration::from_secs(1),
                max_tasks_per_caller: Some(DEFAULT_MAX_TASKS_PER_CALLER),
                max_lifetime: Some(DEFAULT_MAX_LIFETIME),
                max_listen_streams: DEFAULT_MAX_LISTEN_STREAMS,
                max_listen_streams_per_caller: DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER,
                lease_period: DEFAULT_LEASE_PERIOD,
                quota_by_header: false,
                rate_per_caller: None,
                max_result_bytes: Some(DEFAULT_MAX_RESULT_BYTES),
                task_tools: TaskTools::off(),
            },
            clock: Arc::new(SystemClock),
            principal: Arc::new(default_principal),
            custom_principal: false,
            resume: None,
            admission: AdmissionLimits::default(),
            observers: Vec::new(),
        }
    }

    /// The TTL of tasks whose tool sets none (default 1 h). A limited TTL
    /// follows activity: while the tool runs, the runtime keeps the task
    /// alive a TTL ahead of now (writing to the store about three times per
    /// TTL); a task waiting for input expires a TTL after its last change,
    /// and one whose server died a TTL after its last keep-alive. A finished
    /// task is kept for the retention ([`TaskRuntimeBuilder::with_retention`]).
    /// No task lives past the maximum lifetime
    /// ([`TaskRuntimeBuilder::with_max_lifetime`]).
    pub fn with_default_ttl(mut self, ttl: Ttl) -> Self {
        self.settings.default_ttl = ttl;
        self
    }

    /// The longest any task with a limited TTL may live from its creation,
    /// however long its tool keeps it alive (default
    /// [`DEFAULT_MAX_LIFETIME`], 24 h; `None`: no bound). An unlimited TTL
    /// ([`Ttl::Unlimited`]) is not bounded by it.
    pub fn with_max_lifetime(mut self, max: Option<Duration>) -> Self {
        self.settings.max_lifetime = max;
        self
    }

    /// The `pollIntervalMs` suggested to clients for tasks whose tool sets
    /// none ([`ToolTasks::with_poll_interval`](crate::server::ToolTasks::with_poll_interval) sets one per tool). The
    /// default, 1 s, is a choice for tools that run seconds to hours: a
    /// polling client then costs one request a second per task, and sees a
    /// status message up to a second late (a listening client sees it at
    /// once, whatever the interval). Shorter means fresher status for
    /// polling clients and more requests; a tool that reports progress
    /// often and is watched by people may want 250-500 ms.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.settings.poll_interval = interval;
        self
    }

    /// How long finished tasks are kept before the sweeper deletes them
    /// (default 1 h).
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.settings.retention = retention;
        self
    }

    /// The most listen streams open at once in this runtime, all callers
    /// and transports together (default [`DEFAULT_MAX_LISTEN_STREAMS`],
    /// 512). Over HTTP each stream holds a connection for as long as it
    /// is open, so this budget must stay below the connection bound
    /// ([`StreamableHttpServer::with_max_connections`][max], default 1024):
    /// what it leaves is the reserve that answers `tasks/get`, creations
    /// and cancels however many clients listen, and
    /// [`StreamableHttpServer::serve`][serve] refuses to start without one.
    /// A stream past it is refused at once with a JSON-RPC error (-32603,
    /// `data: {"reason": "listenStreams", "retryAfterMs", "maxListenStreams"}`;
    /// over HTTP with status 503 and `Retry-After`), and our client's wait
    /// polls instead.
    ///
    /// This method used to set the per-caller bound, now
    /// [`with_max_listen_streams_per_caller`](Self::with_max_listen_streams_per_caller);
    /// a runtime built with it still holds at most that many streams per
    /// caller (the server-wide bound is the tighter one).
    ///
    /// [max]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/struct.StreamableHttpServer.html#method.with_max_connections
    /// [serve]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/struct.StreamableHttpServer.html#method.serve
    pub fn with_max_listen_streams(mut self, streams: usize) -> Self {
        self.settings.max_listen_streams = streams;
        self
    }

    /// The most listen streams one caller (the principal its caps count
    /// against) may have open at once (default
    /// [`DEFAULT_MAX_LISTEN_STREAMS_PER_CALLER`], 64), within the
    /// server-wide [`with_max_listen_streams`](Self::with_max_listen_streams).
    /// A stream past it is refused as one past the server-wide bound is,
    /// with `data.maxListenStreamsPerCaller`.
    pub fn with_max_listen_streams_per_caller(mut self, streams: usize) -> Self {
        self.settings.max_listen_streams_per_caller = streams;
        self
    }

    /// How often the sweeper looks for expired tasks (default 1 s).
    pub fn with_sweep_interval(mut self, interval: Duration) -> Self {
        self.settings.sweep_interval = interval;
        self
    }

    /// The bounds on tools running at once, on tasks waiting to run, and
    /// per tool, and the callers' shares of the slots (default
    /// [`AdmissionLimits::default`]; see [`AdmissionLimits`]).
    pub fn with_admission(mut self, limits: AdmissionLimits) -> Self {
        self.admission = limits;
        self
    }

    /// How many unfinished tasks one caller (principal) may have at once in
    /// this process (default [`DEFAULT_MAX_TASKS_PER_CALLER`]; `None`: no
    /// limit). A `tools/call` past it is refused with a JSON-RPC error
    /// (-32603, `data.maxTasksPerCaller`, and over HTTP status 503 with
    /// `Retry-After`); other callers are served as usual.
    /// Unauthenticated HTTP callers count as one caller unless
    /// [`TaskRuntimeBuilder::with_quota_by_header`] says otherwise.
    pub fn with_max_tasks_per_caller(mut self, limit: Option<usize>) -> Self {
        self.settings.max_tasks_per_caller = limit;
        self
    }

    /// Counts the caps and rates of unauthenticated HTTP callers each under
    /// its own principal (`true`), instead of all under one (`false`, the
    /// default).
    ///
    /// The principal a cap ([`TaskRuntimeBuilder::with_max_tasks_per_caller`])
    /// or rate ([`TaskRuntimeBuilder::with_rate_per_caller`]) counts against
    /// is the [`Authenticated`](crate::server::Authenticated) one when a layer
    /// authenticated the request (the serving recipe's
    /// [`with_bearer_tokens`](https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/struct.StreamableHttpServer.html#method.with_bearer_tokens),
    /// or a layer of your own). Over HTTP without one, every caller counts
    /// against one shared principal by default, so that a caller who varies
    /// its `Authorization` header gains nothing; with `true`, each counts
    /// against the principal its tasks belong to (with the default
    /// extractor, the hash of its `Authorization` header; with
    /// [`TaskRuntimeBuilder::with_principal`], yours), which suits a server
    /// behind a proxy that authenticates. Over stdio the process is the
    /// caller. Who owns a task (who may read, answer or cancel it) does not
    /// change with this setting.
    pub fn with_quota_by_header(mut self, by_header: bool) -> Self {
        self.settings.quota_by_header = by_header;
        self
    }

    /// How fast one caller may create tasks (default `None`: no limit): a
    /// creation past the rate is refused with a JSON-RPC
    /// error (-32603, `data: {"reason": "rateLimited", "retryAfterMs": N,
    /// "ratePerCaller": "10/s", "rateBurst": 20}`), over HTTP with status
    /// 503 and `Retry-After` (whole seconds, rounded up). Callers are
    /// counted as for the cap (see [`TaskRuntimeBuilder::with_quota_by_header`]).
    ///
    /// Only calls that become tasks count: a synchronous call (a tool whose
    /// policy forbids tasks, or a client that does not declare the
    /// extension) is neither counted nor refused.
    ///
    /// On a shared store that [counts rates](crate::store::Replicas::supports_rate)
    /// (Redis, PostgreSQL) the rate holds for all replicas together: each caller's
    /// bucket is kept in the store, on the store's clock (one round trip per
    /// creation), and a store that cannot be reached fails the creation with
    /// its error. Elsewhere the count is per process (N replicas of a server
    /// allow N times the rate), time is read on tokio's clock (under a
    /// paused clock in tests, the rate moves with it), and the state of
    /// callers quiet long enough to be back at their full burst is dropped
    /// every 30 s.
    pub fn with_rate_per_caller(mut self, rate: Option<CreationRate>) -> Self {
        self.settings.rate_per_caller = rate;
        self
    }

    /// The most bytes of JSON one tool's outcome may weigh (default
    /// [`DEFAULT_MAX_RESULT_BYTES`], 8 MiB; `None`: no bound). A task's
    /// result is stored whole and sent whole to every `tasks/get` for as
    /// long as the task is kept, so one outcome past this bound is not
    /// kept: the task ends `failed` with a JSON-RPC error (-32603) whose
    /// message names both sizes ("the tool's result is 104,857,612 bytes,
    /// past this server's limit of 8,388,608 bytes (max-result-bytes)") and
    /// whose `data` holds them (`{"reason": "resultTooLarge",
    /// "resultBytes", "maxResultBytes"}`); nothing of the result reaches the
    /// store. A tool's error (its `ErrorData`, with its `data`) is held to
    /// the same bound, and so is a synchronous call's result, answered
    /// with that error instead; and `tasks/update`'s input answers, refused
    /// with -32602 (`data.reason` `"inputTooLarge"`). The size is that of
    /// the outcome as JSON, counted without a copy (docs/operator.md says
    /// how the default was chosen). A gateway built on this runtime reads
    /// at most this much (and 64 KiB for the message around it) of each
    /// upstream answer.
    pub fn with_max_result_bytes(mut self, limit: Option<usize>) -> Self {
        self.settings.max_result_bytes = limit;
        self
    }

    /// Durable tasks for callers that declare none (default
    /// [`TaskTools::off`]): with [`TaskTools::all`] or
    /// [`TaskTools::only`], a call of a covered tool whose policy allows a
    /// task, from a caller that declared no tasks (neither the extension
    /// nor 2025-11-25's `params.task`), runs as a task; if it ends within
    /// the window ([`TaskTools::with_window`]) the caller gets its plain
    /// result as before, otherwise a handle (a plain `CallToolResult` that
    /// names the task), and the task tools (`tasks_wait`, `tasks_status`,
    /// `tasks_cancel`, `tasks_answer`, `tasks_list`) follow it. See
    /// [`TaskTools`] and docs/task-tools.md.
    pub fn with_task_tools(mut self, tools: TaskTools) -> Self {
        self.settings.task_tools = tools;
        self
    }

    /// The clock for timestamps and every TTL decision (default: the system
    /// clock; tests inject a [`ManualClock`](crate::server::ManualClock) or
    /// [`TokioClock`](crate::server::TokioClock)).
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The lease period on a store shared by several server processes
    /// (default 10 s; ignored on a store of one process): when a server
    /// dies, another ends its tasks (or runs resumable ones again) within
    /// this period. Shorter means a quicker takeover and more store
    /// writes (a renewal every sixth of it, a scan every quarter), and a
    /// server stalled for half of it loses its lease: its tasks are taken
    /// over and its own writes for them refused.
    pub fn with_lease_period(mut self, period: Duration) -> Self {
        self.settings.lease_period = period.max(Duration::from_millis(12));
        self
    }

    /// How a resumable tool's task runs again on this server after the
    /// server running it stopped (see [`ToolTasks::resumable`](crate::server::ToolTasks::resumable)): given the
    /// call's name and arguments and the task's context, the tool's future.
    /// Without it (the default) no task is resumable here: a stopped
    /// server's tasks fail. Every replica of a deployment gives the same.
    pub fn with_resume<F, Fut>(mut self, resume: F) -> Self
    where
        F: Fn(CallToolRequestParams, TaskContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        self.resume = Some(Arc::new(move |call, task| Box::pin(resume(call, task))));
        self
    }

    /// How a request's principal is found (default: [`default_principal`]):
    /// who owns the tasks a request makes. The caps and rates count an
    /// unauthenticated HTTP request under one shared principal all the same,
    /// unless [`TaskRuntimeBuilder::with_quota_by_header`] is `true`, or your
    /// layer marks the request [`Authenticated`](crate::server::Authenticated).
    pub fn with_principal(
        mut self,
        extract: impl Fn(&Extensions) -> Principal + Send + Sync + 'static,
    ) -> Self {
        self.principal = Arc::new(extract);
        self.custom_principal = true;
        self
    }

    /// Adds `observer` to what hears each task's events: its creation,
    /// status changes, end and removal (see [`TaskObserver`]). Several may
    /// be added; each hears every event, in the order they were added. A
    /// runtime without observers makes no call and keeps no table for them.
    pub fn with_observer(mut self, observer: Arc<dyn TaskObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Starts the runtime. Must be called inside a tokio runtime: it starts
    /// the sweeper and the change listener, which stop when the last clone
    /// of the runtime is dropped.
    pub fn build(self) -> TaskRuntime {
        let period = self.settings.lease_period;
        let leasing = self
            .store
            .replicas()
            .is_some()
            .then(|| Leasing::new(period));
        let gaps = self.store.replicas().map(|replicas| replicas.feed_gaps());
        let turns_in_store = shared::turns_in_store(&self.store, &self.admission);
        let rate = self
            .settings
            .rate_per_caller
            .map(|rate| rate::start(rate, &self.store));
        let mut observers = self.observers;
        // The task spans hear the tasks' events as any observer does (with
        // feature `otel`: without it they have nothing to hear).
        let task_spans = Arc::new(TaskSpans::default());
        if telemetry::spans_on() {
            observers.push(task_spans.clone());
        }
        let inner = Arc::new(Inner {
            store: self.store,
            clock: self.clock,
            principal: self.principal,
            custom_principal: self.custom_principal,
            waiters: Waiters::default(),
            live: Arc::default(),
            admission: Admission::with_turns(self.admission, turns_in_store),
            draining: Draining::default(),
            listeners: Listeners::default(),
            settings: self.settings,
            leasing,
            resumes: self.resume.is_some(),
            runner: fresh_runner(),
            advertised: Advertised::default(),
            rate,
            task_spans,
            observers: Observers::new(observers),
            hasher: tokio::sync::OnceCell::new(),
            asked_now: AskedNow::default(),
        });
        tokio::spawn(listen_for_changes(
            Arc::downgrade(&inner),
            inner.store.changes(),
            gaps,
        ));
        tokio::spawn(run_sweeper(
            Arc::downgrade(&inner),
            inner.settings.sweep_interval,
        ));
        // A store of one process may hold tasks its last process left
        // unfinished: resumed (or failed) here.
        tokio::spawn(resume_left_unfinished(
            Arc::downgrade(&inner),
            self.resume.clone(),
        ));
        if inner.leasing.is_some() {
            tokio::spawn(run_renewals(Arc::downgrade(&inner), period));
            tokio::spawn(run_reaper(Arc::downgrade(&inner), self.resume, period));
        }
        TaskRuntime { inner }
    }
}
