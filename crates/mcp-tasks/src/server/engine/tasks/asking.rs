//! Asking a client, on its own connection, for a task's input: each stored
//! input request (`{method, params}`) sent as a request of the server's,
//! tagged with its task, and the client's answer as `tasks/update` takes
//! it. What a blocked 2025-11-25 `tasks/result` does, and the task tools'
//! wait (`handles`) for a caller whose session declared elicitation.

use rmcp::RoleServer;
use rmcp::model::{ClientCapabilities, CustomRequest, ServerRequest};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};

use crate::task::{RELATED_TASK, TaskId};

/// What asking the client for one input ended with: its key and the
/// client's answer.
pub(crate) type Asked = (String, Result<Value, rmcp::service::ServiceError>);

/// Sends the stored input request `request` (`{method, params}`) to the
/// client of `peer`, tagged with task `id`; its answer, as `tasks/update`
/// takes it.
pub(crate) async fn ask(
    peer: &Peer<RoleServer>,
    id: &TaskId,
    key: String,
    request: Value,
) -> Asked {
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut params = match request.get("params") {
        Some(Value::Object(params)) => params.clone(),
        _ => Map::new(),
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(RELATED_TASK.into(), json!({"taskId": id.expose()}));
    }
    let sent =
        ServerRequest::CustomRequest(CustomRequest::new(method, Some(Value::Object(params))));
    let answer = peer
        .send_request(sent)
        .await
        .map(|result| serde_json::to_value(result).unwrap_or(Value::Null));
    (key, answer)
}

/// Whether a client that declared `capabilities` takes the input request
/// `request` (`{method, params}`) on its connection: an elicitation when it
/// declared elicitation, a sampling request when it declared sampling, a
/// roots request when it declared roots.
pub(crate) fn takes(capabilities: &ClientCapabilities, request: &Value) -> bool {
    match request.get("method").and_then(Value::as_str) {
        Some("elicitation/create") => capabilities.elicitation.is_some(),
        Some("sampling/createMessage") => capabilities.sampling.is_some(),
        Some("roots/list") => capabilities.roots.is_some(),
        _ => false,
    }
}
