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
use crate::server::engine::tasks::listening::ListenSlot;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::waiters::Waiter;
use crate::server::engine::wire::detailed_task;
use crate::store::Principal;
use crate::task::TaskId;

/// The most task ids one stream reports on; further ids are left out of
/// its acknowledgement.
pub(crate) const MAX_TASKS_PER_STREAM: usize = 1024;

/// How often a stream re-reads its tasks without a wake-up: the safety net
/// for changes the change feed cannot announce (another process writing to
/// a shared store).
const REREAD_EVERY: Duration = Duration::from_secs(30);

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

/// One task a stream reports on.
struct Watched {
    id: TaskId,
    waiter: Waiter,
    /// The version last sent or seen when the stream opened.
    version: u64,
    /// Woken since it was last read.
    dirty: bool,
    /// Finished or gone: nothing more to send.
    done: bool,
}

/// One open listen stream for tasks. Dropping it frees everything it holds.
pub(crate) struct Subscription {
    runtime: TaskRuntime,
    id: Value,
    principal: Principal,
    watched: Vec<Watched>,
    ending: CancellationToken,
    _slot: ListenSlot,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("tasks", &self.watched.len())
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
        let inner = &runtime.inner;
        let ending = inner.listeners.ending();
        let slot = runtime.listen_slot(&caller.quota)?;
        let principal = caller.principal.clone();
        let mut watched = Vec::new();
        let mut seen = HashSet::new();
        for id in requested {
            if watched.len() >= MAX_TASKS_PER_STREAM {
                break;
            }
            if !seen.insert(id.clone()) {
                continue;
            }
            let id = TaskId::new(id);
            // Registered before the read: a change after it wakes us.
            let waiter = inner.waiters.register(&id);
            if let Ok(record) = runtime.current(&id, &principal).await {
                watched.push(Watched {
                    id,
                    waiter,
                    version: record.version(),
                    dirty: false,
                    done: record.status().is_terminal(),
                });
            }
        }
        let accepted: Vec<&str> = watched.iter().map(|task| task.id.expose()).collect();
        let acknowledgement = json!({
            "_meta": {SUBSCRIPTION_ID: id},
            "notifications": {"taskIds": accepted},
        });
        let subscription = Self {
            runtime: runtime.clone(),
            id,
            principal,
            watched,
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
            if self.ending.is_cancelled() || self.watched.iter().all(|task| task.done) {
                return None;
            }
            // Boxed: the reads' state lives on the heap only while they run,
            // not in every idle stream.
            if let Some(params) = Box::pin(self.changed_task()).await {
                return Some(params);
            }
            let woken = {
                let waits = self
                    .watched
                    .iter_mut()
                    .enumerate()
                    .filter(|(_, task)| !task.done)
                    .map(|(index, task)| {
                        async move {
                            task.waiter.changed().await;
                            index
                        }
                        .boxed()
                    });
                let any = futures::future::select_all(waits);
                tokio::select! {
                    (index, _, _) = any => Some(index),
                    () = self.ending.cancelled() => return None,
                    () = tokio::time::sleep(REREAD_EVERY) => None,
                }
            };
            for (index, task) in self.watched.iter_mut().enumerate() {
                if woken.is_none_or(|woken| woken == index) {
                    task.dirty = true;
                }
            }
        }
    }

    /// Reads the woken tasks; the params of the first one that changed
    /// since it was last sent.
    async fn changed_task(&mut self) -> Option<Value> {
        for task in self
            .watched
            .iter_mut()
            .filter(|task| task.dirty && !task.done)
        {
            let record = match self.runtime.current(&task.id, &self.principal).await {
                Ok(record) => record,
                Err(error) if error.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
                    // Gone (deleted after its retention): nothing more to say.
                    task.done = true;
                    continue;
                }
                // A store failure (logged by the runtime): read it again on
                // the next wake-up.
                Err(_) => continue,
            };
            task.dirty = false;
            if record.version() == task.version {
                continue;
            }
            task.version = record.version();
            task.done = record.status().is_terminal();
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
