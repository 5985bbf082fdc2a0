//! One call, one run, for the calls that make no task: a synchronous
//! `tools/call` sent with an idempotency key (see [`crate::idempotency`])
//! runs at most once, as a call that makes a task does.
//!
//! A call whose answer is lost (a connection reset, a proxy's 502, a
//! client's timeout) may have run; sending it again may run it again. For a
//! call that makes a task the key finds that task (`runtime.rs`). For one
//! that runs synchronously (a tool whose policy forbids a task, a caller
//! that did not declare the extension, an MRTR round) this module keeps a
//! record of the call in the store, made under the key before the tool
//! runs and given the call's answer when it ends. The same call sent again
//! by the same caller, on this process or another one sharing the store,
//! finds that record: it waits while the first run goes on, then gets the
//! first run's answer (its result, its MRTR input request, or its error),
//! never a second run. A record whose server stopped before the call ended
//! is failed as a task's would be (by a restart on SQLite, by a takeover
//! on a shared store), and the call sent again gets that failure: it may
//! have run in part, and it is not run again.
//!
//! The record is a task record ([`TaskRecord::for_synchronous_call`]) whose
//! id is told to no one: it lives for the tool's TTL from its creation, the
//! sweeper deletes it as any other, and an operator sees it in the admin
//! listing with a status message that says what it is. It goes around the
//! task gates (admission, rates, seats) and the observers: the call is no
//! task, and is neither queued nor counted as one.
//!
//! Only a runtime whose store keeps keys ([`TaskStore::keeps_keys`]) does
//! this, and only such a runtime declares [`IDEMPOTENCY_EXTENSION`]
//! ([`TaskRuntime::declare_idempotency`]).
//!
//! [`TaskStore::keeps_keys`]: crate::store::TaskStore::keeps_keys

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode, InputRequiredResult,
    JsonObject, ServerCapabilities,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::idempotency::IDEMPOTENCY_EXTENSION;
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::budget::response_within;
use crate::server::engine::idempotent::Idempotent;
use crate::server::engine::lease::{Lease, LeaseError};
use crate::server::engine::policy::ToolTasks;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::{error_json, store_failure, tool_panicked};
use crate::store::{Change, Keyed, PackedRecord, StoreErrorKind, TaskRecord};
use crate::task::{TaskId, TaskStatus};

/// The status message of a synchronous call's record, for an operator who
/// lists every task: it is no task of anyone's.
pub(crate) const SYNCHRONOUS_CALL_MESSAGE: &str =
    "a synchronous tools/call, kept for its idempotency key (not a task)";

/// How long a call sent again waits between two reads of the first run's
/// record when no change wakes it (a safety net for a lossy change feed).
const REREAD_EVERY: Duration = Duration::from_secs(5);

/// How long the answer of a synchronous call is tried again while the store
/// cannot be reached.
const KEEP_ANSWER_FOR: Duration = Duration::from_secs(30);

impl TaskRuntime {
    /// True when every `tools/call` sent with an idempotency key runs at
    /// most once on this runtime (its store keeps keys: the memory, SQLite
    /// and Redis stores do): the same call sent again gets the first one's
    /// task or answer. What [`TaskRuntime::declare_idempotency`] declares.
    pub fn honours_idempotency(&self) -> bool {
        self.inner.store.keeps_keys()
    }

    /// `capabilities` with [`IDEMPOTENCY_EXTENSION`] declared (an empty
    /// settings object in its `extensions`) when this runtime
    /// [honours idempotency keys](TaskRuntime::honours_idempotency); as they
    /// are otherwise. A client of this library sends a `tools/call` whose
    /// answer was lost again only to a server that declares it.
    ///
    /// Declare it (in your `ServerHandler::get_info`) only when every
    /// `tools/call` of the server goes through this runtime:
    /// [`TaskRuntime::call_tool`] or a [`TaskRouter`](crate::server::TaskRouter).
    /// A tool answered by your own code, around the runtime, runs again when
    /// its call is sent again.
    pub fn declare_idempotency(&self, mut capabilities: ServerCapabilities) -> ServerCapabilities {
        if self.honours_idempotency() {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(IDEMPOTENCY_EXTENSION.to_owned(), JsonObject::new());
        }
        capabilities
    }

