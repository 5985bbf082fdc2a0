//! [`Handler`]: the client's handler, wrapped so that a 2025-11-25 server's
//! requests tied to a task reach the wait on that task.

// Sampling is deprecated (SEP-2577) but a server may still ask for it.
#![allow(deprecated)]

use std::any::Any;
use std::sync::Arc;

use rmcp::model::{
    CancelledNotificationParam, ClientConfig, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, CustomNotification, CustomRequest,
    CustomResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ListRootsResult, LoggingMessageNotificationParam, Notification, NotificationNoParam,
    ProgressNotificationParam, RequestNoParam, ResourceUpdatedNotificationParam,
    ServerNotification, ServerRequest, SubscriptionsAcknowledgedNotificationParams,
    TaskStatusNotificationParams,
};
use rmcp::service::{DynService, NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Link, Pending, RELATED_TASK, Tap};
use crate::client::state::{Era, TaskState};

/// The method of a 2025-11-25 task status notification.
const TASK_STATUS: &str = "notifications/tasks/status";

/// A client handler for any server, built around your own: build the rmcp
/// client with it (and its [`Tap`] on the transport) so that a
/// 2025-11-25 server's tasks work like the extension's (see the
/// [module](super) docs). Everything that is not tied to a task a
/// `TasksClient` waits on goes to your handler unchanged (a request tied to
/// a task created on this connection first waits up to two seconds for a
/// wait on it); with a 2026-07-28 server that is everything.
///
/// `TasksClient::new` finds it by its type; [`Handler::inner`] gives your
/// handler back.
pub struct Handler {
    service: Arc<dyn DynService<RoleClient>>,
    inner: Arc<dyn Any + Send + Sync>,
    pub(crate) link: Arc<Link>,
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handler").finish_non_exhaustive()
    }
}

impl Handler {
    /// Wraps `handler`.
    pub fn new<H: ClientHandler>(handler: H) -> Self {
        let handler = Arc::new(handler);
        Self {
            service: handler.clone(),
            inner: handler,
            link: Arc::default(),
        }
    }

    /// The tap to wrap this connection's transport with.
    pub fn tap(&self) -> Tap {
        Tap {
            link: self.link.clone(),
        }
    }

    /// The wrapped handler, if it is a `T`.
    pub fn inner<T: 'static>(&self) -> Option<&T> {
        self.inner.downcast_ref()
    }

    /// Hands a request tied to a task to the wait on it. `None`: no wait
    /// here knows the task; the wrapped handler answers.
    async fn to_wait(
        &self,
        method: &str,
        params: Value,
        context: &RequestContext<RoleClient>,
    ) -> Option<Routed> {
        let task = context
            .meta
            .get(RELATED_TASK)
            .and_then(|related| related.get("taskId"))
            .and_then(Value::as_str)?;
        let (respond, answer) = oneshot::channel();
        let pending = Pending {
            key: request_key(&context.id),
            request: json!({"method": method, "params": params}),
            respond,
        };
        let held = tokio::select! {
            held = self.link.deliver_or_hold(task, pending) => held,
            () = context.ct.cancelled() => return Some(Routed::Withdrawn),
        };
        held.ok()?;
        Some(tokio::select! {
            answer = answer => Routed::Answer(answer.unwrap_or_else(|_| {
                Err(ErrorData::internal_error("the client stopped waiting for this task", None))
            })),
            // The server withdrew the request, or the connection is closing:
            // whatever is answered now is dropped unsent.
            () = context.ct.cancelled() => Routed::Withdrawn,
        })
    }

    async fn delegate(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        self.service.handle_request(request, context).await
    }

    async fn notify(
        &self,
        notification: ServerNotification,
        context: NotificationContext<RoleClient>,
    ) {
        // A handler's failure on a notification has no one to go to, as in rmcp.
        let _ = self
            .service
            .handle_notification(notification, context)
            .await;
    }
}

/// How a request handed to a wait ended.
enum Routed {
    /// The wait's answer (or why there is none).
    Answer(Result<Value, ErrorData>),
    /// The request was cancelled before an answer came.
    Withdrawn,
}

