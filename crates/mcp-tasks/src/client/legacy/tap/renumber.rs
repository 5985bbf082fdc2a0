//! Request ids on a Streamable HTTP session taken over from an earlier
//! connection (`Link::adopt_http_session`).
//!
//! A server matches each answer to its request by the JSON-RPC id, within
//! the session: two clients on one session whose requests carry the same
//! id may each get the other's answer (the TypeScript SDK's transport maps
//! ids to HTTP responses per session). The earlier connection (a gateway
//! still draining, another replica that took over other tasks of the same
//! session) numbers its requests from 0, as rmcp numbers every client's,
//! and rmcp offers no way to number them otherwise. So on a session taken
//! over, the tap gives every request of this connection an id of its own,
//! a string no other client of the session sends (a random prefix, then
//! the id rmcp gave), and gives each answer back rmcp's id before anything
//! reads it (the tap included). `notifications/cancelled` names the request
//! by the same id. The server's own requests (elicitation, sampling) and
//! this connection's answers to them keep the server's ids.

use futures::StreamExt;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use serde_json::Value;
use sse_stream::Sse;

use super::Events;

/// The ids of one connection on a session taken over.
pub(super) struct Renumber {
    prefix: String,
}

impl Renumber {
    /// A prefix no other client of the session uses: random.
    pub(super) fn new() -> Self {
        let mut bytes = [0u8; 8];
        // Without randomness, the time: still unlike rmcp's numbers.
        if getrandom::fill(&mut bytes).is_err() {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos());
            bytes.copy_from_slice(&nanos.to_le_bytes()[..8]);
        }
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        Self {
            prefix: format!("mcp-tasks-{hex}-"),
        }
    }

    /// `id` as this connection sends it.
    fn ours(&self, id: &Value) -> Value {
        match id {
            Value::Number(number) => Value::String(format!("{}n{number}", self.prefix)),
            Value::String(text) => Value::String(format!("{}s{text}", self.prefix)),
            other => other.clone(),
        }
    }

    /// The id rmcp gave, of an id this connection sent (`None`: another).
    fn theirs(&self, id: &Value) -> Option<Value> {
        let rest = id.as_str()?.strip_prefix(self.prefix.as_str())?;
        match (rest.strip_prefix('n'), rest.strip_prefix('s')) {
            (Some(number), _) => number.parse::<i64>().ok().map(Value::from),
            (_, Some(text)) => Some(Value::from(text)),
            _ => None,
        }
    }

    /// A message to send: a request (and a `notifications/cancelled`) with
    /// this connection's id.
    pub(super) fn outgoing(&self, message: ClientJsonRpcMessage) -> ClientJsonRpcMessage {
        let Ok(mut value) = serde_json::to_value(&message) else {
            return message;
        };
        let mut changed = false;
        if value.get("method").is_some()
            && let Some(id) = value.get_mut("id")
        {
            *id = self.ours(id);
            changed = true;
        }
        if value.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
            && let Some(id) = value.pointer_mut("/params/requestId")
        {
            *id = self.ours(id);
            changed = true;
        }
        if !changed {
            return message;
        }
        serde_json::from_value(value).unwrap_or(message)
    }

    /// The bytes of a message received with rmcp's id again, when it is an
    /// answer to a request of this connection (`None`: unchanged).
    pub(super) fn incoming_bytes(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut value: Value = serde_json::from_slice(bytes).ok()?;
        if value.get("method").is_some() {
            return None;
        }
        let id = self.theirs(value.get("id")?)?;
        value["id"] = id;
        serde_json::to_vec(&value).ok()
    }

    /// [`Renumber::incoming_bytes`] of a message read already.
    pub(super) fn incoming(&self, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        let Ok(bytes) = serde_json::to_vec(&message) else {
            return message;
        };
        match self.incoming_bytes(&bytes) {
            Some(bytes) => serde_json::from_slice(&bytes).unwrap_or(message),
            None => message,
        }
    }

    /// Every event of an SSE answer with rmcp's ids again.
    pub(super) fn incoming_events(self: &std::sync::Arc<Self>, events: Events) -> Events {
        let renumber = self.clone();
        events
            .map(move |event| {
                event.map(|event| match &event.data {
                    Some(data) => match renumber.incoming_bytes(data.as_bytes()) {
                        Some(bytes) => Sse {
                            data: Some(String::from_utf8_lossy(&bytes).into_owned()),
                            ..event
                        },
                        None => event,
                    },
                    None => event,
                })
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_go_out_with_ids_of_their_own_and_answers_come_back_with_rmcps() {
        let renumber = Renumber::new();
        let request: ClientJsonRpcMessage = serde_json::from_value(json!({
            "jsonrpc": "2.0", "id": 7, "method": "ping"
        }))
        .unwrap();
        let sent = serde_json::to_value(renumber.outgoing(request)).unwrap();
        let id = sent["id"].as_str().expect("a string id").to_owned();
        assert!(id.starts_with("mcp-tasks-") && id.ends_with("-n7"), "{id}");
        assert_ne!(
            id,
            serde_json::to_value(Renumber::new().ours(&json!(7))).unwrap()
        );
        // The answer to it gets 7 back; another client's answer and the
        // server's own request are left alone.
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string();
        let back: Value =
            serde_json::from_slice(&renumber.incoming_bytes(answer.as_bytes()).unwrap()).unwrap();
        assert_eq!(back["id"], json!(7));
        let other = json!({"jsonrpc": "2.0", "id": 7, "result": {}}).to_string();
        assert!(renumber.incoming_bytes(other.as_bytes()).is_none());
        let asked = json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create"});
        assert!(
            renumber
                .incoming_bytes(asked.to_string().as_bytes())
                .is_none()
        );
        // A string id, and a cancel that names a request.
        let cancel: ClientJsonRpcMessage = serde_json::from_value(json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "abc"}
        }))
        .unwrap();
        let sent = serde_json::to_value(renumber.outgoing(cancel)).unwrap();
        let named = sent["params"]["requestId"].as_str().unwrap();
        assert_eq!(renumber.theirs(&json!(named)), Some(json!("abc")));
        // An answer to the server's request keeps the server's id.
        let answer: ClientJsonRpcMessage =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 3, "result": {}})).unwrap();
        assert_eq!(
            serde_json::to_value(renumber.outgoing(answer)).unwrap()["id"],
            json!(3)
        );
    }
}
