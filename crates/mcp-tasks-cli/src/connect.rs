//! Connecting to a server: a child process over stdio, or Streamable HTTP,
//! with the library's `TasksClient::connect` (which wires listening, the
//! 2025-11-25 era and the journal); the CLI adds its handler, its header and
//! `--resolve` flags.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use mcp_tasks::client::journal::Journal;
use mcp_tasks::client::legacy;
use mcp_tasks::{ConnectOptions, Endpoint, TasksClient};
use rmcp::ClientHandler;

use crate::signin::OAuthSource;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, FormElicitationCapability,
    Implementation, UrlElicitationCapability,
};

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
    /// How to sign in to a server that asks for an OAuth token (`None`:
    /// never; see [`crate::signin`]).
    pub(crate) oauth: Option<crate::signin::OAuthOptions>,
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

/// Connects and returns a client (recording its tasks in `journal`, if
/// given), or an error meaning the server is unreachable or does not speak
/// MCP. The library wires the listen channel, the legacy handler and tap,
/// and the journal; the CLI adds its handler and, for a URL, its HTTP client
/// and the OAuth tokens of the token file. A URL that answers 401 with an
/// OAuth challenge no kept token satisfies is signed in to, then connected
/// to again.
pub(crate) async fn connect(
    target: &Target,
    options: &HttpOptions,
    journal: Option<Arc<dyn Journal>>,
) -> anyhow::Result<Client> {
    let (endpoint, connect, source) = prepare(target, options, journal)?;
    let first = TasksClient::connect(endpoint.clone(), CliHandler, connect.clone()).await;
    let connected = match (first, &source) {
        (Err(error), Some(source)) => match source.needs_sign_in().filter(|_| source.may_sign_in())
        {
            Some(challenge) => {
                source.sign_in(&challenge).await?;
                TasksClient::connect(endpoint, CliHandler, connect).await
            }
            None => Err(error),
        },
        (connected, _) => connected,
    };
    connected.map_err(|error| {
        let error = anyhow::Error::new(error);
        match source.as_ref().and_then(|source| source.missing_scopes()) {
            Some(scopes) => error.context(Hint(format!(
                "the server needs the scope {scopes:?}, which the token was not granted \
                 (sign in again with --oauth-scopes naming it, after mcp-tasks logout URL)"
            ))),
            None => error,
        }
    })
}

/// The endpoint, connect options and token source of `target`.
#[allow(clippy::type_complexity)]
fn prepare(
    target: &Target,
    options: &HttpOptions,
    journal: Option<Arc<dyn Journal>>,
) -> anyhow::Result<(Endpoint, ConnectOptions, Option<Arc<OAuthSource>>)> {
    let mut connect = ConnectOptions::default();
    let mut source = None;
    if let Some(journal) = journal {
        connect = connect.with_journal(journal);
    }
    let endpoint = match target {
        Target::Stdio(command) => {
            if !options.headers.is_empty() {
                bail!("--header applies to --url only");
            }
            if !options.resolve.is_empty() {
                bail!("--resolve applies to --url only");
            }
            Endpoint::shell(command.clone())
        }
        Target::Url(url) => {
            // rmcp's own client, less its same-origin redirects: redirects are
            // not followed at all.
            let mut http = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .redirect(reqwest::redirect::Policy::none());
            for (name, address) in &options.resolve {
                // Port 0: the URL's port is used.
                http = http.resolve(name, SocketAddr::new(*address, 0));
            }
            connect =
                connect.with_http_client(http.build().context("cannot build an HTTP client")?);
            // A token given with --header is the caller's: no sign-in then.
            let own_token = options
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("authorization"));
            if let (Some(oauth), false) = (&options.oauth, own_token) {
                let oauth = Arc::new(OAuthSource::new(url, oauth.clone())?);
                connect = connect.with_bearer_source(oauth.clone());
                source = Some(oauth);
            }
            options
                .headers
                .iter()
                .try_fold(Endpoint::url(url.clone()), |endpoint, (name, value)| {
                    endpoint.with_header(name.clone(), value.clone())
                })?
        }
    };
    Ok((endpoint, connect, source))
}

/// What to do, known better than the error says it (the context of a
/// connection error): said instead of the error.
#[derive(Debug)]
pub(crate) struct Hint(pub(crate) String);

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
