//! What the tests of this binary share: the workspace's test kit
//! (`mcp-tasks-testkit`), under the name the test files use.

pub(crate) use mcp_tasks_testkit::*;
