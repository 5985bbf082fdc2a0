//! How the gateway answers a `tools/call`: the route of the name (or the
//! retired route a parked call's retry belongs to), the breaker, the
//! caller's identity, then straight through, as a task of the gateway's
//! own, or as the upstream's own task awaited; every call bounded by its
//! route's call timeout.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::{RequestContext, RoleServer};

use super::held::{Held, bounded};
use super::resume::Kept;
use super::routes::{CallerIdentity, Route};
use super::{Gateway, call, connection, pool, relay, rounds, sync};
use crate::client::CallResponse;
use crate::server::{NewTask, Plan, Principal, Synchronous, TaskPolicy, ToolTasks};
use crate::telemetry::instrument;
use crate::telemetry::server_spans::RequestTrace;

impl Gateway {
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(answered) = self.runtime.call_task_tool(&request, &context).await {
            return answered.map(CallToolResponse::from);
        }
        // In the request's trace context, wherever rmcp runs the handler:
        // the upstream calls continue the caller's trace.
        let trace = RequestTrace::of(&context.extensions).or_current();
        // On the heap: the call's future is large (in a debug build, more
        // than a 2 MiB worker stack holds where a 2025-era stdio session
        // polls it).
        let call = Box::pin(self.route_call(request, context));
        instrument(call, trace).await
    }

    /// The route and upstream tool `name` calls for `caller`, the tool
    /// lists read again first where an upstream said they changed; an
    /// unknown tool and one not open to the caller get the same -32602.
    async fn find(
        &self,
        name: &str,
        caller: &crate::server::Principal,
    ) -> Result<(Arc<Route>, String), ErrorData> {
        let table = self.routes.current();
        for route in &table.routes {
            // Only reads where the upstream said its list changed.
            route.link.tools().await;
        }
        table.find(name, caller).ok_or_else(|| {
            // A prefixed name of an upstream still waited for is said so
            // (its tools are not known yet: access cannot be told apart).
            // Only to a caller the upstream is open to: to others, an
            // unknown tool alike (no oracle of what is configured).
            let waited = table.pending.iter().find(|waiting| {
                waiting.config.prefixed
                    && name
                        .strip_prefix(waiting.config.name.as_str())
                        .is_some_and(|rest| rest.starts_with(table.separator.as_str()))
                    && waiting
                        .rules
                        .as_ref()
                        .is_some_and(|rules| rules.open_to(caller))
            });
            match waited {
                Some(waiting) => ErrorData::invalid_params(
                    format!(
                        "unknown tool: {name} (the upstream {:?} cannot be reached yet; its \
                         tools are listed once it answers)",
                        waiting.config.name
                    ),
                    None,
                ),
                None => ErrorData::invalid_params(format!("unknown tool: {name}"), None),
            }
        })
    }

    async fn route_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = self.runtime.read_call(&request, &context)?;
        // The retry of a call parked on a route a reload let go goes there.
        let retired = sync::parked_call_of(&request)
            .and_then(|id| self.routes.retired_holding(&request.name, id));
        let (route, tool) = match retired {
            Some(found) => found,
            None => self.find(&request.name, call.principal()).await?,
        };
        let principal = call.principal().clone();
        let policy = route.policy(&tool);
        // Resumable once a `GatewayResumes` is attached (see `resume.rs`):
        // a drain waits for a plain call; an upstream's own task is followed
        // again at once (`upstream_task`).
        let resumable = self.routes.resumable();
        let tasks = match policy {
            TaskPolicy::Forbidden => ToolTasks::forbidden(),
            TaskPolicy::Required => ToolTasks::required(),
            _ => ToolTasks::optional(),
        }
        .with_resumable(resumable)
        .with_drain_wait(resumable);
        let marked = route.link.cached_tools().marked.get(&tool).copied();
        // The task is named as the caller called it; the upstream is
        // called by its own name.
        let plan = self.runtime.decide(call, &request, &context, &tasks)?;
        let as_task = matches!(plan, Plan::Task(_));
        tracing::debug!(upstream = route.name(), tool = %request.name, ?policy, as_task, "tools/call");
        let mut upstream_request = request;
        upstream_request.name = tool.into();
        let request = upstream_request;
        // A call that resumes an upstream's parked call runs synchronously.
        let task = match plan {
            Plan::Task(task) if sync::resumes(&request) => Err(task.into_synchronous()),
            Plan::Task(task) => Ok(task),
            Plan::Synchronous(call) => Err(call),
        };
        let unavailable = route.link.health.check().err();
        if let Some(refusal) = unavailable {
            return match task {
                Err(_) => Err(refusal),
                // The task says why, at once.
                Ok(task) => {
                    self.runtime
                        .create(task, move |_task| async move { Err(refusal) })
                        .await
                }
            };
        }
        let identity = route.identity_for(&context, &principal)?;
        let pool = route.pool_of(identity.as_ref());
        let task = match task {
            Ok(task) => task,
            Err(call) => {
                return self
                    .straight(route, pool, principal, call, request, context)
                    .await;
            }
        };
        let connection = route.link.connection().await?;
        if call::upstream_makes_tasks(&connection, marked) {
            return self
                .upstream_task(route, (pool, identity), connection, task, request)
                .await;
        }
        drop(connection);
        let task = match resumable {
            true => task.with_checkpoint(Kept::calls(&route, &request.name, identity)),
            false => task,
        };
        // A connection of the call's own, of the era it starts in: at once
        // if one is free (a new one must open before the task is made),
        // else waited for in the task.
        let era = pool.era_for(&request);
        let lease = match pool.try_permit() {
            Some(permit) => Some(pool.lease_with(permit, era).await?),
            None => None,
        };
        let calls = route.link.calls.clone();
        self.runtime
            .create(task, move |task| async move {
                let lease = match lease {
                    Some(lease) => lease,
                    None => {
                        let _ = task
                            .set_status_message(format!(
                                "waiting for a connection to the upstream server (all {} are busy)",
                                pool.bound()
                            ))
                            .await;
                        pool.lease(era).await?
                    }
                };
                // The route lives until the call ends, whatever a reload does.
                let run = rounds::run(&pool, &calls, lease, &request, relay::Target::Task(task));
                bounded(&route, run).await
            })
            .await
    }

    /// A call straight through, as the caller would have called the
    /// upstream, on a connection of its own; the upstream's requests go to
    /// the caller. Once under the call's idempotency key, as a task would
    /// be.
    async fn straight(
        &self,
        route: Arc<Route>,
        pool: Arc<pool::Pool>,
        principal: Principal,
        call: Synchronous,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let cancelled = context.ct.clone();
        let run = async move {
            let sync = sync::SyncCall {
                pool: &pool,
                calls: &route.link.calls,
                parked: &route.parked,
                options: &route.options,
                principal,
            };
            // Held to the runtime's result budget by run_synchronous.
            bounded(&route, sync::call(sync, request, context)).await
        };
        self.runtime.run_synchronous(call, &cancelled, run).await
    }

    /// A call of an upstream that makes tasks itself: the upstream decides
    /// first, its result or MRTR round goes back as it is, and only its
    /// task becomes one of ours, awaited on the gateway's own connection
    /// (or, for a caller's identity, on a connection of that identity,
    /// held until the task ends).
    async fn upstream_task(
        &self,
        route: Arc<Route>,
        (pool, identity): (Arc<pool::Pool>, Option<CallerIdentity>),
        own: Arc<connection::Connection>,
        task: NewTask,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let held = if route.own_identity() {
            Held::Own(own)
        } else {
            drop(own);
            Held::Leased(pool.lease(pool.era_for(&request)).await?)
        };
        let upstream = match call::start_upstream(&held, &request).await? {
            CallResponse::Complete(result) => return Ok(CallToolResponse::Complete(result)),
            CallResponse::InputRequired(input) => {
                return Ok(CallToolResponse::InputRequired(input));
            }
            CallResponse::Task(upstream) => upstream,
        };
        let id = upstream.id.clone();
        // Kept with the task from its creation on: whoever takes it up
        // after a restart follows the same upstream task.
        let task = match self.routes.resumable() {
            true => {
                // A session the task is kept for (a 2025-11-25 upstream over
                // HTTP) is left open when this gateway closes its connection:
                // the next gateway follows the task on it.
                let session = held.client.http_session();
                if session.is_some() {
                    held.client.keep_http_session();
                }
                let kept = Kept::follows(&route, &request.name, identity, (id.clone(), session));
                task.with_checkpoint(kept).with_drain_wait(false)
            }
            false => task,
        };
        let abandon = held.client.clone();
        // An upstream task made finished (its tool answered at once) makes
        // ours finished too: its outcome is read before ours is made.
        let finished = call::finished_upstream(&held, &upstream).await;
        let started = self
            .runtime
            .create(task, move |task| async move {
                match finished {
                    Some(outcome) => outcome,
                    None => bounded(&route, call::await_upstream(&held, upstream, task)).await,
                }
            })
            .await;
        if started.is_err() {
            call::abandon(abandon, id);
        }
        started
    }
}
