//! The 2025-11-25 era of tasks, which rmcp 3.11 removed: this module adds it
//! back on the client side, so that [`TasksClient`](super::TasksClient) runs
//! tasks on servers that still speak it (everything on the TypeScript SDK v1,
//! the Python SDK 1.x) through the same calls, options, outcomes and errors
//! as the Tasks extension. It is the only place that knows the old wire;
//! delete it the day rmcp speaks it again.
//!
//! On a connection opened with `initialize`:
//!
//! * `call_tool` adds `params.task: {ttl?}` when the server declared
//!   `capabilities.tasks.requests.tools.call` and the tool's
//!   `execution.taskSupport` is `optional` or `required` (read from
//!   `tools/list`, cached per connection and dropped on
//!   `notifications/tools/list_changed`); `forbidden` or absent is a plain
//!   call. The nested `CreateTaskResult {task: {...}}` becomes a
//!   [`TaskState`] of [`Era::Legacy`](super::Era::Legacy).
//! * `await_task` polls `tasks/get`, keeps one `tasks/result` open (it blocks
//!   until the task ends, carries the server's input requests on its stream,
//!   and returns the payload; `isError: true` there means the task failed),
//!   wakes early on `notifications/tasks/status`, and answers the server's
//!   `elicitation/create`, `sampling/createMessage` and `roots/list` requests
//!   tied to the task as [`AwaitOptions::input`](super::AwaitOptions::input)
//!   says, with the same validation as in the extension.
//! * `get`, `cancel` and `cancel_and_wait` use `tasks/get` and `tasks/cancel`;
//!   `update` answers input requests that an earlier wait left unanswered.
//!
//! Two pieces must be in place when the rmcp client is built, because rmcp
//! drops what this era needs before a [`TasksClient`](super::TasksClient)
//! could see it ([`TasksClient::connect`](super::TasksClient::connect) puts
//! them in place; by hand, as below):
//!
//! * [`Handler`] wraps the client's own handler. It hands the server's
//!   requests that carry `_meta["io.modelcontextprotocol/related-task"]` to
//!   the wait on that task, on whichever stream they come (the `tasks/result`
//!   stream, or the GET stream of a server that answers with plain JSON
//!   bodies), and sees the status and list-changed notifications; everything
//!   else goes to the wrapped handler. A request for a task created on the
//!   connection may come before the wait on it starts: it is held for that
//!   wait while the call is in flight and for two seconds after.
//! * A [`Tap`] on the transport ([`Tap::read`] for stdio and other byte
//!   streams, [`Tap::http`][tap-http] (feature `http-client`) for
//!   Streamable HTTP, whether the server answers with SSE or with plain JSON
//!   bodies) keeps the JSON of the server's
//!   answers: rmcp's typed model drops `capabilities.tasks`, every tool's
//!   `execution`, and the `ttl` and `pollInterval` of `tasks/get`.
//!
//! Without them a 2025-11-25 server's tools are always called plainly, its
//! input requests reach the handler directly (no resolver, no validation),
//! and a `tasks/get` answer whose `ttl` or `pollInterval` rmcp dropped keeps
//! the values the wait read before.
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! use mcp_tasks::TasksClient;
//! use mcp_tasks::client::legacy::Handler;
//! use rmcp::model::ProtocolVersion;
//! use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
//!
//! let mut child = tokio::process::Command::new("mcp-server-everything")
//!     .arg("stdio")
//!     .stdin(std::process::Stdio::piped())
//!     .stdout(std::process::Stdio::piped())
//!     .kill_on_drop(true)
//!     .spawn()?;
//! let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
//! let handler = Handler::new(());
//! let transport = (handler.tap().read(stdout), stdin);
//! let lifecycle = ClientLifecycleMode::Auto {
//!     preferred_versions: vec![ProtocolVersion::V_2026_07_28],
//!     legacy_version: Some(ProtocolVersion::V_2025_11_25),
//! };
//! let client = TasksClient::new(serve_client_with_lifecycle(handler, transport, lifecycle).await?);
//! # drop((client, child));
//! # Ok(())
//! # }
//! ```
//!
//! [tap-http]: https://docs.rs/mcp-tasks/latest/mcp_tasks/client/legacy/struct.Tap.html#method.http

mod feed;
mod handler;
mod tap;
mod wire;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::ErrorData;
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

