//! `serve --oauth-*`: the endpoint as an OAuth 2.1 resource server (MCP
//! authorization), with the library's
//! [`OAuthResourceServer`](mcp_tasks::server::oauth::OAuthResourceServer).
//! The issuers are reached once the address is bound (the default
//! audience names the bound port) and before the first request is served.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use mcp_tasks::server::oauth::{OAuthConfig, OAuthResourceServer};

#[derive(Debug, Args)]
pub(crate) struct OAuthArgs {
    /// With --http: accept OAuth access tokens issued by this authorization server (its issuer
    /// identifier, https://, or http:// on a loopback host; repeatable): the endpoint publishes
    /// its protected resource metadata and refuses requests without a good token (see
    /// docs/deployment.md).
    #[arg(long = "oauth-issuer", value_name = "URL")]
    pub(crate) issuers: Vec<String>,
    /// With --oauth-issuer: the audience access tokens must name (`aud`): the server's
    /// canonical URL as clients reach it (default http://ADDR/mcp with the address --http
    /// bound).
    #[arg(long, value_name = "URI")]
    oauth_audience: Option<String>,
    /// With --oauth-issuer: scopes every request needs (space- or comma-separated); a token
    /// without one gets 403.
    #[arg(long, value_name = "SCOPES")]
    oauth_scopes: Option<String>,
    /// With --oauth-issuer: introspect opaque (non-JWT) access tokens at the issuer's
    /// introspection endpoint (RFC 7662) as this client; its secret is read from
    /// --oauth-client-secret-file.
    #[arg(long, value_name = "ID", requires = "oauth_client_secret_file")]
    oauth_client_id: Option<String>,
    /// The file holding the introspection client's secret (its first line).
    #[arg(long, value_name = "FILE", requires = "oauth_client_id")]
    oauth_client_secret_file: Option<PathBuf>,
}

impl OAuthArgs {
    /// Whether the endpoint is a resource server.
    pub(crate) fn enabled(&self) -> bool {
        !self.issuers.is_empty()
    }

    /// The first of the flags that say how the issuer's tokens are checked
    /// (`--oauth-audience`, `--oauth-scopes`, `--oauth-client-id`, whose
    /// secret file clap ties to it), if one is given: they need
    /// `--oauth-issuer` (see `refuse_inapplicable` in `command.rs`).
    pub(crate) fn given(&self) -> Option<&'static str> {
        [
            (self.oauth_audience.is_some(), "--oauth-audience"),
            (self.oauth_scopes.is_some(), "--oauth-scopes"),
            (self.oauth_client_id.is_some(), "--oauth-client-id"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Checks what needs no network: the secret file must be readable.
    /// (Which flags apply without --http or --oauth-issuer is
    /// `refuse_inapplicable`'s, in `command.rs`.)
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if let Some(path) = &self.oauth_client_secret_file {
            self.secret(path)?;
        }
        Ok(())
    }

    fn secret(&self, path: &PathBuf) -> anyhow::Result<String> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--oauth-client-secret-file {}", path.display()))?;
        let secret = text.lines().next().unwrap_or("").trim().to_owned();
        if secret.is_empty() {
            anyhow::bail!(
                "--oauth-client-secret-file {}: the first line is empty",
                path.display()
            );
        }
        Ok(secret)
    }

    /// The resource server for an endpoint bound at `local` (the `--http`
    /// address as given is `given`), or `None` without `--oauth-issuer`.
    pub(crate) async fn resource_server(
        &self,
        given: &str,
        local: SocketAddr,
    ) -> anyhow::Result<Option<Arc<OAuthResourceServer>>> {
        if !self.enabled() {
            return Ok(None);
        }
        let audience = match &self.oauth_audience {
            Some(audience) => audience.clone(),
            None if local.ip().is_unspecified() => anyhow::bail!(
                "--http {given} listens on every address: give --oauth-audience, the URL \
                 clients reach this server at (e.g. https://tasks.example.com/mcp)"
            ),
            None => format!("http://{local}/mcp"),
        };
        let mut config = self
            .issuers
            .iter()
            .fold(OAuthConfig::new(audience), |config, issuer| {
                config.with_issuer(issuer.clone())
            });
        if let Some(scopes) = &self.oauth_scopes {
            config = config.with_scopes(
                scopes
                    .split([' ', ','])
                    .filter(|scope| !scope.is_empty())
                    .map(str::to_owned),
            );
        }
        if let (Some(id), Some(path)) = (&self.oauth_client_id, &self.oauth_client_secret_file) {
            config = config.with_introspection(id.clone(), self.secret(path)?);
        }
        let server = OAuthResourceServer::discover(config)
            .await
            .context("cannot set up OAuth (--oauth-issuer)")?;
        tracing::info!(
            metadata = server.metadata_url(),
            "serving as an OAuth resource server"
        );
        Ok(Some(Arc::new(server)))
    }
}
