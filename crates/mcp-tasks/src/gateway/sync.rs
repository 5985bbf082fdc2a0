//! A synchronous call passed straight through, with the upstream's
//! requests during it relayed to the caller as the caller's era asks them.
//!
//! * **A caller on a 2025-era session** (it sent `initialize`: stdio, or a
//!   stateful HTTP session) is asked on its own connection: the upstream's
//!   `elicitation/create`, `sampling/createMessage` or `roots/list` goes to
//!   it as a server-to-client request, and its answer goes back as the
//!   response.
//! * **A 2026-07-28 caller** cannot be sent requests: the `tools/call` is
//!   answered with an MRTR round (`resultType: input_required`, the
//!   upstream's requests as `inputRequests`, and a `requestState` that
//!   names the parked upstream call). The upstream call goes on waiting;
//!   the caller's retry with `inputResponses` and that `requestState`
//!   answers it, and the retry is answered with the upstream's result or
//!   the next round. A parked call is bound to the caller's principal and
//!   tool and kept for [`GatewayOptions::input_timeout`]; past it, or when
//!   the caller sends no retry, the upstream request is cancelled. It
//!   keeps its upstream connection meanwhile (one of the pool's), and
//!   lives in this process: a retry that reaches another gateway replica
//!   gets -32602, as does one whose `requestState` names no parked call.
//!
//! An upstream's MRTR round during the call (see [`rounds`](super::rounds))
//! is asked of the caller the same way, each of its input requests as one
//! of the upstream's requests, and the call goes on with the answers.
//!
//! A caller that did not declare the capability a request needs
//! (`elicitation`, its URL mode, `sampling`, `roots`) is not asked: the
//! upstream gets an error saying so (for an MRTR round: the call fails
//! with it).

// Sampling and roots are deprecated (SEP-2577) but an upstream may still ask.
#![allow(deprecated)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientResult, InputRequest,
    InputRequests, InputRequiredResult, ProtocolVersion, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;

use super::GatewayOptions;
use super::pool::Pool;
use super::relay::{Asked, Calls, Target};
use super::rounds;
use crate::store::Principal;

/// The prefix of the `requestState` that names a parked call (an
/// upstream's own `requestState` passes through untouched).
const PARKED: &str = "mcp-tasks-gateway/parked/";

/// Whether `request` is the retry of a parked call (its `requestState`
/// names one), whatever it declares.
pub(crate) fn resumes(request: &CallToolRequestParams) -> bool {
    request
        .request_state
        .as_deref()
        .is_some_and(|state| state.starts_with(PARKED))
}

/// The id of the parked call `request` retries, if it retries one.
pub(crate) fn parked_call_of(request: &CallToolRequestParams) -> Option<&str> {
    request.request_state.as_deref()?.strip_prefix(PARKED)
}

/// The synchronous calls parked for their caller's input, by id.
#[derive(Default)]
pub(crate) struct Parked {
    calls: Mutex<HashMap<String, ParkedCall>>,
}

/// One upstream call waiting for its caller's retry.
struct ParkedCall {
    principal: Principal,
    tool: String,
    run: Run,
    /// The requests asked in the last round, by key, with where each
    /// answer goes.
    pending: BTreeMap<String, Asked>,
}

