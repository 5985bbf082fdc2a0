//! `plain-upstream`: the task-less 2025-11-25 server of
//! `mcp_tasks_conformance::plain` on stdio, for the gateway tests.
//! `--cancel-log PATH` appends each `notifications/cancelled` to `PATH`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut cancel_log = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--cancel-log", Some(path)) => cancel_log = Some(path.into()),
            _ => {
                eprintln!("usage: plain-upstream [--cancel-log PATH]");
                return ExitCode::from(64);
            }
        }
    }
    match mcp_tasks_conformance::plain::serve_stdio(cancel_log).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
