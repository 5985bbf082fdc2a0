//! Which requests of an initialize-era session are this era's task
//! requests, and their new names (see the [module docs](super)).

use serde_json::{Map, Value};

use super::PREFIX;
use crate::stdio::{Line, contains};

/// The methods of this era's tasks, as the client sends them, and the
/// extension's `tasks/update`, which this era lacks (rmcp would answer it
/// with the extension's -32021; this era's answer is -32601).
const TASK_METHODS: [&str; 5] = [
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
];

/// True when the capabilities object `capabilities` declares the Tasks
/// extension of 2026-07-28.
pub(crate) fn declares_extension(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|capabilities| capabilities.get("extensions"))
        .and_then(|extensions| extensions.get(crate::task::TASKS_EXTENSION))
        .is_some()
}

/// The new name of a request of this era's tasks, if `message` is one: a
/// `tools/call` whose params carry a `task` object, or a `tasks/*` method of
/// this era. Responses and notifications are never renamed, nor a request
/// that declares the Tasks extension in its own `_meta` (a client of both
/// eras on an initialize-era session, as rmcp's is: the extension wins).
/// Call it only for messages of an initialize-era session.
fn new_name(message: &Map<String, Value>) -> Option<String> {
    if !message.contains_key("id") {
        return None;
    }
    let method = message.get("method")?.as_str()?;
    let declared = message
        .get("params")
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get("io.modelcontextprotocol/clientCapabilities"));
    if declares_extension(declared) {
        return None;
    }
    let augmented_call = method == "tools/call"
        && message
            .get("params")
            .and_then(|params| params.get("task"))
            .is_some_and(Value::is_object);
    (augmented_call || TASK_METHODS.contains(&method)).then(|| format!("{PREFIX}{method}"))
}

/// Renames `message` if it is a request of this era's tasks (see
/// [`new_name`]); true when it did.
pub(crate) fn reroute(message: &mut Map<String, Value>) -> bool {
    match new_name(message) {
        Some(name) => {
            message.insert("method".into(), Value::String(name));
            true
        }
        None => false,
    }
}

/// True when a raw line may hold a request [`reroute`] renames: the cheap
/// test before a line is parsed.
fn may_reroute(line: &[u8]) -> bool {
    contains(line, b"tasks/") || (contains(line, b"tools/call") && contains(line, b"\"task\""))
}

/// This era's part of a newline-delimited connection's reader (the
/// [`StdioTransport`](crate::server::StdioTransport)'s): once the
/// connection opened with an `initialize` that declares no Tasks extension,
/// each request of this era's tasks is renamed (see [`reroute`]).
#[derive(Debug, Default)]
pub(crate) struct Lines {
    /// The connection speaks this era's tasks.
    on: bool,
}

impl Lines {
    /// For a connection whose first request is `first`: on when it is an
    /// `initialize` that declares no Tasks extension (a client that
    /// declares it there, as rmcp's may, is served in the new era).
    pub(crate) fn opened_with(first: &Map<String, Value>) -> Self {
        let params = first.get("params");
        Self {
            on: first.contains_key("id")
                && first.get("method").and_then(Value::as_str) == Some("initialize")
                && !declares_extension(params.and_then(|params| params.get("capabilities"))),
        }
    }

    /// What becomes of `line` if it is this era's to judge (a request it
    /// may rename): renamed, or passed unchanged; `None` for any other
    /// line.
    pub(crate) fn filter(&self, line: &[u8]) -> Option<Line> {
        if !self.on || !may_reroute(line) {
            return None;
        }
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(line) else {
            return Some(Line::Pass);
        };
        if !reroute(&mut message) {
            return Some(Line::Pass);
        }
        let mut renamed = Value::Object(message).to_string().into_bytes();
        renamed.push(b'\n');
        Some(Line::Replace(renamed))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn renamed(message: Value) -> Option<String> {
        let Value::Object(mut message) = message else {
            unreachable!()
        };
        let line = Value::Object(message.clone()).to_string();
        let changed = reroute(&mut message);
        assert!(
            !changed || may_reroute(line.as_bytes()),
            "the cheap test missed {line}"
        );
        changed.then(|| message["method"].as_str().unwrap().to_owned())
    }

    #[test]
    fn task_requests_of_the_old_era_are_renamed() {
        for method in TASK_METHODS {
            let request =
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"taskId": "x"}});
            assert_eq!(renamed(request), Some(format!("{PREFIX}{method}")));
        }
        let call = json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
            "params": {"name": "t", "task": {"ttl": 60000}}});
        assert_eq!(renamed(call), Some(format!("{PREFIX}tools/call")));
        let empty_task = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "t", "task": {}}});
        assert!(renamed(empty_task).is_some());
    }

    #[test]
    fn everything_else_passes() {
        let extension = json!({"io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                "params": {"taskId": "x", "_meta": extension}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "t", "task": {}, "_meta": extension}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "t", "task": null, "arguments": {"task": {}}}}),
            json!({"jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": "x"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"method": "tasks/get"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        ] {
            assert_eq!(renamed(message.clone()), None, "{message}");
        }
    }
}
