//! `notifications/tasks/status`: each change of a task made on an
//! initialize-era session goes to that session, as the bare task, until the
//! task ends or the session closes. Clients must not rely on them (they
//! keep polling), so one lost is lost.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::wire;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::store::Principal;
use crate::task::TaskId;

/// The notification's method.
const STATUS: &str = "notifications/tasks/status";

/// How often a follower looks without a wake-up: the safety net for a
/// shared store's changes the feed cannot announce, and the pace at which
/// a closed session is noticed.
const LOOK_EVERY: Duration = Duration::from_secs(10);

/// Follows task `id` (seen at `version`) for the session of `peer`, in the
/// background. The follower keeps only a weak hold on the runtime.
pub(crate) fn follow(
    runtime: &TaskRuntime,
    peer: Peer<RoleServer>,
    id: TaskId,
    principal: Principal,
    version: u64,
) {
    let inner = Arc::downgrade(&runtime.inner);
    let mut waiter = runtime.inner.waiters.register(&id);
    tokio::spawn(async move {
        let mut seen = version;
        // Read once before the first wait: a change between the read that
        // saw `version` and the waiter's registration is not missed.
        let mut first = true;
        loop {
            if !std::mem::take(&mut first) {
                waiter.wait(LOOK_EVERY).await;
            }
            if peer.is_transport_closed() {
                return;
            }
            let Some(inner) = inner.upgrade() else { return };
            let runtime = TaskRuntime { inner };
            let Ok(record) = runtime.current(&id, &principal).await else {
                // Gone (or the store failed): nothing more to say.
                return;
            };
            drop(runtime);
            if record.version() != seen {
                seen = record.version();
                let notification =
                    CustomNotification::new(STATUS, Some(Value::Object(wire::task(&record))));
                if peer
                    .send_notification(ServerNotification::CustomNotification(notification))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if record.status().is_terminal() {
                return;
            }
        }
    });
}
