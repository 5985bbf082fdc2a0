//! The task requests a wait sends, and the facade's `get`, `update` and
//! `cancel` with it: `tasks/get`, `tasks/update` and `tasks/cancel` in the
//! connection's [`Era`], decided once when a [`TaskRequests`] is made
//! ([`TasksClient::requests`]) instead of looked up again at each request.
//!
//! The extension's requests are written here; the 2025-11-25 era's are in
//! [`legacy`](super::legacy) (`legacy/wire.rs`), the only place that knows
//! that wire, and a [`TaskRequests`] of that era hands each request to it.

use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    InputResponses, JsonObject, ServerResult, UpdateTaskParams, UpdateTaskRequest,
};

use super::TasksClient;
use super::error::Error;
use super::read::{read_ack, read_task_result};
use super::state::{Era, TaskState};
use crate::task::TaskId;

impl<H: ClientHandler> TasksClient<H> {
    /// This connection's task requests, in its era (told now, once: see
    /// [`TasksClient::era`]).
    pub(crate) fn requests(&self) -> TaskRequests<'_, H> {
        TaskRequests {
            client: self,
            era: self.era(),
        }
    }
}

/// `tasks/get`, `tasks/update` and `tasks/cancel` of one connection, in
/// the era it was made with: a wait makes one and holds it to the end.
pub(crate) struct TaskRequests<'c, H: ClientHandler> {
    client: &'c TasksClient<H>,
    era: Era,
}

// Derived `Clone` and `Copy` would ask them of `H`; a reference does not.
impl<H: ClientHandler> Clone for TaskRequests<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H: ClientHandler> Copy for TaskRequests<'_, H> {}

impl<'c, H: ClientHandler> TaskRequests<'c, H> {
    /// The era these requests speak.
    pub(crate) fn era(&self) -> Era {
        self.era
    }

    /// The client they are sent through.
    pub(crate) fn client(&self) -> &'c TasksClient<H> {
        self.client
    }

    /// Sends one of the extension's task requests (the extension declared,
    /// no `_meta` of the caller's) and returns its raw result.
    async fn send(
        &self,
        method: &'static str,
        request: ClientRequest,
        timeout: Option<Duration>,
    ) -> Result<ServerResult, Error> {
        let no_meta = JsonObject::new();
        self.client
            .send(method, request, true, &no_meta, timeout)
            .await
    }

    /// `tasks/get`: the current state of task `id` (in the 2025-11-25 era a
    /// bare task, without its payload).
    pub(crate) async fn get(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<TaskState, Error> {
        match self.era {
            Era::Legacy => self.client.get_legacy(id, timeout).await,
            Era::Extension => {
                let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(
                    GetTaskParams::new(id.expose()),
                ));
                let result = self.send("tasks/get", request, timeout).await?;
                read_task_result(result)
            }
        }
    }

    /// `tasks/update`: sends `responses` to task `id`'s input requests (in
    /// the 2025-11-25 era, answers the requests a wait left unanswered).
    pub(crate) async fn update(
        &self,
        id: &TaskId,
        responses: InputResponses,
        timeout: Option<Duration>,
    ) -> Result<(), Error> {
        match self.era {
            Era::Legacy => self.client.update_legacy(id, responses),
            Era::Extension => {
                let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
                    UpdateTaskParams::new(id.expose(), responses),
                ));
                let result = self.send("tasks/update", request, timeout).await?;
                read_ack("tasks/update", result)
            }
        }
    }

    /// `tasks/cancel`: asks the server to cancel task `id`. The task's
    /// state when the era's answer carries one (2025-11-25's does; the
    /// extension's is an ack).
    pub(crate) async fn cancel(
        &self,
        id: &TaskId,
        timeout: Option<Duration>,
    ) -> Result<Option<TaskState>, Error> {
        match self.era {
            Era::Legacy => self.client.cancel_legacy(id, timeout).await.map(Some),
            Era::Extension => {
                let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
                    CancelTaskParams::new(id.expose()),
                ));
                let result = self.send("tasks/cancel", request, timeout).await?;
                read_ack("tasks/cancel", result).map(|()| None)
            }
        }
    }
}
