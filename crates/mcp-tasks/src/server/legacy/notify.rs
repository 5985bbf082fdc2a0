//! `notifications/tasks/status`: each change of a task made on an
//! initialize-era session goes to that session, as the bare task, until the
//! task ends or the session closes. Clients must not rely on them (they
//! keep polling), so one lost is lost.

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::wire;
use crate::server::engine::tasks::follower::Follower;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::store::Principal;
use crate::task::TaskId;

/// The notification's method.
const STATUS: &str = "notifications/tasks/status";

/// Follows task `id` (seen at `version`) for the session of `peer`, in the
/// background, until the task ends, is gone, or the session closes (noticed
/// at the task's next change or re-read, see [`Follower`]). The follower
/// keeps only a weak hold on the runtime.
pub(crate) fn follow(
    runtime: &TaskRuntime,
    peer: Peer<RoleServer>,
    id: TaskId,
    principal: Principal,
    version: u64,
) {
    // Its first step reads at once: a change between the read that saw
    // `version` and this registration is not missed.
    let mut follower = Follower::new(runtime, id, principal).seen_at(version);
    tokio::spawn(async move {
        while !follower.is_over() {
            // Looked at after every wake-up and re-read, changed or not.
            follower.woken().await;
            if peer.is_transport_closed() {
                return;
            }
            let record = match follower.read().await {
                None => continue,
                Some(Ok(record)) => record,
                // Gone (or the store failed): nothing more to say.
                Some(Err(_)) => return,
            };
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
    });
}
