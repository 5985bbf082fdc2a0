//! `--input prompt`: the questions asked for a form or a URL request,
//! behind a [`Ui`] trait so the flow runs without a terminal in tests.

use anyhow::anyhow;
use mcp_tasks::form::{Choice, ContentError, Field, ItemCount, Kind};
use serde_json::{Map, Value, json};

use super::{Elicitation, printable};

/// How many options a multi-select prompt takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Counts {
    count: ItemCount,
    /// Nothing selected means "skip" (an optional field without default).
    allow_empty: bool,
}

impl Counts {
    pub(super) fn check(self, selected: usize) -> Result<(), String> {
        if selected == 0 && self.allow_empty {
            return Ok(());
        }
        self.count
            .check(selected)
            .map_err(|error| error.to_string())
    }
}

/// What a prompt returned: `Ok(None)` when the user pressed Esc or Ctrl-C.
pub(super) type Asked<T> = anyhow::Result<Option<T>>;

/// The questions the prompt mode asks, so the flow can run without a
/// terminal in tests.
pub(super) trait Ui {
    /// Shows a line of text.
    fn show(&mut self, text: &str);
    /// One of `options`, by index, starting at `start`.
    fn select(
        &mut self,
        message: &str,
        help: Option<&str>,
        options: &[String],
        start: usize,
    ) -> Asked<usize>;
    /// Some of `options`, by index, `selected` at first.
    fn multi_select(
        &mut self,
        message: &str,
        help: Option<&str>,
        options: &[String],
        selected: &[usize],
        counts: Counts,
    ) -> Asked<Vec<usize>>;
    /// A line of text; empty input gives `default` when there is one,
    /// otherwise it goes through `validate` like any input.
    fn text(
        &mut self,
        message: &str,
        help: Option<&str>,
        default: Option<&str>,
        validate: &dyn Fn(&str) -> Result<(), String>,
    ) -> Asked<String>;
    /// Yes or no.
    fn confirm(&mut self, message: &str, help: Option<&str>, default: Option<bool>) -> Asked<bool>;
}

/// One field's answer.
enum Step {
    Value(Value),
    Skip,
    Cancel,
}

const CANCEL: &str = "cancel";

fn action(action: &str) -> Value {
    json!({ "action": action })
}

/// Asks the user to answer `elicitation`.
pub(super) fn ask(elicitation: &Elicitation, ui: &mut dyn Ui) -> anyhow::Result<Value> {
    match elicitation {
        Elicitation::Url { message, url } => {
            ui.show(&format!("The server asks: {}", printable(message, true)));
            ui.show(&format!(
                "It wants you to open this URL:\n  {}",
                printable(url, false)
            ));
            let consent = ui.confirm(
                "Open this URL?",
                Some("yes tells the server you agree; nothing is opened for you"),
                None,
            )?;
            Ok(match consent {
                None => action(CANCEL),
                Some(false) => action("decline"),
                Some(true) => {
                    ui.show(&format!(
                        "Open this URL in your browser: {}",
                        printable(url, false)
                    ));
                    action("accept")
                }
            })
        }
        Elicitation::Form { message, form } => {
            ui.show(&format!("The server asks: {}", printable(message, true)));
            let fill_in = if form.fields().is_empty() {
                "Accept"
            } else {
                "Fill in the form"
            };
            let options = [fill_in, "Decline", "Cancel"].map(str::to_owned);
            match ui.select("Answer this request?", None, &options, 0)? {
                Some(0) => {}
                Some(1) => return Ok(action("decline")),
                _ => return Ok(action(CANCEL)),
            }
            let mut values = Map::new();
            for field in form.fields() {
                match ask_field(field, ui)? {
                    Step::Value(value) => {
                        values.insert(field.name().to_owned(), value);
                    }
                    Step::Skip => {}
                    Step::Cancel => return Ok(action(CANCEL)),
                }
            }
            form.fill_defaults(&mut values);
            let content = form.validate(&values).map_err(|error| match error {
                ContentError::Missing { field } => {
                    anyhow!("the required field {field:?} has no answer")
                }
                other => anyhow!(other),
            })?;
            Ok(json!({"action": "accept", "content": content}))
        }
    }
}

