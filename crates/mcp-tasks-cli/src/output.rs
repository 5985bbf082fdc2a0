//! What the command prints and the exit code it ends with.

use std::io::Write;
use std::process::ExitCode;

use mcp_tasks::{Error, TaskOutcome, TaskState, TaskStatus};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// Exit codes; scripts depend on them.
pub(crate) mod code {
    pub(crate) const COMPLETED: u8 = 0;
    pub(crate) const TOOL_ERROR: u8 = 1;
    pub(crate) const FAILED: u8 = 2;
    pub(crate) const CANCELLED: u8 = 3;
    pub(crate) const INPUT_REQUIRED: u8 = 4;
    pub(crate) const TIMEOUT: u8 = 5;
    pub(crate) const USAGE: u8 = 64;
    pub(crate) const UNREACHABLE: u8 = 69;
    pub(crate) const PROTOCOL: u8 = 70;
    pub(crate) const INTERRUPTED: u8 = 130;
}

/// The outcome of a command, printed for people or as one JSON object.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) status: String,
    pub(crate) task_id: Option<String>,
    pub(crate) status_message: Option<String>,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<Value>,
    pub(crate) exit: u8,
    /// Said explicitly (`"taskId": null`): the command ended before the
    /// server made any task.
    pub(crate) no_task: bool,
}

impl Report {
    fn new(status: &str, exit: u8) -> Self {
        Self {
            status: status.to_owned(),
            task_id: None,
            status_message: None,
            result: None,
            error: None,
            exit,
            no_task: false,
        }
    }

    fn with_task(mut self, id: Option<&mcp_tasks::TaskId>) -> Self {
        self.task_id = id.map(|id| id.expose().to_owned());
        self
    }

    /// The report of a tool result (no task, or a completed one).
    pub(crate) fn completed(result: &CallToolResult, task: Option<&mcp_tasks::TaskId>) -> Self {
        let exit = if result.is_error == Some(true) {
            code::TOOL_ERROR
        } else {
            code::COMPLETED
        };
        let mut report = Self::new("completed", exit).with_task(task);
        report.result = serde_json::to_value(result).ok();
        report
    }

    /// The report of how a wait ended.
    pub(crate) fn outcome(outcome: &TaskOutcome, task: Option<&mcp_tasks::TaskId>) -> Self {
        match outcome {
            TaskOutcome::Completed(result) => Self::completed(result, task),
            TaskOutcome::Failed(failure) => {
                let mut report = Self::from_state(&failure.state);
                report.exit = code::FAILED;
                report
            }
            TaskOutcome::Cancelled(state) | TaskOutcome::InputRequired { state, .. } => {
                Self::from_state(state)
            }
            TaskOutcome::CallInputRequired { request, .. } => {
                let mut report = Self::new("input_required", code::INPUT_REQUIRED).with_task(task);
                report.result = serde_json::to_value(request).ok();
                report
            }
            _ => Self::new("unknown", code::PROTOCOL).with_task(task),
        }
    }

    /// The report of a task state as read (`get`).
    pub(crate) fn from_state(state: &TaskState) -> Self {
        let exit = match state.status {
            TaskStatus::Completed => {
                if state.result.as_ref().and_then(|r| r.get("isError")) == Some(&json!(true)) {
                    code::TOOL_ERROR
                } else {
                    code::COMPLETED
                }
            }
            TaskStatus::Failed => code::FAILED,
            TaskStatus::Cancelled => code::CANCELLED,
            TaskStatus::InputRequired => code::INPUT_REQUIRED,
            _ => code::COMPLETED,
        };
        let mut report = Self::new(state.status.as_str(), exit).with_task(Some(&state.id));
        report.status_message = state.status_message.clone();
        report.result = state.result.clone().map(Value::Object);
        report.error = state.error.as_ref().map(|error| {
            let mut value = json!({"code": error.code, "message": error.message});
            if let Some(data) = &error.data {
                value["data"] = data.clone();
            }
            value
        });
        if state.status == TaskStatus::InputRequired {
            report.result = Some(json!({"inputRequests": state.input_requests}));
        }
        report
    }

