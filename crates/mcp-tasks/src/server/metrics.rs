//! The server's metrics: their names, the [`MetricsObserver`] that counts
//! tasks from the runtime's task events, and the few calls the transports,
//! the admission and the store make.
//!
//! Everything is recorded through the [`metrics`] facade: while no recorder
//! is installed (a library user who never asked for metrics), each call is
//! a no-op behind one atomic load, with no allocation (every label value
//! here is a `&'static str`, or a tool name on task creation and end only).
//! The operator listener ([`operator`](super::operator), feature `http`)
//! installs the Prometheus recorder and renders it at `/metrics`. The
//! gauges of what is open now (tasks by status, listen streams, running and
//! queued tools) are not kept here: the listener reads them from the
//! runtime at each scrape, so they cost nothing between scrapes.
//!
//! Labels never carry a task id, a token or a raw principal. Values that a
//! client chooses are bounded: a method outside [`KNOWN_METHODS`] counts as
//! `other`, a JSON-RPC error code outside [`KNOWN_CODES`] as `other`, and a
//! [`MetricsObserver`] labels at most [`MAX_TOOL_LABELS`] tool names (the
//! tools a server runs tasks for are its own, or its upstream's), the rest
//! as `other`. Every metric is listed, with its type and labels, in
//! `docs/operator.md`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::observe::{TaskEnded, TaskObserver};
use crate::store::TaskRecord;

/// Tasks created, by `tool` (counter).
pub const TASKS_CREATED: &str = "mcp_tasks_tasks_created_total";
/// Tasks ended, by `tool` and `outcome` (`completed`, `failed`,
/// `cancelled`, `expired`) (counter).
pub const TASKS_ENDED: &str = "mcp_tasks_tasks_ended_total";
/// Unfinished tasks this process created, by `status` (gauge, read at scrape).
pub const TASKS_LIVE: &str = "mcp_tasks_tasks_live";
/// From a task's creation to its end, in seconds, by `tool` (histogram).
pub const TASK_DURATION: &str = "mcp_tasks_task_duration_seconds";
/// How long a task waited in `input_required`, in seconds, by `tool` (histogram).
pub const TASK_INPUT_REQUIRED: &str = "mcp_tasks_task_input_required_seconds";
/// Requests answered, by `transport`, `method` and `code` (`ok` or the
/// JSON-RPC error code) (counter).
pub const REQUESTS: &str = "mcp_tasks_requests_total";
/// From a request's arrival to its answer, in seconds, by `transport` and
/// `method` (histogram).
pub const REQUEST_DURATION: &str = "mcp_tasks_request_duration_seconds";
/// Listen streams open now (gauge, read at scrape).
pub const LISTEN_STREAMS_OPEN: &str = "mcp_tasks_listen_streams_open";
/// Tools running now in this process (gauge, read at scrape).
pub const TOOLS_RUNNING: &str = "mcp_tasks_tools_running";
/// Tasks waiting for a slot to run in this process (gauge, read at scrape).
pub const TASKS_QUEUED: &str = "mcp_tasks_tasks_queued";
/// Requests and connections refused, by `cause` (counter).
pub const REFUSALS: &str = "mcp_tasks_refusals_total";
/// Store operations, in seconds, by `store` and `operation` (histogram).
pub const STORE_DURATION: &str = "mcp_tasks_store_operation_duration_seconds";
/// Store operations that failed, by `store` and `operation` (counter).
pub const STORE_ERRORS: &str = "mcp_tasks_store_errors_total";
/// Calls the gateway made upstream, by `outcome` (`ok`, `error`) (counter).
pub const UPSTREAM_CALLS: &str = "mcp_tasks_gateway_upstream_calls_total";
/// Upstream connections the gateway started again after one failed (counter).
pub const UPSTREAM_RESTARTS: &str = "mcp_tasks_gateway_upstream_restarts_total";
/// Upstream connections carrying a call now (gauge).
pub const UPSTREAM_IN_USE: &str = "mcp_tasks_gateway_upstream_connections_in_use";

/// The methods a `method` label names; any other is `other`.
pub const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/list",
    "tasks/result",
    "subscriptions/listen",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
];