use super::state::TaskState;
use crate::task::TaskId;

pub use handler::Handler;
#[cfg(feature = "http-client")]
pub use tap::TapHttp;
pub use tap::{Tap, TapRead};

/// The `_meta` key that ties a message to a task.
pub(crate) use crate::task::RELATED_TASK;

/// How many answers the tap keeps for their requests to pick up.
const RAW_ANSWERS_KEPT: usize = 256;

/// How long after a task was created here its input requests wait for a
/// wait on it to start, before the wrapped handler gets them.
const HOLD: Duration = Duration::from_secs(2);

/// How many recently created tasks are remembered for that.
const CREATED_KEPT: usize = 64;

/// What a tool's `execution.taskSupport` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ToolTasks {
    /// `forbidden`, absent, or a value this client does not know.
    Forbidden,
    /// `optional`.
    Optional,
    /// `required`.
    Required,
}

impl ToolTasks {
    fn from_tool(tool: &Value) -> Self {
        match tool
            .pointer("/execution/taskSupport")
            .and_then(Value::as_str)
        {
            Some("optional") => Self::Optional,
            Some("required") => Self::Required,
            _ => Self::Forbidden,
        }
    }

    fn augments(self) -> bool {
        matches!(self, Self::Optional | Self::Required)
    }
}

/// The task methods a 2025-11-25 server declared in `capabilities.tasks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ServerTasks {
    /// `tasks.requests.tools.call`: `tools/call` can be task-augmented.
    tools_call: bool,
    /// `tasks.list`.
    list: bool,
    /// `tasks.cancel`.
    cancel: bool,
}

impl ServerTasks {
    /// Reads `capabilities.tasks` of a raw `InitializeResult`; `None` when absent.
    fn from_initialize(result: &Value) -> Option<Self> {
        let tasks = result.pointer("/capabilities/tasks")?.as_object()?;
        Some(Self {
            tools_call: tasks
                .get("requests")
                .and_then(|requests| requests.pointer("/tools/call"))
                .is_some_and(Value::is_object),
            list: tasks.get("list").is_some_and(Value::is_object),
            cancel: tasks.get("cancel").is_some_and(Value::is_object),
        })
    }

    /// Whether `tools/call` can be task-augmented (`tasks.requests.tools.call`).
    #[cfg_attr(
        not(feature = "gateway"),
        allow(dead_code, reason = "read by the gateway")
    )]
    pub(crate) fn tools_call(self) -> bool {
        self.tools_call
    }

    /// The methods, in the order a person reads them.
    pub(crate) fn methods(self) -> Vec<&'static str> {
        let mut methods = vec!["tasks/get", "tasks/result"];
        if self.list {
            methods.push("tasks/list");
        }
        if self.cancel {
            methods.push("tasks/cancel");
        }
        methods
    }
}

/// A server-to-client request tied to a task, waiting for its answer.
pub(crate) struct Pending {
    /// The key it is offered under: the JSON-RPC id of the request.
    pub(crate) key: String,
    /// `{method, params}` as the server sent it.
    pub(crate) request: Value,
    /// Where the answer goes (back to rmcp, which sends it to the server).
    pub(crate) respond: oneshot::Sender<Result<Value, ErrorData>>,
}

/// What the handler passes to the wait on a task.
pub(crate) enum Event {
    /// An input request tied to the task.
    Input(Pending),
    /// A `notifications/tasks/status` about the task.
    Status(Box<TaskState>),
}