/// The upstream call, running on its own; dropped, it is aborted (and its
/// lease cancels the upstream request).
struct Run {
    driver: tokio::task::JoinHandle<Result<CallToolResponse, ErrorData>>,
    asks: mpsc::UnboundedReceiver<Asked>,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Parked {
    /// Whether the call `id` is parked here.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// Whether no call is parked here.
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ParkedCall>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the gateway needs for a synchronous call.
pub(crate) struct SyncCall<'a> {
    pub(crate) pool: &'a Arc<Pool>,
    pub(crate) calls: &'a Arc<Calls>,
    pub(crate) parked: &'a Arc<Parked>,
    pub(crate) options: &'a GatewayOptions,
    pub(crate) principal: Principal,
}

/// How the caller of a synchronous call can be asked.
enum Caller {
    /// On its 2025-era session.
    Session(Peer<RoleServer>),
    /// By MRTR rounds.
    Rounds,
    /// Not at all (a request without a session or a protocol version).
    None,
}

fn caller_of(context: &RequestContext<RoleServer>) -> Caller {
    if context
        .meta
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
    {
        Caller::Rounds
    } else if context.peer.peer_info().is_some() {
        // Also a 2025-era request over HTTP served without sessions (a
        // router of one's own; the serving recipe keeps sessions for these
        // clients), for which rmcp makes up a handshake with no
        // capabilities: such a caller is never asked
        // (it declared nothing), so no request waits on a connection that
        // cannot carry one.
        Caller::Session(context.peer.clone())
    } else {
        Caller::None
    }
}

/// Runs a synchronous call (see the [module](self) docs).
pub(crate) async fn call(
    sync: SyncCall<'_>,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let capabilities = context.client_capabilities().unwrap_or_default();
    if let Some(id) = request
        .request_state
        .as_deref()
        .and_then(|state| state.strip_prefix(PARKED))
    {
        let id = id.to_owned();
        return resume(&sync, &id, request, capabilities, &context).await;
    }
    let caller = caller_of(&context);
    let lease = sync.pool.lease(sync.pool.era_for(&request)).await?;
    let (asks_tx, asks) = mpsc::unbounded_channel();
    if let Caller::Rounds = caller {
        let calls = sync.calls.clone();
        let pool = sync.pool.clone();
        let tool = request.name.to_string();
        let driver = tokio::spawn(async move {
            rounds::run(&pool, &calls, lease, &request, Target::Caller(asks_tx))
                .await
                .map(CallToolResponse::Complete)
        });
        let run = Run { driver, asks };
        return round(
            &sync,
            sync.principal.clone(),
            tool,
            run,
            &capabilities,
            &context,
        )
        .await;
    }
    let run = rounds::run(
        sync.pool,
        sync.calls,
        lease,
        &request,
        Target::Caller(asks_tx),
    );
    tokio::pin!(run);
    let mut asks = asks;
    loop {
        tokio::select! {
            result = &mut run => return result.map(CallToolResponse::Complete),
            Some(asked) = asks.recv() => match &caller {
                Caller::Session(peer) => {
                    let peer = peer.clone();
                    let capabilities = capabilities.clone();
                    tokio::spawn(async move {
                        let answer = ask_session(&peer, &capabilities, &asked.request).await;
                        let _ = asked.answer.send(answer);
                    });
                }
                _ => {
                    let _ = asked.answer.send(Err(ErrorData::internal_error(
                        "the gateway's caller cannot be asked during this call (it has no \
                         session and named no protocol version)",
                        None,
                    )));
                }
            },
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        }
    }
}

/// Waits for the upstream call's answer or its next requests: the answer
/// is the response; requests park the call and answer with an MRTR round.
async fn round(
    sync: &SyncCall<'_>,
    principal: Principal,
    tool: String,
    mut run: Run,
    capabilities: &ClientCapabilities,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let first = tokio::select! {
        finished = &mut run.driver => {
            return finished.unwrap_or_else(|_| {
                Err(ErrorData::internal_error("the upstream call stopped", None))
            });
        }
        Some(asked) = run.asks.recv() => asked,
        () = context.ct.cancelled() => {
            return Err(ErrorData::internal_error("the call was cancelled", None));
        }
    };
    let mut pending = BTreeMap::new();
    let mut asked = vec![first];
    while let Ok(more) = run.asks.try_recv() {
        asked.push(more);
    }
    let mut key = 0;
    for request in asked {
        if let Err(error) = declared(capabilities, &request.request) {
            let _ = request.answer.send(Err(error));
            continue;
        }
        key += 1;
        pending.insert(format!("upstream-{key}"), request);
    }
    if pending.is_empty() {
        // Every request was refused; the upstream goes on.
        return Box::pin(round(sync, principal, tool, run, capabilities, context)).await;
    }
    park(
        sync,
        ParkedCall {
            principal,
            tool,
            run,
            pending,
        },
    )
}

/// Parks `call` and answers with its round.
fn park(sync: &SyncCall<'_>, call: ParkedCall) -> Result<CallToolResponse, ErrorData> {
    let id = parked_id()?;
    let requests: InputRequests = call
        .pending
        .iter()
        .map(|(key, asked)| (key.clone(), asked.request.clone()))
        .collect();
    sync.parked.lock().insert(id.clone(), call);
    let timeout = sync.options.input_timeout;
    let parked = Arc::downgrade(sync.parked);
    let expiring = id.clone();
    tokio::spawn(expire(parked, expiring, timeout));
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(format!("{PARKED}{id}")),
    )))
}

