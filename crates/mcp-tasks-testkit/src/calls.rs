//! What tests read of a call and how they wait for one: the text of a
//! result, a wait that returns at `input_required`.

use std::time::Duration;

use mcp_tasks::{AwaitOptions, InputMode};
use rmcp::model::CallToolResult;

/// The text of a result's first content block (empty if it has none).
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

/// Waits of at most 20 s that return at `input_required`.
pub fn waiting() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_input(InputMode::Return)
}
