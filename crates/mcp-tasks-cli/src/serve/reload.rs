//! Reloading a running `serve`: SIGHUP, or `POST /admin/reload` on the
//! operator listener (`mcp-tasks admin reload`), rereads the config file
//! (its `[[upstream]]` entries: [`Gateway::reload`]) and the `--auth-tokens`
//! file ([`BearerTokens::replace`]). Everything is read and checked before
//! anything changes: a file that does not parse, or cannot be served, is
//! refused with its line and the running config stays. Other keys of the
//! file (the flags) take effect at the next start, and a reload says which
//! changed. One reload at a time.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcp_tasks::gateway::{Gateway, ReloadReport};
use mcp_tasks::server::auth::BearerTokens;
use serde_json::json;

use super::config::{ConfigFile, read_gateway};

/// What a reload rereads, and what it changes.
pub(crate) struct Reloader {
    /// The config file and its flag keys at start.
    config: Option<(PathBuf, BTreeMap<String, toml::Value>)>,
    /// The `--auth-tokens` file and the set the server checks.
    tokens: Option<(PathBuf, BearerTokens)>,
    /// The gateway of the file's `[[upstream]]` entries.
    gateway: Option<Gateway>,
    /// One reload at a time.
    serial: tokio::sync::Mutex<()>,
}

/// What a reload did.
#[derive(Debug, Default)]
pub(crate) struct Reloaded {
    /// The upstreams, when the gateway was reloaded.
    upstreams: Option<ReloadReport>,
    /// How many tokens the server now accepts, when they were reread.
    tokens: Option<usize>,
    /// Keys of the file that changed but apply only at the next start.
    unapplied: Vec<String>,
}

impl Reloader {
    /// A reloader of what the server was started with: `None` when there
    /// is nothing to reread (no config file, no tokens file).
    pub(crate) fn new(
        config: Option<&ConfigFile>,
        tokens: Option<(PathBuf, BearerTokens)>,
        gateway: Option<Gateway>,
    ) -> Option<Arc<Self>> {
        if config.is_none() && tokens.is_none() {
            return None;
        }
        Some(Arc::new(Self {
            config: config.map(|file| (file.path().to_owned(), file.flags())),
            tokens,
            gateway,
            serial: tokio::sync::Mutex::new(()),
        }))
    }

    /// Rereads and applies, or changes nothing and says why.
    pub(crate) async fn reload(&self) -> Result<Reloaded, String> {
        let _serial = self.serial.lock().await;
        let mut reloaded = Reloaded::default();
        let mut gateway = None;
        if let Some((path, flags)) = &self.config {
            let file = ConfigFile::read(path).map_err(|error| error.to_string())?;
            let upstreams = read_gateway(&file).map_err(|error| error.to_string())?;
            match (&self.gateway, upstreams) {
                (Some(running), Some(config)) => gateway = Some((running, config)),
                (None, None) => {}
                (Some(_), None) => {
                    return Err(format!(
                        "{}: it has no [[upstream]] entry left; the gateway keeps its upstreams \
                         (stop the server to serve none)",
                        path.display()
                    ));
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "{}: [[upstream]] entries are served from the start only: this server \
                         was started without them",
                        path.display()
                    ));
                }
            }
            let now = file.flags();
            let keys: std::collections::BTreeSet<&String> =
                flags.keys().chain(now.keys()).collect();
            reloaded.unapplied = keys
                .into_iter()
                .filter(|key| flags.get(*key) != now.get(*key))
                .cloned()
                .collect();
        }
        let tokens = match &self.tokens {
            Some((path, served)) => {
                let read = BearerTokens::read(path)
                    .map_err(|error| format!("{}: {error}", path.display()))?;
                Some((served, read))
            }
            None => None,
        };
        // Everything read: now change.
        if let Some((running, config)) = gateway {
            reloaded.upstreams = Some(running.reload(config).await.map_err(|error| {
                format!(
                    "{}: {error}",
                    self.config
                        .as_ref()
                        .map_or_else(String::new, |(path, _)| path.display().to_string())
                )
            })?);
        }
        if let Some((served, read)) = tokens {
            served.replace(&read);
            reloaded.tokens = Some(read.len());
        }
        Ok(reloaded)
    }

    /// The server's line for a reload's outcome.
    pub(crate) async fn reload_and_say(&self, why: &str) -> Result<Reloaded, String> {
        let outcome = self.reload().await;
        match &outcome {
            Ok(reloaded) => eprintln!("{why}: {}", reloaded.line()),
            Err(error) => eprintln!("{why}: reload refused: {error} (the running config stays)"),
        }
        outcome
    }
}