    /// Runs `run`, the synchronous answer to `request` from `caller`, once
    /// under the call's idempotency key (see the [module docs](self));
    /// without a key, or on a store that keeps none, just runs it. Its
    /// answer is held to the result budget (`budget.rs`), and a panic in
    /// `run` is answered as an internal error. `cancelled` fires when
    /// the caller is gone: a call sent again stops waiting for the first
    /// run then.
    pub(crate) async fn run_once<Fut>(
        &self,
        caller: &Caller,
        request: &CallToolRequestParams,
        tasks: &ToolTasks,
        cancelled: &CancellationToken,
        run: Fut,
    ) -> Result<CallToolResponse, ErrorData>
    where
        Fut: Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
    {
        // Every answer is held to the result budget, before it is kept.
        let limit = self.inner.settings.max_result_bytes;
        let run = async move { response_within(run.await, limit) };
        let Some(idempotent) = caller
            .idempotent
            .as_ref()
            .filter(|_| self.honours_idempotency())
        else {
            return run_caught(run).await;
        };
        let store = &self.inner.store;
        if let Some(found) = store
            .find_keyed(&caller.principal, &idempotent.key)
            .await
            .map_err(store_failure)?
        {
            return self
                .answer_again(caller, idempotent, found.id(), cancelled)
                .await;
        }
        let (record, lease) = self.call_record(caller, idempotent, request, tasks).await?;
        let id = record.id().clone();
        if let Keyed::Existing(found) = store.create_keyed(record).await.map_err(store_failure)? {
            return self
                .answer_again(caller, idempotent, found.id(), cancelled)
                .await;
        }
        // The tool and the write of its answer on a task of their own: the
        // record gets its answer even when the caller is gone before it.
        let runtime = self.clone();
        let running = tokio::spawn(async move {
            let answer = match AssertUnwindSafe(run).catch_unwind().await {
                Ok(answer) => answer,
                Err(_panic) => Err(tool_panicked()),
            };
            let change = match &answer {
                Ok(response) => Change::Complete(response_json(response)),
                Err(error) => Change::Fail(error_json(error)),
            };
            runtime.keep_answer(id, change, lease).await;
            answer
        });
        running.await.unwrap_or_else(|_| Err(tool_panicked()))
    }

    /// The record of a synchronous call about to run: its key, the call's
    /// fingerprint, the tool's TTL counted from now, and on a shared store
    /// this process's lease (checked first), so that another replica fails
    /// it if this one stops.
    async fn call_record(
        &self,
        caller: &Caller,
        idempotent: &Idempotent,
        request: &CallToolRequestParams,
        tasks: &ToolTasks,
    ) -> Result<(TaskRecord, Option<Arc<Lease>>), ErrorData> {
        let settings = &self.inner.settings;
        let (record, now) = self.fresh_record(caller, &request.name, tasks, false)?;
        let mut record =
            record.for_synchronous_call(&idempotent.key, idempotent.fingerprint.clone());
        record = record
            .apply(
                &Change::StatusMessage(SYNCHRONOUS_CALL_MESSAGE.to_owned()),
                now,
                settings.retention,
            )
            .map_err(|refused| ErrorData::internal_error(refused.to_string(), None))?
            .into_record();
        let lease = self.checked_lease().await?;
        if let Some(lease) = &lease {
            record = record.with_runner(lease.runner().clone(), None);
        }
        Ok((record, lease))
    }

