//! The `mcp-tasks serve --http` child that the benches of this crate
//! measure (started by the test kit's harness), with what they read of it
//! from `/proc`. Each bench includes
//! this file with `#[path = "support/serve.rs"] mod serve;` and uses the
//! part it needs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mcp_tasks_testkit::serve::Served;

/// This build's `mcp-tasks`.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks");

/// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`; 100 on Linux).
pub(crate) const TICKS: f64 = 100.0;

/// The binary measured: this build's, or `MCP_TASKS_BIN` (one built
/// before a change, for a before/after run).
pub(crate) fn binary() -> String {
    std::env::var("MCP_TASKS_BIN").unwrap_or_else(|_| BIN.to_owned())
}

/// A `serve --http 127.0.0.1:0` child (the test kit's harness), its log
/// off; killed (`kill -9`) when dropped (a stdio upstream of a gateway ends
/// with its stdin).
pub(crate) struct Server {
    served: Served,
    /// The endpoint its first line names (`listening on URL`).
    pub(crate) url: String,
    /// When it was spawned.
    pub(crate) spawned: Instant,
    /// From spawn to the `listening on` line.
    pub(crate) listening: Duration,
}

impl Server {
    /// `serve --http 127.0.0.1:0` of [`binary()`] with `args` (the store
    /// among them).
    pub(crate) fn start(args: &[&str]) -> anyhow::Result<Self> {
        Self::start_binary(&binary(), args)
    }

    /// [`Server::start`] of the `mcp-tasks` binary at `binary`.
    pub(crate) fn start_binary(binary: &str, args: &[&str]) -> anyhow::Result<Self> {
        let spawned = Instant::now();
        let mut command = Command::new(binary);
        command
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "off")
            .stderr(Stdio::null());
        let served = Served::try_command(command, None)
            .map_err(|error| anyhow::anyhow!("{binary} serve {args:?}: {error}"))?;
        Ok(Self {
            url: served.url.clone(),
            listening: served.listening,
            spawned,
            served,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.served.pid()
    }

    /// `HOST:PORT` of [`Server::url`].
    pub(crate) fn addr(&self) -> anyhow::Result<&str> {
        self.url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .context("address of the url")
    }

    /// The server's resident set, in KiB (NaN once it is gone).
    pub(crate) fn rss_kib(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    }

    /// The server's resident set, in MiB.
    pub(crate) fn rss_mib(&self) -> f64 {
        self.rss_kib() / 1024.0
    }

    /// The server's CPU time so far (user and system).
    pub(crate) fn cpu(&self) -> Duration {
        Duration::from_secs_f64(cpu_ticks(self.pid()).unwrap_or(0) as f64 / TICKS)
    }
}

/// CPU time (user and system, in clock ticks) of process `pid` alone.
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis: utime is the
    // 12th of them, stime the 13th (the 14th and 15th of the line).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// A wrk script in `dir` (as `file`) that POSTs `body` as a 2026-07-28 MCP
/// request of `method` naming `name` (`Mcp-Name`): its path.
pub(crate) fn wrk_script(
    dir: &std::path::Path,
    file: &str,
    method: &str,
    name: &str,
    body: &str,
) -> anyhow::Result<String> {
    let path = dir.join(file);
    std::fs::write(
        &path,
        format!(
            "wrk.method = \"POST\"\nwrk.body = [==[{body}]==]\n\
             wrk.headers[\"Content-Type\"] = \"application/json\"\n\
             wrk.headers[\"Accept\"] = \"application/json, text/event-stream\"\n\
             wrk.headers[\"MCP-Protocol-Version\"] = \"2026-07-28\"\n\
             wrk.headers[\"Mcp-Method\"] = \"{method}\"\n\
             wrk.headers[\"Mcp-Name\"] = \"{name}\"\n"
        ),
    )?;
    Ok(path.display().to_string())
}

/// The `_meta` of a 2026-07-28 request that declares the Tasks extension,
/// as the JSON text of a `params` member.
pub(crate) const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A POST to `url` with the headers of a 2026-07-28 MCP request of
/// `method` naming `name` (`Mcp-Name`), as [`wrk_script`]'s requests carry
/// them; the caller adds the body (and any other header) and sends it.
pub(crate) fn mcp_post(
    http: &reqwest::Client,
    url: &str,
    method: &str,
    name: &str,
) -> reqwest::RequestBuilder {
    http.post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Mcp-Name", name)
}
