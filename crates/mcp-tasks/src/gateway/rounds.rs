//! A call of a plain tool to its end: in the era the upstream asks for
//! input in, its MRTR rounds answered through the call's [`Target`].
//!
//! An upstream asks for input during a call in one of two ways: a
//! server-initiated request (2025-era connections; relayed as it comes by
//! [`relay`](super::relay)), or, on a 2026-07-28 connection, an MRTR round:
//! the `tools/call` answers `resultType: input_required` with
//! `inputRequests` and maybe a `requestState`. A round is asked of the
//! call's task (its `input_required`, answered by `tasks/update`) or of
//! its synchronous caller (as the upstream's requests are, see
//! [`sync`](super::sync)), under keys of the gateway's own, and the call
//! is sent again on the same connection with the answers as
//! `inputResponses` and the `requestState` echoed, round after round, until
//! the upstream answers with a result or an error. The same connection,
//! because a server may seal its `requestState` with a key of its own
//! process (fastmcp does): a stdio upstream's other processes could not
//! read it. Between rounds no upstream request is outstanding, so a task
//! cancelled (or expired) while it waits for input ends there, and its
//! connection goes back to the pool.
//!
//! With an upstream of both eras ([`Eras::Both`]), a call starts on a
//! 2025-era connection (see [`Pool::era_for`]); one the upstream refuses
//! there with -32602 (invalid params: it was not carried out, and fastmcp
//! so refuses a tool that returns an MRTR round on a 2025-era connection)
//! is sent again, once, on a 2026-07-28 connection. A tool that then asks
//! by MRTR is called on 2026-07-28 from the start afterwards.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorCode};

use super::call;
use super::connection::{CallEra, Eras};
use super::pool::{Lease, Pool};
use super::relay::{Calls, Target};

/// How many rounds in a row may carry no input request (only a
/// `requestState`, which the client may retry at once with) before the
/// gateway gives up on the upstream.
const EMPTY_ROUNDS: u32 = 16;

/// Runs the call `request` on the connection `lease` holds (see the
/// [module](self) docs); the upstream's requests and progress during it
/// reach `target`.
pub(crate) async fn run(
    pool: &Arc<Pool>,
    calls: &Arc<Calls>,
    lease: Lease,
    request: &CallToolRequestParams,
    target: Target,
) -> Result<CallToolResult, ErrorData> {
    let mut lease = lease;
    let mut params = CallToolRequestParams::new(request.name.clone());
    params.arguments = request.arguments.clone();
    params.input_responses = request.input_responses.clone();
    params.request_state = request.request_state.clone();
    // Whether the call was sent again on 2026-07-28 after a refusal.
    let mut moved = false;
    let mut empty_rounds = 0;
    loop {
        let input = match call::plain(&lease, calls, &params, target.clone()).await {
            Err(error) if !moved && refused_on_handshake(pool, &lease, &error) => {
                tracing::debug!(
                    tool = %params.name,
                    "refused on a 2025-era connection (-32602): sent again on 2026-07-28"
                );
                drop(lease);
                lease = pool.lease(CallEra::Modern).await?;
                moved = true;
                continue;
            }
            Err(error) => return Err(error),
            Ok(CallToolResponse::Complete(result)) => return Ok(result),
            Ok(CallToolResponse::InputRequired(input)) => input,
            Ok(_) => {
                return Err(ErrorData::internal_error(
                    "the upstream server answered with a result of an unknown kind",
                    None,
                ));
            }
        };
        if moved {
            pool.learn_mrtr(&params.name);
        }
        let requests = input.input_requests.unwrap_or_default();
        if requests.is_empty() {
            empty_rounds += 1;
            if empty_rounds > EMPTY_ROUNDS {
                return Err(ErrorData::internal_error(
                    format!(
                        "the upstream server answered {EMPTY_ROUNDS} MRTR rounds in a row that asked \
                         for nothing"
                    ),
                    None,
                ));
            }
            params.input_responses = None;
        } else {
            empty_rounds = 0;
            params.input_responses = Some(target.answer_round(calls, requests).await?);
        }
        params.request_state = input.request_state;
    }
}

/// Whether `error` is an upstream of both eras refusing a call as invalid
/// on a 2025-era connection (what fastmcp answers a tool that asks by
/// MRTR there), to be sent again on 2026-07-28.
fn refused_on_handshake(pool: &Pool, lease: &Lease, error: &ErrorData) -> bool {
    pool.eras() == Eras::Both
        && lease.era() == CallEra::Handshake
        && error.code == ErrorCode::INVALID_PARAMS
}
