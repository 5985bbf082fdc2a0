//! The wait the window and `tasks_wait` share: a task followed for its
//! caller until it ends, a deadline passes, it asks a question only the
//! caller's tools can answer, or the caller goes; meanwhile
//! each of its input requests that the caller's session takes (a
//! 2025-11-25 session that declared elicitation, sampling or roots) is
//! asked on the caller's own connection, and the answer answers the task.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rmcp::model::{CallToolResult, ClientCapabilities, ErrorCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::server::engine::era;
use crate::server::engine::tasks::asking::{ask, takes};
use crate::server::engine::tasks::follower::Follower;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::task_not_found;
use crate::store::{PackedRecord, Principal};
use crate::task::{TaskId, TaskStatus};

/// The tool's own outcome, handed over as it returns (before it is
/// stored), to the window of the call that started it.
pub(crate) type Teed = oneshot::Receiver<Result<CallToolResult, ErrorData>>;

/// How a wait ended.
pub(super) enum Followed {
    /// The tool returned this (the window only).
    Teed(Result<CallToolResult, ErrorData>),
    /// The task ended: its final record.
    Ended(Arc<PackedRecord>),
    /// The deadline passed first: the task as it is.
    Pending(Arc<PackedRecord>),
    /// The caller cancelled its request.
    Abandoned,
}

/// What a wait follows, and for whom.
pub(super) struct Wait<'a> {
    pub(super) runtime: &'a TaskRuntime,
    pub(super) id: &'a TaskId,
    pub(super) principal: &'a Principal,
    /// The request that waits: its connection asks, its cancellation ends
    /// the wait.
    pub(super) context: &'a RequestContext<RoleServer>,
    pub(super) until: Instant,
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

/// The tool's outcome once `teed` hands it over; never when it is gone (a
/// tool that panicked, or no tee at all).
async fn teed_out(teed: &mut Option<Teed>) -> Result<CallToolResult, ErrorData> {
    let out = match teed.as_mut() {
        Some(receiver) => receiver.await,
        None => std::future::pending().await,
    };
    match out {
        Ok(out) => out,
        Err(_) => {
            *teed = None;
            std::future::pending().await
        }
    }
}

impl Wait<'_> {
    /// Waits (see the [module docs](self)); `teed` hands over the tool's
    /// outcome as it returns, for the window.
    pub(super) async fn follow(self, mut teed: Option<Teed>) -> Result<Followed, ErrorData> {
        let Wait {
            runtime,
            id,
            principal,
            context,
            until,
        } = self;
        let capabilities = asks(context);
        let mut follower = Follower::new(runtime, id.clone(), principal.clone());
        let mut asking = FuturesUnordered::new();
        let mut asked = HashSet::new();
        let mut latest = None;
        let deadline = tokio::time::sleep_until(until);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                biased;
                out = teed_out(&mut teed) => return Ok(Followed::Teed(out)),
                next = follower.next() => {
                    // `None` only once the runtime is gone.
                    let record = next.unwrap_or_else(|| Err(task_not_found()))?;
                    if record.status().is_terminal() {
                        if let Some(Ok(out)) = teed.as_mut().map(oneshot::Receiver::try_recv) {
                            return Ok(Followed::Teed(out));
                        }
                        return Ok(Followed::Ended(record));
                    }
                    let mut unaskable = false;
                    for (key, request) in record.input_requests() {
                        match &capabilities {
                            Some(capabilities) if takes(capabilities, request) => {
                                if asked.insert(key.clone()) {
                                    asking.push(ask(&context.peer, id, key.clone(), request.clone()));
                                }
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
                Some((key, answer)) = asking.next(), if !asking.is_empty() => {
                    match answer {
                        Ok(answer) => {
                            let answers = BTreeMap::from([(key, answer)]);
                            match runtime.update_task_as(id, answers, principal).await {
                                // Gone meanwhile: the next read says so.
                                Ok(()) => {}
                                Err(error) if error.code == ErrorCode::INVALID_PARAMS => {}
                                Err(error) => return Err(error),
                            }
                        }
                        Err(error) => {
                            tracing::debug!(%error, "the caller did not answer a task's input request");
                        }
                    }
                    follower.reread();
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
