//! The window: a call that hands out a handle waits for its task a short
//! while first, and answers as a synchronous call would when the task ends
//! within it.

use std::time::Duration;

use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::follow::{Followed, Teed, Wait};
use super::shown;
use crate::server::engine::budget::response_within;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::store::Principal;
use crate::task::TaskId;

/// A call from a caller that declared no tasks, run as a task that hands
/// out a handle when it outlasts `window` ([`TaskTools`](super::TaskTools)).
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) window: Duration,
    /// The call's request: its connection may be asked for input, and its
    /// cancellation cancels the task while the caller has no handle yet.
    pub(crate) context: RequestContext<RoleServer>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// Where the tool hands its outcome to the window, and where the window
/// reads it; neither without a handle.
pub(crate) fn tee(
    handle: Option<&Handle>,
) -> (
    Option<oneshot::Sender<Result<CallToolResult, ErrorData>>>,
    Option<Teed>,
) {
    match handle {
        Some(_) => {
            let (sender, receiver) = oneshot::channel();
            (Some(sender), Some(receiver))
        }
        None => (None, None),
    }
}

impl TaskRuntime {
    /// Answers the call of `handle`, whose task `created` was: the tool's
    /// outcome when the task ends within the window, as a synchronous call
    /// answers it (held to the result budget); the handle otherwise. A
    /// caller that cancels its call meanwhile cancels the task: it never
    /// learnt its id.
    pub(crate) async fn within_window(
        &self,
        created: CallToolResponse,
        handle: Handle,
        principal: &Principal,
        teed: Option<Teed>,
    ) -> Result<CallToolResponse, ErrorData> {
        let CallToolResponse::Task(created) = created else {
            return Ok(created);
        };
        let id = TaskId::new(created.task.task_id);
        let wait = Wait {
            runtime: self,
            id: &id,
            principal,
            context: &handle.context,
            until: Instant::now() + handle.window,
        };
        match wait.follow(teed).await? {
            Followed::Teed(out) => {
                response_within(out.map(CallToolResponse::from), self.max_result_bytes())
            }
            Followed::Ended(record) => shown::ended_as_call(&record).map(CallToolResponse::from),
            Followed::Pending(record) => Ok(shown::unfinished(&record, true).into()),
            Followed::Abandoned => {
                // Best effort: the caller is gone, and so is its answer.
                let _ = self.cancel_task_as(&id, principal).await;
                Err(ErrorData::internal_error("the call was cancelled", None))
            }
        }
    }
}