fn ask_field(field: &Field, ui: &mut dyn Ui) -> anyhow::Result<Step> {
    let skippable = !field.is_required() && field.default().is_none();
    let label = if field.is_required() {
        field.label().to_owned()
    } else {
        format!("{} (optional)", field.label())
    };
    let mut help: Vec<String> = field.description().map(str::to_owned).into_iter().collect();
    help.extend(field.hint());
    let option_titles =
        |choices: &[Choice]| -> Vec<String> { choices.iter().map(|c| c.title.clone()).collect() };
    match field.kind() {
        Kind::Text { .. } | Kind::Number { .. } | Kind::Integer { .. } => {
            if skippable {
                help.push("Enter to skip".into());
            }
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let default = field.default().map(|value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            });
            let validate = |input: &str| {
                if input.is_empty() {
                    return if skippable {
                        Ok(())
                    } else {
                        Err("an answer is required".to_owned())
                    };
                }
                field
                    .parse(input)
                    .map(drop)
                    .map_err(|error| error.to_string())
            };
            let Some(input) = ui.text(&label, help.as_deref(), default.as_deref(), &validate)?
            else {
                return Ok(Step::Cancel);
            };
            if input.is_empty() && skippable {
                return Ok(Step::Skip);
            }
            field
                .parse(&input)
                .map(Step::Value)
                .map_err(|reason| anyhow!("the answer to {:?} {reason}", field.name()))
        }
        Kind::Boolean if skippable => {
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let options = ["Yes", "No", "(skip)"].map(str::to_owned);
            Ok(match ui.select(&label, help.as_deref(), &options, 0)? {
                None => Step::Cancel,
                Some(0) => Step::Value(Value::Bool(true)),
                Some(1) => Step::Value(Value::Bool(false)),
                Some(_) => Step::Skip,
            })
        }
        Kind::Boolean => {
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let default = field.default().and_then(Value::as_bool);
            Ok(match ui.confirm(&label, help.as_deref(), default)? {
                None => Step::Cancel,
                Some(yes) => Step::Value(Value::Bool(yes)),
            })
        }
        Kind::Select { choices } => {
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let mut options = option_titles(choices);
            if skippable {
                options.push("(skip)".into());
            }
            let start = field
                .default()
                .and_then(|default| {
                    choices
                        .iter()
                        .position(|c| Some(&*c.value) == default.as_str())
                })
                .unwrap_or(0);
            Ok(match ui.select(&label, help.as_deref(), &options, start)? {
                None => Step::Cancel,
                Some(index) => match choices.get(index) {
                    Some(choice) => Step::Value(Value::String(choice.value.clone())),
                    None => Step::Skip,
                },
            })
        }
        Kind::MultiSelect { choices, count } => {
            if skippable {
                help.push("select none to skip".into());
            }
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let selected: Vec<usize> = field
                .default()
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|value| {
                    choices
                        .iter()
                        .position(|c| Some(&*c.value) == value.as_str())
                })
                .collect();
            let Some(picked) = ui.multi_select(
                &label,
                help.as_deref(),
                &option_titles(choices),
                &selected,
                Counts {
                    count: *count,
                    allow_empty: skippable,
                },
            )?
            else {
                return Ok(Step::Cancel);
            };
            if picked.is_empty() && skippable {
                return Ok(Step::Skip);
            }
            let values: Vec<Value> = picked
                .iter()
                .filter_map(|index| choices.get(*index))
                .map(|choice| Value::String(choice.value.clone()))
                .collect();
            field
                .check(&Value::Array(values))
                .map(Step::Value)
                .map_err(|reason| anyhow!("the answer to {:?} {reason}", field.name()))
        }
        _ => Err(anyhow!(
            "the form's field {:?} is of a kind this client cannot ask for",
            field.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use mcp_tasks::validate_input_response;

    use super::super::tests::{rich, url_request};
    use super::*;

    #[derive(Debug)]
    enum Reply {
        Type(&'static str),
        Pick(usize),
        Picks(Vec<usize>),
        Yes,
        No,
        Esc,
    }

    /// Plays `replies` like a user at the keyboard; an invalid reply is
    /// recorded in `errors` and the next one is tried, as inquire re-asks.
    #[derive(Debug, Default)]
    struct Script {
        replies: VecDeque<Reply>,
        shown: Vec<String>,
        asked: Vec<String>,
        errors: Vec<String>,
    }

    impl Script {
        fn new(replies: Vec<Reply>) -> Self {
            Self {
                replies: replies.into(),
                ..Self::default()
            }
        }

        fn next(&mut self, message: &str) -> Reply {
            self.replies
                .pop_front()
                .unwrap_or_else(|| panic!("no reply left for {message:?}"))
        }
    }

    impl Ui for Script {
        fn show(&mut self, text: &str) {
            self.shown.push(text.to_owned());
        }

        fn select(
            &mut self,
            message: &str,
            _help: Option<&str>,
            options: &[String],
            start: usize,
        ) -> Asked<usize> {
            self.asked.push(format!("{message} {options:?} @{start}"));
            match self.next(message) {
                Reply::Pick(index) if index < options.len() => Ok(Some(index)),
                Reply::Esc => Ok(None),
                other => panic!("{other:?} for select {message:?}"),
            }
        }

        fn multi_select(
            &mut self,
            message: &str,
            _help: Option<&str>,
            options: &[String],
            selected: &[usize],
            counts: Counts,
        ) -> Asked<Vec<usize>> {
            self.asked
                .push(format!("{message} {options:?} {selected:?}"));
            loop {
                match self.next(message) {
                    Reply::Picks(picks) => match counts.check(picks.len()) {
                        Ok(()) => return Ok(Some(picks)),
                        Err(reason) => self.errors.push(reason),
                    },
                    Reply::Esc => return Ok(None),
                    other => panic!("{other:?} for multi-select {message:?}"),
                }
            }
        }

        fn text(
            &mut self,
            message: &str,
            help: Option<&str>,
            default: Option<&str>,
            validate: &dyn Fn(&str) -> Result<(), String>,
        ) -> Asked<String> {
            self.asked
                .push(format!("{message} [{}] {default:?}", help.unwrap_or("")));
            loop {
                match self.next(message) {
                    Reply::Type("") if default.is_some() => {
                        return Ok(default.map(str::to_owned));
                    }
                    Reply::Type(input) => match validate(input) {
                        Ok(()) => return Ok(Some(input.to_owned())),
                        Err(reason) => self.errors.push(reason),
                    },
                    Reply::Esc => return Ok(None),
                    other => panic!("{other:?} for text {message:?}"),
                }
            }
        }

        fn confirm(
            &mut self,
            message: &str,
            _help: Option<&str>,
            default: Option<bool>,
        ) -> Asked<bool> {
            self.asked.push(format!("{message} {default:?}"));
            match self.next(message) {
                Reply::Yes => Ok(Some(true)),
                Reply::No => Ok(Some(false)),
                Reply::Type("") if default.is_some() => Ok(default),
                Reply::Esc => Ok(None),
                other => panic!("{other:?} for confirm {message:?}"),
            }
        }
    }

    fn run(request: &Value, replies: Vec<Reply>) -> (Value, Script) {
        let mut script = Script::new(replies);
        let elicitation = Elicitation::parse(request).unwrap().unwrap();
        let response = ask(&elicitation, &mut script).unwrap();
        validate_input_response(request, &response).unwrap();
        assert!(
            script.replies.is_empty(),
            "replies left: {:?}",
            script.replies
        );
        (response, script)
    }

    #[test]
    fn prompt_fills_a_form() {
        let Elicitation::Form { form, .. } = Elicitation::parse(&rich()).unwrap().unwrap() else {
            panic!("not a form");
        };
        if form.fields()[1].name() != "age" {
            return; // The script below follows the required-first order.
        }
        use Reply::*;
        let replies = vec![
            Pick(0), // fill in the form
            Type(""),
            Type("ada"),
            Type("ada@example.com"), // email: required, then invalid
            Type("200"),
            Type("36"), // age: out of range, then fine
            Pick(1),    // color: Green
            Picks(vec![]),
            Picks(vec![0, 1, 2]),
            Picks(vec![2, 0]), // toppings: 1 to 2
            Type("1815-13-10"),
            Type(""),                     // birthday: invalid, then skipped
            Type("2026-07-28T09:30:00Z"), // meeting
            Type(""),                     // nickname: default Ada
            Pick(2),                      // size: Large
            Type(""),                     // subscribe: default (false)
            Picks(vec![]),                // tags: none (it has a default)
            Type(""),                     // website: skipped
            Type("61.5"),                 // weight
        ];
        let (response, script) = run(&rich(), replies);
        assert_eq!(
            response,
            json!({"action": "accept", "content": {
                "email": "ada@example.com", "age": 36, "color": "#0f0",
                "toppings": ["kale", "ham"], "meeting": "2026-07-28T09:30:00Z",
                "nickname": "Ada", "size": "l", "subscribe": false, "tags": [], "weight": 61.5
            }})
        );
        assert_eq!(script.shown, ["The server asks: Tell us about you"]);
        assert_eq!(script.errors.len(), 6, "{:?}", script.errors);
        assert!(script.errors[0].contains("required"));
        assert!(script.errors[1].contains("must be an email"));
        assert!(script.errors[2].contains("at most 150"));
        assert_eq!(
            script.errors[3..5],
            ["takes at least 1 option", "takes at most 2 options"]
        );
        assert!(script.errors[5].contains("must be a date"));
        assert!(
            script
                .asked
                .iter()
                .any(|a| a == "Age [In years · a whole number from 0 to 150] None")
        );
        assert!(
            script
                .asked
                .iter()
                .any(|a| a.starts_with("size (optional) [\"Small\", \"Medium\", \"Large\"] @1"))
        );
        assert!(
            script
                .asked
                .iter()
                .any(|a| a == "subscribe (optional) Some(false)")
        );
        assert!(
            script
                .asked
                .iter()
                .any(|a| a.starts_with("tags (optional) [\"a\", \"b\", \"c\"] [0]"))
        );
        assert!(script.asked.iter().any(|a| {
            a.contains("website (optional) [a URI, e.g. https://example.com/ · Enter to skip]")
        }));
    }

    #[test]
    fn prompt_decline_cancel_and_skips() {
        use Reply::*;
        assert_eq!(run(&rich(), vec![Pick(1)]).0, json!({"action": "decline"}));
        assert_eq!(run(&rich(), vec![Pick(2)]).0, json!({"action": "cancel"}));
        assert_eq!(run(&rich(), vec![Esc]).0, json!({"action": "cancel"}));
        // Esc in the middle of the form cancels it.
        assert_eq!(
            run(&rich(), vec![Pick(0), Type("a@b.c"), Esc]).0,
            json!({"action": "cancel"})
        );
        // Optional fields without defaults can be skipped in every kind.
        let optional = json!({"method": "elicitation/create", "params": {"message": "m",
            "requestedSchema": {"type": "object", "properties": {
                "b": {"type": "boolean"}, "e": {"type": "string", "enum": ["x"]},
                "m": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": ["x", "y"]}},
                "n": {"type": "number"}, "s": {"type": "string"}}}}});
        let (response, script) = run(
            &optional,
            vec![Pick(0), Pick(2), Pick(1), Picks(vec![]), Type(""), Type("")],
        );
        assert_eq!(response, json!({"action": "accept", "content": {}}));
        assert!(
            script.asked[1].contains("[\"Yes\", \"No\", \"(skip)\"]"),
            "{:?}",
            script.asked
        );
        assert!(
            script.asked[2].contains("[\"x\", \"(skip)\"]"),
            "{:?}",
            script.asked
        );
        let (response, _) = run(
            &optional,
            vec![
                Pick(0),
                Pick(0),
                Pick(0),
                Picks(vec![1]),
                Type("2.5"),
                Type("hi"),
            ],
        );
        assert_eq!(
            response,
            json!({"action": "accept", "content": {"b": true, "e": "x", "m": ["y"], "n": 2.5, "s": "hi"}})
        );
        // A form without fields offers plain Accept.
        let empty = json!({"method": "elicitation/create", "params": {"message": "OK?",
            "requestedSchema": {"type": "object", "properties": {}}}});
        let (response, script) = run(&empty, vec![Pick(0)]);
        assert_eq!(response, json!({"action": "accept", "content": {}}));
        assert!(script.asked[0].contains("[\"Accept\", \"Decline\", \"Cancel\"]"));
    }

    #[test]
    fn prompt_url_consent() {
        use Reply::*;
        let (response, script) = run(&url_request(), vec![Yes]);
        assert_eq!(response, json!({"action": "accept"}));
        assert_eq!(
            script.shown,
            [
                "The server asks: Sign in",
                "It wants you to open this URL:\n  https://example.com/auth?x=1&y=2",
                "Open this URL in your browser: https://example.com/auth?x=1&y=2",
            ]
        );
        assert_eq!(script.asked, ["Open this URL? None"]);
        assert_eq!(
            run(&url_request(), vec![No]).0,
            json!({"action": "decline"})
        );
        assert_eq!(
            run(&url_request(), vec![Esc]).0,
            json!({"action": "cancel"})
        );
        let tricky = json!({"method": "elicitation/create", "params": {"mode": "url",
            "message": "m", "url": "https://good.example\u{1b}[8m.evil.example"}});
        let (_, script) = run(&tricky, vec![No]);
        assert!(script.shown[1].ends_with("https://good.example\\u{1b}[8m.evil.example"));
    }
}
