//! The terminal the prompt runs on: inquire's prompts, on stderr.

use anyhow::anyhow;

use super::ask::{Asked, Counts, Ui};

/// The terminal, through inquire (prompts on stderr).
#[derive(Debug)]
pub(super) struct Terminal;

fn asked<T>(result: inquire::error::InquireResult<T>) -> Asked<T> {
    use inquire::InquireError;
    match result {
        Ok(value) => Ok(Some(value)),
        Err(InquireError::OperationCanceled | InquireError::OperationInterrupted) => Ok(None),
        Err(InquireError::NotTTY) => Err(anyhow!(
            "cannot prompt: not a terminal (use --input accept --answer FIELD=VALUE, decline or fail)"
        )),
        Err(error) => Err(anyhow!(error).context("prompting for input")),
    }
}

impl Ui for Terminal {
    fn show(&mut self, text: &str) {
        eprintln!("{text}");
    }

    fn select(
        &mut self,
        message: &str,
        help: Option<&str>,
        options: &[String],
        start: usize,
    ) -> Asked<usize> {
        let mut prompt =
            inquire::Select::new(message, options.to_vec()).with_starting_cursor(start);
        let help = help.map(|help| format!("{help} · ↑↓ to move, enter to select"));
        if let Some(help) = &help {
            prompt = prompt.with_help_message(help);
        }
        asked(prompt.raw_prompt().map(|option| option.index))
    }

    fn multi_select(
        &mut self,
        message: &str,
        help: Option<&str>,
        options: &[String],
        selected: &[usize],
        counts: Counts,
    ) -> Asked<Vec<usize>> {
        let mut prompt = inquire::MultiSelect::new(message, options.to_vec())
            .with_default(selected)
            .with_validator(
                move |picked: &[inquire::list_option::ListOption<&String>]| {
                    Ok(match counts.check(picked.len()) {
                        Ok(()) => inquire::validator::Validation::Valid,
                        Err(reason) => inquire::validator::Validation::Invalid(reason.into()),
                    })
                },
            );
        let help =
            help.map(|help| format!("{help} · ↑↓ to move, space to select, enter to submit"));
        if let Some(help) = &help {
            prompt = prompt.with_help_message(help);
        }
        asked(
            prompt
                .raw_prompt()
                .map(|picked| picked.iter().map(|option| option.index).collect()),
        )
    }

    fn text(
        &mut self,
        message: &str,
        help: Option<&str>,
        default: Option<&str>,
        validate: &dyn Fn(&str) -> Result<(), String>,
    ) -> Asked<String> {
        let mut prompt = inquire::Text::new(message).with_validator(move |input: &str| {
            Ok(match validate(input) {
                Ok(()) => inquire::validator::Validation::Valid,
                Err(reason) => inquire::validator::Validation::Invalid(reason.into()),
            })
        });
        if let Some(help) = help {
            prompt = prompt.with_help_message(help);
        }
        if let Some(default) = default {
            prompt = prompt.with_default(default);
        }
        asked(prompt.prompt())
    }

    fn confirm(&mut self, message: &str, help: Option<&str>, default: Option<bool>) -> Asked<bool> {
        let mut prompt = inquire::Confirm::new(message);
        if let Some(help) = help {
            prompt = prompt.with_help_message(help);
        }
        if let Some(default) = default {
            prompt = prompt.with_default(default);
        }
        asked(prompt.prompt())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{InputPolicy, answer};
    use mcp_tasks::validate_input_response;

    const PTY_CHILD: &str = "MCP_TASKS_PROMPT_PTY_CHILD";

    /// Run by `prompt_in_a_pty` inside a pseudo-terminal: answers a form
    /// with the inquire prompts and prints the response.
    #[test]
    #[ignore = "run by prompt_in_a_pty"]
    fn pty_child() {
        if std::env::var_os(PTY_CHILD).is_none() {
            return;
        }
        let request = json!({"method": "elicitation/create", "params": {"message": "Who are you?",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "title": "Your name"},
                "ok": {"type": "boolean", "title": "All fine"},
                "pet": {"type": "string", "title": "Pet", "oneOf": [
                    {"const": "c", "title": "Cat"}, {"const": "d", "title": "Dog"}]}},
                "required": ["name", "ok", "pet"]}}});
        let response = answer(&request, &InputPolicy::Prompt).unwrap().unwrap();
        validate_input_response(&request, &response).unwrap();
        eprintln!("PTY-ANSWER {response}");
    }

    /// Types `text` (rexpect buffers what is sent until a flush).
    fn keys(pty: &mut rexpect::session::PtySession, text: &str) {
        pty.send(text).unwrap();
        pty.flush().unwrap();
    }

    #[test]
    fn prompt_in_a_pty() {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "prompt::terminal::tests::pty_child",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(PTY_CHILD, "1")
            .env("NO_COLOR", "1");
        let mut pty = rexpect::session::spawn_command(command, Some(20_000)).unwrap();
        pty.exp_string("Who are you?").unwrap();
        pty.exp_string("Answer this request?").unwrap();
        keys(&mut pty, "\r"); // Fill in the form
        pty.exp_string("Your name").unwrap();
        keys(&mut pty, "\r"); // empty: refused, it is required
        pty.exp_string("an answer is required").unwrap();
        keys(&mut pty, "Ada\r");
        pty.exp_string("All fine").unwrap();
        keys(&mut pty, "y\r");
        pty.exp_string("Pet").unwrap();
        keys(&mut pty, "Dog"); // filters the options
        pty.exp_string("Dog").unwrap();
        keys(&mut pty, "\r");
        pty.exp_string("PTY-ANSWER ").unwrap();
        let line = pty.read_line().unwrap();
        let response: Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(
            response,
            json!({"action": "accept", "content": {"name": "Ada", "ok": true, "pet": "d"}})
        );
    }
}
