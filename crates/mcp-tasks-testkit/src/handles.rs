//! The task tools' answers (`docs/task-tools.md`) as a raw client reads
//! them: a handle's task id, a result's first text.

use serde_json::Value;

/// The first text of a `CallToolResult` as JSON ("" when it has none).
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// The task id of a handle (its `structuredContent.taskId`); panics,
/// showing it, when `result` is not one.
pub fn task_id(result: &Value) -> String {
    result["structuredContent"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a handle: {result}"))
        .to_owned()
}
