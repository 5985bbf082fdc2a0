//! Where `mcp-tasks admin` acts: a running server's operator listener over
//! HTTP (`--server`), or a store opened here (`--store`), which writes the
//! audit line itself (stderr, and `--audit-log FILE`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mcp_tasks::server::admin::{
    Admin, AdminError, AuditEntry, Filter, HashRequest, ListRequest, ListResponse, NameRequest,
    PurgeRequest, Purged, Show, TaskView,
};
use mcp_tasks::store::{SharedStore, StoreErrorKind};
use mcp_tasks::{TaskId, UnixMillis};
use mcp_tasks_postgres::{Migrations, PostgresOptions, PostgresStore};
use mcp_tasks_redis::{RedisOptions, RedisStore};
use mcp_tasks_sqlite::SqliteStore;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::serve::{Namespace, StoreChoice};

/// Why a command failed, and so its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A bad flag or argument (64).
    Usage(String),
    /// The server or store cannot be reached or opened (69).
    Unreachable(anyhow::Error),
    /// The action failed (1).
    Failed(String),
}

impl From<AdminError> for Failure {
    fn from(error: AdminError) -> Self {
        match error {
            AdminError::BadRequest(message) => Self::Usage(message),
            AdminError::Store(store) => {
                Self::Unreachable(anyhow::Error::new(store).context("the task store failed"))
            }
            other => Self::Failed(other.to_string()),
        }
    }
}

/// A running server's admin API, or a store.
pub(crate) enum Backend {
    Remote {
        client: reqwest::Client,
        base: String,
        token: Option<String>,
    },
    Local {
        admin: Admin,
        who: String,
        audit_log: Option<PathBuf>,
    },
}

