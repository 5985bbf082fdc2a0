//! What a call of the gateway and a gateway task taken up again share: the
//! connection an upstream task is awaited on ([`Held`]), and a call bounded
//! by its route's call timeout ([`bounded`]).

use std::sync::Arc;

use rmcp::ErrorData;

use super::routes::Route;
use super::{breaker, connection, pool};

/// The connection an upstream task is awaited on.
pub(crate) enum Held {
    /// The gateway's own.
    Own(Arc<connection::Connection>),
    /// One of the caller's identity, leased for the task.
    Leased(pool::Lease),
}

impl std::ops::Deref for Held {
    type Target = connection::Connection;

    fn deref(&self) -> &connection::Connection {
        match self {
            Self::Own(connection) => connection,
            Self::Leased(lease) => lease,
        }
    }
}

/// `call`, failed when it takes longer than the route's call timeout
/// (dropped then: its upstream request is cancelled).
pub(crate) async fn bounded<T>(
    route: &Route,
    call: impl std::future::Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let Some(limit) = route.config.call_timeout else {
        return call.await;
    };
    match tokio::time::timeout(limit, call).await {
        Ok(outcome) => outcome,
        Err(_) => Err(ErrorData::internal_error(
            format!(
                "{} did not answer within {} (its call timeout)",
                breaker::the_upstream(route.name()),
                breaker::seconds(limit)
            ),
            None,
        )),
    }
}
