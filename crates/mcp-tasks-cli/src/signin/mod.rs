//! Signing in to OAuth-protected MCP servers (MCP authorization), with
//! rmcp's client (its `auth` feature): a server that answers 401 with
//! `WWW-Authenticate: Bearer resource_metadata=...` is signed in to with
//! the authorization code flow and PKCE through the person's browser (a
//! loopback redirect; dynamic client registration, or `--oauth-client-id`),
//! or with client credentials for machines (`--oauth-client-credentials`).
//!
//! The tokens are kept per server in the token file ([`tokens`]), and
//! handed to every request of a connection by an [`OAuthSource`], the
//! library's `BearerSource`: refreshed before they expire (a refresh token,
//! or client credentials again), so a wait longer than a token's life
//! keeps working, and a later command (`wait --resume`) uses them without
//! a new sign-in. `mcp-tasks logout URL` forgets them.
//!
//! Tokens, refresh tokens, client secrets and authorization codes are never
//! printed nor logged; `Debug` of everything holding one leaves it out.

mod browser;
mod tokens;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use clap::Args;
use futures::future::BoxFuture;
use mcp_tasks::client::bearer::{BearerError, BearerSource};
use oauth2::TokenResponse as _;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, StoredCredentials, WWWAuthenticateParams,
};

pub(crate) use tokens::canonical;
use tokens::{FILE_NAME, TokenFile};

/// The environment variable that may hold the client secret of
/// `--oauth-client-credentials` (never a flag: a command line is seen by
/// every user of the machine).
const SECRET_VARIABLE: &str = "MCP_TASKS_OAUTH_CLIENT_SECRET";

/// A token is refreshed when less than this much of its life is left (or
/// half of its life, for a short one), as rmcp does.
const REFRESH_BEFORE: u64 = 30;

/// The sign-in flags of every command that reaches a server by URL (refused
/// for a server on stdio, and beside a `--header 'Authorization: ...'`:
/// see the refusals of `inapplicable.rs`).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct OAuthArgs {
    /// Sign in with client credentials (a machine, no browser): --oauth-client-id, and the
    /// secret from --oauth-client-secret-file or MCP_TASKS_OAUTH_CLIENT_SECRET.
    #[arg(long, requires = "oauth_client_id")]
    oauth_client_credentials: bool,
    /// The client id: a pre-registered public client for the browser sign-in (default: dynamic
    /// client registration), or the machine client of --oauth-client-credentials.
    #[arg(long, value_name = "ID")]
    oauth_client_id: Option<String>,
    /// A file holding the client secret of --oauth-client-credentials.
    #[arg(long, value_name = "FILE", requires = "oauth_client_credentials")]
    oauth_client_secret_file: Option<PathBuf>,
    /// The scopes to ask for, space or comma separated (default: those the server names).
    #[arg(long, value_name = "SCOPES")]
    oauth_scopes: Option<String>,
    /// How long the browser sign-in may take, in seconds [default: 300] (not with
    /// --oauth-client-credentials, which opens no browser).
    #[arg(long, value_name = "SECS")]
    oauth_timeout: Option<u64>,
    /// The token file (default: oauth-tokens.json beside the journal).
    #[arg(long, value_name = "PATH", env = TOKENS_VARIABLE)]
    oauth_tokens: Option<PathBuf>,
}

/// The environment variable that may name the token file.
const TOKENS_VARIABLE: &str = "MCP_TASKS_OAUTH_TOKENS";

/// How long a browser sign-in may take without `--oauth-timeout`.
const SIGN_IN_TIMEOUT: u64 = 300;

/// How to sign in: the parsed [`OAuthArgs`].
#[derive(Clone)]
pub(crate) struct OAuthOptions {
    tokens: TokenFile,
    /// Whether `--oauth-tokens` (or its variable) placed the token file.
    placed: bool,
    /// Whether a server that needs a sign-in gets one (else only kept
    /// tokens are used).
    pub(crate) sign_in: bool,
    grant: Grant,
    scopes: Option<Vec<String>>,
    timeout: Duration,
}

impl std::fmt::Debug for OAuthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthOptions")
            .field("tokens", &self.tokens)
            .field("grant", &self.grant)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// Which grant a sign-in uses.
