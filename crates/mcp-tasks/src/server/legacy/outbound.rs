//! What rmcp's typed model cannot carry, written into the answers of an
//! initialize-era session on their way out: `capabilities.tasks` in the
//! `InitializeResult` of a server that declares the Tasks extension, and
//! each tool's `execution.taskSupport` in `tools/list`. The answers are
//! turned into rmcp's `CustomResult` (any JSON) with the fields added.

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, CustomResult, JsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;

use super::wire;
use crate::server::engine::policy::TaskPolicy;
use crate::server::engine::tasks::runtime::{TaskRuntime, WeakRuntime};

/// The rewriting of one connection's (or HTTP session's) answers.
#[derive(Debug)]
pub(crate) struct Outbound {
    runtime: WeakRuntime,
    /// The connection was opened with `initialize`.
    initialize_era: bool,
    /// Its `InitializeResult` declared the Tasks extension, so this era's
    /// tasks were declared too.
    tasks: bool,
}

impl Outbound {
    /// For a connection of `runtime`; `initialize_era` when it is known to
    /// be one already (an HTTP session), else learnt from its first
    /// request ([`Outbound::received`]).
    pub(crate) fn new(runtime: &TaskRuntime, initialize_era: bool) -> Self {
        Self {
            runtime: runtime.downgrade(),
            initialize_era,
            tasks: false,
        }
    }

    /// Notes a message from the client: an `initialize` request makes the
    /// connection an initialize-era one.
    pub(crate) fn received(&mut self, message: &RxJsonRpcMessage<RoleServer>) {
        if let JsonRpcMessage::Request(request) = message
            && matches!(request.request, ClientRequest::InitializeRequest(_))
        {
            self.initialize_era = true;
        }
    }

    /// A message to the client, with this era's fields written in.
    pub(crate) fn sent(
        &mut self,
        message: TxJsonRpcMessage<RoleServer>,
    ) -> TxJsonRpcMessage<RoleServer> {
        if !self.initialize_era {
            return message;
        }
        let JsonRpcMessage::Response(mut response) = message else {
            return message;
        };
        let rewritten = match &response.result {
            ServerResult::InitializeResult(result) if result.capabilities.supports_tasks() => {
                self.tasks = true;
                serde_json::to_value(result).ok().map(|mut value| {
                    if let Some(Value::Object(capabilities)) = value.get_mut("capabilities") {
                        capabilities.insert("tasks".into(), wire::capabilities());
                    }
                    value
                })
            }
            ServerResult::ListToolsResult(result) if self.tasks => {
                let runtime = self.runtime.upgrade();
                serde_json::to_value(result).ok().map(|mut value| {
                    if let (Some(runtime), Some(Value::Array(tools))) =
                        (runtime, value.get_mut("tools"))
                    {
                        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                            let policy = tool
                                .get("name")
                                .and_then(Value::as_str)
                                .and_then(|name| Some((name, runtime.advertised_policy(name)?)))
                                .map(|(name, policy)| shown_policy(&runtime, name, policy));
                            if let Some(policy) = policy {
                                tool.insert(
                                    "execution".into(),
                                    serde_json::json!({"taskSupport": wire::task_support(policy)}),
                                );
                            }
                        }
                    }
                    value
                })
            }
            _ => None,
        };
        if let Some(value) = rewritten {
            response.result = ServerResult::CustomResult(CustomResult::new(value));
        }
        JsonRpcMessage::Response(response)
    }
}

/// The policy a session of this era reads for the tool `name`: a tool that
/// hands a caller without tasks a handle ([`TaskTools`]) reads `optional`
/// where it requires a task, or the TypeScript SDK refuses to call it
/// without one (this era's `tools/list` cannot tell a session that holds
/// tasks from one that does not).
///
/// [`TaskTools`]: crate::server::TaskTools
fn shown_policy(runtime: &TaskRuntime, name: &str, policy: TaskPolicy) -> TaskPolicy {
    match policy {
        TaskPolicy::Required if runtime.hands_out(name, policy) => TaskPolicy::Optional,
        policy => policy,
    }
}

/// A transport whose answers go through an [`Outbound`] (the stdio
/// transport's, an HTTP session's).
#[derive(Debug)]
pub(crate) struct Rewriting<T> {
    inner: T,
    outbound: Outbound,
}

impl<T> Rewriting<T> {
    /// `inner`, its answers rewritten by `outbound`.
    pub(crate) fn new(inner: T, outbound: Outbound) -> Self {
        Self { inner, outbound }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Rewriting<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = self.outbound.sent(item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        self.outbound.received(&message);
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
