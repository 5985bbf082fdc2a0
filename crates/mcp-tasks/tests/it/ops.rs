//! The Grafana dashboard and the Prometheus alert rules of `ops/` stay true
//! to the metrics the code exports: every metric name they query is one of
//! `mcp_tasks::server::metrics::ALL`, every metric there has a panel, the
//! dashboard is a dashboard (JSON, panels with queries), and `promtool`
//! accepts the rules, passes their unit tests (`ops/prometheus/alerts_test.yml`)
//! and parses every dashboard query. `promtool` must be installed (Debian's
//! `prometheus` package, as `.ci/run` installs it): without it these tests
//! fail, never skip.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mcp_tasks::server::metrics::{
    ALL, REQUEST_DURATION, STORE_DURATION, TASK_DURATION, TASK_INPUT_REQUIRED,
};
use serde_json::Value;

/// The metrics exported as histograms: PromQL names them with a suffix.
const HISTOGRAMS: [&str; 4] = [
    TASK_DURATION,
    TASK_INPUT_REQUIRED,
    REQUEST_DURATION,
    STORE_DURATION,
];

/// The series a histogram `NAME` exports: `NAME_bucket`, `NAME_sum`, `NAME_count`.
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

const DASHBOARD: &str = "ops/grafana/mcp-tasks.json";
const ALERTS: &str = "ops/prometheus/alerts.yml";
const ALERTS_TEST: &str = "ops/prometheus/alerts_test.yml";

/// The repository's root (this crate is `crates/mcp-tasks`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD))
        .unwrap_or_else(|error| panic!("{DASHBOARD} is not JSON: {error}"))
}

/// One query of the dashboard: where it is, and its text.
struct Query {
    /// `panel 7 "Task duration p50 and p95, by tool", target B`, or
    /// `variable tool`.
    place: String,
    /// The panel's id and the target's `refId` (`None` for a variable's query).
    panel: Option<(u64, String)>,
    expr: String,
}

/// Every panel of the dashboard, those inside a collapsed row's `panels` too.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, into: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            into.push(panel);
            if let Some(inner) = panel.get("panels") {
                walk(inner, into);
            }
        }
    }
    let mut all = Vec::new();
    walk(&dashboard["panels"], &mut all);
    all
}

fn is_row(panel: &Value) -> bool {
    panel["type"] == "row"
}

fn panel_place(panel: &Value) -> String {
    format!(
        "panel {} {}",
        panel["id"],
        panel["title"]
            .as_str()
            .map_or_else(|| "(untitled)".to_owned(), |title| format!("{title:?}"))
    )
}

/// The queries of the dashboard's panels, and those of its variables.
fn dashboard_queries(dashboard: &Value) -> Vec<Query> {
    let mut queries = Vec::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                let ref_id = target["refId"].as_str().unwrap_or("?").to_owned();
                queries.push(Query {
                    place: format!("{}, target {ref_id}", panel_place(panel)),
                    panel: Some((panel["id"].as_u64().unwrap_or(0), ref_id)),
                    expr: expr.to_owned(),
                });
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = match &variable["query"] {
            Value::String(query) => Some(query.as_str()),
            Value::Object(query) => query.get("query").and_then(Value::as_str),
            _ => None,
        };
        if let (Some(query), "query") = (query, variable["type"].as_str().unwrap_or("")) {
            queries.push(Query {
                place: format!("variable {}", variable["name"]),
                panel: None,
                expr: query.to_owned(),
            });
        }
    }
    queries
}

/// Every `mcp_tasks_[a-z0-9_]+` token of `text` (a name, not the tail of a
/// longer one).
fn metric_tokens(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let is_name = |byte: u8| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_';
    let mut tokens = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("mcp_tasks_") {
        let start = from + found;
        let mut end = start + "mcp_tasks_".len();
        while end < bytes.len() && is_name(bytes[end]) {
            end += 1;
        }
        let inside_another = start > 0
            && (is_name(bytes[start - 1])
                || bytes[start - 1].is_ascii_uppercase()
                || bytes[start - 1] == b':');
        if !inside_another {
            tokens.push(&text[start..end]);
        }
        from = end;
    }
    tokens
}

/// The exported metric a PromQL name stands for: itself, or a histogram's
/// for `NAME_bucket`, `NAME_sum` and `NAME_count`; `None` if it names none.
fn exported(token: &str) -> Option<&'static str> {
    if let Some(name) = ALL.iter().find(|name| **name == token) {
        return Some(name);
    }
    HISTOGRAM_SUFFIXES.iter().find_map(|suffix| {
        let base = token.strip_suffix(suffix)?;
        HISTOGRAMS.iter().copied().find(|name| *name == base)
    })
}