#[derive(Clone)]
enum Grant {
    /// The authorization code flow in the person's browser, with a
    /// pre-registered client id or dynamic client registration.
    Browser { client_id: Option<String> },
    /// Client credentials.
    Machine { client_id: String, secret: String },
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Browser { client_id } => f
                .debug_struct("Browser")
                .field("client_id", client_id)
                .finish(),
            Self::Machine { client_id, .. } => f
                .debug_struct("Machine")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
        }
    }
}

impl OAuthArgs {
    /// The sign-in flags given on the command line (`--oauth-tokens` set by
    /// its variable alone is not one: the environment may hold it for every
    /// command), by their names.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        let from_variable = std::env::var_os(TOKENS_VARIABLE).map(PathBuf::from);
        [
            (self.oauth_client_credentials, "--oauth-client-credentials"),
            (self.oauth_client_id.is_some(), "--oauth-client-id"),
            (
                self.oauth_client_secret_file.is_some(),
                "--oauth-client-secret-file",
            ),
            (self.oauth_scopes.is_some(), "--oauth-scopes"),
            (self.oauth_timeout.is_some(), "--oauth-timeout"),
            (
                self.oauth_tokens.is_some() && self.oauth_tokens != from_variable,
                "--oauth-tokens",
            ),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }

    /// Whether the sign-in is a machine's (`--oauth-client-credentials`):
    /// no browser.
    pub(crate) fn machine(&self) -> bool {
        self.oauth_client_credentials
    }

    /// The options these flags give (reading the client secret).
    pub(crate) fn options(&self) -> anyhow::Result<OAuthOptions> {
        let grant = if self.oauth_client_credentials {
            let client_id = self
                .oauth_client_id
                .clone()
                .context("--oauth-client-credentials needs --oauth-client-id")?;
            let secret = match &self.oauth_client_secret_file {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?,
                None => std::env::var(SECRET_VARIABLE).with_context(|| {
                    format!(
                        "--oauth-client-credentials needs the secret: \
                         --oauth-client-secret-file FILE or {SECRET_VARIABLE}"
                    )
                })?,
            };
            let secret = secret.trim().to_owned();
            if secret.is_empty() {
                bail!("the client secret is empty");
            }
            Grant::Machine { client_id, secret }
        } else {
            Grant::Browser {
                client_id: self.oauth_client_id.clone(),
            }
        };
        let scopes = self.oauth_scopes.as_deref().map(|text| {
            text.split([' ', ','])
                .filter(|scope| !scope.is_empty())
                .map(str::to_owned)
                .collect()
        });
        Ok(OAuthOptions {
            tokens: TokenFile::new(tokens_path(self.oauth_tokens.as_ref())?),
            placed: self.oauth_tokens.is_some(),
            sign_in: true,
            grant,
            scopes,
            timeout: Duration::from_secs(self.oauth_timeout.unwrap_or(SIGN_IN_TIMEOUT).max(1)),
        })
    }
}

impl OAuthOptions {
    /// The kept tokens only, refreshed as needed, never a new sign-in (for
    /// `ls --refresh`, which asks many servers in passing).
    pub(crate) fn kept_only() -> anyhow::Result<Self> {
        let mut options = OAuthArgs::default().options()?;
        options.sign_in = false;
        Ok(options)
    }

    /// These options with the token file beside `journal` (the journal of
    /// the command: `--journal`), unless `--oauth-tokens` placed it.
    pub(crate) fn beside_journal(mut self, journal: &std::path::Path) -> Self {
        if !self.placed
            && let Ok(path) = tokens_path_from(None, Some(journal.to_owned()), None)
        {
            self.tokens = TokenFile::new(path);
        }
        self
    }
}

/// The token file: `--oauth-tokens`, else beside the journal
/// (`MCP_TASKS_JOURNAL`, else the user's data directory).
fn tokens_path(explicit: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    tokens_path_from(
        explicit,
        std::env::var_os("MCP_TASKS_JOURNAL").map(PathBuf::from),
        dirs::data_dir(),
    )
}

/// [`tokens_path`] from the flag, the journal's path and the user's data
/// directory.
fn tokens_path_from(
    explicit: Option<&PathBuf>,
    journal: Option<PathBuf>,
    data: Option<PathBuf>,
) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.clone());
    }
    let folder = match journal {
        Some(journal) if !journal.as_os_str().is_empty() => {
            journal.parent().map(PathBuf::from).unwrap_or_default()
        }
        _ => data
            .context("this system has no user data directory: give --oauth-tokens")?
            .join("mcp-tasks"),
    };
    Ok(folder.join(FILE_NAME))
}

