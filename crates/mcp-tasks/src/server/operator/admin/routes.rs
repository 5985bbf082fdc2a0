//! The admin API over HTTP: [`routes`], an axum router under `/admin/` that
//! the operator listener (`serve --admin`) serves behind its admin token.
//! Never mount it on the MCP port: it reaches every caller's tasks.
//!
//! Every route is a `POST` with a JSON body and answers JSON; an error is
//! `{"error": MESSAGE}` with a 4xx or 5xx status. Task ids travel only in
//! bodies, never in a path or query (which proxies log).
//!
//! | Route | Body | Answer |
//! |---|---|---|
//! | `/admin/tasks/list` | `{"filter": Filter, "limit": N, "show": {"ids": B}, "page": B}` | `{"tasks": [TaskView]}` |
//! | `/admin/tasks/show` | `{"task": ID or HASH, "show": {"ids": B, "results": B}}` | `TaskView` |
//! | `/admin/tasks/cancel` | `{"task": ID or HASH}` | `TaskView` |
//! | `/admin/tasks/purge` | `{"olderThanMs": N, "dryRun": B}` | `{"tasks": [HASH], "dryRun": B}` |
//! | `/admin/hash` | `{"id": ID}` | `{"hash": HASH}` |
//!
//! Each action but `hash` writes an audit line ([`AuditEntry`]) naming who
//! asked: the label of the [`Authenticated`] principal the listener's token
//! check left on the request, `admin` for a token without a label, or
//! `loopback` when the listener asks for no token.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::post;
use http::{HeaderValue, StatusCode, header};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::audit::AuditEntry;
use super::ops::{Admin, AdminError};
use super::view::{Filter, Show, TaskView, operator_label};
use crate::server::auth::principal::Authenticated;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::task::TaskId;

/// The largest request body accepted.
const MAX_BODY: usize = 64 * 1024;

/// How many tasks a listing gives when the request names no limit.
const DEFAULT_LIMIT: usize = 1000;

/// The body of `/admin/tasks/list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct ListRequest {
    /// Which tasks.
    pub filter: Filter,
    /// At most this many (default 1000).
    pub limit: Option<usize>,
    /// What to show of each (ids; results are never listed).
    pub show: Show,
    /// A refresh of the operator's page, every few seconds while it is
    /// open: audited with how many tasks it listed, not each hash (unless
    /// it shows ids).
    pub page: bool,
}

/// The answer of `/admin/tasks/list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListResponse {
    /// The tasks, oldest first.
    pub tasks: Vec<TaskView>,
}

/// The body of `/admin/tasks/show` and `/admin/tasks/cancel`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct NameRequest {
    /// The task's id or hash.
    pub task: String,
    /// What to show beyond the summary.
    pub show: Show,
}

/// The body of `/admin/tasks/purge`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct PurgeRequest {
    /// Finished tasks whose end is at least this long ago.
    pub older_than_ms: u64,
    /// Only say which.
    pub dry_run: bool,
}

/// The body of `/admin/hash`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HashRequest {
    /// A task id.
    pub id: String,
}

/// The admin API's routes on `runtime`'s tasks (see the module docs),
/// for the operator listener to serve behind its admin token.
pub fn routes(runtime: TaskRuntime) -> Router {
    Router::new()
        .route("/admin/tasks/list", post(list))
        .route("/admin/tasks/show", post(show))
        .route("/admin/tasks/cancel", post(cancel))
        .route("/admin/tasks/purge", post(purge))
        .route("/admin/hash", post(hash))
        .with_state(runtime)
}

fn reply(status: StatusCode, body: &impl Serialize) -> Response {
    let mut response = Response::new(Body::from(
        serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec()),
    ));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn failed(error: &AdminError) -> Response {
    let status = match error {
        AdminError::NotFound => StatusCode::NOT_FOUND,
        AdminError::BadRequest(_) => StatusCode::BAD_REQUEST,
        AdminError::Finished(_) => StatusCode::CONFLICT,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut message = error.to_string();
    if let AdminError::Store(store) = error
        && let Some(cause) = std::error::Error::source(store)
    {
        message = format!("{message}: {cause}");
    }
    reply(status, &json!({"error": message}))
}

/// Who asked, for the audit line.
fn who(request: &Request) -> String {
    match request.extensions().get::<Authenticated>() {
        Some(mark) => operator_label(mark.principal()),
        None => "loopback".to_owned(),
    }
}

/// Who asked, the body read as `T`, and the runtime's admin handle.
async fn read<T: DeserializeOwned>(
    runtime: TaskRuntime,
    request: Request,
) -> Result<(String, T, Admin), Response> {
    let who = who(&request);
    let body: Bytes = axum::body::to_bytes(request.into_body(), MAX_BODY)
        .await
        .map_err(|_| {
            reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                &json!({"error": format!("the body is not readable or larger than {MAX_BODY} bytes")}),
            )
        })?;
    let body = if body.is_empty() {
        &b"{}"[..]
    } else {
        &body[..]
    };
    let parsed = serde_json::from_slice(body).map_err(|error| {
        reply(
            StatusCode::BAD_REQUEST,
            &json!({"error": format!("the body is not the JSON this route takes: {error}")}),
        )
    })?;
    let admin = Admin::of_runtime(runtime)
        .await
        .map_err(|error| failed(&AdminError::Store(error)))?;
    Ok((who, parsed, admin))
}

