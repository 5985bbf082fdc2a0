//! `conformance-server`: the fixture server of `mcp_tasks_conformance`
//! for the official conformance suite and `interop/`, over stdio or
//! stateless Streamable HTTP.
//!
//! ```text
//! conformance-server [--stdio | --http ADDR] [--store memory|sqlite:PATH] [--poll-interval MS]
//! ```
//!
//! `--http ADDR` binds ADDR (port 0: any free port), then prints one line,
//! `listening on http://ADDR/mcp` with the bound address, on stdout.
//! Without `--http` it serves on stdin and stdout (`--stdio`, the default)
//! until stdin closes. Tasks are kept in memory unless `--store
//! sqlite:PATH` names a SQLite file. `--poll-interval` is the
//! `pollIntervalMs` suggested to clients (default 500).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use mcp_tasks::server::TaskRuntime;
use mcp_tasks::store::{MemoryStore, SharedStore};
use mcp_tasks_conformance::{FixtureServer, serve_http};
use mcp_tasks_sqlite::SqliteStore;
use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;

const USAGE: &str = "usage: conformance-server [--stdio | --http ADDR] \
                     [--store memory|sqlite:PATH] [--poll-interval MS]";

/// The exit code of a usage error (`EX_USAGE`).
const EXIT_USAGE: u8 = 64;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Flags {
    /// Where to serve HTTP; `None`: stdio.
    http: Option<String>,
    store: Store,
    poll_interval: Duration,
}

/// Where the server keeps its tasks.
#[derive(Debug, PartialEq, Eq)]
enum Store {
    Memory,
    Sqlite(PathBuf),
}

impl Flags {
    fn parse(mut args: impl Iterator<Item = String>) -> anyhow::Result<Self> {
        let mut flags = Self {
            http: None,
            store: Store::Memory,
            poll_interval: Duration::from_millis(500),
        };
        let mut stdio = false;
        while let Some(flag) = args.next() {
            let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--stdio" => stdio = true,
                "--http" => flags.http = Some(value()?),
                "--store" => {
                    let text = value()?;
                    flags.store = match text.split_once(':') {
                        _ if text == "memory" => Store::Memory,
                        Some(("sqlite", path)) if !path.is_empty() => {
                            Store::Sqlite(PathBuf::from(path))
                        }
                        _ => bail!("unknown store {text:?}: use memory or sqlite:PATH"),
                    };
                }
                "--poll-interval" => {
                    let text = value()?;
                    let ms: u64 = text
                        .parse()
                        .with_context(|| format!("--poll-interval {text:?}: not milliseconds"))?;
                    flags.poll_interval = Duration::from_millis(ms.max(1));
                }
                other => bail!("unknown argument {other:?}"),
            }
        }
        if stdio && flags.http.is_some() {
            bail!("give one of --stdio and --http");
        }
        Ok(flags)
    }

    /// Opens the store; a SQLite file is opened at once (its unfinished
    /// tasks from an earlier run are failed).
    fn open_store(&self) -> anyhow::Result<SharedStore> {
        Ok(match &self.store {
            Store::Memory => Arc::new(MemoryStore::new()),
            Store::Sqlite(path) => Arc::new(
                SqliteStore::open(path)
                    .with_context(|| format!("cannot open the task store {}", path.display()))?,
            ),
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags = match Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(error) => {
            eprintln!("error: {error:#}\n{USAGE}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(flags).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(flags: Flags) -> anyhow::Result<()> {
    let runtime = TaskRuntime::builder(flags.open_store()?)
        .with_poll_interval(flags.poll_interval)
        .build();
    let server =
        FixtureServer::new(runtime.clone()).context("no randomness for the requestState key")?;
    let Some(address) = &flags.http else {
        return serve_stdio(server, &runtime).await;
    };
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address}"))?;
    let local = listener.local_addr().context("no local address")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{local}/mcp")?;
    stdout.flush()?;
    drop(stdout);
    serve_http(server, listener)
        .await
        .context("the HTTP server stopped")
}

/// Serves on stdin and stdout until stdin closes (also before any message),
/// task listens included.
async fn serve_stdio(server: FixtureServer, runtime: &TaskRuntime) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let transport = mcp_tasks::server::StdioTransport::new(runtime, stdin, stdout);
    let running = match server.serve(transport).await {
        Ok(running) => running,
        // The client went away before its first message: nothing to serve.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(error).context("cannot start the MCP server on stdio"),
    };
    running
        .waiting()
        .await
        .context("the MCP server on stdio stopped")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Flags> {
        Flags::parse(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn flags_parse() {
        let defaults = parse(&[]).unwrap();
        assert_eq!(
            defaults,
            Flags {
                http: None,
                store: Store::Memory,
                poll_interval: Duration::from_millis(500)
            }
        );
        assert_eq!(parse(&["--stdio"]).unwrap(), defaults);
        let flags = parse(&[
            "--http",
            "127.0.0.1:0",
            "--store",
            "sqlite:/tmp/t.db",
            "--poll-interval",
            "100",
        ])
        .unwrap();
        assert_eq!(flags.http.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(flags.store, Store::Sqlite(PathBuf::from("/tmp/t.db")));
        assert_eq!(flags.poll_interval, Duration::from_millis(100));
        for bad in [
            &["--http"][..],
            &["--stdio", "--http", "127.0.0.1:0"],
            &["--store", "sqlite:"],
            &["--store", "redis://x"],
            &["--poll-interval", "soon"],
            &["--verbose"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