/// The bearer tokens of one server: what the token file holds for it,
/// refreshed when about to expire, and the sign-in when it holds nothing
/// usable.
pub(crate) struct OAuthSource {
    url: String,
    key: String,
    options: OAuthOptions,
    /// rmcp's client for this server, once a refresh or sign-in needed it.
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
    /// The challenge of a 401 this source had no token for: a sign-in is
    /// needed.
    challenge: Mutex<Option<String>>,
    /// The scopes a 403 `insufficient_scope` named that the token lacks.
    missing: Mutex<Option<String>>,
}

impl std::fmt::Debug for OAuthSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSource")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The access token of `credentials` while it has more than a little life
/// left (or no known expiry).
fn fresh(credentials: &StoredCredentials) -> Option<String> {
    let response = credentials.token_response.as_ref()?;
    let token = response.access_token().secret().clone();
    let (Some(life), Some(received)) = (response.expires_in(), credentials.token_received_at)
    else {
        return Some(token);
    };
    let left = life
        .as_secs()
        .saturating_sub(now_secs().saturating_sub(received));
    (left >= REFRESH_BEFORE.min(life.as_secs() / 2).max(1)).then_some(token)
}

fn bearer_error(error: &anyhow::Error) -> BearerError {
    format!("{error:#}").into()
}

impl OAuthSource {
    pub(crate) fn new(url: &str, options: OAuthOptions) -> anyhow::Result<Self> {
        Ok(Self {
            url: url.to_owned(),
            key: canonical(url)?,
            options,
            manager: tokio::sync::Mutex::new(None),
            challenge: Mutex::new(None),
            missing: Mutex::new(None),
        })
    }

    /// The challenge of a 401 this source had no token for, if any: the
    /// server needs a sign-in.
    pub(crate) fn needs_sign_in(&self) -> Option<String> {
        self.challenge.lock().ok()?.clone()
    }

    /// The scopes a 403 `insufficient_scope` asked for that the token was
    /// not granted (all it named, when the grant is not known).
    pub(crate) fn missing_scopes(&self) -> Option<String> {
        self.missing.lock().ok()?.clone()
    }

    /// Whether this source may start a sign-in.
    pub(crate) fn may_sign_in(&self) -> bool {
        self.options.sign_in
    }

    fn entry(&self) -> tokens::Entry {
        self.options.tokens.entry(&self.key)
    }

    /// rmcp's client for this server, with the token file as its store.
    async fn new_manager(&self) -> Result<AuthorizationManager, AuthError> {
        let mut manager = AuthorizationManager::new_allowing_private_addresses(&self.url).await?;
        manager.set_credential_store(self.entry());
        Ok(manager)
    }

    /// A token from rmcp's client for what the token file holds: refreshed
    /// with the refresh token, or client credentials asked again; `None`
    /// when neither can (a sign-in is needed). `refused`: the token the
    /// server refused, if that is why.
    async fn renewed(&self, refused: Option<&str>) -> anyhow::Result<Option<String>> {
        let mut slot = self.manager.lock().await;
        // Another request of this connection may have renewed it meanwhile.
        if let Some(token) = self.entry_credentials()?.as_ref().and_then(fresh)
            && Some(token.as_str()) != refused
        {
            return Ok(Some(token));
        }
        if slot.is_none() {
            let mut manager = self.new_manager().await?;
            match &self.options.grant {
                Grant::Machine { .. } => {
                    let resolution = manager.resolve_metadata().await.with_context(|| {
                        format!("cannot discover how to sign in to {}", self.url)
                    })?;
                    manager.set_metadata(resolution.metadata);
                }
                Grant::Browser { .. } => {
                    if !manager.initialize_from_store().await.with_context(|| {
                        format!("cannot discover how to sign in to {}", self.url)
                    })? {
                        return Ok(None);
                    }
                }
            }
            *slot = Some(manager);
        }
        let Some(manager) = slot.as_mut() else {
            return Ok(None);
        };
        match &self.options.grant {
            Grant::Browser { .. } => match manager.refresh_token().await {
                Ok(response) => Ok(Some(response.access_token().secret().clone())),
                Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => {
                    Ok(None)
                }
                Err(error) => Err(anyhow::Error::new(error)
                    .context(format!("cannot refresh the access token for {}", self.url))),
            },
            Grant::Machine { .. } => self.client_credentials(manager, None).await.map(Some),
        }
    }