/// What one connection shares between its [`Handler`], its [`Tap`] and its
/// `TasksClient`s.
#[derive(Default)]
pub(crate) struct Link {
    shared: Mutex<Shared>,
    /// Woken when a wait starts or a task-augmented call ends.
    changed: Notify,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Shared {
    /// Whether the tap keeps answers: unknown until the first result.
    tapping: Tapping,
    /// The raw `InitializeResult`.
    initialize: Option<Value>,
    /// Recent raw results by the JSON text of their request id.
    answers: VecDeque<(String, Value)>,
    /// The waits on each task (by task id), newest last.
    routes: HashMap<String, Vec<(u64, mpsc::UnboundedSender<Event>)>>,
    next_route: u64,
    /// Input requests no wait answered, by task id, for the next wait.
    parked: HashMap<String, Vec<Pending>>,
    /// Tasks awaited on this connection: their input is never handed to
    /// the wrapped handler behind the back of the caller's input mode.
    awaited: HashSet<String>,
    /// The tools' task support from the last `tools/list`.
    tools: Option<HashMap<String, ToolTasks>>,
    /// Bumped by every `notifications/tools/list_changed`.
    tools_generation: u64,
    /// Task-augmented `tools/call`s whose answer is not read yet.
    task_calls: usize,
    /// The tasks created here lately, by id, with when.
    created: VecDeque<(String, Instant)>,
    /// The Streamable HTTP session (see [`Link::http_session`]).
    session: Session,
}

/// A connection's Streamable HTTP session, as the tap sees it (over HTTP
/// only: a client without `http-client` never has one).
#[derive(Default)]
#[cfg_attr(not(feature = "http-client"), allow(dead_code))]
struct Session {
    /// The session the server gave (or the one adopted).
    current: Option<Arc<str>>,
    /// A session of an earlier connection to take over: the handshake's
    /// own session is closed, and every request goes on this one.
    adopt: Option<Arc<str>>,
    /// Not closed (`DELETE`) when the connection closes.
    keep: bool,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Tapping {
    #[default]
    Undecided,
    /// An initialize-era server: keep answers.
    On,
    /// A 2026-07-28 server (it answered `server/discover`): keep nothing.
    Off,
}

impl Link {
    #[cfg(feature = "gateway")]
    /// The Streamable HTTP session of the connection (`None`: stdio, a
    /// 2026-07-28 server without sessions, or no handshake yet). A
    /// 2025-11-25 server may keep a task for the session that made it only
    /// (the TypeScript SDK v1 does): another connection reaches it by
    /// adopting this session ([`Link::adopt_http_session`]).
    pub(crate) fn http_session(&self) -> Option<Arc<str>> {
        self.lock().session.current.clone()
    }

    /// Makes the connection, before its handshake, take over `session`
    /// (of an earlier connection to the same server, which may be gone):
    /// the handshake's own session is closed at once, requests go on
    /// `session`, and no standing SSE stream is opened on it (the earlier
    /// connection may still hold the server's only one).
    pub(crate) fn adopt_http_session(&self, session: Arc<str>) {
        self.lock().session.adopt = Some(session);
    }

    /// The session adopted, if any.
    #[cfg(feature = "http-client")]
    fn adopted_session(&self) -> Option<Arc<str>> {
        self.lock().session.adopt.clone()
    }

    /// Records the session the handshake gave.
    #[cfg(feature = "http-client")]
    fn set_http_session(&self, session: Arc<str>) {
        self.lock().session.current = Some(session);
    }

    #[cfg(feature = "gateway")]
    /// Keeps the session open on the server when the connection closes:
    /// something left there (a task another connection will follow) must
    /// outlive it.
    pub(crate) fn keep_http_session(&self) {
        self.lock().session.keep = true;
    }

