//! Where [`TaskContext::progress`](crate::server::TaskContext::progress) sends MCP
//! `notifications/progress`: the caller that asked for them with a
//! `progressToken` in its `tools/call`'s `_meta`, when its era lets a
//! server send them for this call.
//!
//! * A synchronous call (no task), in either era: on the call's own
//!   response stream (HTTP) or the connection (stdio), as core MCP says.
//! * A task of a session opened with `initialize` (2025-11-25): the token
//!   stays valid for the task's whole life there, so the notifications go on
//!   the session (over HTTP on the call's stream while it is open, then on
//!   the session's standalone stream), tagged with the related-task `_meta`.
//! * A task of 2026-07-28: never. The Tasks extension does not support
//!   progress for tasks (`notifications/progress` "MUST NOT" go on a task's
//!   listen stream); the status message, read by `tasks/get` and pushed as
//!   `notifications/tasks`, is how such a caller learns it.

use std::sync::Mutex;

use rmcp::model::{JsonObject, NotificationMetaObject, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::json;

use super::era::is_old_tasks_era;
use crate::task::{RELATED_TASK, TaskId};

/// The caller's peer and the token it asked for progress with.
pub(crate) struct ProgressSink {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    /// The last progress sent: `progress` must increase, so a value that
    /// does not is not sent.
    last: Mutex<Option<u64>>,
}

impl ProgressSink {
    /// The sink of a call that runs synchronously: its token, if it sent one.
    pub(crate) fn for_call(context: &RequestContext<RoleServer>) -> Option<Self> {
        Self::of(context)
    }

    /// The sink of a call that runs as a task: only on a 2025-11-25 session
    /// (see the [module docs](self)).
    pub(crate) fn for_task(context: &RequestContext<RoleServer>) -> Option<Self> {
        is_old_tasks_era(context)
            .then(|| Self::of(context))
            .flatten()
    }

    fn of(context: &RequestContext<RoleServer>) -> Option<Self> {
        let token = context.meta.get_progress_token()?;
        Some(Self {
            peer: context.peer.clone(),
            token,
            last: Mutex::default(),
        })
    }

    /// Sends `done` of `total` with `message`, if `done` is past the last
    /// progress sent; of task `task` (2025-11-25), tagged with it. A
    /// notification that cannot be sent (the caller went away) is dropped:
    /// progress is a courtesy, never a reason to fail the tool.
    pub(crate) async fn send(
        &self,
        done: u64,
        total: Option<u64>,
        message: Option<&str>,
        task: Option<&TaskId>,
    ) {
        {
            let mut last = self
                .last
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            if last.is_some_and(|last| done <= last) {
                return;
            }
            *last = Some(done);
        }
        // As f64, as the wire has it: exact up to 2^53.
        #[allow(clippy::cast_precision_loss)]
        let mut params = ProgressNotificationParam::new(self.token.clone(), done as f64);
        #[allow(clippy::cast_precision_loss)]
        {
            params.total = total.map(|total| total as f64);
        }
        params.message = message.map(str::to_owned);
        if let Some(task) = task {
            let mut meta = JsonObject::new();
            meta.insert(RELATED_TASK.into(), json!({"taskId": task.expose()}));
            params.meta = Some(NotificationMetaObject::from(meta));
        }
        if let Err(error) = self.peer.notify_progress(params).await {
            tracing::debug!(%error, "a progress notification could not be sent");
        }
    }
}