    /// Asks for a token with client credentials (the manager has the
    /// authorization server's metadata); rmcp keeps it in the token file.
    async fn client_credentials(
        &self,
        manager: &mut AuthorizationManager,
        challenge: Option<&str>,
    ) -> anyhow::Result<String> {
        let Grant::Machine { client_id, secret } = &self.options.grant else {
            bail!("not a machine sign-in");
        };
        let scopes = match &self.options.scopes {
            Some(scopes) => scopes.clone(),
            // What the challenge and the protected resource metadata name;
            // a machine has no use for offline_access.
            None => manager
                .select_scopes(None, &[])
                .into_iter()
                .filter(|scope| scope != "offline_access")
                .collect(),
        };
        let resource = self.resource(challenge).await?;
        let config = ClientCredentialsConfig::ClientSecret {
            client_id: client_id.clone(),
            client_secret: secret.clone(),
            scopes,
            resource: Some(resource),
        };
        manager
            .validate_client_credentials_metadata(&config)
            .context("the authorization server does not take client credentials this way")?;
        manager.configure_client_credentials(&config)?;
        let response = manager
            .exchange_client_credentials(&config)
            .await
            .with_context(|| {
                format!("the authorization server refused client {client_id}'s credentials")
            })?;
        Ok(response.access_token().secret().clone())
    }

    /// The `resource` of the server's protected resource metadata (RFC
    /// 9728): the audience its tokens must name (RFC 8707).
    async fn resource(&self, challenge: Option<&str>) -> anyhow::Result<String> {
        let base = reqwest::Url::parse(&self.url)?;
        let mut candidates = Vec::new();
        if let Some(url) = challenge
            .and_then(|header| WWWAuthenticateParams::parse(header, &base).resource_metadata_url)
        {
            candidates.push(url);
        }
        let path = base.path().trim_end_matches('/');
        for suffix in [path, ""] {
            let mut url = base.clone();
            url.set_path(&format!("/.well-known/oauth-protected-resource{suffix}"));
            url.set_query(None);
            candidates.push(url);
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()?;
        for url in candidates {
            if url.origin() != base.origin() {
                continue;
            }
            let Ok(response) = http.get(url.clone()).send().await else {
                continue;
            };
            if !response.status().is_success() {
                continue;
            }
            #[derive(serde::Deserialize)]
            struct Metadata {
                resource: Option<String>,
            }
            if let Ok(Metadata {
                resource: Some(resource),
            }) = response.json().await
            {
                return Ok(resource);
            }
        }
        bail!(
            "{} publishes no protected resource metadata naming its resource",
            self.url
        )
    }

    /// Signs in to the server that answered 401 with `challenge`: client
    /// credentials, or the authorization code flow in the browser. rmcp
    /// keeps the tokens in the token file.
    pub(crate) async fn sign_in(&self, challenge: &str) -> anyhow::Result<()> {
        let mut manager = self.new_manager().await?;
        let resolution = manager
            .resolve_metadata_from_challenge(Some(challenge))
            .await
            .with_context(|| {
                format!(
                    "{} asks for a token ({challenge}), and how to sign in to it cannot be \
                     discovered",
                    self.url
                )
            })?;
        if !resolution.source.is_discovered() {
            bail!(
                "{} asks for a token ({challenge}) but publishes no OAuth metadata to sign in \
                 with: give one with --header 'Authorization: Bearer TOKEN'",
                self.url
            );
        }
        manager.set_metadata(resolution.metadata);
        match &self.options.grant {
            Grant::Machine { .. } => {
                self.client_credentials(&mut manager, Some(challenge))
                    .await?;
            }
            Grant::Browser { client_id } => {
                let callback = browser::Callback::bind().await?;
                let mut request = AuthorizationRequest::new(callback.redirect_uri())
                    .with_client_name("mcp-tasks");
                if let Some(client_id) = client_id {
                    request = request.with_preregistered_client(client_id);
                }
                request = match &self.options.scopes {
                    Some(scopes) => request.with_scopes(scopes.clone()),
                    None => request.with_initial_scope_selection(),
                };
                let session = AuthorizationSession::new(manager, request)
                    .await
                    .map_err(|(_, error)| error)
                    .context("cannot start the sign-in")?;
                eprintln!(
                    "Sign in to {} in your browser; if none opens, open this URL:\n{}",
                    self.url,
                    session.get_authorization_url()
                );
                browser::open(session.get_authorization_url());
                let redirect = callback.wait(self.options.timeout).await?;
                if let Some(refusal) = browser::refusal(&redirect) {
                    bail!("the authorization server refused the sign-in: {refusal}");
                }
                let callback = AuthorizationCallback::from_redirect_url(&redirect)
                    .context("the sign-in's redirect is incomplete")?;
                session
                    .handle_callback_with_issuer(
                        &callback.code,
                        &callback.csrf_token,
                        callback.issuer.as_deref(),
                    )
                    .await
                    .context("the authorization server did not give a token")?;
                manager = session.auth_manager;
                eprintln!("Signed in to {}.", self.url);
            }
        }
        *self.manager.lock().await = Some(manager);
        if let Ok(mut challenge) = self.challenge.lock() {
            *challenge = None;
        }
        Ok(())
    }
}

impl BearerSource for OAuthSource {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, BearerError>> {
        Box::pin(async move {
            let stored = self
                .entry_credentials()
                .map_err(|error| bearer_error(&error))?;
            match stored {
                None => Ok(None),
                Some(credentials) => match fresh(&credentials) {
                    Some(token) => Ok(Some(token)),
                    None => self
                        .renewed(None)
                        .await
                        .map_err(|error| bearer_error(&error)),
                },
            }
        })
    }

