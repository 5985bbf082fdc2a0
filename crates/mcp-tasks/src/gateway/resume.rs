//! Gateway tasks that outlive their gateway process: what a task keeps to
//! be taken up again, and the runtime's resume hook that takes it up
//! ([`GatewayResumes`]).
//!
//! Every task the gateway makes (once a [`GatewayResumes`] is attached) is
//! resumable and is created with a checkpoint ([`Kept`]) naming its
//! upstream, the upstream's tool and, for an upstream that is called with
//! the caller's identity, that identity. The rest depends on who runs the
//! work:
//!
//! * **The upstream's own task** (it answered with one): the checkpoint
//!   names it (and, for a 2025-11-25 upstream over HTTP, the session it
//!   was made on: the TypeScript SDK v1 keeps a task for its session).
//!   Whoever takes the gateway's task up next (the gateway started again
//!   on SQLite, another replica on a shared store, after a drain's
//!   hand-off or a crash) connects to the upstream again with the same
//!   identity (taking that session over: see `client::legacy::tap`) and
//!   follows that task to its end, relaying input and cancel as the first
//!   gateway did. The upstream is never called twice.
//! * **A call the upstream answers itself** (a plain tool): the work lives
//!   in the gateway process, so a drain waits for it (the task's
//!   [`drain_wait`](crate::server::ToolTasks::drain_wait)). Cut off all the
//!   same, it is run again from the start, once, when the configuration of
//!   the gateway that takes it up marks its tool
//!   [`rerun_on_restart`](super::GatewayOptions::rerun_on_restart); any
//!   other fails, naming the upstream and the restart.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde::{Deserialize, Serialize};

use super::held::{Held, bounded};
use super::relay::Target;
use super::routes::{CallerIdentity, Route, Routes};
use super::{Gateway, call, connection, rounds};
use crate::server::{TaskContext, TaskRuntimeBuilder};
use crate::store::BoxFuture;
use crate::task::TaskId;

/// How long a resumed task waits for its gateway to be attached
/// ([`GatewayResumes::attach`]) and for its upstream to be served.
const FIND_WAIT: Duration = Duration::from_secs(60);

/// What a gateway task keeps in its checkpoint to be taken up again.
#[derive(Serialize, Deserialize)]
pub(crate) struct Kept {
    gateway: Call,
}

#[derive(Serialize, Deserialize)]
struct Call {
    /// The upstream's name (as configured; the one upstream of a single
    /// gateway has its own).
    upstream: String,
    /// The upstream's own name of the tool.
    tool: String,
    /// The identity the call carried, when not the gateway's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<CallerIdentity>,
    #[serde(flatten)]
    work: Work,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Work {
    /// The upstream's own task, followed.
    Follows {
        /// Its id (a bearer token of the upstream: never logged).
        task: TaskId,
        /// The Streamable HTTP session it was made on, for a 2025-11-25
        /// upstream that keeps a task for its session only (the
        /// TypeScript SDK v1): the next gateway adopts it. Never logged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
    },
    /// A call the upstream answers itself (run again or not as the
    /// configuration of the gateway that takes it up says).
    Calls {
        /// How many times it was run again.
        #[serde(default)]
        reruns: u32,
    },
}

impl Kept {
    /// What a task following the upstream's task `task` keeps.
    pub(crate) fn follows(
        route: &Route,
        tool: &str,
        identity: Option<CallerIdentity>,
        (task, session): (TaskId, Option<Arc<str>>),
    ) -> serde_json::Value {
        let session = session.map(|session| session.to_string());
        Self::of(route, tool, identity, Work::Follows { task, session })
    }

    /// What a task of a plain call keeps.
    pub(crate) fn calls(
        route: &Route,
        tool: &str,
        identity: Option<CallerIdentity>,
    ) -> serde_json::Value {
        Self::of(route, tool, identity, Work::Calls { reruns: 0 })
    }

