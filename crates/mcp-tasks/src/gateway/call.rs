//! One `tools/call` relayed to the upstream: as a plain request whose
//! progress and requests reach the call's [`TaskContext`]
//! (see [`relay`](super::relay); its MRTR rounds are answered by
//! [`rounds`](super::rounds)), or, when the upstream itself makes tasks
//! (either era), as its task awaited with our own client, its status and
//! input relayed the same way. A dropped call (the task was cancelled or
//! expired) cancels the upstream request (through its [`Lease`]) or the
//! upstream task.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    InputRequest, InputResponses,
};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;

use super::client_failure;
use super::connection::{Connection, UpstreamClient};
use super::pool::Lease;
use super::relay::{Calls, Target, fit_to_form};
use super::upstream::upstream_failure;
use crate::client::{
    AwaitOptions, CallOptions, CallResponse, Era, InputError, InputMode, ListenMode, TaskOutcome,
    TaskState, read_call_result,
};
use crate::server::{TaskContext, TaskPolicy};
use crate::task::TaskId;

/// Whether the upstream answers a call of a tool marked `marked` with a
/// task of its own: a 2026-07-28 upstream that advertises the extension, or
/// a 2025-11-25 upstream that declared `tasks.requests.tools.call`, for a
/// tool it marks optional or required.
pub(crate) fn upstream_makes_tasks(connection: &Connection, marked: Option<TaskPolicy>) -> bool {
    connection.makes_tasks()
        && (!connection.client.initialize_era()
            || matches!(marked, Some(TaskPolicy::Optional | TaskPolicy::Required)))
}

/// Sends `tasks/cancel` for the upstream task when dropped armed.
struct CancelTask {
    client: UpstreamClient,
    id: Option<TaskId>,
    /// The gateway's task that follows it: when its tool is dropped because
    /// this gateway stops running it (a drain, a takeover), the upstream's
    /// task is left running for the gateway that takes it up.
    follower: Option<TaskContext>,
}

impl Drop for CancelTask {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let client = self.client.clone();
        let follower = self.follower.take();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Some(follower) = follower
                    && follower.is_left_to_resume().await
                {
                    return;
                }
                let _ = client.cancel(&id).await;
            });
        }
    }
}

/// Relays one call as a plain request on the connection `lease` holds for
/// it alone, and returns what the upstream answered (a result, or an MRTR
/// round, which [`rounds`](super::rounds) answers). The upstream's
/// requests and progress on the connection reach `target`.
/// Dropped before the upstream answered, the lease cancels the request.
pub(crate) async fn plain(
    lease: &Lease,
    calls: &Arc<Calls>,
    request: &CallToolRequestParams,
    target: Target,
) -> Result<CallToolResponse, ErrorData> {
    let connection: &Connection = lease;
    let guard = calls.register(connection.id, target);
    let mut params = CallToolRequestParams::new(request.name.clone());
    params.arguments = request.arguments.clone();
    params.input_responses = request.input_responses.clone();
    params.request_state = request.request_state.clone();
    let mut options = PeerRequestOptions::no_options();
    options.timeout = None;
    let peer = connection.client.running().peer().clone();
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            options,
        )
        .await
        .map_err(|error| {
            // Not sent: the connection is dead, and counts as a failure of
            // the upstream's.
            lease.connection_failed();
            upstream_failure(&connection.upstream, "tools/call", &error)
        })?;
    guard.set_progress_token(handle.progress_token.clone());
    lease.sent(handle.id.clone());
    let answer = tokio::select! {
        answer = handle.await_response() => answer,
        // A stdio child that died takes the request with it.
        () = connection.closed() => Err(rmcp::service::ServiceError::TransportClosed),
    };
    lease.answered();
    counted(&connection.upstream, answer.is_ok());
    let answer = answer.map_err(|error| {
        // Over HTTP the request goes out in the transport's worker: one
        // that could not be sent fails here.
        if matches!(error, rmcp::service::ServiceError::TransportSend(_)) {
            lease.connection_failed();
        }
        upstream_failure(&connection.upstream, "tools/call", &error)
    })?;
    match read_call_result(answer).map_err(|error| client_failure("tools/call", &error))? {
        CallResponse::Complete(result) => Ok(CallToolResponse::Complete(result)),
        CallResponse::InputRequired(input) => Ok(CallToolResponse::InputRequired(input)),
        CallResponse::Task(_) => Err(ErrorData::internal_error(
            "the upstream server answered with a task that was not asked for",
            None,
        )),
    }
}

/// Calls a tool on an upstream that makes tasks itself, declaring the
/// extension (and carrying the caller's MRTR answers): its result, its MRTR
/// input request, or its task.
pub(crate) async fn start_upstream(
    connection: &Connection,
    request: &CallToolRequestParams,
) -> Result<CallResponse, ErrorData> {
    // No timeout: an upstream that runs the call at once is waited for as
    // its own caller would wait.
    let call = CallOptions::default().with_timeout(None).with_mrtr_retry(
        request.input_responses.clone(),
        request.request_state.clone(),
    );
    let answer = connection
        .client
        .call_tool(request.name.to_string(), request.arguments.clone(), call)
        .await;
    counted(&connection.upstream, answer.is_ok());
    answer.map_err(|error| client_failure("tools/call", &error))
}