    /// Writes a synchronous call's answer into its record (`change`), in the
    /// name of `lease`'s runner where there is one; tried again while the
    /// store cannot be reached, for at most [`KEEP_ANSWER_FOR`], in the
    /// background once the first try failed (the caller has its answer;
    /// the same call sent again meanwhile waits). Written around the
    /// observers: the call is no task.
    async fn keep_answer(&self, id: TaskId, change: Change, lease: Option<Arc<Lease>>) {
        if self.try_keep_answer(&id, &change, lease.as_ref()).await {
            return;
        }
        let runtime = self.clone();
        tokio::spawn(async move {
            let give_up = tokio::time::Instant::now() + KEEP_ANSWER_FOR;
            let mut pause = Duration::from_millis(100);
            while tokio::time::Instant::now() + pause < give_up {
                tokio::time::sleep(pause).await;
                if runtime.try_keep_answer(&id, &change, lease.as_ref()).await {
                    return;
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            tracing::error!(
                "a synchronous call's answer could not be kept for its idempotency key"
            );
        });
    }

    /// One try of [`TaskRuntime::keep_answer`]: true when done (written, or
    /// not to be written: the record ended meanwhile, or went to another
    /// runner), false when worth trying again.
    async fn try_keep_answer(
        &self,
        id: &TaskId,
        change: &Change,
        lease: Option<&Arc<Lease>>,
    ) -> bool {
        let inner = &self.inner;
        let (store, now, retention) = (&*inner.store, inner.clock.now(), inner.settings.retention);
        let written = match (lease, &inner.leasing, inner.store.replicas()) {
            (Some(lease), Some(leasing), Some(replicas)) => {
                match leasing.ensure(replicas, lease).await {
                    Err(LeaseError::Lost) => return true,
                    Err(LeaseError::Store(error)) => Err(error),
                    Ok(()) => {
                        crate::store::modify_as(store, id, change, lease.runner(), now, retention)
                            .await
                    }
                }
            }
            _ => crate::store::modify(store, id, change, now, retention).await,
        };
        match written {
            Ok(_) => true,
            Err(error) if error.kind() == StoreErrorKind::Unavailable => {
                tracing::warn!(%error, "keeping a synchronous call's answer failed; retrying");
                false
            }
            Err(error) => {
                tracing::error!(%error, "keeping a synchronous call's answer failed");
                true
            }
        }
    }

    /// The answer to a call sent again, whose key the record `id` holds:
    /// once that record has ended, the first run's answer (see
    /// [`replay`]); -32602 for another call under the key.
    pub(crate) async fn answer_again(
        &self,
        caller: &Caller,
        idempotent: &Idempotent,
        id: &TaskId,
        cancelled: &CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut waiter = self.inner.waiters.register(id);
        loop {
            let record = match self.current(id, &caller.principal).await {
                Ok(record) => record,
                // Deleted since it was found: past its retention.
                Err(error) if error.code == ErrorCode::INVALID_PARAMS => {
                    return Err(answer_gone());
                }
                Err(error) => return Err(error),
            };
            idempotent.same_call(record.call_fingerprint())?;
            if record.status().is_terminal() {
                return replay(&record);
            }
            if !record.ran_synchronously() {
                return Err(task_made());
            }
            tokio::select! {
                () = waiter.wait(REREAD_EVERY) => {}
                () = cancelled.cancelled() => return Err(answer_gone()),
            }
        }
    }
}

/// Runs `run` on a task of its own (a panic in it is answered as an
/// internal error, not spread to the connection).
async fn run_caught<Fut>(run: Fut) -> Result<CallToolResponse, ErrorData>
where
    Fut: Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
{
    match tokio::spawn(run).await {
        Ok(answer) => answer,
        Err(_) => Err(tool_panicked()),
    }
}

/// A synchronous call's answer as its record keeps it: the result (or MRTR
/// input request) as its JSON, with its `resultType`.
fn response_json(response: &CallToolResponse) -> Value {
    let value = match response {
        CallToolResponse::Complete(result) => serde_json::to_value(result),
        CallToolResponse::InputRequired(input) => serde_json::to_value(input),
        CallToolResponse::Task(task) => serde_json::to_value(task),
        other => serde_json::to_value(rmcp::model::ServerResult::from(other.clone())),
    };
    value.unwrap_or_else(|_| serde_json::json!({"content": []}))
}

/// The answer an ended record gives a call sent again: for a synchronous
/// call's record, the first run's answer as it was; for a task's (the
/// first send made a task, this one runs synchronously), its result, or
/// its error.
fn replay(record: &PackedRecord) -> Result<CallToolResponse, ErrorData> {
    match record.status() {
        TaskStatus::Completed => {
            let Some(value) = record.result_value() else {
                return Err(ErrorData::internal_error(
                    "the first run of this call left no answer to give again",
                    None,
                ));
            };
            let input = value.get("resultType").and_then(Value::as_str) == Some("input_required");
            let read = if input && record.ran_synchronously() {
                serde_json::from_value::<InputRequiredResult>(value).map(CallToolResponse::from)
            } else {
                serde_json::from_value::<CallToolResult>(value).map(CallToolResponse::from)
            };
            read.map_err(|error| {
                ErrorData::internal_error(
                    format!("the first run's answer to this call cannot be read again: {error}"),
                    None,
                )
            })
        }
        TaskStatus::Failed => Err(record
            .error_value()
            .and_then(|error| serde_json::from_value::<ErrorData>(error).ok())
            .unwrap_or_else(|| {
                ErrorData::internal_error("the first run of this call failed", None)
            })),
        _ => Err(ErrorData::internal_error(
            "the first run of this call was cancelled on the server; it is not run again",
            None,
        )),
    }
}

/// The record holding a call's key is gone before its answer could be
/// given again (past its retention, or the caller left).
fn answer_gone() -> ErrorData {
    ErrorData::internal_error(
        "this call's idempotency key was used before, and that call's answer is no longer kept; \
         it is not run again: send it with a new key to run it again",
        None,
    )
}

/// A call sent again without the Tasks extension whose first send made a
/// task, still unfinished.
fn task_made() -> ErrorData {
    ErrorData::invalid_params(
        "this call's idempotency key was used before by a call that made a task, still \
         unfinished; send it again declaring the Tasks extension to get that task",
        None,
    )
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ContentBlock, ErrorCode};
    use serde_json::json;

    use super::*;
    use crate::store::{Principal, TaskRecord};
    use crate::task::{Ttl, UnixMillis};

    fn ended(change: &Change) -> PackedRecord {
        let record = TaskRecord::new(
            TaskId::new("t"),
            Principal::new("p"),
            UnixMillis::new(0),
            Ttl::from_millis(60_000),
            None,
        )
        .for_synchronous_call(
            &crate::IdempotencyKey::new("k").expect("key"),
            crate::store::call_fingerprint("tool", None),
        );
        let done = record
            .apply(change, UnixMillis::new(1), Duration::from_secs(60))
            .expect("applies")
            .into_record();
        PackedRecord::pack(done)
    }

    #[test]
    fn a_first_runs_answer_is_given_again_as_it_was() {
        let result = CallToolResult::success(vec![ContentBlock::text("paid 5 EUR")]);
        let kept = ended(&Change::Complete(response_json(&result.clone().into())));
        match replay(&kept).expect("an answer") {
            CallToolResponse::Complete(again) => assert_eq!(again.content, result.content),
            other => panic!("expected the result, got {other:?}"),
        }
        let asked = serde_json::from_value::<InputRequiredResult>(json!({
            "resultType": "input_required",
            "inputRequests": {"name": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {}}}}},
            "requestState": "s1"
        }))
        .expect("an input request");
        let kept = ended(&Change::Complete(response_json(&asked.into())));
        let CallToolResponse::InputRequired(again) = replay(&kept).expect("an answer") else {
            panic!("expected the input request");
        };
        assert_eq!(again.request_state.as_deref(), Some("s1"));
        let refused = ErrorData::invalid_params("no such account", Some(json!({"account": 7})));
        let kept = ended(&Change::Fail(error_json(&refused)));
        let error = replay(&kept).expect_err("the error");
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.message, "no such account");
        assert_eq!(error.data, Some(json!({"account": 7})));
        let cancelled = ended(&Change::Cancel);
        assert!(
            replay(&cancelled)
                .unwrap_err()
                .message
                .contains("not run again")
        );
    }
}