impl Routed {
    /// The answer as the result type the server asked for.
    fn decode<T: DeserializeOwned>(self) -> Result<T, ErrorData> {
        match self {
            Self::Answer(answer) => serde_json::from_value(answer?).map_err(|error| {
                ErrorData::internal_error(
                    format!("the client's answer is not valid: {error}"),
                    None,
                )
            }),
            Self::Withdrawn => Err(ErrorData::internal_error("the request was cancelled", None)),
        }
    }
}

/// The key an input request is offered under: its JSON-RPC id.
fn request_key(id: &rmcp::model::RequestId) -> String {
    match id {
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
        rmcp::model::NumberOrString::String(s) => s.to_string(),
    }
}

fn unexpected() -> ErrorData {
    ErrorData::internal_error(
        "the client's handler answered with the wrong result type",
        None,
    )
}

impl ClientHandler for Handler {
    async fn ping(&self, context: RequestContext<RoleClient>) -> Result<(), ErrorData> {
        let ping = ServerRequest::PingRequest(RequestNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        self.delegate(ping, context).await.map(drop)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let raw = serde_json::to_value(&params).unwrap_or(Value::Null);
        if let Some(answer) = self.to_wait("sampling/createMessage", raw, &context).await {
            return answer.decode();
        }
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.delegate(request, context).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(unexpected()),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        if let Some(answer) = self.to_wait("roots/list", json!({}), &context).await {
            return answer.decode();
        }
        let request = ServerRequest::ListRootsRequest(RequestNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        match self.delegate(request, context).await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(unexpected()),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let raw = serde_json::to_value(&params).unwrap_or(Value::Null);
        match self.to_wait("elicitation/create", raw, &context).await {
            // An elicitation has an answer for this: it was cancelled. (rmcp
            // drops it unsent; an error would only be logged as a failure.)
            Some(Routed::Withdrawn) => return Ok(ElicitResult::new(ElicitationAction::Cancel)),
            Some(answer) => return answer.decode(),
            None => {}
        }
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.delegate(request, context).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(unexpected()),
        }
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        match self
            .delegate(ServerRequest::CustomRequest(request), context)
            .await?
        {
            ClientResult::CustomResult(result) => Ok(result),
            _ => Err(unexpected()),
        }
    }

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let notification = ServerNotification::CancelledNotification(Notification::new(params));
        self.notify(notification, context).await;
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let notification = ServerNotification::ProgressNotification(Notification::new(params));
        self.notify(notification, context).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let notification =
            ServerNotification::LoggingMessageNotification(Notification::new(params));
        self.notify(notification, context).await;
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let notification =
            ServerNotification::ResourceUpdatedNotification(Notification::new(params));
        self.notify(notification, context).await;
    }

    async fn on_resource_list_changed(&self, context: NotificationContext<RoleClient>) {
        let notification =
            ServerNotification::ResourceListChangedNotification(NotificationNoParam {
                method: Default::default(),
                extensions: Default::default(),
            });
        self.notify(notification, context).await;
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.link.tools_changed();
        let notification = ServerNotification::ToolListChangedNotification(NotificationNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        self.notify(notification, context).await;
    }

    async fn on_prompt_list_changed(&self, context: NotificationContext<RoleClient>) {
        let notification = ServerNotification::PromptListChangedNotification(NotificationNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        self.notify(notification, context).await;
    }

    async fn on_subscriptions_acknowledged(
        &self,
        params: SubscriptionsAcknowledgedNotificationParams,
        context: NotificationContext<RoleClient>,
    ) {
        let notification =
            ServerNotification::SubscriptionsAcknowledgedNotification(Notification::new(params));
        self.notify(notification, context).await;
    }

    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        context: NotificationContext<RoleClient>,
    ) {
        let notification = ServerNotification::TaskStatusNotification(Notification::new(params));
        self.notify(notification, context).await;
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleClient>,
    ) {
        if notification.method == TASK_STATUS
            && let Some(params) = &notification.params
            && let Ok(state) = TaskState::from_json(params.clone())
        {
            self.link.status(&state.in_era(Era::Legacy));
        }
        self.notify(
            ServerNotification::CustomNotification(notification),
            context,
        )
        .await;
    }

    fn get_info(&self) -> ClientConfig {
        self.service.get_info()
    }
}