/// Drops the parked call `id` after `timeout` if no retry took it.
async fn expire(parked: Weak<Parked>, id: String, timeout: Duration) {
    tokio::time::sleep(timeout).await;
    if let Some(parked) = parked.upgrade() {
        let expired = parked.lock().remove(&id);
        if expired.is_some() {
            tracing::debug!("a synchronous call parked for its caller's input expired");
        }
        drop(expired);
    }
}

/// The retry of a parked call: its answers go to the upstream, and the
/// retry is answered with the upstream's result or the next round.
async fn resume(
    sync: &SyncCall<'_>,
    id: &str,
    request: CallToolRequestParams,
    capabilities: ClientCapabilities,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let unknown = || {
        ErrorData::invalid_params(
            "the requestState names no call waiting for input here (unknown, expired, answered \
             already, or parked on another gateway replica)",
            None,
        )
    };
    let call = {
        let mut parked = sync.parked.lock();
        match parked.get(id) {
            Some(call) if call.principal == sync.principal && call.tool == *request.name => {}
            _ => return Err(unknown()),
        }
        parked.remove(id).ok_or_else(unknown)?
    };
    let ParkedCall {
        principal,
        tool,
        run,
        pending,
    } = call;
    let mut answers = request.input_responses.unwrap_or_default();
    let mut missing = BTreeMap::new();
    for (key, asked) in pending {
        match answers.remove(&key) {
            Some(answer) => {
                let _ = asked.answer.send(Ok(answer));
            }
            None => {
                missing.insert(key, asked);
            }
        }
    }
    if !missing.is_empty() {
        // Asked again, rather than failed.
        return park(
            sync,
            ParkedCall {
                principal,
                tool,
                run,
                pending: missing,
            },
        );
    }
    round(sync, principal, tool, run, &capabilities, context).await
}

/// A fresh parked-call id: 128 bits from the system's CSPRNG, as hex.
fn parked_id() -> Result<String, ErrorData> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| ErrorData::internal_error(format!("no randomness: {error}"), None))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Whether the caller declared what `request` needs; `Err` for the
/// upstream saying what is missing.
fn declared(capabilities: &ClientCapabilities, request: &InputRequest) -> Result<(), ErrorData> {
    let wire = serde_json::to_value(request).unwrap_or(Value::Null);
    let method = wire.get("method").and_then(Value::as_str).unwrap_or("");
    let has = match method {
        "elicitation/create" => capabilities
            .elicitation
            .as_ref()
            .is_some_and(|elicitation| {
                match wire.pointer("/params/mode").and_then(Value::as_str) {
                    Some("url") => elicitation.url.is_some(),
                    // `{}` means form only.
                    _ => elicitation.form.is_some() || elicitation.url.is_none(),
                }
            }),
        "sampling/createMessage" => capabilities.sampling.is_some(),
        "roots/list" => capabilities.roots.is_some(),
        _ => false,
    };
    if has {
        Ok(())
    } else {
        Err(ErrorData::internal_error(
            format!("the gateway's caller did not declare the capability {method} needs"),
            None,
        ))
    }
}

/// Asks a caller on its 2025-era session.
async fn ask_session(
    peer: &Peer<RoleServer>,
    capabilities: &ClientCapabilities,
    request: &InputRequest,
) -> Result<Value, ErrorData> {
    declared(capabilities, request)?;
    let failed = |error: rmcp::service::ServiceError| match error {
        rmcp::service::ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(
            format!("the gateway's caller did not answer: {other}"),
            None,
        ),
    };
    let to_value = |value: Result<Value, serde_json::Error>| {
        value.map_err(|error| ErrorData::internal_error(error.to_string(), None))
    };
    let sent = match request {
        InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request.clone()),
        InputRequest::CreateMessage(request) => {
            ServerRequest::CreateMessageRequest(request.clone())
        }
        InputRequest::ListRoots(request) => ServerRequest::ListRootsRequest(request.clone()),
        _ => {
            return Err(ErrorData::internal_error(
                "the gateway cannot relay this request",
                None,
            ));
        }
    };
    let answer = match peer.send_request(sent).await.map_err(failed)? {
        ClientResult::ElicitResult(answer) => serde_json::to_value(answer),
        ClientResult::CreateMessageResult(answer) => serde_json::to_value(answer),
        ClientResult::ListRootsResult(answer) => serde_json::to_value(answer),
        _ => {
            return Err(ErrorData::internal_error(
                "the gateway's caller answered with another kind of result",
                None,
            ));
        }
    };
    to_value(answer)
}
