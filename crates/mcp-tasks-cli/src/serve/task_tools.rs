//! `--task-tools` and `--task-tools-wait` (docs/task-tools.md): their
//! values as the runtime takes them, and a tool name the demo server does
//! not have refused.

use std::time::Duration;

use mcp_tasks::server::TaskTools;

/// `--task-tools-wait`: seconds, from 0 to an hour.
pub(super) fn parse_window(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=3600.0).contains(&secs) => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to 3600"
        )),
    }
}

/// `--task-tools` and `--task-tools-wait` as the runtime takes them.
pub(super) fn task_tools(names: Option<&[String]>, wait: Option<Duration>) -> TaskTools {
    let tools = match names {
        None => return TaskTools::off(),
        Some(names) if names.iter().any(|name| name == "*") => TaskTools::all(),
        Some(names) => TaskTools::only(
            names
                .iter()
                .map(|name| name.trim())
                .filter(|name| !name.is_empty()),
        ),
    };
    match wait {
        Some(window) => tools.with_window(window),
        None => tools,
    }
}

/// `--task-tools=TOOL,...` naming a tool the demo server does not have
/// (`gateway`: the tools are an upstream's, unknown here).
pub(super) fn refusal(names: Option<&[String]>, gateway: bool) -> Option<String> {
    if gateway {
        return None;
    }
    let names = names?;
    let unknown = names.iter().map(|name| name.trim()).find(|name| {
        *name != "*" && !name.is_empty() && !super::tools::names().any(|tool| tool == *name)
    })?;
    let tools: Vec<_> = super::tools::names().collect();
    Some(format!(
        "--task-tools={unknown} names no tool of this server: it serves the demo tools, {} (an \
         upstream's tools are its own: --upstream)",
        tools.join(", ")
    ))
}