impl Reloaded {
    /// One line: `reloaded: upstreams added: b; removed: a; replaced: none;
    /// unchanged: c; 2 tokens`.
    pub(crate) fn line(&self) -> String {
        let mut parts = Vec::new();
        if let Some(report) = &self.upstreams {
            let names = |names: &[String]| {
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            };
            parts.push(format!(
                "upstreams added: {}; removed: {}; replaced: {}; unchanged: {}",
                names(&report.added),
                names(&report.removed),
                names(&report.replaced),
                names(&report.unchanged)
            ));
        }
        if let Some(tokens) = self.tokens {
            parts.push(format!("{tokens} tokens"));
        }
        if !self.unapplied.is_empty() {
            parts.push(format!(
                "changed, applied at the next start: {}",
                self.unapplied.join(", ")
            ));
        }
        if parts.is_empty() {
            parts.push("nothing changed".to_owned());
        }
        format!("reloaded: {}", parts.join("; "))
    }

    /// The JSON `admin reload` prints.
    pub(crate) fn json(&self) -> serde_json::Value {
        let report = self.upstreams.clone().unwrap_or_default();
        json!({
            "added": report.added,
            "removed": report.removed,
            "replaced": report.replaced,
            "unchanged": report.unchanged,
            "tokens": self.tokens,
            "unapplied": self.unapplied,
            "summary": self.line(),
        })
    }
}

/// SIGHUP reloads, for the rest of the process. Listened to before the
/// server starts, so an early SIGHUP does not end it (its default).
#[cfg(unix)]
pub(crate) fn on_sighup(reloader: Arc<Reloader>) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let _ = reloader.reload_and_say("SIGHUP").await;
        }
    });
    Ok(())
}

/// No SIGHUP here: `admin reload` only.
#[cfg(not(unix))]
pub(crate) fn on_sighup(_: Arc<Reloader>) -> anyhow::Result<()> {
    Ok(())
}

/// `POST /admin/reload` on the operator listener: 200 with what changed,
/// 422 with why nothing did.
pub(crate) fn route(reloader: Option<Arc<Reloader>>) -> axum::Router {
    axum::Router::new().route(
        "/admin/reload",
        axum::routing::post(move || {
            let reloader = reloader.clone();
            async move { answer(reloader.as_deref()).await }
        }),
    )
}

async fn answer(reloader: Option<&Reloader>) -> Response {
    let Some(reloader) = reloader else {
        return answer_json(
            StatusCode::CONFLICT,
            &json!({"error": "nothing to reload: this server was started without --config \
                 and without --auth-tokens"}),
        );
    };
    tracing::info!(target: mcp_tasks::server::admin::AUDIT_TARGET, action = "reload", "admin reload");
    match reloader.reload_and_say("admin reload").await {
        Ok(reloaded) => answer_json(StatusCode::OK, &reloaded.json()),
        Err(error) => answer_json(
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!({"error": format!("reload refused: {error} (the running config stays)")}),
        ),
    }
}

fn answer_json(status: StatusCode, body: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_change_and_nothing_else() {
        let mut reloaded = Reloaded::default();
        assert_eq!(reloaded.line(), "reloaded: nothing changed");
        let mut report = ReloadReport::default();
        report.added = vec!["b".into()];
        report.removed = vec!["a".into()];
        report.unchanged = vec!["c".into(), "d".into()];
        reloaded.upstreams = Some(report);
        reloaded.tokens = Some(2);
        reloaded.unapplied = vec!["max-running".into()];
        assert_eq!(
            reloaded.line(),
            "reloaded: upstreams added: b; removed: a; replaced: none; unchanged: c, d; 2 tokens; \
             changed, applied at the next start: max-running"
        );
        assert_eq!(reloaded.json()["added"], json!(["b"]));
        assert_eq!(reloaded.json()["tokens"], json!(2));
    }
}