    /// The report of an error.
    pub(crate) fn error(error: &Error) -> Self {
        let exit = exit_for(error);
        let status = match error {
            // Before any task existed there is no task status to give.
            Error::Timeout { task_id: None, .. } => "timeout".to_owned(),
            Error::Timeout { .. } => error
                .last_status()
                .map_or("working", TaskStatus::as_str)
                .to_owned(),
            Error::InputRequired { .. } | Error::CallInputRequired { .. } => {
                "input_required".to_owned()
            }
            _ if exit == code::FAILED => "failed".to_owned(),
            _ => "error".to_owned(),
        };
        let mut report = Self::new(&status, exit).with_task(error.task_id());
        report.no_task = matches!(error, Error::Timeout { task_id: None, .. });
        report.error = Some(match error.rpc_error() {
            Some(rpc) => {
                let mut value = json!({"code": rpc.code, "message": rpc.message});
                if let Some(data) = &rpc.data {
                    value["data"] = data.clone();
                }
                value
            }
            None => json!({"message": error_chain(error)}),
        });
        report
    }

    /// Prints the report: one JSON object on stdout, or text for people:
    /// on stdout the outcome (the result, or else the task's status
    /// line), on stderr why it failed and what was not answered.
    pub(crate) fn print(&self, as_json: bool) -> ExitCode {
        if as_json {
            self.print_json();
        } else {
            self.print_human(None);
        }
        ExitCode::from(self.exit)
    }

    /// Prints the report for people under `heading`, which names the task
    /// and says its status (one of several tasks on one stream): the
    /// heading is its status line.
    pub(crate) fn print_under(&self, heading: &str) {
        self.print_human(Some(heading));
    }

    fn print_json(&self) {
        let mut value = json!({"status": self.status});
        if let Some(id) = &self.task_id {
            value["taskId"] = json!(id);
        } else if self.no_task {
            value["taskId"] = Value::Null;
        }
        if let Some(message) = &self.status_message {
            value["statusMessage"] = json!(message);
        }
        if let Some(result) = &self.result {
            value["result"] = result.clone();
        }
        if let Some(error) = &self.error {
            value["error"] = error.clone();
        }
        let _ = writeln!(std::io::stdout().lock(), "{value}");
    }

    fn print_human(&self, heading: Option<&str>) {
        let mut out = std::io::stdout().lock();
        let mut err = std::io::stderr().lock();
        if let Some(heading) = heading {
            let _ = writeln!(out, "{heading}");
        }
        let mut result_shown = false;
        if let Some(result) = &self.result {
            if self.status == "input_required" {
                let _ = writeln!(err, "input required and not answered:");
                let _ = writeln!(err, "{}", pretty(result));
            } else {
                print_result(result, &mut out, &mut err);
                result_shown = true;
            }
        }
        if let Some(error) = &self.error {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            match error.get("code") {
                Some(code) => {
                    let _ = writeln!(err, "error {code}: {message}");
                }
                None => {
                    let _ = writeln!(err, "error: {message}");
                }
            }
            if let Some(data) = error.get("data") {
                let _ = writeln!(err, "  data: {data}");
            }
        }
        // A task that ended without a result (or is still running): its
        // status line is the outcome. Without a task (an unknown id), or
        // when the wait itself went wrong ("error", no task status), the
        // error says it all.
        if heading.is_none() && !result_shown && self.task_id.is_some() && self.status != "error" {
            let _ = writeln!(out, "{}", self.status_line());
        }
    }

    /// The status and, after a space, the status message, if any.
    pub(crate) fn status_line(&self) -> String {
        status_text(&self.status, self.status_message.as_deref())
    }
}

/// A status and its message for people, as every status line shows them:
/// `working step 2 of 3`; a message that says its status already
/// (`cancelled by the caller`) is shown alone.
pub(crate) fn status_text(status: &str, message: Option<&str>) -> String {
    match message {
        Some(message) if message.starts_with(status) => message.to_owned(),
        Some(message) if !message.is_empty() => format!("{status} {message}"),
        _ => status.to_owned(),
    }
}

