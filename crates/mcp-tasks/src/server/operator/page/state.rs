//! What `/ui/state` answers: the numbers of `/metrics` now (read from the
//! same rendering, so the page and a scrape agree), this process's running
//! tools by name, and the per-minute series of the last hour
//! ([`History`](super::history::History)).
//!
//! ```json
//! {"at": 1765000000000, "draining": false,
//!  "tasks": {"working": 3, "inputRequired": 1},
//!  "admission": {"running": 3, "runningLimit": 1024, "queued": 0, "queuedLimit": 10000, "oldestQueuedSecs": 0},
//!  "runningByTool": {"long_job": 3},
//!  "listen": {"open": 0, "limit": 1024},
//!  "refusals": {"cap": 2},
//!  "store": [{"store": "sqlite", "operation": "get", "count": 40, "errors": 0, "p50Ms": 0.1, "p99Ms": 0.4}],
//!  "upstreams": [{"upstream": "jobs", "breakerOpen": false, "waiting": false, "inUse": 1, "calls": 9, "errors": 0}],
//!  "tools": [{"tool": "long_job", "created": 4, "ended": {"completed": 1, "failed": 0, "cancelled": 0, "expired": 0},
//!             "minutes": {"at": [...], "created": [...], "completed": [...], "failed": [...],
//!                         "cancelled": [...], "expired": [...], "p50Secs": [...], "p95Secs": [...]}}]}
//! ```

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use super::expo::Samples;
use super::history::{Reading, buckets, quantile, since};
use crate::telemetry::metrics::{
    LISTEN_STREAMS_LIMIT, LISTEN_STREAMS_OPEN, REFUSALS, STORE_DURATION, STORE_ERRORS,
    TASK_DURATION, TASKS_CREATED, TASKS_ENDED, TASKS_LIVE, TASKS_QUEUED, TASKS_QUEUED_LIMIT,
    TASKS_QUEUED_OLDEST, TOOLS_RUNNING, TOOLS_RUNNING_LIMIT, UPSTREAM_BREAKER_OPEN, UPSTREAM_CALLS,
    UPSTREAM_IN_USE, UPSTREAM_WAITING,
};

/// The outcomes a task ends with, as the metrics label them.
const OUTCOMES: [&str; 4] = ["completed", "failed", "cancelled", "expired"];

/// How far back the store's percentiles look.
const STORE_WINDOW_MS: u64 = 5 * 60 * 1000;

/// The answer of `/ui/state`: `now` read for this request, `kept` the
/// history's readings (oldest first).
pub(crate) fn state(
    now: &Reading,
    kept: &[Reading],
    running_by_tool: Vec<(String, usize)>,
    draining: bool,
) -> Value {
    let live = &now.samples;
    let number = |name: &str, labels: &[(&str, &str)]| live.value(name, labels);
    json!({
        "at": now.at,
        "draining": draining,
        "tasks": {
            "working": number(TASKS_LIVE, &[("status", "working")]).unwrap_or(0.0),
            "inputRequired": number(TASKS_LIVE, &[("status", "input_required")]).unwrap_or(0.0),
        },
        "admission": {
            "running": number(TOOLS_RUNNING, &[]).unwrap_or(0.0),
            "runningLimit": number(TOOLS_RUNNING_LIMIT, &[]),
            "queued": number(TASKS_QUEUED, &[]).unwrap_or(0.0),
            "queuedLimit": number(TASKS_QUEUED_LIMIT, &[]),
            "oldestQueuedSecs": number(TASKS_QUEUED_OLDEST, &[]).unwrap_or(0.0),
        },
        "runningByTool": running_by_tool.into_iter().map(|(tool, n)| (tool, json!(n))).collect::<Map<_, _>>(),
        "listen": {
            "open": number(LISTEN_STREAMS_OPEN, &[]).unwrap_or(0.0),
            "limit": number(LISTEN_STREAMS_LIMIT, &[]),
        },
        "refusals": by_label(live, REFUSALS, "cause"),
        "store": store(now, kept),
        "upstreams": upstreams(live),
        "tools": tools(now, kept),
    })
}

/// Every series of `name` as `{label value: value}`.
fn by_label(samples: &Samples, name: &str, key: &str) -> Map<String, Value> {
    samples
        .of(name)
        .filter_map(|sample| Some((sample.label(key)?.to_owned(), json!(sample.value))))
        .collect()
}

/// Every value the label `key` takes in the series of `names`, sorted.
fn label_values(samples: &Samples, names: &[&str], key: &str) -> BTreeSet<String> {
    names
        .iter()
        .flat_map(|name| samples.of(name))
        .filter_map(|sample| sample.label(key).map(str::to_owned))
        .collect()
}

