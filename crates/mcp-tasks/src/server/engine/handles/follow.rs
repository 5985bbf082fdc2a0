//! The wait the window and `tasks_wait` share: a task followed for its
//! caller until it ends, a deadline passes, it asks a question only the
//! caller's tools can answer, or the caller goes; meanwhile
//! each of its input requests that the caller's session takes (a
//! 2025-11-25 session that declared elicitation, sampling or roots) is
//! asked on the caller's own connection, once (`asked.rs`), and the
//! answer answers the task whenever it comes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ClientCapabilities;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::time::Instant;

use crate::server::engine::era;
use crate::server::engine::tasks::asking::{ask, takes};
use crate::server::engine::tasks::follower::Follower;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::task_not_found;
use crate::store::{PackedRecord, Principal};
use crate::task::{TaskId, TaskStatus};

/// How a wait ended.
pub(super) enum Followed {
    /// The task ended: its final record.
    Ended(Arc<PackedRecord>),
    /// The deadline passed first: the task as it is.
    Pending(Arc<PackedRecord>),
    /// The caller cancelled its request.
    Abandoned,
}

/// What a wait follows, and for whom.
pub(super) struct Wait<'a> {
    runtime: &'a TaskRuntime,
    id: &'a TaskId,
    principal: &'a Principal,
    /// The request that waits: its connection asks, its cancellation ends
    /// the wait.
    context: &'a RequestContext<RoleServer>,
    until: Instant,
}

/// The capabilities of a caller whose session takes the server's requests
/// on its connection: a 2025-11-25 session (2026-07-28 has no requests of
/// the server's during a call).
fn asks(context: &RequestContext<RoleServer>) -> Option<ClientCapabilities> {
    if !era::is_initialize_era(context) {
        return None;
    }
    context
        .peer
        .peer_info()
        .map(|info| info.capabilities.clone())
}

/// Asks the caller of `context` for input `key` of task `id` (`request`)
/// on its connection, unless it is out there already: its answer answers
/// the task whenever it comes, after the wait that asked too (the store's
/// change then wakes whichever wait follows the task).
fn ask_once(
    runtime: &TaskRuntime,
    context: &RequestContext<RoleServer>,
    id: &TaskId,
    principal: &Principal,
    key: &str,
    request: &Value,
) {
    if !runtime.inner.asked_now.mark(id.expose(), key) {
        return;
    }
    let weak = runtime.downgrade();
    let peer = context.peer.clone();
    let (id, principal, key, request) = (
        id.clone(),
        principal.clone(),
        key.to_owned(),
        request.clone(),
    );
    tokio::spawn(async move {
        let (key, answer) = ask(&peer, &id, key, request).await;
        let Some(runtime) = weak.upgrade() else {
            return;
        };
        match answer {
            Ok(answer) => {
                let answers = BTreeMap::from([(key.clone(), answer)]);
                // Gone or answered meanwhile: nothing to do.
                if let Err(error) = runtime.update_task_as(&id, answers, &principal).await {
                    tracing::debug!(%error, "a task's input answered on the connection was not taken");
                }
            }
            Err(error) => {
                tracing::debug!(%error, "the caller did not answer a task's input request");
            }
        }
        runtime.inner.asked_now.clear(id.expose(), &key);
    });
}

impl<'a> Wait<'a> {
    /// A wait of the request of `context` for task `id` of `principal`, of
    /// at most `within` from now.
    pub(super) fn within(
        runtime: &'a TaskRuntime,
        id: &'a TaskId,
        principal: &'a Principal,
        context: &'a RequestContext<RoleServer>,
        within: Duration,
    ) -> Self {
        Wait {
            runtime,
            id,
            principal,
            context,
            until: Instant::now() + within,
        }
    }

    /// Waits (see the [module docs](self)).
    pub(super) async fn follow(self) -> Result<Followed, ErrorData> {
        let Wait {
            runtime,
            id,
            principal,
            context,
            until,
        } = self;
        let capabilities = asks(context);
        let mut follower = Follower::new(runtime, id.clone(), principal.clone());
        let mut latest = None;
        let deadline = tokio::time::sleep_until(until);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                biased;
                next = follower.next() => {
                    // `None` only once the runtime is gone.
                    let record = next.unwrap_or_else(|| Err(task_not_found()))?;
                    if record.status().is_terminal() {
                        return Ok(Followed::Ended(record));
                    }
                    let mut unaskable = false;
                    for (key, request) in record.input_requests() {
                        match &capabilities {
                            Some(capabilities) if takes(capabilities, request) => {
                                ask_once(runtime, context, id, principal, key, request);
                            }
                            _ => unaskable = true,
                        }
                    }
                    // A question only the caller's tools can answer: nothing
                    // to wait for until it does.
                    if unaskable && *record.status() == TaskStatus::InputRequired {
                        return Ok(Followed::Pending(record));
                    }
                    latest = Some(record);
                }
                () = context.ct.cancelled() => return Ok(Followed::Abandoned),
                () = &mut deadline, if latest.is_some() => {
                    let Some(record) = latest.take() else { continue };
                    return Ok(Followed::Pending(record));
                }
            }
        }
    }
}