    fn of(
        route: &Route,
        tool: &str,
        identity: Option<CallerIdentity>,
        work: Work,
    ) -> serde_json::Value {
        let kept = Self {
            gateway: Call {
                upstream: route.name().to_owned(),
                tool: tool.to_owned(),
                identity,
                work,
            },
        };
        serde_json::to_value(kept).unwrap_or_default()
    }
}

/// Runs a gateway's tasks again where the gateway that ran them stopped:
/// installed in the runtime's builder ([`GatewayResumes::install`]) and
/// attached to the gateway once it started ([`GatewayResumes::attach`]).
/// Without it a gateway's tasks fail when their gateway stops, as they
/// always did. See the module docs of [`crate::gateway`] for what is taken
/// up and how.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_tasks::gateway::{Gateway, GatewayOptions, GatewayResumes, Upstream};
/// use mcp_tasks::server::TaskRuntime;
/// use mcp_tasks::store::MemoryStore;
///
/// let resumes = GatewayResumes::new();
/// // SQLite or a shared store in practice: memory forgets every task.
/// let runtime = resumes.install(TaskRuntime::builder(MemoryStore::new())).build();
/// let upstream = Upstream::url("http://127.0.0.1:9000/mcp");
/// let gateway = Gateway::start(upstream, runtime, GatewayOptions::default()).await?;
/// resumes.attach(&gateway);
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct GatewayResumes {
    gateway: Arc<OnceLock<Weak<Routes>>>,
    attached: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for GatewayResumes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayResumes")
            .field("attached", &self.gateway.get().is_some())
            .finish()
    }
}

impl GatewayResumes {
    /// Nothing attached yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `builder` with this as its resume hook
    /// ([`TaskRuntimeBuilder::with_resume`]): the gateway's tasks a stopped
    /// gateway left are run here once [`GatewayResumes::attach`] names the
    /// gateway (those found before wait for it, up to a minute).
    pub fn install(&self, builder: TaskRuntimeBuilder) -> TaskRuntimeBuilder {
        let resumes = self.clone();
        builder.with_resume(move |request, task| {
            let resumes = resumes.clone();
            async move { resumes.resume(request, task).await }
        })
    }

    /// The gateway whose tasks are resumed, started on the runtime this was
    /// installed in. From now on the gateway makes its tasks resumable.
    pub fn attach(&self, gateway: &Gateway) {
        gateway.routes.set_resumable();
        let _ = self.gateway.set(Arc::downgrade(&gateway.routes));
        self.attached.notify_waiters();
    }

    async fn routes(&self) -> Result<Arc<Routes>, ErrorData> {
        let found = || self.gateway.get().and_then(Weak::upgrade);
        let waited = tokio::time::timeout(FIND_WAIT, async {
            loop {
                let notified = self.attached.notified();
                if let Some(routes) = found() {
                    return routes;
                }
                notified.await;
            }
        });
        waited.await.map_err(|_| {
            ErrorData::internal_error(
                "no gateway took this gateway task up (the runtime resumes tasks, but no \
                 gateway was attached to it)",
                None,
            )
        })
    }

    /// Takes up the gateway task of `task` from its checkpoint.
    async fn resume(
        &self,
        request: CallToolRequestParams,
        task: TaskContext,
    ) -> Result<CallToolResult, ErrorData> {
        match self.take_up(request, &task).await {
            Ok(run) => run.await,
            Err(refusal) => {
                // Why it ends, not the resumed run's "...the task runs again".
                let _ = task.set_status_message(refusal.message.to_string()).await;
                Err(refusal)
            }
        }
    }

    /// What runs for the gateway task of `task` now, from its checkpoint;
    /// why it cannot be taken up again, as the error.
    async fn take_up(
        &self,
        request: CallToolRequestParams,
        task: &TaskContext,
    ) -> Result<BoxFuture<'static, Result<CallToolResult, ErrorData>>, ErrorData> {
        let Some(Kept { gateway: kept }) = task.resumed::<Kept>()? else {
            return Err(ErrorData::internal_error(
                "the gateway stopped before it kept what this task calls upstream; it cannot be \
                 taken up again",
                None,
            ));
        };
        let routes = self.routes().await?;
        let route = find_route(&routes, &kept.upstream).await?;
        drop(routes);
        let mut upstream_request = CallToolRequestParams::new(kept.tool.clone());
        upstream_request.arguments = request.arguments;
        let task = task.clone();
        match kept.work {
            Work::Follows { task: id, session } => {
                let on = On {
                    identity: kept.identity.as_ref(),
                    session: session.map(Arc::from),
                };
                let (held, state) = found_again(&route, on, &upstream_request, &id).await?;
                tracing::debug!(upstream = route.name(), "following an upstream task again");
                Ok(Box::pin(async move {
                    bounded(&route, call::await_upstream(&held, state, task)).await
                }))
            }
            Work::Calls { .. } if !route.reruns(&kept.tool) => Err(cut_off(&kept.upstream, None)),
            Work::Calls { reruns } if reruns > 0 => Err(cut_off(&kept.upstream, Some(reruns))),
            Work::Calls { reruns } => {
                let again = Kept {
                    gateway: Call {
                        work: Work::Calls { reruns: reruns + 1 },
                        ..kept
                    },
                };
                let message = format!(
                    "the gateway restarted during the call to {}: it runs again from the start \
                     (its tool is marked rerun-on-restart)",
                    super::breaker::the_upstream(&again.gateway.upstream)
                );
                task.checkpoint_with_message(&again, message).await?;
                let pool = route.pool_of(again.gateway.identity.as_ref());
                Ok(Box::pin(async move {
                    let lease = pool.lease(pool.era_for(&upstream_request)).await?;
                    let calls = route.link.calls.clone();
                    let run =
                        rounds::run(&pool, &calls, lease, &upstream_request, Target::Task(task));
                    bounded(&route, run).await
                }))
            }
        }
    }
}