fn store(now: &Reading, kept: &[Reading]) -> Vec<Value> {
    let live = &now.samples;
    // The reading nearest to five minutes ago (or the oldest): the window.
    let start = kept
        .iter()
        .rev()
        .find(|reading| now.at.saturating_sub(reading.at) >= STORE_WINDOW_MS)
        .or_else(|| kept.first());
    let count_series = format!("{STORE_DURATION}_count");
    let mut rows: Vec<Value> = live
        .of(&count_series)
        .filter_map(|sample| {
            let (store, operation) = (sample.label("store")?, sample.label("operation")?);
            let labels = [("store", store), ("operation", operation)];
            let mut recent = buckets(live, STORE_DURATION, &labels);
            if let Some(start) = start {
                recent = since(&recent, &buckets(&start.samples, STORE_DURATION, &labels));
            }
            let millis = |q| quantile(q, &recent).map(|secs| secs * 1000.0);
            Some(json!({
                "store": store,
                "operation": operation,
                "count": sample.value,
                "errors": live.value(STORE_ERRORS, &labels).unwrap_or(0.0),
                "p50Ms": millis(0.5),
                "p99Ms": millis(0.99),
            }))
        })
        .collect();
    rows.sort_by_key(|row| (row["store"].to_string(), row["operation"].to_string()));
    rows
}

fn upstreams(live: &Samples) -> Vec<Value> {
    let names = [
        UPSTREAM_BREAKER_OPEN,
        UPSTREAM_WAITING,
        UPSTREAM_IN_USE,
        UPSTREAM_CALLS,
    ];
    label_values(live, &names, "upstream")
        .into_iter()
        .map(|upstream| {
            let one = [("upstream", upstream.as_str())];
            let calls = |outcome| {
                live.value(
                    UPSTREAM_CALLS,
                    &[("upstream", &upstream), ("outcome", outcome)],
                )
                .unwrap_or(0.0)
            };
            json!({
                "upstream": upstream,
                "breakerOpen": live.value(UPSTREAM_BREAKER_OPEN, &one) == Some(1.0),
                "waiting": live.value(UPSTREAM_WAITING, &one) == Some(1.0),
                "inUse": live.value(UPSTREAM_IN_USE, &one).unwrap_or(0.0),
                "calls": calls("ok") + calls("error"),
                "errors": calls("error"),
            })
        })
        .collect()
}

/// One tool's task numbers in one reading.
#[derive(Default)]
struct ToolNumbers {
    created: f64,
    /// By [`OUTCOMES`].
    ended: [f64; 4],
    /// The duration histogram's buckets, in order of bounds.
    buckets: Vec<(f64, f64)>,
}

