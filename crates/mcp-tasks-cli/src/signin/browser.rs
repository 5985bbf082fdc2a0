//! The person's side of the authorization code flow: a loopback redirect
//! (`http://127.0.0.1:PORT/callback` on a port the system picks, RFC 8252
//! §7.3) that waits for the authorization server to send the browser back,
//! and the browser opened on the authorization URL (`$BROWSER`, else
//! `xdg-open` or `open`; `BROWSER=none` opens nothing). The URL is always
//! printed too, for a machine where no browser opens.

use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::http::Uri;
use axum::response::Html;
use tokio::sync::{mpsc, oneshot};

/// The page the browser shows once sent back.
const DONE: &str = "<!doctype html><title>mcp-tasks</title><p>Signed in. You may close this \
                    window and go back to mcp-tasks.</p>";

/// A listening loopback redirect.
#[derive(Debug)]
pub(crate) struct Callback {
    redirect_uri: String,
    arrived: mpsc::Receiver<String>,
    stop: Option<oneshot::Sender<()>>,
}

impl Callback {
    /// Listens on 127.0.0.1, on a port the system picks.
    pub(crate) async fn bind() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot listen on 127.0.0.1 for the sign-in's redirect")?;
        let port = listener.local_addr()?.port();
        let redirect_uri = format!("http://127.0.0.1:{port}/callback");
        let (sender, arrived) = mpsc::channel(4);
        let base = redirect_uri.clone();
        let app = axum::Router::new().route(
            "/callback",
            axum::routing::get(move |uri: Uri| {
                let sender = sender.clone();
                let base = base.clone();
                async move {
                    let query = uri.query().unwrap_or_default();
                    let _ = sender.send(format!("{base}?{query}")).await;
                    Html(DONE)
                }
            }),
        );
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self {
            redirect_uri,
            arrived,
            stop: Some(stop),
        })
    }

    /// Where the authorization server sends the browser back.
    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// The URL the browser was sent back to (with `code` and `state`, or
    /// `error`), within `limit`.
    pub(crate) async fn wait(mut self, limit: Duration) -> anyhow::Result<String> {
        let arrived = tokio::time::timeout(limit, self.arrived.recv()).await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match arrived {
            Ok(Some(url)) => Ok(url),
            Ok(None) => bail!("the sign-in's redirect listener stopped"),
            Err(_) => bail!(
                "the sign-in was not completed within {} s (--oauth-timeout)",
                limit.as_secs()
            ),
        }
    }
}

/// What `error` the authorization server sent the browser back with, if it
/// refused (RFC 6749 §4.1.2.1), as a sentence: the code and its description.
pub(crate) fn refusal(redirect: &str) -> Option<String> {
    let url = reqwest::Url::parse(redirect).ok()?;
    let mut error = None;
    let mut description = None;
    for (key, value) in url.query_pairs() {
        match key.as_ref() {
            "error" => error = Some(value.into_owned()),
            "error_description" => description = Some(value.into_owned()),
            _ => {}
        }
    }
    let error = error?;
    Some(match description {
        Some(description) => format!("{error} ({description})"),
        None => error,
    })
}

/// Opens `url` in the person's browser, if one can be started; says
/// nothing when none can (the caller has printed the URL).
pub(crate) fn open(url: &str) {
    let program = match std::env::var("BROWSER") {
        Ok(browser) if browser.trim().is_empty() || browser.trim() == "none" => return,
        Ok(browser) => browser,
        Err(_) if cfg!(target_os = "macos") => "open".to_owned(),
        Err(_) => "xdg-open".to_owned(),
    };
    // `$BROWSER` may carry arguments ("firefox --new-window").
    let mut words = program.split_whitespace();
    let Some(program) = words.next() else {
        return;
    };
    let started = std::process::Command::new(program)
        .args(words)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = started {
        // Reaped when it exits (a browser launcher returns at once).
        std::thread::spawn(move || child.wait());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_redirect_brings_back_its_query_and_the_browser_a_page() {
        let callback = Callback::bind().await.unwrap();
        let redirect = callback.redirect_uri().to_owned();
        assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
        assert!(redirect.ends_with("/callback"), "{redirect}");
        let page = tokio::spawn({
            let redirect = redirect.clone();
            async move {
                reqwest::get(format!("{redirect}?code=c1&state=s1&iss=http%3A%2F%2Fas"))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            }
        });
        let url = callback.wait(Duration::from_secs(10)).await.unwrap();
        assert_eq!(
            url,
            format!("{redirect}?code=c1&state=s1&iss=http%3A%2F%2Fas")
        );
        assert!(page.await.unwrap().contains("Signed in"));
    }

    #[tokio::test]
    async fn a_sign_in_not_completed_in_time_says_so() {
        let callback = Callback::bind().await.unwrap();
        let error = callback.wait(Duration::from_secs(1)).await.unwrap_err();
        assert!(error.to_string().contains("within 1 s"), "{error}");
    }

    #[test]
    fn a_refusal_is_read_from_the_redirect() {
        assert_eq!(
            refusal("http://127.0.0.1:1/callback?error=access_denied&error_description=no%20way")
                .as_deref(),
            Some("access_denied (no way)")
        );
        assert_eq!(refusal("http://127.0.0.1:1/callback?code=c&state=s"), None);
    }
}
