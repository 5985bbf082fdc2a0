//! The server's metrics: their names (kept with every other metric name in
//! the crate's telemetry module, and re-exported here), the
//! [`MetricsObserver`] that counts
//! tasks from the runtime's task events, and the few calls the transports,
//! the admission and the store make.
//!
//! Everything is recorded through the [`metrics`] facade: while no recorder
//! is installed (a library user who never asked for metrics), each call is
//! a no-op behind one atomic load, with no allocation (every label value
//! here is a `&'static str`, or a tool name on task creation and end only).
//! The operator listener (`server::operator`, feature `operator`)
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

// The request metrics are made by the HTTP front (feature `http-server`) only.
#![cfg_attr(not(feature = "http-server"), allow(dead_code))]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::observe::{TaskEnded, TaskObserver, TaskOutcome};
use crate::store::TaskRecord;
pub use crate::telemetry::names::*;

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
    let mut at = 0;
    while let Some(quote) = body[at..].iter().position(|byte| *byte == b'"') {
        let rest = &body[at + quote..];
        if rest.starts_with(b"\"result\"") {
            return "ok";
        }
        if rest.starts_with(b"\"error\"") {
            return error_code(rest);
        }
        at += quote + 1;
    }
    "none"
}

/// The code of the error object that `rest` starts with the key of.
fn error_code(rest: &[u8]) -> &'static str {
    let Some(at) = rest.windows(7).position(|at| at == b"\"code\":") else {
        return "other";
    };
    let value = &rest[at + 7..];
    let start = value
        .iter()
        .take_while(|byte| byte.is_ascii_whitespace())
        .count();
    let digits = value[start..]
        .iter()
        .take_while(|byte| byte.is_ascii_digit() || **byte == b'-')
        .count();
    std::str::from_utf8(&value[start..start + digits]).map_or("other", code_label)
}

/// The transports a `transport` label names.
const TRANSPORTS: [&str; 2] = ["http", "stdio"];

/// The codes a `code` label takes besides [`KNOWN_CODES`].
const OTHER_CODES: [&str; 4] = ["ok", "stream", "none", "other"];

/// Where every metric is recorded from, for the recorder.
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

/// The keys of the request metrics, made once: every label here comes
/// from a short fixed list, so a request records without building a key
/// (an allocation and a hash each).
struct RequestKeys {
    /// By transport, method (or `other`, last) and code.
    counters: Vec<metrics::Key>,
    /// By transport and method.
    durations: Vec<metrics::Key>,
}

fn request_keys() -> &'static RequestKeys {
    static KEYS: std::sync::OnceLock<RequestKeys> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let methods = KNOWN_METHODS.iter().chain(["other"].iter());
        let codes: Vec<&str> = OTHER_CODES.iter().chain(KNOWN_CODES).copied().collect();
        let mut counters = Vec::new();
        let mut durations = Vec::new();
        for transport in TRANSPORTS {
            for method in methods.clone() {
                durations.push(metrics::Key::from_parts(
                    REQUEST_DURATION,
                    vec![
                        metrics::Label::new("transport", transport),
                        metrics::Label::new("method", *method),
                    ],
                ));
                for code in &codes {
                    counters.push(metrics::Key::from_parts(
                        REQUESTS,
                        vec![
                            metrics::Label::new("transport", transport),
                            metrics::Label::new("method", *method),
                            metrics::Label::new("code", *code),
                        ],
                    ));
                }
            }
        }
        RequestKeys {
            counters,
            durations,
        }
    })
}

/// Where `value` is in `list`, else the place after it.
fn index_in(list: &[&str], value: &str) -> usize {
    list.iter()
        .position(|known| *known == value)
        .unwrap_or(list.len())
}

/// Counts one request answered over `transport` (`http` or `stdio`) and
/// its latency; `method` and `code` are labels made by [`method_label`],
/// [`code_label`] or [`answer_code`].
pub(crate) fn request(
    transport: &'static str,
    method: &'static str,
    code: &'static str,
    took: Duration,
) {
    let keys = request_keys();
    let methods = KNOWN_METHODS.len() + 1;
    let codes = OTHER_CODES.len() + KNOWN_CODES.len();
    let transport = index_in(&TRANSPORTS, transport).min(TRANSPORTS.len() - 1);
    let method = index_in(KNOWN_METHODS, method).min(methods - 1);
    let code = match (index_in(&OTHER_CODES, code), index_in(KNOWN_CODES, code)) {
        (other, _) if other < OTHER_CODES.len() => other,
        (_, known) if known < KNOWN_CODES.len() => OTHER_CODES.len() + known,
        // `other`.
        _ => OTHER_CODES.len() - 1,
    };
    let counter = &keys.counters[(transport * methods + method) * codes + code];
    let duration = &keys.durations[transport * methods + method];
    metrics::with_recorder(|recorder| {
        recorder.register_counter(counter, &METADATA).increment(1);
        recorder
            .register_histogram(duration, &METADATA)
            .record(took.as_secs_f64());
    });
}

