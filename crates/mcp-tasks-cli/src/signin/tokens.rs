//! The token file: each server's OAuth credentials (rmcp's
//! `StoredCredentials`: client id, access and refresh tokens, granted
//! scopes, issuer), keyed by the server's canonical URL, in one JSON file
//! only its owner may read (`0600`, in a `0700` folder, beside the journal).
//!
//! Every change rewrites the file whole: a new private file beside it,
//! renamed over it, so a reader never sees half of one. Two processes that
//! change it at the same instant may lose one's change (the loser signs in
//! again); nothing is corrupted.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use mcp_tasks::private_files;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The file's name beside the journal.
pub(crate) const FILE_NAME: &str = "oauth-tokens.json";

/// What the file holds.
#[derive(Default, Serialize, Deserialize)]
struct Contents {
    /// Canonical server URL -> its credentials.
    #[serde(default)]
    servers: BTreeMap<String, StoredCredentials>,
}

/// The token file at a path.
#[derive(Debug, Clone)]
pub(crate) struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> anyhow::Result<Contents> {
        match std::fs::read(&self.path) {
            Ok(bytes) if bytes.is_empty() => Ok(Contents::default()),
            Ok(bytes) => {
                private_files::warn_if_exposed(&self.path)?;
                // The parse error's text never quotes the file (it holds tokens).
                serde_json::from_slice(&bytes).map_err(|error| {
                    anyhow::anyhow!(
                        "{} is not a token file (line {}, column {})",
                        self.path.display(),
                        error.line(),
                        error.column()
                    )
                })
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Contents::default()),
            Err(error) => {
                Err(error).with_context(|| format!("cannot read {}", self.path.display()))
            }
        }
    }

    fn write(&self, contents: &Contents) -> anyhow::Result<()> {
        let folder = self
            .path
            .parent()
            .filter(|folder| !folder.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        private_files::create_private_dir(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        let name = self
            .path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| FILE_NAME.to_owned());
        let temporary = folder.join(format!(".{name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        private_files::create_private_file(&temporary)
            .with_context(|| format!("cannot create {}", temporary.display()))?;
        let bytes = serde_json::to_vec_pretty(contents).context("cannot encode the tokens")?;
        let written = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(&bytes)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written.with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// The credentials kept for `server` (a canonical URL).
    pub(crate) fn load(&self, server: &str) -> anyhow::Result<Option<StoredCredentials>> {
        Ok(self.read()?.servers.remove(server))
    }

    /// Keeps `credentials` for `server`.
    pub(crate) fn save(&self, server: &str, credentials: StoredCredentials) -> anyhow::Result<()> {
        let mut contents = self.read()?;
        contents.servers.insert(server.to_owned(), credentials);
        self.write(&contents)
    }

    /// Forgets `server`'s credentials; returns whether there were any.
    pub(crate) fn remove(&self, server: &str) -> anyhow::Result<bool> {
        let mut contents = self.read()?;
        if contents.servers.remove(server).is_none() {
            return Ok(false);
        }
        self.write(&contents)?;
        Ok(true)
    }

    /// rmcp's credential store for one server's entry.
    pub(crate) fn entry(&self, server: &str) -> Entry {
        Entry {
            file: self.clone(),
            server: server.to_owned(),
        }
    }
}

/// One server's entry of the token file, as rmcp's `CredentialStore`:
/// rmcp saves what it gets from the authorization server here, and reads it
/// back to refresh.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    file: TokenFile,
    server: String,
}

fn store_error(error: &anyhow::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{error:#}"))
}

#[async_trait::async_trait]
impl CredentialStore for Entry {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.file
            .load(&self.server)
            .map_err(|error| store_error(&error))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.file
            .save(&self.server, credentials)
            .map_err(|error| store_error(&error))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.file
            .remove(&self.server)
            .map(drop)
            .map_err(|error| store_error(&error))
    }
}

/// The canonical form of a server URL, the token file's key: scheme and
/// host in lower case, no default port, no fragment, no trailing `/` (but
/// the root's).
pub(crate) fn canonical(url: &str) -> anyhow::Result<String> {
    let mut parsed =
        reqwest::Url::parse(url.trim()).with_context(|| format!("{url:?} is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        anyhow::bail!("{url:?} is not an http or https URL");
    }
    parsed.set_fragment(None);
    let mut text = parsed.to_string();
    if parsed.path() != "/" && parsed.query().is_none() {
        while text.ends_with('/') {
            text.pop();
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use oauth2::basic::BasicTokenType;
    use oauth2::{AccessToken, RefreshToken};
    use rmcp::transport::auth::{OAuthTokenResponse, VendorExtraTokenFields};

    use super::*;

    fn credentials(access: &str) -> StoredCredentials {
        let mut response = OAuthTokenResponse::new(
            AccessToken::new(access.into()),
            BasicTokenType::Bearer,
            VendorExtraTokenFields::default(),
        );
        response.set_refresh_token(Some(RefreshToken::new(format!("{access}-refresh"))));
        StoredCredentials::new(
            "client-1".into(),
            Some(response),
            vec!["tasks".into()],
            Some(1),
        )
    }

    fn access(credentials: &StoredCredentials) -> String {
        use oauth2::TokenResponse as _;
        credentials
            .token_response
            .as_ref()
            .unwrap()
            .access_token()
            .secret()
            .clone()
    }

    #[test]
    fn servers_are_kept_apart_in_a_private_file_and_forgotten_one_by_one() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("state/oauth-tokens.json");
        let file = TokenFile::new(path.clone());
        assert!(file.load("http://a/mcp").unwrap().is_none(), "no file yet");
        file.save("http://a/mcp", credentials("token-a")).unwrap();
        file.save("http://b/mcp", credentials("token-b")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
        }
        assert_eq!(
            access(&file.load("http://a/mcp").unwrap().unwrap()),
            "token-a"
        );
        assert_eq!(
            access(&file.load("http://b/mcp").unwrap().unwrap()),
            "token-b"
        );
        assert!(file.remove("http://a/mcp").unwrap());
        assert!(!file.remove("http://a/mcp").unwrap(), "already gone");
        assert!(file.load("http://a/mcp").unwrap().is_none());
        assert_eq!(
            access(&file.load("http://b/mcp").unwrap().unwrap()),
            "token-b"
        );
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, [FILE_NAME], "no temporary file is left behind");
    }

    #[test]
    fn a_broken_file_is_an_error_that_quotes_nothing_of_it() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join(FILE_NAME);
        std::fs::write(&path, "{\"servers\": {\"http://a/mcp\": \"secret-token").unwrap();
        let error = TokenFile::new(path).load("http://a/mcp").unwrap_err();
        let text = format!("{error:#}");
        assert!(text.contains("is not a token file"), "{text}");
        assert!(!text.contains("secret-token"), "{text}");
    }

    #[test]
    fn debug_never_prints_a_token() {
        let text = format!("{:?}", credentials("the-access-token"));
        assert!(!text.contains("the-access-token"), "{text}");
    }

    #[test]
    fn urls_are_keyed_in_one_canonical_form() {
        assert_eq!(
            canonical("HTTP://Example.COM:80/mcp/#x").unwrap(),
            "http://example.com/mcp"
        );
        assert_eq!(
            canonical("https://example.com:443").unwrap(),
            "https://example.com/"
        );
        assert_eq!(
            canonical("http://127.0.0.1:8080/mcp").unwrap(),
            "http://127.0.0.1:8080/mcp"
        );
        assert!(canonical("ftp://example.com/").is_err());
        assert!(canonical("not a url").is_err());
    }
}
