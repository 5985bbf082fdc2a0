//! `hostile-server SCENARIO [--http ADDR]`: the hostile task server of
//! `mcp_tasks_conformance::hostile` on stdio (the default) or over HTTP
//! (prints `listening on http://ADDR/mcp`). For the client's reliability tests.

use std::io::Write;
use std::process::ExitCode;

use mcp_tasks_conformance::hostile::{Hostile, Scenario, serve_http, serve_stdio};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(scenario) = args.first().and_then(|name| Scenario::parse(name)) else {
        eprintln!(
            "usage: hostile-server SCENARIO [--http ADDR] (see mcp_tasks_conformance::hostile)"
        );
        return ExitCode::from(64);
    };
    let hostile = Hostile::new(scenario);
    let served = match args.get(1).map(String::as_str) {
        Some("--http") => {
            let address = args.get(2).map_or("127.0.0.1:0", String::as_str);
            match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => {
                    if let Ok(local) = listener.local_addr() {
                        let mut stdout = std::io::stdout().lock();
                        let _ = writeln!(stdout, "listening on http://{local}/mcp");
                        let _ = stdout.flush();
                    }
                    serve_http(hostile, listener).await
                }
                Err(error) => Err(error),
            }
        }
        _ => serve_stdio(hostile).await,
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
