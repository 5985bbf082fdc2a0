//! [`Admin`]: what an operator does to every caller's tasks (list, show,
//! cancel, purge), on a running server's runtime or straight on a store no
//! server holds (or a Redis store, at any time).
//!
//! A cancel is the same change `tasks/cancel` makes: the task's record
//! asks for it, and the runtime running the tool (in this process, or on
//! any replica of a shared store, which hears the change on the store's
//! change feed) stops the tool and ends the task `cancelled`. Through a
//! runtime, the change and a purge's deletions are told to its observers
//! (metrics, traces) as the runtime's own are.

use std::time::Duration;

use super::view::{Filter, Show, TaskView};
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::store::{Change, Modified, SharedStore, StoreError, TaskRecord, modify};
use crate::task::{TaskId, UnixMillis};
use crate::telemetry::task_hash::TaskHasher;

/// How many records one read of the store takes.
const PAGE: usize = 256;

/// How long a task finished by `--store`'s hand is kept (a cancel asks the
/// runner, which finishes the task with its own retention).
const RETENTION: Duration = Duration::from_secs(3600);

/// Why an admin action failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// No task has this id or hash.
    #[error("no task has this id or hash")]
    NotFound,
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The task has finished; it cannot be cancelled.
    #[error("the task has already finished ({0})")]
    Finished(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a purge found (and, unless it was a dry run, deleted).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Purged {
    /// The hashes of the tasks purged.
    pub tasks: Vec<String>,
    /// Whether nothing was deleted (a dry run).
    pub dry_run: bool,
}

/// The operator's handle on every caller's tasks. Cheap to clone.
#[derive(Clone)]
pub struct Admin {
    store: SharedStore,
    runtime: Option<TaskRuntime>,
    hasher: TaskHasher,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("runtime", &self.runtime.is_some())
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// The admin handle of a running server's runtime.
    ///
    /// # Errors
    ///
    /// The store's hash key could not be read.
    pub async fn of_runtime(runtime: TaskRuntime) -> Result<Self, StoreError> {
        Ok(Self {
            store: runtime.store().clone(),
            hasher: runtime.task_hasher().await?,
            runtime: Some(runtime),
        })
    }

    /// The admin handle of a store no server in this process runs: one no
    /// server holds, or a store shared by several (Redis, PostgreSQL).
    ///
    /// # Errors
    ///
    /// The store's hash key could not be read.
    pub async fn of_store(store: SharedStore) -> Result<Self, StoreError> {
        Ok(Self {
            hasher: crate::server::TaskHasher::new(&store.hash_key().await?),
            store,
            runtime: None,
        })
    }

    /// The hasher that names this store's tasks.
    pub fn hasher(&self) -> &TaskHasher {
        &self.hasher
    }

    /// The time now: the runtime's clock, or the system's.
    pub fn now(&self) -> UnixMillis {
        match &self.runtime {
            Some(runtime) => runtime.now(),
            None => UnixMillis::now(),
        }
    }

    /// Up to `limit` tasks of any caller that pass `filter`, oldest first,
    /// read from the store a page at a time.
    ///
    /// # Errors
    ///
    /// The filter names an unknown status, or the store failed.
    pub async fn list(&self, filter: &Filter, limit: usize) -> Result<Vec<TaskRecord>, AdminError> {
        filter.check().map_err(AdminError::BadRequest)?;
        let now = self.now();
        let mut found = Vec::new();
        let mut after: Option<TaskId> = None;
        while found.len() < limit {
            let page = self.store.list_all(after.as_ref(), PAGE).await?;
            let last = page.len() < PAGE;
            after = page.last().map(|record| record.id().clone());
            found.extend(
                page.into_iter()
                    .filter(|record| filter.matches(record, now))
                    .take(limit - found.len()),
            );
            if last {
                break;
            }
        }
        Ok(found)
    }

    /// The task named by `name`: its id, or its hash (found by reading
    /// every task, a page at a time).
    ///
    /// # Errors
    ///
    /// [`AdminError::NotFound`], or the store failed.
    pub async fn find(&self, name: &str) -> Result<TaskRecord, AdminError> {
        if !TaskHasher::is_hash(name) {
            return self
                .store
                .get(&TaskId::new(name))
                .await?
                .ok_or(AdminError::NotFound);
        }
        let mut after: Option<TaskId> = None;
        loop {
            let page = self.store.list_all(after.as_ref(), PAGE).await?;
            let last = page.len() < PAGE;
            after = page.last().map(|record| record.id().clone());
            if let Some(record) = page
                .into_iter()
                .find(|record| self.hasher.hash(record.id()) == name)
            {
                return Ok(record);
            }
            if last {
                return Err(AdminError::NotFound);
            }
        }
    }

    /// `record` as shown now.
    pub fn view(&self, record: &TaskRecord, show: Show) -> TaskView {
        TaskView::of(record, &self.hasher, show, self.now())
    }

    /// Cancels the task named by `name` as `tasks/cancel` would: its tool
    /// is stopped by whichever runtime runs it, which ends it `cancelled`
    /// with the status message [`CANCELLED_BY_OPERATOR_MESSAGE`](crate::store::CANCELLED_BY_OPERATOR_MESSAGE).
    /// Returns the record as the cancel left it.
    ///
    /// # Errors
    ///
    /// [`AdminError::NotFound`], [`AdminError::Finished`], or the store failed.
    pub async fn cancel(&self, name: &str) -> Result<TaskRecord, AdminError> {
        let record = self.find(name).await?;
        if record.status().is_terminal() {
            return Err(AdminError::Finished(record.status().as_str().to_owned()));
        }
        let id = record.id().clone();
        let modified = match &self.runtime {
            Some(runtime) => runtime.cancel_by_operator(&id).await?,
            None => {
                let now = UnixMillis::now();
                modify(
                    &*self.store,
                    &id,
                    &Change::RequestCancelByOperator,
                    now,
                    RETENTION,
                )
                .await?
            }
        };
        match modified {
            Modified::Applied(record) => Ok(record),
            Modified::Refused(record, _) if record.status().is_terminal() => {
                Err(AdminError::Finished(record.status().as_str().to_owned()))
            }
            Modified::Refused(record, _) => Ok(record),
            Modified::Missing => Err(AdminError::NotFound),
        }
    }

    /// Deletes every finished task whose last change (its end) is at least
    /// `older_than` ago; with `dry_run`, only says which. Unfinished tasks
    /// are never purged.
    ///
    /// # Errors
    ///
    /// The store failed (what was deleted before stays deleted).
    pub async fn purge(&self, older_than: Duration, dry_run: bool) -> Result<Purged, AdminError> {
        let now = self.now();
        let mut purged = Purged {
            tasks: Vec::new(),
            dry_run,
        };
        let mut after: Option<TaskId> = None;
        loop {
            let page = self.store.list_all(after.as_ref(), PAGE).await?;
            let last = page.len() < PAGE;
            after = page.last().map(|record| record.id().clone());
            for record in page {
                if !record.status().is_terminal()
                    || now.saturating_since(record.updated_at()) < older_than
                {
                    continue;
                }
                if !dry_run {
                    match &self.runtime {
                        Some(runtime) => runtime.delete(record.id()).await?,
                        None => self.store.delete(record.id()).await?,
                    }
                }
                purged.tasks.push(self.hasher.hash(record.id()));
            }
            if last {
                return Ok(purged);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Admin, AdminError};
    use crate::server::operator::admin::{Filter, Show};
    use crate::store::{Change, MemoryStore, Principal, SharedStore, TaskRecord, modify};
    use crate::task::{TaskId, Ttl, UnixMillis};

    /// Records made `ago` ms before now: a finished one of `bob` and a
    /// working one of `alice`.
    async fn store() -> SharedStore {
        let store: SharedStore = Arc::new(MemoryStore::new());
        let now = UnixMillis::now().as_millis();
        for (id, owner, tool, ago) in [
            ("a-old", "bob", "long_job", 3_600_000),
            ("b-new", "alice", "sleep", 0),
        ] {
            let record = TaskRecord::new(
                TaskId::new(id),
                Principal::new(owner),
                UnixMillis::new(now - ago),
                Ttl::Unlimited,
                None,
            )
            .with_tool(tool);
            store.create(record).await.expect("create");
        }
        let done = Change::Complete(serde_json::json!({"content": []}));
        let at = UnixMillis::new(now - 3_000_000);
        modify(
            &*store,
            &TaskId::new("a-old"),
            &done,
            at,
            Duration::from_secs(7200),
        )
        .await
        .expect("complete");
        store
    }

    fn ids(records: &[TaskRecord]) -> Vec<&str> {
        records.iter().map(|record| record.id().expose()).collect()
    }

    #[tokio::test]
    async fn filters_find_cancel_and_purge() {
        let admin = Admin::of_store(store().await).await.expect("admin");
        let list = |filter: Filter| {
            let admin = admin.clone();
            async move { admin.list(&filter, 10).await.expect("list") }
        };
        assert_eq!(ids(&list(Filter::default()).await), ["a-old", "b-new"]);
        assert_eq!(
            ids(&list(Filter::default().with_status("working")).await),
            ["b-new"]
        );
        assert_eq!(
            ids(&list(Filter::default().with_tool("long_job")).await),
            ["a-old"]
        );
        assert_eq!(
            ids(&list(Filter::default().with_principal("alice")).await),
            ["b-new"]
        );
        let hour = Duration::from_secs(1800);
        assert_eq!(
            ids(&list(Filter::default().with_older_than(hour)).await),
            ["a-old"]
        );
        assert_eq!(
            ids(&list(Filter::default().with_newer_than(hour)).await),
            ["b-new"]
        );
        assert_eq!(
            admin.list(&Filter::default(), 1).await.expect("list").len(),
            1
        );
        assert!(matches!(
            admin.list(&Filter::default().with_status("done"), 10).await,
            Err(AdminError::BadRequest(_))
        ));

        let hash = admin.hasher().hash(&TaskId::new("b-new"));
        assert_eq!(
            admin.find(&hash).await.expect("by hash").id().expose(),
            "b-new"
        );
        assert!(matches!(
            admin.find("th_00000000000000000000000000000000").await,
            Err(AdminError::NotFound)
        ));
        let view = admin.view(&admin.find("a-old").await.expect("by id"), Show::default());
        assert!(
            view.id.is_none() && view.result.is_none(),
            "hidden unless asked"
        );
        assert_eq!(
            (view.principal.as_str(), view.tool.as_deref()),
            ("bob", Some("long_job"))
        );
        let view = admin.view(
            &admin.find("a-old").await.expect("by id"),
            Show::default().with_ids(true).with_results(true),
        );
        assert_eq!(view.id.as_deref(), Some("a-old"));
        assert!(view.result.is_some());

        assert!(matches!(
            admin.cancel("a-old").await,
            Err(AdminError::Finished(_))
        ));
        let cancelled = admin.cancel(&hash).await.expect("cancel");
        assert!(cancelled.cancel_requested() && cancelled.cancelled_by_operator());

        let dry = admin.purge(hour, true).await.expect("dry run");
        assert_eq!(dry.tasks, [admin.hasher().hash(&TaskId::new("a-old"))]);
        assert_eq!(
            admin
                .list(&Filter::default(), 10)
                .await
                .expect("list")
                .len(),
            2
        );
        let purged = admin.purge(hour, false).await.expect("purge");
        assert_eq!(purged.tasks, dry.tasks);
        assert_eq!(
            ids(&list(Filter::default()).await),
            ["b-new"],
            "the unfinished one stays"
        );
    }
}