/// Counts one refusal for `cause`.
pub(crate) fn refused(cause: &'static str) {
    metrics::counter!(REFUSALS, "cause" => cause).increment(1);
}

/// Counts one lease of this process lost to another replica.
pub(crate) fn lease_lost() {
    metrics::counter!(LEASES_LOST).increment(1);
}

/// The store operations measured, in the order of [`StoreKeys`].
pub(crate) const STORE_OPERATIONS: [&str; 8] = [
    "create",
    "get",
    "compare_and_swap",
    "delete",
    "expired",
    "list_owned",
    "list_all",
    "hash_key",
];

/// The keys of one store's metrics, made once (see [`RequestKeys`]).
pub(crate) struct StoreKeys {
    durations: Vec<metrics::Key>,
    errors: Vec<metrics::Key>,
}

impl StoreKeys {
    /// The keys of the store labelled `store`.
    pub(crate) fn new(store: &'static str) -> Self {
        let key = |name: &'static str, operation: &'static str| {
            metrics::Key::from_parts(
                name,
                vec![
                    metrics::Label::new("store", store),
                    metrics::Label::new("operation", operation),
                ],
            )
        };
        Self {
            durations: STORE_OPERATIONS
                .iter()
                .map(|operation| key(STORE_DURATION, operation))
                .collect(),
            errors: STORE_OPERATIONS
                .iter()
                .map(|operation| key(STORE_ERRORS, operation))
                .collect(),
        }
    }

    /// Records operation `operation` (an index of [`STORE_OPERATIONS`]):
    /// how long it took, and its failure.
    pub(crate) fn record(&self, operation: usize, took: Duration, failed: bool) {
        metrics::with_recorder(|recorder| {
            recorder
                .register_histogram(&self.durations[operation], &METADATA)
                .record(took.as_secs_f64());
            if failed {
                recorder
                    .register_counter(&self.errors[operation], &METADATA)
                    .increment(1);
            }
        });
    }
}

/// A [`TaskObserver`] that counts tasks: created and ended (by tool and
/// outcome), their durations and time in `input_required` (histograms, by
/// tool). Register it with
/// [`TaskRuntimeBuilder::with_observer`](https://docs.rs/mcp-tasks/latest/mcp_tasks/server/struct.TaskRuntimeBuilder.html#method.with_observer);
/// the `serve --admin` of the CLI does.
#[derive(Debug, Default)]
pub struct MetricsObserver {
    /// The keys of each tool labelled so far (at most [`MAX_TOOL_LABELS`],
    /// then `other` and `unknown`), made once.
    tools: Mutex<HashMap<Arc<str>, Arc<ToolKeys>>>,
}

/// The keys of one tool's task metrics.
#[derive(Debug)]
struct ToolKeys {
    created: metrics::Key,
    /// By [`TaskOutcome`], in the order of [`OUTCOMES`].
    ended: Vec<metrics::Key>,
    duration: metrics::Key,
    input_required: metrics::Key,
}

/// Every outcome, in the order of [`ToolKeys::ended`].
const OUTCOMES: [TaskOutcome; 4] = [
    TaskOutcome::Completed,
    TaskOutcome::Failed,
    TaskOutcome::Cancelled,
    TaskOutcome::Expired,
];

impl ToolKeys {
    fn new(tool: &str) -> Self {
        let tool = metrics::Label::new("tool", tool.to_owned());
        Self {
            created: metrics::Key::from_parts(TASKS_CREATED, vec![tool.clone()]),
            ended: OUTCOMES
                .iter()
                .map(|outcome| {
                    metrics::Key::from_parts(
                        TASKS_ENDED,
                        vec![
                            tool.clone(),
                            metrics::Label::new("outcome", outcome.as_str()),
                        ],
                    )
                })
                .collect(),
            duration: metrics::Key::from_parts(TASK_DURATION, vec![tool.clone()]),
            input_required: metrics::Key::from_parts(TASK_INPUT_REQUIRED, vec![tool]),
        }
    }
}

