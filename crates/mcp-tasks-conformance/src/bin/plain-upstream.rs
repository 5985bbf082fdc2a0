//! `plain-upstream`: the task-less 2025-11-25 server of
//! `mcp_tasks_conformance::plain` on stdio, for the gateway tests.
//! `--cancel-log PATH` appends each `notifications/cancelled` to `PATH`,
//! `--life-log PATH` the process's start and exit, `--call-log PATH` each
//! `tools/call`; `--dual` speaks 2026-07-28 too (see the module's docs).

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let options = match mcp_tasks_conformance::plain::Options::from_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(64);
        }
    };
    match mcp_tasks_conformance::plain::serve_stdio(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