    /// Whether the session is kept ([`Link::keep_http_session`]).
    #[cfg(feature = "http-client")]
    fn keeps_http_session(&self) -> bool {
        self.lock().session.keep
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True while the tap should still read what arrives.
    fn tapping(&self) -> bool {
        self.lock().tapping != Tapping::Off
    }

    /// Whether the answer to a request of `method` must be read as the
    /// server sent it: the `InitializeResult` until the era is known, then
    /// the answers of the requests a 2025-11-25 client reads raw.
    #[cfg(feature = "http-client")]
    fn wants_answer(&self, method: &str) -> bool {
        match self.lock().tapping {
            Tapping::Off => false,
            Tapping::Undecided => method == "initialize",
            Tapping::On => {
                matches!(method, "tools/list" | "tools/call") || method.starts_with("tasks/")
            }
        }
    }

    /// Sees a message the transport handed on already parsed (rmcp's HTTP
    /// client reads plain JSON bodies that way): a `server/discover` result
    /// turns the tap off, as its JSON would.
    #[cfg(feature = "http-client")]
    fn observe_typed(&self, message: &rmcp::model::ServerJsonRpcMessage) {
        if let rmcp::model::ServerJsonRpcMessage::Response(response) = message
            && matches!(
                response.result,
                rmcp::model::ServerResult::DiscoverResult(_)
            )
        {
            let mut shared = self.lock();
            if shared.tapping == Tapping::Undecided {
                shared.tapping = Tapping::Off;
            }
        }
    }

    /// Reads one JSON-RPC message as the transport received it, and keeps it
    /// if it is an answer the era needs.
    fn observe_message(&self, bytes: &[u8]) {
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        let (Some(id), Some(result)) = (message.remove("id"), message.remove("result")) else {
            return;
        };
        let mut shared = self.lock();
        match shared.tapping {
            Tapping::Off => {}
            Tapping::Undecided => {
                if result.get("supportedVersions").is_some() {
                    shared.tapping = Tapping::Off;
                } else if result.get("protocolVersion").is_some()
                    && result.get("capabilities").is_some()
                {
                    shared.tapping = Tapping::On;
                    shared.initialize = Some(result);
                }
            }
            Tapping::On => {
                if shared.answers.len() >= RAW_ANSWERS_KEPT {
                    shared.answers.pop_front();
                }
                shared.answers.push_back((id.to_string(), result));
            }
        }
    }

    /// The raw result of the request with this id, if the tap kept it.
    fn take_answer(&self, id: &rmcp::model::RequestId) -> Option<Value> {
        let key = serde_json::to_value(id).ok()?.to_string();
        let mut shared = self.lock();
        let index = shared.answers.iter().position(|(id, _)| *id == key)?;
        shared.answers.remove(index).map(|(_, result)| result)
    }

    /// The task methods the server declared at `initialize`, if the tap saw it.
    fn server_tasks(&self) -> Option<Option<ServerTasks>> {
        let shared = self.lock();
        shared.initialize.as_ref().map(ServerTasks::from_initialize)
    }

    fn cached_tool(&self, name: &str) -> Option<ToolTasks> {
        self.lock().tools.as_ref()?.get(name).copied()
    }

    fn tools_generation(&self) -> u64 {
        self.lock().tools_generation
    }

    /// Caches a listing unless the list changed since `generation`.
    fn store_tools(&self, generation: u64, tools: HashMap<String, ToolTasks>) {
        let mut shared = self.lock();
        if shared.tools_generation == generation {
            shared.tools = Some(tools);
        }
    }

    /// `notifications/tools/list_changed`: the next call lists the tools again.
    fn tools_changed(&self) {
        let mut shared = self.lock();
        shared.tools = None;
        shared.tools_generation = shared.tools_generation.wrapping_add(1);
    }

    /// Hands an input request tied to `task` to its newest wait, or keeps it
    /// for the next wait when the task was awaited on this connection.
    /// `Err` gives it back: no wait here knows the task.
    fn deliver(&self, task: &str, pending: Pending) -> Result<(), Pending> {
        let mut shared = self.lock();
        let mut pending = Event::Input(pending);
        if let Some(routes) = shared.routes.get(task) {
            for (_, route) in routes.iter().rev() {
                match route.send(pending) {
                    Ok(()) => return Ok(()),
                    Err(mpsc::error::SendError(back)) => pending = back,
                }
            }
        }
        let Event::Input(pending) = pending else {
            unreachable!("only input is delivered here");
        };
        if shared.awaited.contains(task) {
            shared
                .parked
                .entry(task.to_owned())
                .or_default()
                .push(pending);
            Ok(())
        } else {
            Err(pending)
        }
    }

    /// Hands an input request tied to `task` on as [`Link::deliver`] does,
    /// but first holds it while a wait on the task may still start: the
    /// server may send it (on the GET stream, say) before the client has read
    /// the answer that created the task, or before the caller, who has that
    /// answer, starts the wait. So while a task-augmented call is in flight,
    /// and for [`HOLD`] after `task` was created here, the request waits for
    /// the wait. `Err` gives it back: no wait came.
    async fn deliver_or_hold(&self, task: &str, mut pending: Pending) -> Result<(), Pending> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            pending = match self.deliver(task, pending) {
                Ok(()) => return Ok(()),
                Err(pending) => pending,
            };
            let until = {
                let shared = self.lock();
                let created = shared
                    .created
                    .iter()
                    .find(|(id, _)| id == task)
                    .map(|(_, at)| *at + HOLD);
                match created {
                    _ if shared.task_calls > 0 => None,
                    Some(until) if until > Instant::now() => Some(until),
                    _ => return Err(pending),
                }
            };
            match until {
                None => changed.await,
                Some(until) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(until) => {}
                    }
                }
            }
        }
    }

    /// Counts a task-augmented `tools/call` in flight until the guard drops.
    pub(crate) fn task_call(self: &Arc<Self>) -> TaskCall {
        self.lock().task_calls += 1;
        TaskCall(self.clone())
    }

    /// A task was created here: its input is held for a wait a while.
    pub(crate) fn task_created(&self, task: &TaskId) {
        let now = Instant::now();
        let mut shared = self.lock();
        while shared
            .created
            .front()
            .is_some_and(|(_, at)| *at + HOLD <= now)
            || shared.created.len() >= CREATED_KEPT
        {
            shared.created.pop_front();
        }
        shared.created.push_back((task.expose().to_owned(), now));
    }

    /// A `notifications/tasks/status`: every wait on the task sees it.
    fn status(&self, state: &TaskState) {
        let shared = self.lock();
        if let Some(routes) = shared.routes.get(state.id.expose()) {
            for (_, route) in routes {
                let _ = route.send(Event::Status(Box::new(state.clone())));
            }
        }
    }

    /// Starts routing `task`'s input and notifications to a new wait, with
    /// what earlier waits left unanswered.
    pub(crate) fn route(self: &Arc<Self>, task: &TaskId) -> Route {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut shared = self.lock();
        let token = shared.next_route;
        shared.next_route += 1;
        let key = task.expose().to_owned();
        shared.awaited.insert(key.clone());
        shared
            .routes
            .entry(key.clone())
            .or_default()
            .push((token, sender));
        let pending = shared
            .parked
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .map(|pending| (pending.key.clone(), pending))
            .collect();
        drop(shared);
        self.changed.notify_waiters();
        Route {
            link: self.clone(),
            task: key,
            token,
            receiver,
            pending,
        }
    }

    /// Takes the held input requests of `task` under `keys`.
    fn take_parked(&self, task: &TaskId, keys: &[&str]) -> Vec<Pending> {
        let mut shared = self.lock();
        let Some(parked) = shared.parked.get_mut(task.expose()) else {
            return Vec::new();
        };
        let (taken, kept) = std::mem::take(parked)
            .into_iter()
            .partition(|pending| keys.contains(&pending.key.as_str()));
        *parked = kept;
        taken
    }
}

