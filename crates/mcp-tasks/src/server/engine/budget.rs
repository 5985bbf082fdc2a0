//! The result budget: how many bytes of JSON one tool's outcome may weigh
//! before the runtime refuses to keep it ([`TaskRuntimeBuilder::with_max_result_bytes`][with]).
//!
//! A task's result is stored whole (in memory, in a SQLite row, in a Redis
//! value) and sent whole to every `tasks/get` that reads it, for as long as
//! the task is kept; a synchronous call's result is sent whole once. One
//! tool that returns 200 MB would cost that much in the store and again in
//! every answer. So every outcome is measured on its way to becoming a
//! record ([`outcome_within`], which every path a tool's outcome takes calls:
//! a supervised task, the first step of a creation (`engine/calls/create.rs`), a
//! resumed task, the gateway's tasks) or an answer ([`response_within`], every synchronous
//! call's, from `once.rs` and `TaskRouter`),
//! and one past the budget becomes a JSON-RPC error naming both sizes
//! instead; nothing of it reaches the store. Input answers
//! ([`input_within`], `tasks/update`) are held to the same budget.
//!
//! The size is the length of the outcome serialized as JSON, counted by a
//! writer that keeps no byte ([`json_size`]): measuring costs no second
//! copy of the result, only the time to serialize it once (about a
//! millisecond per megabyte).
//!
//! [with]: crate::server::TaskRuntimeBuilder::with_max_result_bytes

use std::collections::BTreeMap;
use std::io;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult};
use serde::Serialize;
use serde_json::{Value, json};

use super::wire::{error_json, result_json, tool_panicked};
use crate::store::Change;
use crate::task::grouped;

/// The result budget unless the builder says otherwise: 8 MiB of JSON per
/// tool outcome (docs/operator.md says why).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 8 << 20;

/// What a tool's outcome becomes in its task's record: its result, its
/// error, or the failure that a panic or an outcome past `limit` bytes is
/// (`None`: no limit).
pub(crate) fn outcome_within(
    finished: std::thread::Result<Result<CallToolResult, ErrorData>>,
    limit: Option<usize>,
) -> Change {
    match finished {
        Ok(Ok(result)) => match past(&result, limit) {
            Some((size, limit)) => Change::Fail(error_json(&too_large("result", size, limit))),
            None => Change::Complete(result_json(&result)),
        },
        Ok(Err(error)) => match past(&error, limit) {
            Some((size, limit)) => Change::Fail(error_json(&too_large("error", size, limit))),
            None => Change::Fail(error_json(&error)),
        },
        Err(_panic) => Change::Fail(error_json(&tool_panicked())),
    }
}

/// A synchronous call's outcome as it is answered: as it is, or, past
/// `limit` bytes (`None`: no limit), a JSON-RPC error naming both sizes.
pub(crate) fn answer_within(
    outcome: Result<CallToolResult, ErrorData>,
    limit: Option<usize>,
) -> Result<CallToolResult, ErrorData> {
    match &outcome {
        Ok(result) => match past(result, limit) {
            Some((size, limit)) => Err(too_large("result", size, limit)),
            None => outcome,
        },
        Err(error) => match past(error, limit) {
            Some((size, limit)) => Err(too_large("error", size, limit)),
            None => outcome,
        },
    }
}

/// A synchronous `tools/call` answer as it is sent: a result or an error
/// past `limit` bytes (`None`: no limit) becomes the error naming both
/// sizes ([`answer_within`]); an MRTR round or a task goes as it is.
pub(crate) fn response_within(
    answer: Result<CallToolResponse, ErrorData>,
    limit: Option<usize>,
) -> Result<CallToolResponse, ErrorData> {
    match answer {
        Ok(CallToolResponse::Complete(result)) => {
            answer_within(Ok(result), limit).map(CallToolResponse::Complete)
        }
        Err(error) => answer_within(Err(error), limit).map(CallToolResponse::Complete),
        other => other,
    }
}

/// `tasks/update`'s input answers, refused with -32602 naming both sizes
/// when they are past `limit` bytes (`None`: no limit).
pub(crate) fn input_within(
    responses: &BTreeMap<String, Value>,
    limit: Option<usize>,
) -> Result<(), ErrorData> {
    match past(responses, limit) {
        Some((size, limit)) => Err(ErrorData::invalid_params(
            format!(
                "the input responses are {} bytes, past this server's limit of {} bytes \
                 (max-result-bytes); nothing was recorded",
                grouped(size),
                grouped(limit as u64)
            ),
            Some(json!({"reason": "inputTooLarge", "inputBytes": size, "maxResultBytes": limit})),
        )),
        None => Ok(()),
    }
}

