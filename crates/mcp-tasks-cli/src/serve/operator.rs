//! `serve --admin ADDR`: the operator listener of the library
//! (`mcp_tasks::server::operator`) beside the MCP server, with its metrics:
//! the flags read and checked before anything is opened, the recorder
//! installed, the store measured and the runtime observed, then the
//! listener bound and its address printed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::operator::{
    Draining, OperatorListener, check_address, install_prometheus, metrics_observer,
};
use mcp_tasks::server::{MeteredStore, TaskObserver, TaskRuntime};
use mcp_tasks::store::SharedStore;

use super::StoreChoice;

/// A flag that cannot be served: `mcp-tasks` exits 64 with its message.
#[derive(Debug)]
pub(crate) struct BadFlag(pub(crate) String);

impl std::fmt::Display for BadFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadFlag {}

/// The operator listener the flags ask for.
#[derive(Debug)]
pub(crate) struct Operator {
    address: SocketAddr,
    tokens: Option<BearerTokens>,
    /// Set when the server begins to shut down: `/readyz` answers 503.
    pub(crate) draining: Draining,
}

impl Operator {
    /// Reads `--admin` and `--admin-tokens`: `None` without `--admin` (and
    /// then no `--admin-tokens`: `refuse_inapplicable` in `command.rs`
    /// refuses it).
    pub(crate) fn from_flags(
        admin: Option<&str>,
        tokens: Option<&PathBuf>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(admin) = admin else {
            return Ok(None);
        };
        let address: SocketAddr = admin.parse().map_err(|_| {
            BadFlag(format!(
                "--admin {admin:?} is not an IP address and port, as in 127.0.0.1:9090"
            ))
        })?;
        let tokens = match tokens {
            None => None,
            Some(path) => Some(
                BearerTokens::read(path)
                    .with_context(|| format!("--admin-tokens {}", path.display()))?,
            ),
        };
        check_address(address, tokens.is_some())
            .map_err(|error| BadFlag(format!("--admin: {error} (--admin-tokens FILE)")))?;
        Ok(Some(Self {
            address,
            tokens,
            draining: Draining::default(),
        }))
    }

    /// `store`, measured under its kind's name, and the observers of the
    /// runtime's tasks, with the metrics recorder installed.
    pub(crate) fn instrument(
        &self,
        store: SharedStore,
        choice: &StoreChoice,
    ) -> anyhow::Result<(SharedStore, Vec<Arc<dyn TaskObserver>>)> {
        install_prometheus().context("cannot record metrics")?;
        let name = match choice {
            StoreChoice::Memory => "memory",
            StoreChoice::Sqlite(_) => "sqlite",
            StoreChoice::Redis(_) => "redis",
            StoreChoice::Postgres(_) => "postgres",
        };
        Ok((MeteredStore::shared(store, name), vec![metrics_observer()]))
    }

    /// Binds the listener, says where on `out`, and serves it in the
    /// background for the rest of the process.
    pub(crate) async fn start(
        self,
        runtime: TaskRuntime,
        reloader: Option<Arc<super::reload::Reloader>>,
        out: &mut dyn std::io::Write,
    ) -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::bind(self.address)
            .await
            .with_context(|| format!("cannot listen on {} (--admin)", self.address))?;
        let local = listener.local_addr().context("no local address")?;
        let admin =
            mcp_tasks::server::admin::routes(runtime.clone()).merge(super::reload::route(reloader));
        let mut operator = OperatorListener::new(runtime)
            .with_routes(admin)
            .with_metrics(install_prometheus().context("cannot record metrics")?)
            .with_draining(self.draining);
        if let Some(tokens) = self.tokens {
            operator = operator.with_tokens(tokens);
        }
        writeln!(out, "operator listener on http://{local}")?;
        out.flush()?;
        tokio::spawn(async move {
            if let Err(error) = operator.serve(listener).await {
                tracing::error!(%error, "the operator listener stopped");
            }
        });
        Ok(())
    }
}
