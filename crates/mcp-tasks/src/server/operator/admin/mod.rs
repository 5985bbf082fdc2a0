//! The operator's view of every caller's tasks: [`Admin`] (list with
//! filters, show, cancel, purge), the audit line each action writes
//! ([`AuditEntry`]), and (feature `operator`) the HTTP routes of the admin API,
//! `routes`, which the operator listener serves behind its admin token.
//!
//! Tasks are named by their keyed hash ([`TaskHasher`](crate::server::TaskHasher)),
//! never by their id unless asked; callers by their token's label
//! ([`principal_label`]). `mcp-tasks admin` is a thin shell over this.

mod audit;
mod ops;
#[cfg(feature = "operator")]
mod routes;
mod view;

pub use audit::{AUDIT_TARGET, AuditEntry};
pub use ops::{Admin, AdminError, Purged};
#[cfg(feature = "operator")]
pub use routes::{HashRequest, ListRequest, ListResponse, NameRequest, PurgeRequest, routes};
#[cfg(feature = "operator")]
pub(crate) use view::operator_label;
pub use view::{
    ANONYMOUS, Filter, OTHER, PROCESS, Show, TaskView, UNAUTHENTICATED, UNLABELLED_TOKEN,
    principal_label,
};