/// Every tool's numbers in `samples`, in one pass (a page of many tools
/// and an hour of readings would otherwise scan each reading per tool).
fn by_tool(samples: &Samples) -> HashMap<&str, ToolNumbers> {
    let bucket_series = format!("{TASK_DURATION}_bucket");
    let mut tools: HashMap<&str, ToolNumbers> = HashMap::new();
    for sample in &samples.0 {
        let Some(tool) = sample.label("tool") else {
            continue;
        };
        if sample.name == TASKS_CREATED {
            tools.entry(tool).or_default().created = sample.value;
        } else if sample.name == TASKS_ENDED {
            let outcome = sample.label("outcome").unwrap_or_default();
            if let Some(index) = OUTCOMES.iter().position(|known| *known == outcome) {
                tools.entry(tool).or_default().ended[index] = sample.value;
            }
        } else if sample.name == bucket_series
            && let Some(bound) = sample.bound()
        {
            tools
                .entry(tool)
                .or_default()
                .buckets
                .push((bound, sample.value));
        }
    }
    for numbers in tools.values_mut() {
        numbers.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    tools
}

fn tools(now: &Reading, kept: &[Reading]) -> Vec<Value> {
    let mut points: Vec<&Reading> = kept.iter().collect();
    points.push(now);
    let indexed: Vec<HashMap<&str, ToolNumbers>> = points
        .iter()
        .map(|reading| by_tool(&reading.samples))
        .collect();
    let none = ToolNumbers::default();
    let at: Vec<Value> = points
        .iter()
        .skip(1)
        .map(|reading| json!(reading.at))
        .collect();
    let live = indexed.last().expect("the reading now is there");
    let mut names: Vec<&str> = live.keys().copied().collect();
    names.sort_unstable();
    names
        .into_iter()
        .map(|tool| {
            let pairs: Vec<(&ToolNumbers, &ToolNumbers)> = indexed
                .windows(2)
                .map(|pair| {
                    (
                        pair[0].get(tool).unwrap_or(&none),
                        pair[1].get(tool).unwrap_or(&none),
                    )
                })
                .collect();
            let per_minute = |number: &dyn Fn(&ToolNumbers) -> f64| -> Value {
                pairs
                    .iter()
                    .map(|(a, b)| json!((number(b) - number(a)).max(0.0)))
                    .collect()
            };
            let mut minutes = Map::new();
            minutes.insert("at".into(), Value::Array(at.clone()));
            minutes.insert("created".into(), per_minute(&|n| n.created));
            for (index, outcome) in OUTCOMES.iter().enumerate() {
                minutes.insert((*outcome).into(), per_minute(&|n| n.ended[index]));
            }
            for (key, q) in [("p50Secs", 0.5), ("p95Secs", 0.95)] {
                let values = pairs
                    .iter()
                    .map(|(a, b)| json!(quantile(q, &since(&b.buckets, &a.buckets))))
                    .collect();
                minutes.insert(key.into(), values);
            }
            let numbers = &live[tool];
            let totals: Map<String, Value> = OUTCOMES
                .iter()
                .zip(numbers.ended)
                .map(|(outcome, total)| ((*outcome).to_owned(), json!(total)))
                .collect();
            json!({
                "tool": tool,
                "created": numbers.created,
                "ended": totals,
                "minutes": minutes,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn reading(at: u64, text: &str) -> Reading {
        Reading {
            at,
            samples: Arc::new(Samples::parse(text, |_| true)),
        }
    }

    #[test]
    fn the_state_gives_the_rendered_numbers_and_the_minutes_between_readings() {
        let earlier = reading(
            0,
            "mcp_tasks_tasks_created_total{tool=\"a\"} 2\n\
             mcp_tasks_task_duration_seconds_bucket{tool=\"a\",le=\"1\"} 0\n\
             mcp_tasks_task_duration_seconds_bucket{tool=\"a\",le=\"+Inf\"} 0\n",
        );
        let now = reading(
            60_000,
            "mcp_tasks_tasks_created_total{tool=\"a\"} 5\n\
             mcp_tasks_tasks_ended_total{tool=\"a\",outcome=\"failed\"} 1\n\
             mcp_tasks_task_duration_seconds_bucket{tool=\"a\",le=\"1\"} 1\n\
             mcp_tasks_task_duration_seconds_bucket{tool=\"a\",le=\"+Inf\"} 1\n\
             mcp_tasks_tasks_live{status=\"working\"} 4\n\
             mcp_tasks_tasks_queued_limit 10\n\
             mcp_tasks_refusals_total{cause=\"cap\"} 2\n\
             mcp_tasks_gateway_upstream_breaker_open{upstream=\"jobs\"} 1\n\
             mcp_tasks_store_operation_duration_seconds_count{store=\"sqlite\",operation=\"get\"} 3\n\
             mcp_tasks_store_operation_duration_seconds_bucket{store=\"sqlite\",operation=\"get\",le=\"0.001\"} 3\n\
             mcp_tasks_store_operation_duration_seconds_bucket{store=\"sqlite\",operation=\"get\",le=\"+Inf\"} 3\n",
        );
        let state = state(&now, &[earlier], vec![("a".into(), 4)], false);
        assert_eq!(state["tasks"]["working"], 4.0);
        assert_eq!(state["tasks"]["inputRequired"], 0.0);
        assert_eq!(state["admission"]["queuedLimit"], 10.0);
        assert_eq!(state["admission"]["runningLimit"], Value::Null);
        assert_eq!(state["refusals"]["cap"], 2.0);
        assert_eq!(state["runningByTool"]["a"], 4);
        assert_eq!(state["upstreams"][0]["breakerOpen"], true);
        assert_eq!(state["store"][0]["count"], 3.0);
        assert_eq!(state["store"][0]["p50Ms"], 0.5);
        let tool = &state["tools"][0];
        assert_eq!(tool["created"], 5.0);
        assert_eq!(tool["ended"]["failed"], 1.0);
        assert_eq!(tool["minutes"]["created"], json!([3.0]));
        assert_eq!(tool["minutes"]["failed"], json!([1.0]));
        assert_eq!(tool["minutes"]["p50Secs"], json!([0.5]));
        assert_eq!(tool["minutes"]["at"], json!([60_000]));
    }
}