/// The size of `value` and the limit, when `value` is past it.
fn past<T: Serialize + ?Sized>(value: &T, limit: Option<usize>) -> Option<(u64, usize)> {
    let limit = limit?;
    let size = json_size(value);
    (size > limit as u64).then_some((size, limit))
}

/// The failure a `what` ("result" or "error") of `size` bytes past `limit` is.
fn too_large(what: &str, size: u64, limit: usize) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "the tool's {what} is {} bytes, past this server's limit of {} bytes \
             (max-result-bytes)",
            grouped(size),
            grouped(limit as u64)
        ),
        Some(json!({"reason": "resultTooLarge", "resultBytes": size, "maxResultBytes": limit})),
    )
}

/// How many bytes `value` takes as JSON, counted without keeping them. A
/// value that does not serialize counts what it wrote before it failed.
pub(crate) fn json_size<T: Serialize + ?Sized>(value: &T) -> u64 {
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// A writer that counts what it is given and keeps nothing.
struct Counter(u64);

impl io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;

    use super::*;

    fn text(bytes: usize) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text("x".repeat(bytes))])
    }

    #[test]
    fn sizes_are_what_serde_writes() {
        let result = text(1000);
        assert_eq!(
            json_size(&result),
            serde_json::to_vec(&result).unwrap().len() as u64
        );
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(104_857_612), "104,857,612");
        assert_eq!(grouped(16_777_216), "16,777,216");
    }

    #[test]
    fn an_outcome_past_the_limit_fails_naming_both_sizes() {
        let result = text(2000);
        let size = json_size(&result);
        let limit = usize::try_from(size).unwrap();
        // At the limit: kept whole.
        let Change::Complete(kept) = outcome_within(Ok(Ok(result.clone())), Some(limit)) else {
            panic!("completed at the limit");
        };
        assert_eq!(kept["resultType"], "complete");
        assert!(matches!(
            outcome_within(Ok(Ok(result.clone())), None),
            Change::Complete(_)
        ));
        // One byte past it: failed, and nothing of the result kept.
        let Change::Fail(error) = outcome_within(Ok(Ok(result)), Some(limit - 1)) else {
            panic!("failed past the limit");
        };
        let message = error["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!(
                "the tool's result is {} bytes, past this server's limit of {} bytes \
                 (max-result-bytes)",
                grouped(size),
                grouped(size - 1)
            )
        );
        assert_eq!(error["code"], -32603);
        assert_eq!(error["data"]["resultBytes"], size);
        assert_eq!(error["data"]["maxResultBytes"], size - 1);
        assert!(
            error.to_string().len() < 300,
            "no part of the result: {error}"
        );
    }

    #[test]
    fn errors_and_answers_are_held_to_the_same_limit() {
        let error = ErrorData::internal_error("boom", Some(json!({"dump": "y".repeat(5000)})));
        let Change::Fail(kept) = outcome_within(Ok(Err(error.clone())), Some(100)) else {
            panic!("failed");
        };
        assert!(
            kept["message"]
                .as_str()
                .unwrap()
                .starts_with("the tool's error is 5,0")
        );
        assert!(answer_within(Err(error.clone()), Some(100_000)).is_err_and(|e| e == error));
        let refused = answer_within(Ok(text(5000)), Some(1000)).unwrap_err();
        assert!(
            refused
                .message
                .contains("past this server's limit of 1,000 bytes")
        );
        assert!(answer_within(Ok(text(5000)), None).is_ok());
        assert!(matches!(
            outcome_within(Err(Box::new("panic")), Some(1)),
            Change::Fail(error) if error["message"] == "internal error: the tool panicked"
        ));
    }

    #[test]
    fn input_answers_past_the_limit_are_refused() {
        let answers: BTreeMap<String, Value> = [(
            "k".to_owned(),
            json!({"action": "accept", "content": {"a": "z".repeat(500)}}),
        )]
        .into();
        assert!(input_within(&answers, Some(10_000)).is_ok());
        assert!(input_within(&answers, None).is_ok());
        let refused = input_within(&answers, Some(100)).unwrap_err();
        assert_eq!(refused.code.0, -32602);
        assert!(refused.message.starts_with("the input responses are 5"));
    }
}
