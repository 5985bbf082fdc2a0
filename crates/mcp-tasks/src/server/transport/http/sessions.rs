//! The sessions of initialize-era clients over Streamable HTTP (2025-11-25
//! and before; 2026-07-28 has none): rmcp's own, in memory, with each
//! session's answers passed through the 2025-11-25 tasks layer on their
//! way out (`capabilities.tasks`, `execution.taskSupport`; see
//! `server::legacy`). A session lives in the process that made it, so
//! replicas behind a load balancer need sticky routing for these clients
//! (by `Mcp-Session-Id`); 2026-07-28 clients need none.

use std::sync::Arc;

use futures::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

use crate::server::TaskRuntime;
use crate::server::legacy::outbound::{Outbound, Rewriting};

/// rmcp's [`LocalSessionManager`], whose sessions' answers go through
/// [`Outbound`].
pub(super) struct Sessions {
    inner: LocalSessionManager,
    runtime: TaskRuntime,
}

impl Sessions {
    pub(super) fn new(runtime: TaskRuntime) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            runtime,
        }
    }
}

impl Sessions {
    fn wrap(
        &self,
        transport: <LocalSessionManager as SessionManager>::Transport,
    ) -> Quieted<Rewriting<<LocalSessionManager as SessionManager>::Transport>> {
        Quieted(Rewriting::new(
            transport,
            Outbound::new(&self.runtime, true),
        ))
    }
}

/// A session's transport that puts its service loop in the quiet scope (see
/// [`quiet`](crate::quiet)): rmcp serves each session on a task it spawns
/// with no span around it, then, right after sending the `InitializeResult`
/// (the moment the send ends, in the same poll), starts the service loop
/// under a span it makes there. The scope is opened as that send ends
/// ([`quiet::arm`](crate::quiet::arm)), so the span is ours and the loop
/// stays in the scope. Checked by the logs test of mcp-tasks-conformance,
/// on rmcp 3.11.0.
pub(super) struct Quieted<T>(T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for Quieted<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let initialized = matches!(
            &item,
            ServerJsonRpcMessage::Response(response)
                if matches!(response.result, ServerResult::InitializeResult(_))
        );
        let send = self.0.send(item);
        async move {
            let sent = send.await;
            if initialized && sent.is_ok() {
                crate::quiet::arm();
            }
            sent
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

impl SessionManager for Sessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = Quieted<Rewriting<<LocalSessionManager as SessionManager>::Transport>>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        Ok((id, self.wrap(transport)))
    }

    fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<ServerJsonRpcMessage, Self::Error>> + Send {
        self.inner.initialize_session(id, message)
    }

    fn has_session(
        &self,
        id: &SessionId,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send {
        self.inner.has_session(id)
    }

    fn close_session(
        &self,
        id: &SessionId,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close_session(id)
    }

    fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.create_stream(id, message)
    }

    fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.accept_message(id, message)
    }

    fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.create_standalone_stream(id)
    }

    fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> impl Future<
        Output = Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error>,
    > + Send {
        self.inner.resume(id, last_event_id)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(match self.inner.restore_session(id).await? {
            RestoreOutcome::Restored(transport) => RestoreOutcome::Restored(self.wrap(transport)),
            RestoreOutcome::AlreadyPresent => RestoreOutcome::AlreadyPresent,
            _ => RestoreOutcome::NotSupported,
        })
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