/// The JSON-RPC error codes a `code` label names; any other is `other`.
pub const KNOWN_CODES: &[&str] = &[
    "-32700", "-32600", "-32601", "-32602", "-32603", "-32002", "-32021", "-32042", "-32001",
];

/// The most tool names one [`MetricsObserver`] labels; later ones are `other`.
pub const MAX_TOOL_LABELS: usize = 256;

/// `method` as a label: itself when known, else `other`.
pub(crate) fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other")
}

/// A JSON-RPC error `code` as a label: itself when known, else `other`.
pub(crate) fn code_label(code: &str) -> &'static str {
    KNOWN_CODES
        .iter()
        .find(|known| **known == code)
        .copied()
        .unwrap_or("other")
}

/// The `code` label of a JSON-RPC answer's bytes: `ok` for a result, the
/// error's code for an error (`other` when not a known one, `none` when
/// the bytes are neither). Reads only as far as the first `"result"` or
/// `"error"` key: a JSON string cannot hold either unescaped, and the
/// members before them (`jsonrpc`, `id`) are not objects, so the first one
/// found is the answer's own.
pub(crate) fn answer_code(body: &[u8]) -> &'static str {
    let find = |needle: &[u8]| body.windows(needle.len()).position(|at| at == needle);
    let (result, error) = (find(b"\"result\""), find(b"\"error\""));
    let error = match (result, error) {
        (Some(result), Some(error)) if result < error => return "ok",
        (Some(_), None) => return "ok",
        (_, Some(error)) => error,
        (None, None) => return "none",
    };
    let rest = &body[error..];
    let Some(at) = rest.windows(7).position(|at| at == b"\"code\":") else {
        return "other";
    };
    let digits = rest[at + 7..]
        .iter()
        .skip_while(|byte| byte.is_ascii_whitespace())
        .take_while(|byte| byte.is_ascii_digit() || **byte == b'-')
        .count();
    let start = at
        + 7
        + rest[at + 7..]
            .iter()
            .take_while(|byte| byte.is_ascii_whitespace())
            .count();
    std::str::from_utf8(&rest[start..start + digits]).map_or("other", code_label)
}

/// Counts one request answered over `transport` and its latency.
pub(crate) fn request(
    transport: &'static str,
    method: &'static str,
    code: &'static str,
    took: Duration,
) {
    metrics::counter!(REQUESTS, "transport" => transport, "method" => method, "code" => code)
        .increment(1);
    metrics::histogram!(REQUEST_DURATION, "transport" => transport, "method" => method)
        .record(took.as_secs_f64());
}

/// Counts one refusal for `cause`.
pub(crate) fn refused(cause: &'static str) {
    metrics::counter!(REFUSALS, "cause" => cause).increment(1);
}

/// Counts one store operation of `store` and its latency, or its failure.
pub(crate) fn store_operation(
    store: &'static str,
    operation: &'static str,
    took: Duration,
    failed: bool,
) {
    metrics::histogram!(STORE_DURATION, "store" => store, "operation" => operation)
        .record(took.as_secs_f64());
    if failed {
        metrics::counter!(STORE_ERRORS, "store" => store, "operation" => operation).increment(1);
    }
}

/// A [`TaskObserver`] that counts tasks: created and ended (by tool and
/// outcome), their durations and time in `input_required` (histograms, by
/// tool). Register it with
/// [`TaskRuntimeBuilder::with_observer`](super::TaskRuntimeBuilder::with_observer);
/// the `serve --admin` of the CLI does.
#[derive(Debug, Default)]
pub struct MetricsObserver {
    /// The tool names labelled so far (at most [`MAX_TOOL_LABELS`]).
    tools: Mutex<HashSet<Arc<str>>>,
}

impl MetricsObserver {
    /// An observer counting into the installed metrics recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// `tool` as a label: the name, while fewer than [`MAX_TOOL_LABELS`]
    /// were seen, else `other`; `unknown` for a task this process did not
    /// create.
    fn tool_label(&self, tool: Option<&str>) -> String {
        let Some(tool) = tool else {
            return "unknown".to_owned();
        };
        let mut tools = self
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if tools.contains(tool) {
            return tool.to_owned();
        }
        if tools.len() < MAX_TOOL_LABELS {
            tools.insert(Arc::from(tool));
            return tool.to_owned();
        }
        "other".to_owned()
    }
}