/// Where an upstream's task is asked for again: with the call's identity
/// (the gateway's own without one), on the session it was made on when
/// the upstream keeps tasks per session.
struct On<'a> {
    identity: Option<&'a CallerIdentity>,
    session: Option<Arc<str>>,
}

/// The upstream's task `id` found again, on a connection as `on` says: the
/// connection and the task's state.
async fn found_again(
    route: &Arc<Route>,
    on: On<'_>,
    request: &CallToolRequestParams,
    id: &TaskId,
) -> Result<(Held, crate::TaskState), ErrorData> {
    let held = match (on.session, on.identity) {
        (Some(session), identity) => {
            let mut upstream = route.config.upstream.clone();
            if let Some(identity) = identity {
                upstream = upstream.with_only_header(&identity.header, &identity.value);
            }
            let opened = connection::connect_on(
                &upstream,
                &route.link.shared(),
                &route.options,
                connection::Lifecycle::Handshake,
                Some(session),
            )
            .await
            .map_err(|error| {
                ErrorData::internal_error(
                    format!(
                        "the gateway restarted while it followed a task of {}, and could not \
                         connect to it again: {error}",
                        super::breaker::the_upstream(route.name())
                    ),
                    None,
                )
            })?;
            Held::Own(Arc::new(opened))
        }
        (None, None) => Held::Own(route.link.connection().await?),
        (None, Some(identity)) => {
            let pool = route.pool_of(Some(identity));
            Held::Leased(pool.lease(pool.era_for(request)).await?)
        }
    };
    let state = held.client.get(id).await.map_err(|error| {
        let why = match error {
            crate::client::Error::UnknownTask { .. } => {
                "it does not know the task (a server that keeps its tasks in memory, or runs \
                 as a child of each gateway, loses them when it stops; or the task expired)"
                    .to_owned()
            }
            other => super::client_failure("tasks/get", &other)
                .message
                .into_owned(),
        };
        ErrorData::internal_error(
            format!(
                "the gateway restarted while it followed a task of {}, and could not take it up \
                 again: {why}",
                super::breaker::the_upstream(route.name())
            ),
            None,
        )
    })?;
    Ok((held, state))
}

/// The route of the upstream `name`, waited for up to [`FIND_WAIT`] while
/// the upstream cannot be reached.
async fn find_route(routes: &Routes, name: &str) -> Result<Arc<Route>, ErrorData> {
    let deadline = tokio::time::Instant::now() + FIND_WAIT;
    loop {
        let table = routes.current();
        if let Some(route) = table.routes.iter().find(|route| route.name() == name) {
            return Ok(route.clone());
        }
        let waited = table
            .pending
            .iter()
            .any(|pending| pending.config.name == name);
        if !waited || tokio::time::Instant::now() >= deadline {
            return Err(ErrorData::internal_error(
                format!(
                    "the gateway restarted during this task, and {} is {} now",
                    super::breaker::the_upstream(name),
                    if waited {
                        "still not reachable a minute later"
                    } else {
                        "no longer served"
                    }
                ),
                None,
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The error of a plain call a restart cut off that is not run again
/// (again: how many times it already ran again).
fn cut_off(upstream: &str, again: Option<u32>) -> ErrorData {
    let why = match again {
        None => "it is not run again: its tool is not marked rerun-on-restart".to_owned(),
        Some(_) => "it was run again once already, and is not run a third time".to_owned(),
    };
    ErrorData::internal_error(
        format!(
            "the gateway stopped (a restart, a deploy or a crash) during the call to {}, which \
             the gateway itself held; {why}",
            super::breaker::the_upstream(upstream)
        ),
        None,
    )
}
