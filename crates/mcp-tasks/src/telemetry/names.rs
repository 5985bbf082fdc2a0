//! Every metric name the crate records, with its label vocabularies: the
//! server's (tasks, requests, refusals, the store), the gateway's
//! (`mcp_tasks_gateway_*`) and OAuth's (`mcp_tasks_oauth_*`). Public as
//! the constants of `server::metrics`, which re-exports them; every metric is
//! listed, with its type and labels, in `docs/operator.md`.

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
/// The bound on tools running at once in this process (gauge, read at
/// scrape; absent when unbounded).
pub const TOOLS_RUNNING_LIMIT: &str = "mcp_tasks_tools_running_limit";
/// The bound on tasks waiting for a slot in this process (gauge, read at
/// scrape; absent when unbounded).
pub const TASKS_QUEUED_LIMIT: &str = "mcp_tasks_tasks_queued_limit";
/// How long the task that has waited longest for a slot in this process has
/// waited, in seconds; 0 with none waiting (gauge, read at scrape).
pub const TASKS_QUEUED_OLDEST: &str = "mcp_tasks_tasks_queued_oldest_seconds";
/// The bound on listen streams open at once (gauge, read at scrape).
pub const LISTEN_STREAMS_LIMIT: &str = "mcp_tasks_listen_streams_limit";
/// Times this process's lease in a shared store was claimed by another
/// replica (it was not renewed in time): its tools stopped here (counter).
pub const LEASES_LOST: &str = "mcp_tasks_leases_lost_total";
/// Requests and connections refused, by `cause` (counter).
pub const REFUSALS: &str = "mcp_tasks_refusals_total";
/// Store operations, in seconds, by `store` and `operation` (histogram).
pub const STORE_DURATION: &str = "mcp_tasks_store_operation_duration_seconds";
/// Store operations that failed, by `store` and `operation` (counter).
pub const STORE_ERRORS: &str = "mcp_tasks_store_errors_total";
/// Calls the gateway made upstream, by `upstream` (its name) and `outcome`
/// (`ok`, `error`) (counter).
pub const UPSTREAM_CALLS: &str = "mcp_tasks_gateway_upstream_calls_total";
/// Upstream connections the gateway started again after one failed, by
/// `upstream` (counter).
pub const UPSTREAM_RESTARTS: &str = "mcp_tasks_gateway_upstream_restarts_total";
/// Upstream connections carrying a call now, by `upstream` (gauge).
pub const UPSTREAM_IN_USE: &str = "mcp_tasks_gateway_upstream_connections_in_use";
/// Whether an upstream's calls fail fast now (1) or go through (0), by
/// `upstream` (gauge; see `gateway::CircuitBreaker`).
pub const UPSTREAM_BREAKER_OPEN: &str = "mcp_tasks_gateway_upstream_breaker_open";
/// Whether an upstream that could not be reached when the gateway started is
/// still waited for (1; its tools are not served) or is served (0), by
/// `upstream` (gauge; see `gateway::Gateway::start_many`).
pub const UPSTREAM_WAITING: &str = "mcp_tasks_gateway_upstream_waiting";
/// Fetches of an OAuth issuer's keys after the first, by `outcome` (`ok`, `error`) (counter).
pub const OAUTH_KEY_FETCHES: &str = "mcp_tasks_oauth_key_fetches_total";
/// Token introspections asked of an OAuth issuer, by `outcome` (`ok`, `error`) (counter).
pub const OAUTH_INTROSPECTIONS: &str = "mcp_tasks_oauth_introspections_total";

/// Every metric name above, for what must name only metrics that exist (the
/// Grafana dashboard and the alert rules in `ops/`: a test reads them).
pub const ALL: &[&str] = &[
    TASKS_CREATED,
    TASKS_ENDED,
    TASKS_LIVE,
    TASK_DURATION,
    TASK_INPUT_REQUIRED,
    REQUESTS,
    REQUEST_DURATION,
    LISTEN_STREAMS_OPEN,
    TOOLS_RUNNING,
    TASKS_QUEUED,
    TOOLS_RUNNING_LIMIT,
    TASKS_QUEUED_LIMIT,
    TASKS_QUEUED_OLDEST,
    LISTEN_STREAMS_LIMIT,
    LEASES_LOST,
    REFUSALS,
    STORE_DURATION,
    STORE_ERRORS,
    UPSTREAM_CALLS,
    UPSTREAM_RESTARTS,
    UPSTREAM_IN_USE,
    UPSTREAM_BREAKER_OPEN,
    UPSTREAM_WAITING,
    OAUTH_KEY_FETCHES,
    OAUTH_INTROSPECTIONS,
];

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

/// The most tool names one `MetricsObserver` (the server's) labels; later
/// ones are `other`.
pub const MAX_TOOL_LABELS: usize = 256;

#[cfg(test)]
mod tests {
    #[test]
    fn every_metric_name_is_in_all() {
        let source = include_str!("names.rs");
        let declared: Vec<&str> = source
            .lines()
            .filter(|line| line.starts_with("pub const ") && line.contains(": &str = \"mcp_tasks_"))
            .filter_map(|line| line.split('"').nth(1))
            .collect();
        assert!(declared.len() >= 20, "{declared:?}");
        for name in &declared {
            assert!(super::ALL.contains(name), "{name} is missing from ALL");
        }
        assert_eq!(declared.len(), super::ALL.len(), "ALL names a metric twice");
    }
}