impl TaskObserver for MetricsObserver {
    fn task_created(&self, _record: &TaskRecord, tool: &str) {
        metrics::counter!(TASKS_CREATED, "tool" => self.tool_label(Some(tool))).increment(1);
    }

    fn task_ended(&self, ended: &TaskEnded<'_>) {
        let tool = self.tool_label(ended.tool);
        metrics::counter!(TASKS_ENDED, "tool" => tool.clone(), "outcome" => ended.outcome.as_str())
            .increment(1);
        metrics::histogram!(TASK_DURATION, "tool" => tool.clone())
            .record(ended.duration.as_secs_f64());
        metrics::histogram!(TASK_INPUT_REQUIRED, "tool" => tool)
            .record(ended.input_required.as_secs_f64());
    }
}

/// Describes every metric to the installed recorder (its `# HELP` line).
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(TASKS_CREATED, "Tasks created, by tool.");
    describe_counter!(TASKS_ENDED, "Tasks ended, by tool and outcome.");
    describe_gauge!(
        TASKS_LIVE,
        "Unfinished tasks created by this process, by status."
    );
    describe_histogram!(
        TASK_DURATION,
        Unit::Seconds,
        "From a task's creation to its end, by tool."
    );
    describe_histogram!(
        TASK_INPUT_REQUIRED,
        Unit::Seconds,
        "Time a task spent in input_required, by tool."
    );
    describe_counter!(
        REQUESTS,
        "Requests answered, by transport, method and JSON-RPC error code (ok: none)."
    );
    describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "From a request's arrival to its answer, by transport and method."
    );
    describe_gauge!(LISTEN_STREAMS_OPEN, "Listen streams open now.");
    describe_gauge!(TOOLS_RUNNING, "Tools running now in this process.");
    describe_gauge!(TASKS_QUEUED, "Tasks waiting for a slot in this process.");
    describe_counter!(REFUSALS, "Requests and connections refused, by cause.");
    describe_histogram!(
        STORE_DURATION,
        Unit::Seconds,
        "Task store operations, by store and operation."
    );
    describe_counter!(
        STORE_ERRORS,
        "Task store operations that failed, by store and operation."
    );
    describe_counter!(UPSTREAM_CALLS, "Gateway calls to the upstream, by outcome.");
    describe_counter!(
        UPSTREAM_RESTARTS,
        "Gateway upstream connections started again after a failure."
    );
    describe_gauge!(
        UPSTREAM_IN_USE,
        "Gateway upstream connections carrying a call now."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_chosen_values_are_bounded() {
        assert_eq!(method_label("tasks/get"), "tasks/get");
        assert_eq!(method_label("tasks/get2"), "other");
        assert_eq!(method_label(""), "other");
        assert_eq!(code_label("-32602"), "-32602");
        assert_eq!(code_label("12345"), "other");
        let observer = MetricsObserver::new();
        for n in 0..MAX_TOOL_LABELS {
            assert_eq!(observer.tool_label(Some(&format!("t{n}"))), format!("t{n}"));
        }
        assert_eq!(observer.tool_label(Some("one-more")), "other");
        assert_eq!(
            observer.tool_label(Some("t0")),
            "t0",
            "seen ones keep their label"
        );
        assert_eq!(observer.tool_label(None), "unknown");
    }

    #[test]
    fn the_code_of_an_answer_is_read_from_its_first_key() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"error":{"code":-32603}}}"#;
        assert_eq!(answer_code(ok), "ok");
        let error =
            br#"{"jsonrpc":"2.0","id":"x\"error\":","error":{"code": -32602,"message":"m"}}"#;
        assert_eq!(answer_code(error), "-32602");
        let odd = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}"#;
        assert_eq!(answer_code(odd), "other");
        assert_eq!(answer_code(b"not json"), "none");
    }
}