/// Prints a tool result for people: text as text, other content summarised.
fn print_result(result: &Value, out: &mut impl Write, err: &mut impl Write) {
    let Ok(result) = serde_json::from_value::<CallToolResult>(result.clone()) else {
        let _ = writeln!(out, "{}", pretty(result));
        return;
    };
    if result.is_error == Some(true) {
        let _ = writeln!(err, "the tool reported an error:");
    }
    for content in &result.content {
        let line = match content {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => {
                format!(
                    "[image {}, {} bytes base64]",
                    image.mime_type,
                    image.data.len()
                )
            }
            ContentBlock::Audio(audio) => {
                format!(
                    "[audio {}, {} bytes base64]",
                    audio.mime_type,
                    audio.data.len()
                )
            }
            ContentBlock::Resource(resource) => {
                let uri = serde_json::to_value(&resource.resource)
                    .ok()
                    .and_then(|value| value.get("uri").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                format!("[embedded resource {uri}]")
            }
            ContentBlock::ResourceLink(link) => format!("[link {} {}]", link.name, link.uri),
            _ => "[content of a kind this version does not know]".to_owned(),
        };
        let _ = writeln!(out, "{line}");
    }
    if let Some(structured) = &result.structured_content {
        let _ = writeln!(out, "{}", pretty(structured));
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// The error and its causes, one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    crate::explain::with_details(crate::explain::chain(error), error)
}

/// The exit code of a library error.
pub(crate) fn exit_for(error: &Error) -> u8 {
    match error {
        Error::Timeout { .. } => code::TIMEOUT,
        Error::Protocol { .. } | Error::Stalled { .. } => code::PROTOCOL,
        Error::InputRequired { .. } | Error::CallInputRequired { .. } => code::INPUT_REQUIRED,
        Error::TaskCancelled(_) => code::CANCELLED,
        // --listen on a server that cannot listen (to this task).
        Error::ListenDeclined
        | Error::Rpc {
            method: "subscriptions/listen",
            ..
        } => code::PROTOCOL,
        Error::Rpc { .. } | Error::UnknownTask { .. } | Error::TaskFailed(_) => code::FAILED,
        // An answer the flags cannot build (the resolver's error) or that the
        // form refuses is a usage error.
        Error::InvalidInputResponse { .. } | Error::InputHandler { .. } | Error::Usage(_) => {
            code::USAGE
        }
        // The call's answer was lost and it was not sent again.
        Error::CallMayHaveRun { .. } => code::UNREACHABLE,
        _ if error.is_transport() => code::UNREACHABLE,
        _ => code::PROTOCOL,
    }
}

/// The exit codes of outcomes from the best to the worst: completed, a
/// result with `isError`, cancelled, failed, input left unanswered, timed
/// out, then the waits that went wrong (an answer the flags cannot give,
/// an unreachable server, a protocol error).
const BEST_TO_WORST: [u8; 9] = [
    code::COMPLETED,
    code::TOOL_ERROR,
    code::CANCELLED,
    code::FAILED,
    code::INPUT_REQUIRED,
    code::TIMEOUT,
    code::USAGE,
    code::UNREACHABLE,
    code::PROTOCOL,
];

/// The worse of two exit codes (a code not in [`BEST_TO_WORST`] is worst).
pub(crate) fn worse(a: u8, b: u8) -> u8 {
    let rank = |exit| {
        BEST_TO_WORST
            .iter()
            .position(|&known| known == exit)
            .unwrap_or(BEST_TO_WORST.len())
    };
    if rank(b) > rank(a) { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_outcome_wins() {
        use code::*;
        let all = |codes: &[u8]| {
            codes
                .iter()
                .fold(COMPLETED, |exit, &code| worse(exit, code))
        };
        assert_eq!(all(&[]), COMPLETED);
        assert_eq!(all(&[COMPLETED, TOOL_ERROR]), TOOL_ERROR);
        assert_eq!(all(&[FAILED, CANCELLED, TOOL_ERROR]), FAILED);
        assert_eq!(all(&[CANCELLED, COMPLETED]), CANCELLED);
        assert_eq!(all(&[FAILED, TIMEOUT, INPUT_REQUIRED]), TIMEOUT);
        assert_eq!(all(&[TIMEOUT, UNREACHABLE, USAGE]), UNREACHABLE);
        assert_eq!(all(&[PROTOCOL, FAILED]), PROTOCOL);
        assert_eq!(all(&[INTERRUPTED, PROTOCOL]), INTERRUPTED);
    }
}
