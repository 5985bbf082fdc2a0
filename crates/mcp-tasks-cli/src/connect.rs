//! Connecting to a server: a child process over stdio, or Streamable HTTP,
//! with a listen channel on either, so that waits can listen.

use std::collections::HashMap;
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, bail};
use mcp_tasks::TasksClient;
use mcp_tasks::client::ListenChannel;
use mcp_tasks::client::listen::DemuxReader;
use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, FormElicitationCapability,
    Implementation, ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdout};

/// How long a child server may take to exit after its stdin closes
/// before it is killed.
const CHILD_EXIT_GRACE: Duration = Duration::from_secs(3);

/// Where the server is.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// A Streamable HTTP endpoint.
    Url(String),
    /// A command line, run with `sh -c`, speaking MCP on stdio.
    Stdio(String),
}

/// The CLI's rmcp client handler: it declares form and URL elicitation
/// (answered by the wait's resolver, not here) so that servers may ask.
#[derive(Debug, Clone, Default)]
pub(crate) struct CliHandler;

impl ClientHandler for CliHandler {
    fn get_info(&self) -> ClientConfig {
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        elicitation.url = Some(UrlElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-tasks", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Parses `--header 'Name: value'`.
pub(crate) fn parse_header(text: &str) -> anyhow::Result<(String, String)> {
    let Some((name, value)) = text.split_once(':') else {
        bail!("--header {text:?} is not 'Name: value'");
    };
    let name = name.trim();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        bail!("--header {text:?} has an invalid header name");
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

/// Connects and returns a client, or an error meaning the server is
/// unreachable or does not speak MCP.
pub(crate) async fn connect(
    target: &Target,
    headers: &[(String, String)],
) -> anyhow::Result<TasksClient<CliHandler>> {
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let connecting = async {
        match target {
            Target::Stdio(command) => {
                if !headers.is_empty() {
                    bail!("--header applies to --url only");
                }
                let mut child = tokio::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!("exec {command}"))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .with_context(|| format!("cannot start {command:?}"))?;
                let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                    bail!("cannot talk to {command:?}: no pipes");
                };
                let (channel, stdout) = ListenChannel::stdio(stdout);
                let stdout = ChildOutput {
                    stdout,
                    child: Some(child),
                };
                let running = serve_client_with_lifecycle(CliHandler, (stdout, stdin), lifecycle)
                    .await
                    .with_context(|| format!("{command:?} does not speak MCP on stdio"))?;
                Ok(TasksClient::new(running).with_listen(channel))
            }
            Target::Url(url) => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    if name.eq_ignore_ascii_case("authorization") {
                        let token = value.strip_prefix("Bearer ").unwrap_or(value);
                        config = config.auth_header(token);
                    } else {
                        custom.insert(
                            http::HeaderName::try_from(name.as_str())
                                .with_context(|| format!("bad header name {name:?}"))?,
                            http::HeaderValue::try_from(value.as_str())
                                .with_context(|| format!("bad value for header {name:?}"))?,
                        );
                    }
                }
                if !custom.is_empty() {
                    config = config.custom_headers(custom);
                }
                let channel = ListenChannel::http(reqwest::Client::new(), &config);
                let transport = StreamableHttpClientTransport::from_config(config);
                let running = serve_client_with_lifecycle(CliHandler, transport, lifecycle)
                    .await
                    .with_context(|| format!("cannot reach an MCP server at {url}"))?;
                Ok(TasksClient::new(running).with_listen(channel))
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), connecting)
        .await
        .context("the server did not answer within 30 s")?
}

/// The child server's stdout, which owns the child: the process lives as
/// long as the connection reads from it. When it is dropped (the
/// connection closed, and with it the child's stdin), the child has
/// [`CHILD_EXIT_GRACE`] to exit before it is killed.
struct ChildOutput {
    stdout: DemuxReader<ChildStdout>,
    child: Option<Child>,
}

impl AsyncRead for ChildOutput {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stdout).poll_read(cx, buf)
    }
}

impl Drop for ChildOutput {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        // Without a runtime the child is killed at once (kill_on_drop).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if tokio::time::timeout(CHILD_EXIT_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            });
        }
    }
}