/// A task-augmented `tools/call` in flight (see [`Link::task_call`]).
pub(crate) struct TaskCall(Arc<Link>);

impl Drop for TaskCall {
    fn drop(&mut self) {
        self.0.lock().task_calls -= 1;
        self.0.changed.notify_waiters();
    }
}

/// One wait's view of its task: the events for it, and the input requests
/// it holds. Dropping it (the wait ended, or its future was dropped) keeps
/// the unanswered requests for the next wait.
pub(crate) struct Route {
    link: Arc<Link>,
    task: String,
    token: u64,
    receiver: mpsc::UnboundedReceiver<Event>,
    /// Input requests received and not answered, by key.
    pub(crate) pending: BTreeMap<String, Pending>,
}

impl Route {
    /// The next event; pending forever if the channel closed.
    pub(crate) async fn next(&mut self) -> Event {
        match self.receiver.recv().await {
            Some(event) => event,
            None => std::future::pending().await,
        }
    }

    /// The pending requests the server still waits on, as offered to input
    /// handlers: key to `{method, params}`.
    pub(crate) fn requests(&mut self) -> BTreeMap<String, Value> {
        self.pending
            .retain(|_, pending| !pending.respond.is_closed());
        self.pending
            .iter()
            .map(|(key, pending)| (key.clone(), pending.request.clone()))
            .collect()
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut shared = self.link.lock();
        if let Some(routes) = shared.routes.get_mut(&self.task) {
            routes.retain(|(token, _)| *token != self.token);
            if routes.is_empty() {
                shared.routes.remove(&self.task);
            }
        }
        let mut left: Vec<Pending> = std::mem::take(&mut self.pending).into_values().collect();
        while let Ok(event) = self.receiver.try_recv() {
            if let Event::Input(pending) = event {
                left.push(pending);
            }
        }
        left.retain(|pending| !pending.respond.is_closed());
        if !left.is_empty() {
            shared
                .parked
                .entry(self.task.clone())
                .or_default()
                .extend(left);
        }
    }
}
