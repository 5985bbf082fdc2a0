//! Small helpers the test files share: the workspace's test kit, and what
//! only these tests read.

use mcp_tasks::CallResponse;
pub(crate) use mcp_tasks_testkit::args;
pub(crate) use mcp_tasks_testkit::calls::{text, waiting};
pub(crate) use mcp_tasks_testkit::runtime_server::serve_recipe as serve_gateway;
pub(crate) use mcp_tasks_testkit::wait::first_lines;

/// The text of a call's plain result; anything else fails the test.
pub(crate) fn completed_text(response: CallResponse) -> String {
    match response {
        CallResponse::Complete(result) => text(&result),
        other => panic!("expected a plain result, got {other:?}"),
    }
}

/// A fresh path for a `plain-upstream` log (`kind`: `cancel`, `life`),
/// unique to this test process and `line`; any file left there is removed.
pub(crate) fn fixture_log(kind: &str, line: u32) -> std::path::PathBuf {
    mcp_tasks_testkit::wait::fresh_log(&format!("plain-upstream-{kind}"), line)
}
