//! `plain-upstream`: the task-less 2025-11-25 server of
//! `mcp_tasks_conformance::plain` on stdio, for the gateway tests.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    match mcp_tasks_conformance::plain::serve_stdio().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