async fn list(State(runtime): State<TaskRuntime>, request: Request) -> Response {
    let (who, body, admin) = match read::<ListRequest>(runtime, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let limit = body.limit.unwrap_or(DEFAULT_LIMIT);
    let listed = admin.list(&body.filter, limit).await;
    let mut args = json!({"filter": body.filter, "limit": limit, "showIds": body.show.ids});
    let show = Show::default().with_ids(body.show.ids);
    let views: Vec<TaskView> = listed
        .as_ref()
        .map(|records| {
            records
                .iter()
                .map(|record| admin.view(record, show))
                .collect()
        })
        .unwrap_or_default();
    let hashes = if body.page && !body.show.ids {
        args["page"] = json!(true);
        args["listed"] = json!(views.len());
        Vec::new()
    } else {
        views.iter().map(|view| view.task.clone()).collect()
    };
    AuditEntry::new(who, "ls", args, admin.now())
        .with_tasks(hashes)
        .with_outcome(&listed)
        .emit();
    match listed {
        Ok(_) => reply(StatusCode::OK, &ListResponse { tasks: views }),
        Err(error) => failed(&error),
    }
}

async fn show(State(runtime): State<TaskRuntime>, request: Request) -> Response {
    let (who, body, admin) = match read::<NameRequest>(runtime, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let found = admin.find(&body.task).await;
    let view = found
        .as_ref()
        .ok()
        .map(|record| admin.view(record, body.show));
    let args = json!({"showIds": body.show.ids, "showResults": body.show.results});
    AuditEntry::new(who, "show", args, admin.now())
        .with_tasks(view.iter().map(|view| view.task.clone()).collect())
        .with_outcome(&found)
        .emit();
    match (found, view) {
        (Ok(_), Some(view)) => reply(StatusCode::OK, &view),
        (Err(error), _) => failed(&error),
        (Ok(_), None) => failed(&AdminError::NotFound),
    }
}

async fn cancel(State(runtime): State<TaskRuntime>, request: Request) -> Response {
    let (who, body, admin) = match read::<NameRequest>(runtime, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let cancelled = admin.cancel(&body.task).await;
    let view = cancelled
        .as_ref()
        .ok()
        .map(|record| admin.view(record, Show::default()));
    // A task named by its hash is audited by it even when the cancel failed.
    let tasks = match (&view, admin.hasher()) {
        (Some(view), _) => vec![view.task.clone()],
        (None, _) if crate::server::TaskHasher::is_hash(&body.task) => vec![body.task.clone()],
        (None, hasher) => vec![hasher.hash(&TaskId::new(body.task.as_str()))],
    };
    AuditEntry::new(who, "cancel", json!({}), admin.now())
        .with_tasks(tasks)
        .with_outcome(&cancelled)
        .emit();
    match (cancelled, view) {
        (Ok(_), Some(view)) => reply(StatusCode::OK, &view),
        (Err(error), _) => failed(&error),
        (Ok(_), None) => failed(&AdminError::NotFound),
    }
}

async fn purge(State(runtime): State<TaskRuntime>, request: Request) -> Response {
    let (who, body, admin) = match read::<PurgeRequest>(runtime, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let older_than = std::time::Duration::from_millis(body.older_than_ms);
    let purged = admin.purge(older_than, body.dry_run).await;
    let args = json!({"olderThanMs": body.older_than_ms, "dryRun": body.dry_run});
    AuditEntry::new(who, "purge", args, admin.now())
        .with_tasks(
            purged
                .as_ref()
                .map(|purged| purged.tasks.clone())
                .unwrap_or_default(),
        )
        .with_outcome(&purged)
        .emit();
    match purged {
        Ok(purged) => reply(StatusCode::OK, &purged),
        Err(error) => failed(&error),
    }
}

async fn hash(State(runtime): State<TaskRuntime>, request: Request) -> Response {
    let (_, body, admin) = match read::<HashRequest>(runtime, request).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    if body.id.is_empty() {
        return failed(&AdminError::BadRequest("the body names no task id".into()));
    }
    reply(
        StatusCode::OK,
        &json!({"hash": admin.hasher().hash(&TaskId::new(body.id))}),
    )
}
