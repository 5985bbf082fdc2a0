//! One listen stream, whatever carries it: which tasks it reports on, and
//! what it sends, in order: the acknowledgement, the task notifications,
//! and the result that ends it.

use std::collections::HashSet;
use std::time::Duration;

use futures::FutureExt;
use rmcp::ErrorData;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::SUBSCRIPTION_ID;
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::admission::refusal::Refusal;
use crate::server::engine::tasks::follower::Follower;
use crate::server::engine::tasks::listening::ListenSlot;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::detailed_task;
use crate::task::TaskId;

/// The most task ids one stream reports on; further ids are left out of
/// its acknowledgement.
pub(crate) const MAX_TASKS_PER_STREAM: usize = 1024;

/// A listen stream refused for load: the caller or the server has no
/// stream left.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The JSON-RPC error (see [`refusal`](crate::server::engine::admission::refusal)).
    pub(crate) error: ErrorData,
    /// When to try again (`Retry-After` over HTTP).
    #[cfg_attr(not(feature = "http-server"), allow(dead_code))]
    pub(crate) retry_after: Duration,
}

impl From<Refusal> for Refused {
    /// The refusal as a listen stream's transport answers it: the JSON-RPC
    /// error, and when to try again.
    fn from(refusal: Refusal) -> Self {
        let retry_after = refusal.retry_after();
        Self {
            error: refusal.into_error(None),
            retry_after,
        }
    }
}

/// The `taskIds` a listen request's params ask for: `None` when it names
/// none (rmcp serves it), an error when they are not a list of strings.
pub(crate) fn requested_task_ids(params: &Value) -> Option<Result<Vec<String>, ErrorData>> {
    let ids = params.get("notifications")?.get("taskIds")?;
    let malformed =
        || ErrorData::invalid_params("notifications.taskIds must be a list of strings", None);
    Some(match ids {
        Value::Array(ids) => ids
            .iter()
            .map(|id| id.as_str().map(str::to_owned).ok_or_else(malformed))
            .collect(),
        _ => Err(malformed()),
    })
}

/// One open listen stream for tasks. Dropping it frees everything it holds.
pub(crate) struct Subscription {
    id: Value,
    /// The tasks it reports on, each followed (see [`Follower`]).
    followed: Vec<Follower>,
    ending: CancellationToken,
    _slot: ListenSlot,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("tasks", &self.followed.len())
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// Opens the stream of listen request `id` for `caller`: takes a place
    /// among the open streams (or is refused, see [`Slot::take`]), keeps
    /// the requested ids that exist and belong to the caller. Returns the
    /// params of its acknowledgement and the stream.
    pub(crate) async fn open(
        runtime: &TaskRuntime,
        caller: &Caller,
        id: Value,
        requested: Vec<String>,
    ) -> Result<(Value, Self), Refused> {
        let ending = runtime.subscriptions_ending();
        let slot = runtime.listen_slot(&caller.quota)?;
        let mut followed = Vec::new();
        let mut seen = HashSet::new();
        for id in requested {
            if followed.len() >= MAX_TASKS_PER_STREAM {
                break;
            }
            if !seen.insert(id.clone()) {
                continue;
            }
            // Its first read is the task as it is now: not sent, the stream
            // reports changes from here (a task ended already is
            // acknowledged and then has nothing more to say).
            let mut follower = Follower::new(runtime, TaskId::new(id), caller.principal.clone());
            if let Some(Ok(_)) = follower.read().await {
                followed.push(follower);
            }
        }
        let accepted: Vec<&str> = followed.iter().map(|task| task.id().expose()).collect();
        let acknowledgement = json!({
            "_meta": {SUBSCRIPTION_ID: id},
            "notifications": {"taskIds": accepted},
        });
        let subscription = Self {
            id,
            followed,
            ending,
            _slot: slot,
        };
        Ok((acknowledgement, subscription))
    }

    /// The params of the next `notifications/tasks`, or `None` once the
    /// stream is over (every task finished or gone, or the runtime ended
    /// its streams). Cancel safe: a change woken and not sent yet is read
    /// again by the next call.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        loop {
            if self.ending.is_cancelled() {
                return None;
            }
            // Boxed: the reads' state lives on the heap only while they run,
            // not in every idle stream.
            if let Some(params) = Box::pin(self.changed_task()).await {
                return Some(params);
            }
            if self.followed.iter().all(Follower::is_over) {
                return None;
            }
            let woken = futures::future::select_all(
                self.followed
                    .iter_mut()
                    .filter(|task| !task.is_over())
                    .map(|task| task.woken().boxed()),
            );
            tokio::select! {
                _ = woken => {}
                () = self.ending.cancelled() => return None,
            }
        }
    }

    /// Reads the tasks due for a read, in order; the params of the first
    /// one that changed since it was last sent.
    async fn changed_task(&mut self) -> Option<Value> {
        for task in &mut self.followed {
            // `None`: not due, unchanged, or over. An error: gone (the
            // follower is over: nothing more to say), or a store failure
            // (logged by the runtime: read again on its next wake-up).
            let Some(Ok(record)) = task.read().await else {
                continue;
            };
            let Ok(detailed) = detailed_task(&record) else {
                continue;
            };
            let Ok(Value::Object(mut params)) = serde_json::to_value(detailed) else {
                continue;
            };
            params.insert("_meta".into(), json!({SUBSCRIPTION_ID: self.id}));
            return Some(Value::Object(params));
        }
        None
    }

    /// The result that ends the stream gracefully.
    pub(crate) fn result(&self) -> Value {
        json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID: self.id}})
    }

    /// The JSON-RPC id of the listen request.
    #[cfg_attr(not(feature = "http-server"), allow(dead_code))]
    pub(crate) fn id(&self) -> &Value {
        &self.id
    }
}