/// The outcome of an upstream task whose creation said it had already
/// finished (its tool answered in its first step), so that the gateway's
/// task is made finished as well, in one write, and its caller needs no
/// stream to learn so: the outcome the creation carried (an upstream of
/// this crate answers our client's call with it, see
/// [`CREATED_OUTCOME_EXTENSION`](crate::CREATED_OUTCOME_EXTENSION)), else
/// read with one `tasks/get`. `None` when the creation did not say so (or
/// in the 2025-11-25 era, whose result is read with `tasks/result`), or
/// when the read did not give the outcome: the gateway's task then awaits
/// the upstream's as any other does.
pub(crate) async fn finished_upstream(
    connection: &Connection,
    upstream: &TaskState,
) -> Option<Result<CallToolResult, ErrorData>> {
    if upstream.era() != Era::Extension || !upstream.status.is_terminal() {
        return None;
    }
    if upstream.has_outcome() {
        return upstream.outcome().ok().map(outcome_of);
    }
    let state = connection.client.get(&upstream.id).await.ok()?;
    if state.id != upstream.id || !state.has_outcome() {
        return None;
    }
    state.outcome().ok().map(outcome_of)
}

/// Counts one call answered by the upstream (`ok`) or failed on the way (`error`).
fn counted(upstream: &str, answered: bool) {
    let outcome = if answered { "ok" } else { "error" };
    metrics::counter!(
        crate::telemetry::names::UPSTREAM_CALLS,
        "upstream" => upstream.to_owned(),
        "outcome" => outcome
    )
    .increment(1);
}

/// Cancels an upstream task the gateway will not await (its own task could
/// not be created).
pub(crate) fn abandon(client: UpstreamClient, id: TaskId) {
    drop(CancelTask {
        client,
        id: Some(id),
        follower: None,
    });
}

/// Awaits the upstream's task `upstream` for the gateway's `task`: its input
/// requests become `task`'s input, its status messages `task`'s, and its
/// outcome the task's. Dropped (the task was cancelled or expired), it sends
/// `tasks/cancel` on.
pub(crate) async fn await_upstream(
    connection: &Connection,
    upstream: TaskState,
    task: TaskContext,
) -> Result<CallToolResult, ErrorData> {
    // On the gateway's own connection, shared by every such call: the
    // upstream's input reaches this call through its task (a 2025-11-25
    // request names the task it belongs to); a request that names none is
    // refused there.
    let client = connection.client.clone();
    let (status_tx, mut status_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let resolver_task = task.clone();
    let keys = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let options = AwaitOptions::default()
        .with_deadline(None)
        // Listen where the upstream serves the stream, poll where it
        // refuses (fastmcp-tasks: -32601) or speaks 2025-11-25.
        .with_listen(ListenMode::Auto)
        .with_stall_detection(u32::MAX, false)
        .with_input(InputMode::resolver(move |requests| {
            relay_inputs(resolver_task.clone(), keys.clone(), requests)
        }))
        .with_observer(move |state| {
            if let Some(message) = &state.status_message {
                let _ = status_tx.send(message.clone());
            }
        });
    let mut cancel = CancelTask {
        client: client.clone(),
        id: Some(upstream.id.clone()),
        follower: Some(task.clone()),
    };
    let run = async {
        let outcome = client.await_task(upstream, &options).await;
        cancel.id = None;
        outcome_of(outcome.map_err(|error| client_failure("the upstream task", &error))?)
    };
    let forward = async {
        let mut last = None;
        while let Some(message) = status_rx.recv().await {
            if last.as_ref() != Some(&message) {
                let _ = task.set_status_message(message.clone()).await;
                last = Some(message);
            }
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        outcome = run => outcome,
        () = forward => unreachable!("forwarding never ends"),
        () = connection.closed() => Err(ErrorData::internal_error(
            "the connection to the upstream server was lost during the task (it exited or \
             crashed, or stopped answering)",
            None,
        )),
    }
}

/// What the upstream task's outcome makes of the gateway's task.
fn outcome_of(outcome: TaskOutcome) -> Result<CallToolResult, ErrorData> {
    match outcome {
        TaskOutcome::Completed(result) => Ok(result),
        TaskOutcome::Failed(failure) => Err(ErrorData::new(
            rmcp::model::ErrorCode(i32::try_from(failure.error.code).unwrap_or(-32603)),
            failure.error.message.clone(),
            failure.error.data.clone(),
        )),
        TaskOutcome::Cancelled(_) => Err(ErrorData::internal_error(
            "the upstream server cancelled its task",
            None,
        )),
        _ => Err(ErrorData::internal_error(
            "the upstream task needs input the gateway could not relay",
            None,
        )),
    }
}

/// Asks the gateway's task for the upstream's input requests, under keys of
/// the gateway's own (the upstream's keys may name its task), and hands the
/// answers back under the upstream's keys.
async fn relay_inputs(
    task: TaskContext,
    keys: Arc<std::sync::atomic::AtomicU64>,
    requests: BTreeMap<String, Value>,
) -> Result<InputResponses, InputError> {
    let mut ours = BTreeMap::new();
    let mut theirs = BTreeMap::new();
    for (key, wire) in requests {
        let request: InputRequest = serde_json::from_value(wire.clone())
            .map_err(|error| InputError::new(key.clone(), error))?;
        let n = keys.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mine = format!("upstream-task-{n}");
        ours.insert(mine.clone(), request);
        theirs.insert(mine, (key, wire));
    }
    let answers = task
        .request_inputs(ours)
        .await
        .map_err(|error| InputError::new("input", error.message.to_string()))?;
    let mut responses = InputResponses::new();
    for (mine, answer) in answers {
        if let Some((key, wire)) = theirs.remove(&mine) {
            responses.insert(key, fit_to_form(&wire, answer));
        }
    }
    Ok(responses)
}