impl MetricsObserver {
    /// An observer counting into the installed metrics recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The keys of `tool`: its name, while fewer than [`MAX_TOOL_LABELS`]
    /// were seen, else `other`; `unknown` for a task this process did not
    /// create.
    fn keys(&self, tool: Option<&str>) -> Arc<ToolKeys> {
        let label = tool.unwrap_or("unknown");
        let mut tools = self
            .tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(keys) = tools.get(label) {
            return keys.clone();
        }
        // Two more than the bound: `other` and `unknown` have keys too.
        let label = if tool.is_some() && tools.len() >= MAX_TOOL_LABELS {
            "other"
        } else {
            label
        };
        tools
            .entry(Arc::from(label))
            .or_insert_with(|| Arc::new(ToolKeys::new(label)))
            .clone()
    }

    #[cfg(test)]
    fn tool_label(&self, tool: Option<&str>) -> String {
        let keys = self.keys(tool);
        keys.created
            .labels()
            .next()
            .map(|label| label.value().to_owned())
            .unwrap_or_default()
    }
}

impl TaskObserver for MetricsObserver {
    fn task_created(&self, _record: &TaskRecord, tool: &str) {
        let keys = self.keys(Some(tool));
        metrics::with_recorder(|recorder| {
            recorder
                .register_counter(&keys.created, &METADATA)
                .increment(1);
        });
    }

    fn task_ended(&self, ended: &TaskEnded<'_>) {
        let keys = self.keys(ended.tool);
        let outcome = OUTCOMES
            .iter()
            .position(|outcome| *outcome == ended.outcome)
            .unwrap_or(1);
        metrics::with_recorder(|recorder| {
            recorder
                .register_counter(&keys.ended[outcome], &METADATA)
                .increment(1);
            recorder
                .register_histogram(&keys.duration, &METADATA)
                .record(ended.duration.as_secs_f64());
            recorder
                .register_histogram(&keys.input_required, &METADATA)
                .record(ended.input_required.as_secs_f64());
        });
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
    describe_gauge!(
        TOOLS_RUNNING_LIMIT,
        "The bound on tools running at once in this process (absent: none)."
    );
    describe_gauge!(
        TASKS_QUEUED_LIMIT,
        "The bound on tasks waiting for a slot in this process (absent: none)."
    );
    describe_gauge!(
        TASKS_QUEUED_OLDEST,
        Unit::Seconds,
        "How long the task waiting longest for a slot in this process has waited."
    );
    describe_gauge!(
        LISTEN_STREAMS_LIMIT,
        "The bound on listen streams open at once."
    );
    describe_counter!(
        LEASES_LOST,
        "Times this process's lease in a shared store was claimed by another replica."
    );
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
    describe_counter!(
        UPSTREAM_CALLS,
        "Gateway calls to an upstream, by upstream and outcome."
    );
    describe_counter!(
        UPSTREAM_RESTARTS,
        "Gateway upstream connections started again after a failure, by upstream."
    );
    describe_gauge!(
        UPSTREAM_IN_USE,
        "Gateway upstream connections carrying a call now, by upstream."
    );
    describe_gauge!(
        UPSTREAM_BREAKER_OPEN,
        "Whether an upstream's calls fail fast now (1) or go through (0), by upstream."
    );
    describe_gauge!(
        UPSTREAM_WAITING,
        "Whether an upstream unreachable at the gateway's start is still waited for (1) or served (0), by upstream."
    );
    describe_counter!(
        OAUTH_KEY_FETCHES,
        "Fetches of an OAuth issuer's keys after the first, by outcome."
    );
    describe_counter!(
        OAUTH_INTROSPECTIONS,
        "Token introspections asked of an OAuth issuer, by outcome."
    );
}

/// Counts one fetch of an OAuth issuer's keys.
#[cfg(feature = "oauth")]
pub(crate) fn oauth_key_fetch(ok: bool) {
    metrics::counter!(OAUTH_KEY_FETCHES, "outcome" => if ok { "ok" } else { "error" }).increment(1);
}

/// Counts one introspection asked of an OAuth issuer.
#[cfg(feature = "oauth")]
pub(crate) fn oauth_introspection(ok: bool) {
    metrics::counter!(OAUTH_INTROSPECTIONS, "outcome" => if ok { "ok" } else { "error" })
        .increment(1);
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
