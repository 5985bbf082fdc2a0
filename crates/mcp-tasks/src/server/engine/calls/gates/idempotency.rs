//! The same call sent again: a call whose idempotency key a task of its
//! caller holds gets that task back (or, when the first send ran
//! synchronously, that run's answer), before any other gate and before its
//! tool runs. The store's atomic `create_keyed` settles two creations
//! racing with one key; the loser's answer is the winner's task
//! ([`raced`]).

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, ErrorCode};
use tokio_util::sync::CancellationToken;

use super::Ask;
use crate::server::engine::admission::caller::Caller;
use crate::server::engine::calls::stop::Stop;
use crate::server::engine::idempotent::Idempotent;
use crate::server::engine::tasks::runtime::TaskRuntime;
use crate::server::engine::wire::store_failure;
use crate::store::TaskRecord;

/// Goes on when the call sent no key, or no task of its caller holds it
/// (or the one that did is gone); else stops with that task's answer.
pub(super) async fn pass(ask: &Ask<'_>) -> Result<(), Stop> {
    let Some(idempotent) = &ask.caller.idempotent else {
        return Ok(());
    };
    let runtime = ask.runtime;
    let found = runtime
        .inner
        .store
        .find_keyed(&ask.caller.principal, &idempotent.key)
        .await
        .map_err(store_failure)?;
    let Some(found) = found else {
        return Ok(());
    };
    match keyed_answer(runtime, ask.caller, idempotent, &found).await? {
        Some(answer) => Err(Stop::Answer(Box::new(answer))),
        None => Ok(()),
    }
}

/// The answer to a call whose idempotency key a task of its caller holds
/// (`found`, read from the store): that task as it is now, or -32602 for
/// another call under the key; `None` when the task is gone by now.
async fn keyed_answer(
    runtime: &TaskRuntime,
    caller: &Caller,
    idempotent: &Idempotent,
    found: &TaskRecord,
) -> Result<Option<CallToolResponse>, ErrorData> {
    if found.ran_synchronously() {
        // The first send ran synchronously: its answer, never a task.
        let never = CancellationToken::new();
        return runtime
            .answer_again(caller, idempotent, found.id(), &never)
            .await
            .map(Some);
    }
    match runtime.current(found.id(), &caller.principal).await {
        Ok(record) => idempotent.answer(&record).map(Some),
        Err(error) if error.code == ErrorCode::INVALID_PARAMS => Ok(None),
        Err(error) => Err(error),
    }
}

/// The answer to a creation that lost a race for its idempotency key: the
/// winner's task (`found`, or read again).
pub(in crate::server::engine::calls) async fn raced(
    runtime: &TaskRuntime,
    caller: &Caller,
    found: Option<&TaskRecord>,
) -> Result<CallToolResponse, ErrorData> {
    let Some(idempotent) = &caller.idempotent else {
        return Err(ErrorData::internal_error(
            "the store found an idempotency key the call did not send",
            None,
        ));
    };
    let read;
    let found = match found {
        Some(found) => found,
        None => {
            read = runtime
                .inner
                .store
                .find_keyed(&caller.principal, &idempotent.key)
                .await
                .map_err(store_failure)?;
            match &read {
                Some(found) => found,
                None => return Err(key_holder_gone()),
            }
        }
    };
    keyed_answer(runtime, caller, idempotent, found)
        .await?
        .ok_or_else(key_holder_gone)
}

/// A creation lost the race for its idempotency key to a task that is gone
/// again already (deleted at once): the caller may send the call again.
fn key_holder_gone() -> ErrorData {
    ErrorData::internal_error(
        "the task holding this call's idempotency key ended and was deleted meanwhile; \
         send the call again",
        None,
    )
}