    fn rejected<'a>(
        &'a self,
        sent: Option<&'a str>,
        challenge: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, BearerError>> {
        Box::pin(async move {
            // A token the server refused (revoked, or signed with a key it
            // no longer knows): one renewal; none: a sign-in is needed.
            let renewed = match sent {
                Some(sent) => self
                    .renewed(Some(sent))
                    .await
                    .map_err(|error| bearer_error(&error))?,
                None => None,
            };
            if renewed.is_none()
                && let Ok(mut slot) = self.challenge.lock()
            {
                *slot = Some(challenge.to_owned());
            }
            Ok(renewed)
        })
    }

    fn insufficient_scope(&self, challenge: &str) {
        let Ok(base) = reqwest::Url::parse(&self.url) else {
            return;
        };
        let wanted = WWWAuthenticateParams::parse(challenge, &base)
            .scope
            .unwrap_or_default();
        let granted = self
            .entry_credentials()
            .ok()
            .flatten()
            .map(|credentials| credentials.granted_scopes)
            .unwrap_or_default();
        let missing: Vec<&str> = wanted
            .split_whitespace()
            .filter(|scope| !granted.iter().any(|granted| granted == scope))
            .collect();
        let missing = match missing.is_empty() {
            true => wanted.clone(),
            false => missing.join(" "),
        };
        if let Ok(mut slot) = self.missing.lock() {
            *slot = Some(missing);
        }
    }
}

impl OAuthSource {
    fn entry_credentials(&self) -> anyhow::Result<Option<StoredCredentials>> {
        self.options.tokens.load(&self.key)
    }
}

/// `mcp-tasks logout URL`.
#[derive(Debug, Args)]
pub(crate) struct LogoutArgs {
    /// The server's URL, as given to --url.
    url: String,
    /// The token file (default: oauth-tokens.json beside the journal).
    #[arg(long, value_name = "PATH", env = TOKENS_VARIABLE)]
    oauth_tokens: Option<PathBuf>,
}

/// Forgets the tokens kept for a server, and says so.
pub(crate) fn logout(args: &LogoutArgs) -> ExitCode {
    let forgotten = canonical(&args.url).and_then(|key| {
        let file = TokenFile::new(tokens_path(args.oauth_tokens.as_ref())?);
        Ok((file.remove(&key)?, key, file))
    });
    match forgotten {
        Ok((true, key, file)) => {
            eprintln!(
                "Signed out of {key}: its tokens are gone from {}.",
                file.path().display()
            );
            ExitCode::SUCCESS
        }
        Ok((false, key, _)) => {
            eprintln!("No tokens were kept for {key}.");
            ExitCode::SUCCESS
        }
        Err(error) => crate::usage(format_args!("{error:#}")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use oauth2::basic::BasicTokenType;
    use oauth2::{AccessToken, RefreshToken};
    use rmcp::transport::auth::{OAuthTokenResponse, VendorExtraTokenFields};

    use super::*;

    fn credentials(life: Option<u64>, received: Option<u64>) -> StoredCredentials {
        let mut response = OAuthTokenResponse::new(
            AccessToken::new("access".into()),
            BasicTokenType::Bearer,
            VendorExtraTokenFields::default(),
        );
        response.set_refresh_token(Some(RefreshToken::new("refresh".into())));
        response.set_expires_in(life.map(Duration::from_secs).as_ref());
        StoredCredentials::new("client".into(), Some(response), vec![], received)
    }

    #[test]
    fn a_token_is_used_until_little_of_its_life_is_left() {
        let now = now_secs();
        assert_eq!(
            fresh(&credentials(Some(3600), Some(now))).as_deref(),
            Some("access")
        );
        assert_eq!(
            fresh(&credentials(Some(3600), Some(now - 3580))),
            None,
            "20 s left"
        );
        assert_eq!(
            fresh(&credentials(Some(10), Some(now))).as_deref(),
            Some("access")
        );
        assert_eq!(
            fresh(&credentials(Some(10), Some(now - 6))),
            None,
            "under half its life"
        );
        assert_eq!(
            fresh(&credentials(Some(60), Some(now - 120))),
            None,
            "expired"
        );
        assert_eq!(
            fresh(&credentials(None, Some(now - 100_000))).as_deref(),
            Some("access"),
            "no known expiry: the server decides"
        );
    }

    #[test]
    fn no_secret_in_debug_nor_on_the_command_line() {
        let temp = tempfile::tempdir().unwrap();
        let secret_file = temp.path().join("secret");
        std::fs::write(&secret_file, "s3cret-value\n").unwrap();
        let args = OAuthArgs {
            oauth_client_credentials: true,
            oauth_client_id: Some("machine".into()),
            oauth_client_secret_file: Some(secret_file),
            oauth_scopes: Some("tasks:read,tasks:write".into()),
            oauth_timeout: None,
            oauth_tokens: Some(temp.path().join("t.json")),
        };
        let options = args.options().unwrap();
        let Grant::Machine { secret, .. } = &options.grant else {
            panic!("a machine grant");
        };
        assert_eq!(secret, "s3cret-value", "read from the file, trimmed");
        assert_eq!(
            options.scopes.as_deref(),
            Some(&["tasks:read".to_owned(), "tasks:write".to_owned()][..])
        );
        let source = OAuthSource::new("http://127.0.0.1:1/mcp", options).unwrap();
        let debug = format!("{source:?} {:?}", source.options);
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("machine"), "{debug}");
    }

    #[test]
    fn the_token_file_is_beside_the_journal_unless_given() {
        let given = PathBuf::from("/x/tokens.json");
        let journal = Some(PathBuf::from("/j/journal.sqlite3"));
        let data = Some(PathBuf::from("/home/u/.local/share"));
        assert_eq!(
            tokens_path_from(Some(&given), journal.clone(), data.clone()).unwrap(),
            given
        );
        assert_eq!(
            tokens_path_from(None, journal, data.clone()).unwrap(),
            PathBuf::from("/j/oauth-tokens.json")
        );
        assert_eq!(
            tokens_path_from(None, None, data).unwrap(),
            PathBuf::from("/home/u/.local/share/mcp-tasks/oauth-tokens.json"),
            "beside the default journal"
        );
        assert!(tokens_path_from(None, None, None).is_err());
        // A command's --journal moves it, unless --oauth-tokens placed it.
        let journal = Path::new("/elsewhere/j.sqlite3");
        let unplaced = OAuthArgs {
            oauth_tokens: None,
            ..OAuthArgs::default()
        };
        let moved = unplaced.options().unwrap().beside_journal(journal);
        assert_eq!(
            moved.tokens.path(),
            Path::new("/elsewhere/oauth-tokens.json")
        );
        let placed = OAuthArgs {
            oauth_tokens: Some(given.clone()),
            ..OAuthArgs::default()
        };
        let kept = placed.options().unwrap().beside_journal(journal);
        assert_eq!(kept.tokens.path(), given);
    }
}
