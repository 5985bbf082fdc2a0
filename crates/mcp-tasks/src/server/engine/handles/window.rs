//! The window: a call that hands out a handle waits for its task a short
//! while first, and answers as a synchronous call would when the task ends
//! within it.

use std::time::Duration;

use rmcp::model::CallToolResponse;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::follow::{Followed, Wait};
use super::shown;
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

impl TaskRuntime {
    /// Answers the call of `handle`, whose task `created` was: the tool's
    /// outcome when the task ends within the window, as a synchronous call
    /// answers it (its result as the tool returned it, or its error, read
    /// back from the store: a result past the budget is the same error
    /// either way); the handle otherwise. A
    /// caller that cancels its call meanwhile cancels the task: it never
    /// learnt its id.
    pub(crate) async fn within_window(
        &self,
        created: CallToolResponse,
        handle: Handle,
        principal: &Principal,
    ) -> Result<CallToolResponse, ErrorData> {
        let CallToolResponse::Task(created) = created else {
            return Ok(created);
        };
        let id = TaskId::new(created.task.task_id);
        let wait = Wait::within(self, &id, principal, &handle.context, handle.window);
        match wait.follow().await? {
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
