//! The gateway's own roots: what it answers an upstream's session-level
//! `roots/list` (one asked during a connection's handshake or start-up
//! window, or with no call in flight; see [`relay`](super::relay)), and
//! the `notifications/roots/list_changed` it sends every open 2025-era
//! upstream connection when they change ([`Gateway::set_roots`]).
//!
//! [`Gateway::set_roots`]: super::Gateway::set_roots

// Roots are deprecated (SEP-2577) but upstreams of the 2025 era still ask.
#![allow(deprecated)]

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use rmcp::model::Root;
use rmcp::{Peer, RoleClient};
use tokio::time::Instant;

use super::Error;

/// The roots and the connections told when they change.
#[derive(Default)]
pub(crate) struct SessionRoots {
    roots: RwLock<Vec<Root>>,
    /// The open 2025-era connections (the only ones with a session to tell),
    /// with the window each opens when told.
    told: Mutex<Vec<(Peer<RoleClient>, SessionWindow)>>,
}

impl SessionRoots {
    pub(crate) fn new(roots: Vec<Root>) -> Self {
        Self {
            roots: RwLock::new(roots),
            told: Mutex::default(),
        }
    }

    fn told(&self) -> MutexGuard<'_, Vec<(Peer<RoleClient>, SessionWindow)>> {
        self.told
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The roots as they are now.
    pub(crate) fn current(&self) -> Vec<Root> {
        self.roots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Tells the 2025-era connection `peer` of every later change; `window`
    /// opens when it is told, for the `roots/list` it asks in return.
    pub(crate) fn register(&self, peer: Peer<RoleClient>, window: SessionWindow) {
        let mut told = self.told();
        told.retain(|(peer, _)| !peer.is_transport_closed());
        told.push((peer, window));
    }

    /// Replaces the roots; when they differ, sends
    /// `notifications/roots/list_changed` to every open 2025-era connection
    /// (each opens its session window first). Whether they differed.
    pub(crate) async fn replace(&self, roots: Vec<Root>) -> bool {
        {
            let mut current = self
                .roots
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *current == roots {
                return false;
            }
            *current = roots;
        }
        let open: Vec<(Peer<RoleClient>, SessionWindow)> = {
            let mut told = self.told();
            told.retain(|(peer, _)| !peer.is_transport_closed());
            told.clone()
        };
        tracing::debug!(
            connections = open.len(),
            "the gateway's roots changed: telling the upstream"
        );
        for (peer, window) in open {
            window.open();
            // A connection that closed meanwhile has no session left to tell.
            let _ = tokio::time::timeout(Duration::from_secs(5), peer.notify_roots_list_changed())
                .await;
        }
        true
    }
}

/// When a connection's session-level window last opened: at its handshake's
/// end, and when it is told the roots changed (unset during the handshake,
/// which counts as open). A `roots/list` while it is open is the session's.
#[derive(Clone, Default)]
pub(crate) struct SessionWindow(Arc<Mutex<Option<Instant>>>);

impl SessionWindow {
    /// Opens the window now.
    pub(crate) fn open(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    }

    /// Whether the window, `length` long, is open.
    pub(crate) fn is_open(&self, length: Duration) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none_or(|opened| opened.elapsed() < length)
    }
}

/// A root for the file or directory at `path`: a `file://` URI of its
/// absolute path (made absolute against the current directory, not
/// resolved through symbolic links), named by its last component. Fails
/// ([`Error::Root`]) when nothing is at `path`.
pub fn root_for_path(path: impl AsRef<Path>) -> Result<Root, Error> {
    let failed = |path: &Path, source| Error::Root {
        path: path.to_owned(),
        source,
    };
    let given = path.as_ref();
    let path = std::path::absolute(given).map_err(|source| failed(given, source))?;
    std::fs::metadata(&path).map_err(|source| failed(&path, source))?;
    let uri = reqwest::Url::from_file_path(&path).map_err(|()| {
        let source = std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a path a file URI can name",
        );
        failed(&path, source)
    })?;
    let mut root = Root::new(uri.to_string());
    root.name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned());
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_becomes_an_absolute_file_uri_named_by_its_last_component() {
        let dir = tempfile::tempdir().unwrap();
        let spaced = dir.path().join("my docs");
        std::fs::create_dir(&spaced).unwrap();
        let root = root_for_path(&spaced).unwrap();
        assert!(root.uri.starts_with("file:///"), "{}", root.uri);
        assert!(root.uri.ends_with("/my%20docs"), "{}", root.uri);
        assert_eq!(root.name.as_deref(), Some("my docs"));
        let missing = root_for_path(dir.path().join("missing")).unwrap_err();
        assert!(
            missing.to_string().ends_with("missing cannot be a root"),
            "{missing}"
        );
        let Error::Root { source, .. } = missing else {
            panic!("expected Error::Root, got {missing:?}");
        };
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_is_open_during_the_handshake_and_for_its_length_after() {
        let window = SessionWindow::default();
        assert!(window.is_open(Duration::from_secs(1)));
        window.open();
        assert!(window.is_open(Duration::from_secs(1)));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!window.is_open(Duration::from_secs(1)));
        window.open();
        assert!(window.is_open(Duration::from_secs(1)));
    }
}
