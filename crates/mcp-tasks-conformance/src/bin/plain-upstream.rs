//! `plain-upstream`: the task-less 2025-11-25 server of
//! `mcp_tasks_conformance::plain` on stdio, for the gateway tests.
//! `--cancel-log PATH` appends each `notifications/cancelled` to `PATH`,
//! `--life-log PATH` the process's start and exit.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut logs = mcp_tasks_conformance::plain::Logs::default();
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--cancel-log", Some(path)) => logs.cancel = Some(path.into()),
            ("--life-log", Some(path)) => logs.life = Some(path.into()),
            _ => {
                eprintln!("usage: plain-upstream [--cancel-log PATH] [--life-log PATH]");
                return ExitCode::from(64);
            }
        }
    }
    match mcp_tasks_conformance::plain::serve_stdio(logs).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
