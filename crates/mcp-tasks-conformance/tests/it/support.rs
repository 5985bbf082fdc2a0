//! Small helpers the test files share.

use std::time::Duration;

use mcp_tasks::{AwaitOptions, InputMode};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

/// A JSON object as tool arguments (anything else: none).
pub(crate) fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// The text of a result's first content block.
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// Waits of at most 20 s that return at `input_required`.
pub(crate) fn waiting() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_input(InputMode::Return)
}
