//! Connecting to a server: a child process over stdio, or Streamable HTTP.
//! Either way the connection is built with the library's `legacy::Handler`
//! and a tap on the transport, so that a 2025-11-25 server's tasks work too,
//! and with a listen channel, so that waits can listen. On stdio a line check
//! also reads what rmcp drops, so that a server answering with garbage ends a
//! wait with a protocol error instead of a timeout.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use mcp_tasks::TasksClient;
use mcp_tasks::client::listen::DemuxReader;
use mcp_tasks::client::{CheckedReader, LineCheck, ListenChannel, legacy};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, FormElicitationCapability,
    Implementation, ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{
    ClientLifecycleMode, RxJsonRpcMessage, TxJsonRpcMessage, serve_client_with_lifecycle,
};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::{ClientHandler, RoleClient};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The client the commands use.
pub(crate) type Client = TasksClient<legacy::Handler>;

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

/// What a Streamable HTTP connection adds to its URL.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpOptions {
    /// Headers for every request (`--header`).
    pub(crate) headers: Vec<(String, String)>,
    /// Addresses to connect to for host names of the URL (`--resolve`).
    pub(crate) resolve: Vec<(String, IpAddr)>,
}

/// Parses `--resolve NAME=ADDR`.
pub(crate) fn parse_resolve(text: &str) -> anyhow::Result<(String, IpAddr)> {
    let Some((name, address)) = text.split_once('=') else {
        bail!("--resolve {text:?} is not NAME=ADDR");
    };
    let name = name.trim();
    if name.is_empty() || http::uri::Authority::try_from(name).is_err() || name.contains(':') {
        bail!("--resolve {text:?}: {name:?} is not a host name");
    }
    let address = address.trim();
    let address = address
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .with_context(|| format!("--resolve {text:?}: {address:?} is not an IP address"))?;
    Ok((name.to_owned(), address))
}

/// How long a stdio server has to exit once its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A server on stdio, its stdout read through the listen channel's demux,
/// the line check and the tap. Closing it closes the
/// server's stdin, gives it [`EXIT_GRACE`] to exit and then kills it (as
/// rmcp's own child-process transport does, which has no tap); dropping it
/// unclosed kills the server.
struct ChildTransport {
    io: AsyncRwTransport<
        RoleClient,
        legacy::TapRead<CheckedReader<DemuxReader<ChildStdout>>>,
        ChildStdin,
    >,
    child: Child,
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.io.close().await?;
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// Connects and returns a client, or an error meaning the server is
/// unreachable or does not speak MCP.
pub(crate) async fn connect(target: &Target, options: &HttpOptions) -> anyhow::Result<Client> {
    let headers = &options.headers;
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let handler = legacy::Handler::new(CliHandler);
    let tap = handler.tap();
    let connecting = async {
        match target {
            Target::Stdio(command) => {
                if !headers.is_empty() {
                    bail!("--header applies to --url only");
                }
                if !options.resolve.is_empty() {
                    bail!("--resolve applies to --url only");
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
                    bail!("cannot reach the stdin and stdout of {command:?}");
                };
                let (channel, stdout) = ListenChannel::stdio(stdout);
                // After the demux: the check reads exactly the lines rmcp reads.
                let (check, stdout) = LineCheck::stdio(stdout);
                let transport = ChildTransport {
                    io: AsyncRwTransport::new_client(tap.read(stdout), stdin),
                    child,
                };
                let running = serve_client_with_lifecycle(handler, transport, lifecycle)
                    .await
                    .with_context(|| format!("{command:?} does not speak MCP on stdio"))?;
                Ok((running, channel, Some(check)))
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
                // rmcp's own client, less its same-origin redirects: redirects are
                // not followed at all.
                let mut http = reqwest::Client::builder()
                    .pool_max_idle_per_host(0)
                    .redirect(reqwest::redirect::Policy::none());
                for (name, address) in &options.resolve {
                    // Port 0: the URL's port is used.
                    http = http.resolve(name, SocketAddr::new(*address, 0));
                }
                let http = http.build().context("cannot build an HTTP client")?;
                let channel = ListenChannel::http(http.clone(), &config);
                let transport = StreamableHttpClientTransport::with_client(tap.http(http), config);
                let running = serve_client_with_lifecycle(handler, transport, lifecycle)
                    .await
                    .with_context(|| format!("cannot reach an MCP server at {url}"))?;
                // rmcp reports an unusable HTTP answer itself: no line check.
                Ok((running, channel, None))
            }
        }
    };
    let (running, channel, check) = tokio::time::timeout(Duration::from_secs(30), connecting)
        .await
        .context("the server did not answer within 30 s")??;
    if let Some(info) = running.peer_info() {
        tracing::debug!(version = %info.protocol_version, "connected");
    }
    let client = TasksClient::new(running).with_listen(channel);
    Ok(match check {
        Some(check) => client.with_line_check(check),
        None => client,
    })
}