/// Lines of a rules or rule-test file with the rule (or test) each is in:
/// `alert McpTasksQueueSaturated`, else the closest comment above a test.
fn yaml_places(text: &str) -> Vec<(usize, String, &str)> {
    let mut place = String::from("(top of the file)");
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        for key in ["- alert:", "- record:"] {
            if let Some(name) = trimmed.strip_prefix(key) {
                place = format!("{} {}", &key[2..key.len() - 1], name.trim());
            }
        }
        // The comment naming each test case of alerts_test.yml.
        if let Some(comment) = trimmed.strip_prefix("# McpTasks")
            && line.starts_with("  #")
        {
            let alert = comment.split(':').next().unwrap_or(comment);
            place = format!("test of McpTasks{alert}");
        }
        lines.push((number + 1, place.clone(), line));
    }
    lines
}

#[test]
fn dashboard_and_rules_name_only_exported_metrics() {
    let mut unknown = Vec::new();
    let mut checked = 0;
    for query in dashboard_queries(&dashboard()) {
        for token in metric_tokens(&query.expr) {
            checked += 1;
            if exported(token).is_none() {
                unknown.push(format!("{DASHBOARD}, {}: {token}", query.place));
            }
        }
    }
    for file in [ALERTS, ALERTS_TEST] {
        let text = read(file);
        for (line, place, content) in yaml_places(&text) {
            for token in metric_tokens(content) {
                checked += 1;
                if exported(token).is_none() {
                    unknown.push(format!("{file}:{line}, {place}: {token}"));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics the code does not export (not in mcp_tasks::server::metrics::ALL, \
         crates/mcp-tasks/src/telemetry/names.rs; a histogram's series end in _bucket, _sum or _count):\n  {}",
        unknown.join("\n  ")
    );
    assert!(
        checked > 50,
        "only {checked} metric names found in ops/: the scan is broken"
    );
}

#[test]
fn every_exported_metric_has_a_panel() {
    let dashboard = dashboard();
    let queries = dashboard_queries(&dashboard);
    let missing: Vec<&str> = ALL
        .iter()
        .copied()
        .filter(|name| {
            !queries.iter().any(|query| {
                query.panel.is_some()
                    && metric_tokens(&query.expr)
                        .iter()
                        .any(|token| exported(token) == Some(*name))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{DASHBOARD} has no panel for these metrics (add one, or a target to a panel): {missing:?}"
    );
}

#[test]
fn dashboard_is_an_importable_dashboard() {
    let dashboard = dashboard();
    assert!(
        dashboard["schemaVersion"].as_u64().is_some(),
        "{DASHBOARD}: no schemaVersion"
    );
    assert!(
        dashboard["title"].is_string() && dashboard["uid"].is_string(),
        "{DASHBOARD}: no title or uid"
    );
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|variable| variable["name"].as_str())
        .collect();
    for wanted in ["datasource", "instance", "tool"] {
        assert!(
            variables.contains(&wanted),
            "{DASHBOARD}: no template variable {wanted} (has {variables:?})"
        );
    }
    let mut problems = Vec::new();
    let mut ids = std::collections::HashSet::new();
    let all = panels(&dashboard);
    assert!(!all.is_empty(), "{DASHBOARD}: no panels");
    for panel in all {
        let place = panel_place(panel);
        if !ids.insert(panel["id"].as_u64()) || panel["id"].as_u64().is_none() {
            problems.push(format!("{place}: its id is missing or not unique"));
        }
        let grid = &panel["gridPos"];
        if ["h", "w", "x", "y"]
            .iter()
            .any(|key| grid[key].as_u64().is_none())
        {
            problems.push(format!("{place}: gridPos needs h, w, x and y"));
        }
        if is_row(panel) {
            continue;
        }
        if !matches!(panel["type"].as_str(), Some("timeseries" | "stat")) {
            problems.push(format!(
                "{place}: type {} (timeseries or stat expected)",
                panel["type"]
            ));
        }
        let targets = panel["targets"].as_array().map_or(&[][..], Vec::as_slice);
        if !targets.iter().any(|target| {
            target["expr"]
                .as_str()
                .is_some_and(|expr| !expr.trim().is_empty())
        }) {
            problems.push(format!("{place}: no target with an expr"));
        }
        for target in targets {
            if !target["refId"].is_string() {
                problems.push(format!("{place}: a target without refId"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{DASHBOARD}:\n  {}",
        problems.join("\n  ")
    );
}

/// Runs `promtool` with `args` in the repository's root.
fn promtool(args: &[&str]) -> Output {
    match Command::new("promtool")
        .args(args)
        .current_dir(root())
        .output()
    {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed: apt-get install prometheus (Debian) provides it \
             (.ci/run installs it); these tests check ops/prometheus and ops/grafana with it"
        ),
        Err(error) => panic!("cannot run promtool: {error}"),
    }
}

/// What `promtool` printed.
fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Asserts `promtool ARGS` succeeded, with its output if not.
fn assert_promtool(args: &[&str]) {
    let output = promtool(args);
    assert!(
        output.status.success(),
        "promtool {} failed ({}):\n{}",
        args.join(" "),
        output.status,
        printed(&output)
    );
}

#[test]
fn alert_rules_pass_promtool_check_and_their_tests() {
    assert_promtool(&["check", "rules", ALERTS]);
    assert_promtool(&["test", "rules", ALERTS_TEST]);
}

/// `query` with Grafana's variables replaced as Prometheus would get them:
/// the intervals by `5m`, the others (`$instance`, `${tool}`) by `.*`.
fn without_grafana_variables(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        let (name, used) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced
                .find('}')
                .unwrap_or_else(|| panic!("an unclosed ${{ in {query:?}"));
            let name = &braced[..end];
            (name.split(':').next().unwrap_or(name), end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        assert!(!name.is_empty(), "a lone $ in {query:?}");
        match name {
            "__rate_interval" | "__interval" | "__range" => out.push_str("5m"),
            builtin if builtin.starts_with("__") => {
                panic!("Grafana variable ${builtin} in {query:?}: add it to this test")
            }
            _ => out.push_str(".*"),
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    out
}

#[test]
fn dashboard_queries_parse() {
    let queries = dashboard_queries(&dashboard());
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut names = Vec::new();
    for query in &queries {
        // Variables' queries (`label_values(...)`) are Grafana's, not PromQL.
        let Some((panel, ref_id)) = &query.panel else {
            continue;
        };
        let record = format!("dashboard:panel_{panel}_{ref_id}");
        let expr = without_grafana_variables(&query.expr);
        // A JSON string is a YAML double-quoted scalar.
        let expr = serde_json::to_string(&expr).expect("a string serializes");
        writeln!(rules, "      - record: {record}\n        expr: {expr}")
            .expect("writing to a String");
        names.push(format!("{record}: {}", query.place));
    }
    assert!(!names.is_empty(), "{DASHBOARD}: no queries");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("dashboard_rules.yml");
    std::fs::write(&file, &rules).expect("writing the rules");
    let path = file.to_str().expect("a UTF-8 temporary path");
    let output = promtool(&["check", "rules", path]);
    if !output.status.success() {
        let printed = printed(&output);
        // The panels promtool names (by their rules' names), most likely first.
        let named: Vec<&String> = names
            .iter()
            .filter(|name| {
                let record = name.split(": ").next().unwrap_or(name);
                printed.contains(&format!("\"{record}\""))
            })
            .collect();
        panic!(
            "a query of {DASHBOARD} does not parse: promtool check rules on its queries written as \
             recording rules (Grafana's variables replaced: intervals by 5m, the others by .*) \
             failed ({}):\n{printed}\nwhich panel:\n  {}\nthe rules:\n{rules}",
            output.status,
            if named.is_empty() {
                names.join("\n  ")
            } else {
                named
                    .iter()
                    .map(|name| name.as_str())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            }
        );
    }
}

#[test]
fn the_scans_see_what_they_should() {
    assert_eq!(
        metric_tokens(
            "sum(rate(mcp_tasks_a_total[5m])) / x_mcp_tasks_b + dashboard:mcp_tasks_c mcp_tasks_d_bucket"
        ),
        ["mcp_tasks_a_total", "mcp_tasks_d_bucket"]
    );
    assert_eq!(
        exported(&format!("{TASK_DURATION}_bucket")),
        Some(TASK_DURATION)
    );
    assert_eq!(exported("mcp_tasks_tasks_created_total_count"), None);
    assert_eq!(
        without_grafana_variables(
            r#"rate(x{instance=~"$instance", tool=~"${tool:regex}"}[$__rate_interval])"#
        ),
        r#"rate(x{instance=~".*", tool=~".*"}[5m])"#
    );
}
