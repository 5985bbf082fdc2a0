//! The fast paths: the requests the serving recipe answers itself, in front
//! of rmcp's Streamable HTTP service, because rmcp's own way through them
//! costs several times the work (see BENCHMARKS.md).
//!
//! The [front middleware](super::front) is their one entrance: after the
//! [guard](super::guard) has admitted a request and read its body, it hands
//! it to the path its `Mcp-Method` names, and whatever that path does not
//! take to rmcp.
//!
//! | method | read by | answered by |
//! |---|---|---|
//! | `tasks/get`, `tasks/cancel` | [`quick`], from the body's bytes | [`tasks::respond`], written by [`body`] |
//! | `tasks/update` | [`tasks::accept_update`], from the guard's `Value` | [`tasks::respond`], written by [`body`] |
//! | `subscriptions/listen` naming `taskIds` | [`listen::accept`] | [`listen::answer`]: an event stream |
//! | `tools/call` | [`call::ToolCalls::read`], from the body's bytes, or [`call::ToolCalls::accepts`], from the guard's `Value` | rmcp's own handler, through [`call::ToolCalls::answer`]; its progress by token ([`progress`]) |
//!
//! # The equivalence rule
//!
//! A fast path is an optimization, never a second server: for every request
//! it takes, a client must not be able to tell it from rmcp's service
//! behind it, configured as the recipe configures it (stateless for
//! 2026-07-28, JSON answers). That is:
//!
//! * **It answers only what rmcp would answer the same way.** The status
//!   (200, or rmcp's 400 and 404 for the errors it gives them), the
//!   `Content-Type: application/json`, the body's JSON (the same keys and
//!   values; a `tasks/get` answer is the text serde writes for rmcp's
//!   `GetTaskResult`), and the JSON-RPC errors (the same code, message and
//!   `data`: the runtime's own, as rmcp's handler returns them), or, for a
//!   call whose progress comes before its answer, the event stream rmcp
//!   writes ([`progress`]). The one place it answers what rmcp could not:
//!   a task listen (rmcp 3.11 has no `taskIds`, see
//!   [`listen`](crate::server::transport::listen)).
//! * **It hands on, untouched, everything it does not fully accept**: a
//!   header that does not match the body (`Mcp-Name`,
//!   `MCP-Protocol-Version`), a missing `_meta` key or capability, an
//!   `Mcp-Param-*` header, a `logLevel`, a `progressToken` another call in
//!   flight holds, an era or shape it does not read. rmcp then validates
//!   and answers as it always does, with the body's very bytes. A reader
//!   that is unsure refuses: being slow is allowed, answering otherwise is
//!   not.
//! * One documented leniency: a `tasks/*` request without `Mcp-Name` is
//!   answered (see [`tasks`]).
//!
//! Tests that hold the rule (keep them with the code they check):
//! `quick`'s and `call`'s unit tests and the fuzz target
//! `server_reads_request` (a bytes reader takes only what the `Value`
//! reader takes, and reads the same call; `quick` takes all of it), `body`'s (its bytes are serde's JSON for every status), `tasks`'
//! and `listen`'s (only exact requests are taken); in `tests/it/server/`:
//! `progress.rs` (`a_call_with_a_progress_token_is_answered_as_rmcps_own_path_answers_it`,
//! `calls_in_flight_with_the_same_token_each_hear_only_their_own_progress`),
//! `http.rs` (`polls_read_from_their_bytes_answer_as_the_value_path`,
//! `every_malformed_request_gets_a_json_rpc_error`), `runtime.rs`
//! (`over_http_tasks_belong_to_the_bearer_that_made_them`: what the path
//! leaves gets rmcp's -32020 and -32021), `access.rs` (the guard admits
//! exactly what rmcp admits, and every route, fast or not, is guarded
//! alike).
//!
//! # One reader and one writer per method
//!
//! A `tasks/get` or `tasks/cancel` is read by [`quick`] alone, from its
//! bytes, without a `serde_json::Value` (the largest cost it had left);
//! it takes exactly the polls the `Value` reading would (a key given twice
//! counts by its last value, as in a `Value`), so what it leaves goes
//! straight on to the guard's checks and rmcp. A `tasks/update` is read from
//! the `Value` the guard parses anyway, by [`tasks::accept_update`]: its
//! `inputResponses` are kept as JSON trees, which gain nothing from the
//! bytes. A `tasks/get` answer is written by [`body`], except where its
//! bytes do not allow: an `input_required` task (whose requests rmcp's
//! types normalize) and a result the record keeps as a tree rather than as
//! its JSON text, which go through serde and rmcp's `GetTaskResult`, a
//! second writer kept for them. Delete this
//! folder the day rmcp's own path is as fast.

use http::HeaderName;

/// The MCP request headers the fast paths read, named once: a lookup by a
/// `HeaderName` only hashes it, where one by `&str` parses the name first.
pub(crate) static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub(crate) static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
pub(crate) static MCP_PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static("mcp-protocol-version");

mod body;
pub(crate) mod call;
pub(crate) mod listen;
mod progress;
pub(crate) mod quick;
pub(crate) mod tasks;