impl Backend {
    /// The admin API at `base` (the operator listener's URL).
    pub(crate) fn remote(base: &str, token: Option<String>) -> Result<Self, Failure> {
        let base = base.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "--server takes the operator listener's URL, as in http://127.0.0.1:9090, not {base:?}"
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|error| Failure::Unreachable(error.into()))?;
        Ok(Self::Remote {
            client,
            base,
            token,
        })
    }

    /// The store `text` (as `serve --store` takes it), opened here.
    pub(crate) async fn local(
        text: &str,
        namespace: Namespace<'_>,
        audit_log: Option<PathBuf>,
    ) -> Result<Self, Failure> {
        let store: SharedStore = match StoreChoice::parse(text)
            .map_err(|e| Failure::Usage(e.to_string()))?
        {
            StoreChoice::Memory => {
                return Err(Failure::Usage(
                    "a memory store lives in its server's process: use --server".into(),
                ));
            }
            StoreChoice::Sqlite(path) => {
                if !path.exists() {
                    return Err(Failure::Usage(format!(
                        "no task store at {}",
                        path.display()
                    )));
                }
                match SqliteStore::open(&path) {
                    Ok(store) => Arc::new(store),
                    Err(error) if error.kind() == StoreErrorKind::InUse => {
                        return Err(Failure::Unreachable(anyhow::anyhow!(
                            "a running server holds the task store {}: its cache is the truth and \
                             a second writer would corrupt it; use --server http://ADDR (that \
                             server's --admin listener) instead",
                            path.display()
                        )));
                    }
                    Err(error) => {
                        return Err(Failure::Unreachable(
                            anyhow::Error::new(error)
                                .context(format!("cannot open the task store {}", path.display())),
                        ));
                    }
                }
            }
            StoreChoice::Postgres(url) => {
                // An operator's command reads the schema as it is: migrating
                // is `admin migrate`'s (or a server's) to do.
                let options = PostgresOptions::default()
                    .with_schema(namespace.postgres_schema)
                    .with_migrations(Migrations::Check);
                Arc::new(
                    PostgresStore::connect_with(&url, options)
                        .await
                        .map_err(|error| {
                            Failure::Unreachable(
                                anyhow::Error::new(error)
                                    .context("cannot open the PostgreSQL task store"),
                            )
                        })?,
                )
            }
            StoreChoice::Redis(url) => Arc::new(
                RedisStore::connect_with(
                    &url,
                    RedisOptions::default().with_key_prefix(namespace.redis_key_prefix),
                )
                .await
                .map_err(|error| {
                    Failure::Unreachable(
                        anyhow::Error::new(error).context("cannot open the Redis task store"),
                    )
                })?,
            ),
        };
        let admin = Admin::of_store(store)
            .await
            .map_err(|error| Failure::Unreachable(error.into()))?;
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_else(|_| "unknown".to_owned());
        Ok(Self::Local {
            admin,
            who: format!("local:{user}"),
            audit_log,
        })
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, Failure> {
        let Self::Remote {
            client,
            base,
            token,
        } = self
        else {
            return Err(Failure::Failed("not a server".into()));
        };
        let mut request = client
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).map_err(|e| Failure::Failed(e.to_string()))?);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach the admin API at {base}"))
            .map_err(Failure::Unreachable)?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .with_context(|| format!("the admin API at {base} did not answer"))
            .map_err(Failure::Unreachable)?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|error| {
                Failure::Failed(format!(
                    "the admin API answered JSON this build cannot read: {error}"
                ))
            });
        }
        let message = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|body| body.get("error").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| format!("HTTP {status}"));
        Err(match status.as_u16() {
            400 => Failure::Usage(message),
            401 | 403 => Failure::Unreachable(anyhow::anyhow!(
                "the admin API refused the token ({message}): give --admin-token-file FILE or MCP_TASKS_ADMIN_TOKEN"
            )),
            404 if path == "/admin/tasks/list" => Failure::Unreachable(anyhow::anyhow!(
                "{base} has no admin API (is it a server's --admin listener?)"
            )),
            404 if path == "/admin/reload" => Failure::Unreachable(anyhow::anyhow!(
                "{base} cannot reload (is it a server's --admin listener, of this version?)"
            )),
            500.. => Failure::Unreachable(anyhow::anyhow!("{message}")),
            _ => Failure::Failed(message),
        })
    }

    /// Makes the server at `base` reread its files (`POST /admin/reload`).
    pub(crate) async fn reload(&self) -> Result<Value, Failure> {
        self.post("/admin/reload", &json!({})).await
    }

    /// Writes the audit line of a local action: stderr, and the audit log.
    fn audit(&self, action: &str, args: Value, tasks: Vec<String>, outcome: &Result<(), String>) {
        let Self::Local { who, audit_log, .. } = self else {
            return;
        };
        let line = AuditEntry::new(who.clone(), action, args, UnixMillis::now())
            .with_tasks(tasks)
            .with_outcome(outcome)
            .to_line();
        eprintln!("{line}");
        if let Some(path) = audit_log {
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| writeln!(file, "{line}"));
            if let Err(error) = written {
                eprintln!(
                    "error: cannot append to the audit log {}: {error}",
                    path.display()
                );
            }
        }
    }

    pub(crate) async fn list(
        &self,
        filter: Filter,
        limit: usize,
        show: Show,
    ) -> Result<Vec<TaskView>, Failure> {
        match self {
            Self::Remote { .. } => {
                let mut request = ListRequest::default();
                request.filter = filter;
                request.limit = Some(limit);
                request.show = Show::default().with_ids(show.ids);
                let listed: ListResponse = self.post("/admin/tasks/list", &request).await?;
                Ok(listed.tasks)
            }
            Self::Local { admin, .. } => {
                let listed = admin.list(&filter, limit).await;
                let views: Vec<TaskView> = listed
                    .as_ref()
                    .map(|records| {
                        records
                            .iter()
                            .map(|record| admin.view(record, show))
                            .collect()
                    })
                    .unwrap_or_default();
                self.audit(
                    "ls",
                    json!({"filter": filter, "limit": limit, "showIds": show.ids}),
                    views.iter().map(|view| view.task.clone()).collect(),
                    &listed.as_ref().map(|_| ()).map_err(ToString::to_string),
                );
                listed?;
                Ok(views)
            }
        }
    }

    pub(crate) async fn show(&self, name: &str, show: Show) -> Result<TaskView, Failure> {
        match self {
            Self::Remote { .. } => {
                let mut request = NameRequest::default();
                request.task = name.to_owned();
                request.show = show;
                self.post("/admin/tasks/show", &request).await
            }
            Self::Local { admin, .. } => {
                let found = admin.find(name).await;
                let view = found.as_ref().ok().map(|record| admin.view(record, show));
                self.audit(
                    "show",
                    json!({"showIds": show.ids, "showResults": show.results}),
                    self.named(name, view.as_ref()),
                    &found.as_ref().map(|_| ()).map_err(ToString::to_string),
                );
                found?;
                view.ok_or(Failure::Failed("no task has this id or hash".into()))
            }
        }
    }

    pub(crate) async fn cancel(&self, name: &str) -> Result<TaskView, Failure> {
        match self {
            Self::Remote { .. } => {
                let mut request = NameRequest::default();
                request.task = name.to_owned();
                self.post("/admin/tasks/cancel", &request).await
            }
            Self::Local { admin, .. } => {
                let cancelled = admin.cancel(name).await;
                let view = cancelled
                    .as_ref()
                    .ok()
                    .map(|record| admin.view(record, Show::default()));
                self.audit(
                    "cancel",
                    json!({}),
                    self.named(name, view.as_ref()),
                    &cancelled.as_ref().map(|_| ()).map_err(ToString::to_string),
                );
                cancelled?;
                view.ok_or(Failure::Failed("no task has this id or hash".into()))
            }
        }
    }

    pub(crate) async fn purge(
        &self,
        older_than: Duration,
        dry_run: bool,
    ) -> Result<Purged, Failure> {
        let older_than_ms = u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX);
        match self {
            Self::Remote { .. } => {
                let mut request = PurgeRequest::default();
                request.older_than_ms = older_than_ms;
                request.dry_run = dry_run;
                self.post("/admin/tasks/purge", &request).await
            }
            Self::Local { admin, .. } => {
                let purged = admin.purge(older_than, dry_run).await;
                self.audit(
                    "purge",
                    json!({"olderThanMs": older_than_ms, "dryRun": dry_run}),
                    purged.as_ref().map(|p| p.tasks.clone()).unwrap_or_default(),
                    &purged.as_ref().map(|_| ()).map_err(ToString::to_string),
                );
                Ok(purged?)
            }
        }
    }

    pub(crate) async fn hash(&self, id: &str) -> Result<String, Failure> {
        match self {
            Self::Remote { .. } => {
                let mut request = HashRequest::default();
                request.id = id.to_owned();
                let answer: Value = self.post("/admin/hash", &request).await?;
                answer
                    .get("hash")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| Failure::Failed("the admin API answered no hash".into()))
            }
            Self::Local { admin, .. } => Ok(admin.hasher().hash(&TaskId::new(id))),
        }
    }

    /// The hash a local action's audit line names: the task's, or what the
    /// name hashes to when no task was found (never the name, an id).
    fn named(&self, name: &str, view: Option<&TaskView>) -> Vec<String> {
        match (view, self) {
            (Some(view), _) => vec![view.task.clone()],
            (None, _) if mcp_tasks::server::TaskHasher::is_hash(name) => vec![name.to_owned()],
            (None, Self::Local { admin, .. }) => vec![admin.hasher().hash(&TaskId::new(name))],
            (None, Self::Remote { .. }) => Vec::new(),
        }
    }
}
