//! Answering input requests: interactively on a terminal (`--input prompt`),
//! from `--answer FIELD=VALUE` values (`--input accept`), by declining, or
//! not at all (`--input fail`).
//!
//! What a form asks for, and whether an answer fits it, is the library's
//! [`mcp_tasks::form`]; this module holds the policy ([`policy`]), filling a
//! form from `--answer` values ([`fill`]), the question flow ([`ask`]) and
//! the terminal it runs on ([`terminal`]). Fields are asked in the form's
//! order (see the library's notes on field order).

use anyhow::Context as _;
use mcp_tasks::form::Form;
use serde_json::{Value, json};

mod ask;
mod fill;
mod policy;
mod terminal;

pub(crate) use fill::answer_all;
pub(crate) use policy::InputPolicy;

use ask::Ui as _;
use terminal::Terminal;

/// Answers one input request (`{method, params}` as the server sent it).
///
/// `Ok(None)` means it is not answered here: the policy is `Fail`, or the
/// request is `sampling/createMessage`, an unknown method or an unknown
/// elicitation mode; the caller then reports the input requirement.
/// `roots/list` is answered with `{"roots": []}` under every other policy:
/// this client exposes no roots. Errors are for forms that cannot be filled
/// (a missing required `--answer`, an `--answer` the form rejects, a schema
/// the library cannot read) and for terminal failures.
pub(crate) fn answer(request: &Value, policy: &InputPolicy) -> anyhow::Result<Option<Value>> {
    if *policy == InputPolicy::Fail {
        return Ok(None);
    }
    match request.get("method").and_then(Value::as_str) {
        Some("elicitation/create") => {}
        Some("roots/list") => return Ok(Some(json!({"roots": []}))),
        _ => return Ok(None),
    }
    if *policy == InputPolicy::Decline {
        return Ok(Some(json!({"action": "decline"})));
    }
    let Some(elicitation) = Elicitation::parse(request)? else {
        return Ok(None);
    };
    let response = match (policy, elicitation) {
        (InputPolicy::Accept(_), Elicitation::Url { message, url }) => {
            // Accepting is consent: the user still has to open the URL.
            Terminal.show(&format!("The server asks: {}", printable(&message, true)));
            Terminal.show(&format!(
                "Open this URL in your browser: {}",
                printable(&url, false)
            ));
            json!({"action": "accept"})
        }
        (InputPolicy::Accept(answers), Elicitation::Form { form, .. }) => {
            json!({"action": "accept", "content": fill::fill(&form, answers)?})
        }
        (_, elicitation) => ask::ask(&elicitation, &mut Terminal)?,
    };
    Ok(Some(response))
}

/// An `elicitation/create` request this module can answer.
#[derive(Clone, Debug, PartialEq)]
enum Elicitation {
    Form { message: String, form: Form },
    Url { message: String, url: String },
}

impl Elicitation {
    /// `None` for an elicitation mode other than form and URL.
    fn parse(request: &Value) -> anyhow::Result<Option<Self>> {
        let params = request
            .get("params")
            .and_then(Value::as_object)
            .context("the elicitation request has no params object")?;
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match params.get("mode").and_then(Value::as_str) {
            None | Some("form") => {
                let schema = params
                    .get("requestedSchema")
                    .context("the form elicitation request has no requestedSchema")?;
                Ok(Some(Self::Form {
                    message,
                    form: Form::from_value(schema)?,
                }))
            }
            Some("url") => {
                let url = params
                    .get("url")
                    .and_then(Value::as_str)
                    .context("the URL elicitation request has no url")?
                    .to_owned();
                Ok(Some(Self::Url { message, url }))
            }
            Some(_) => Ok(None),
        }
    }
}

/// `text` with control characters (and, unless `newlines`, line breaks)
/// and bidirectional-override characters escaped, so that what the server
/// sent cannot rewrite or hide parts of the terminal line.
fn printable(text: &str, newlines: bool) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = (c.is_control() && !(newlines && c == '\n'))
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if hidden {
            shown.extend(c.escape_unicode());
        } else {
            shown.push(c);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use mcp_tasks::validate_input_response;

    use super::*;

    /// A form with every kind of field.
    pub(super) fn rich() -> Value {
        json!({"method": "elicitation/create", "params": {
            "message": "Tell us about you",
            "requestedSchema": {"type": "object", "properties": {
                "email": {"type": "string", "format": "email", "title": "Email"},
                "website": {"type": "string", "format": "uri"},
                "birthday": {"type": "string", "format": "date"},
                "meeting": {"type": "string", "format": "date-time"},
                "nickname": {"type": "string", "minLength": 2, "maxLength": 8, "default": "Ada"},
                "weight": {"type": "number", "minimum": 0.5},
                "age": {"type": "integer", "minimum": 0, "maximum": 150, "title": "Age",
                    "description": "In years"},
                "subscribe": {"type": "boolean", "default": false},
                "size": {"type": "string", "enum": ["s", "m", "l"],
                    "enumNames": ["Small", "Medium", "Large"], "default": "m"},
                "color": {"type": "string", "oneOf": [
                    {"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]},
                "toppings": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"anyOf": [
                    {"const": "ham", "title": "Ham"}, {"const": "egg", "title": "Egg"},
                    {"const": "kale", "title": "Kale"}]}},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]},
                    "default": ["a"]}
            }, "required": ["email", "age", "color", "toppings"]}
        }})
    }

    pub(super) fn url_request() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "url",
            "message": "Sign in", "url": "https://example.com/auth?x=1&y=2"}})
    }

    pub(super) fn accept(answers: &[&str]) -> InputPolicy {
        let answers: Vec<String> = answers.iter().map(|a| (*a).to_owned()).collect();
        InputPolicy::parse("accept", &answers).unwrap()
    }

    /// `answer`, checked with the client library's validation.
    pub(super) fn answered(request: &Value, policy: &InputPolicy) -> Value {
        let response = answer(request, policy).unwrap().expect("an answer");
        validate_input_response(request, &response).unwrap();
        response
    }

    pub(super) fn failure(request: &Value, policy: &InputPolicy) -> String {
        format!("{:#}", answer(request, policy).unwrap_err())
    }

    #[test]
    fn decline_fail_url_and_other_kinds() {
        assert_eq!(
            answered(&rich(), &InputPolicy::Decline),
            json!({"action": "decline"})
        );
        assert_eq!(answer(&rich(), &InputPolicy::Fail).unwrap(), None);
        assert_eq!(
            answered(&url_request(), &accept(&[])),
            json!({"action": "accept"})
        );
        assert_eq!(
            answered(&url_request(), &InputPolicy::Decline),
            json!({"action": "decline"})
        );
        assert_eq!(answer(&url_request(), &InputPolicy::Fail).unwrap(), None);
        let sampling =
            json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}});
        let roots = json!({"method": "roots/list"});
        let future = json!({"method": "elicitation/create", "params": {"mode": "telepathy", "message": "m"}});
        for policy in [InputPolicy::Prompt, accept(&[]), InputPolicy::Decline] {
            assert_eq!(answer(&sampling, &policy).unwrap(), None);
            assert_eq!(answered(&roots, &policy), json!({"roots": []}));
            assert_eq!(answer(&json!({"method": "x/y"}), &policy).unwrap(), None);
        }
        assert_eq!(answer(&future, &accept(&[])).unwrap(), None);
        assert_eq!(answer(&future, &InputPolicy::Prompt).unwrap(), None);
        assert_eq!(answer(&roots, &InputPolicy::Fail).unwrap(), None);
        // A form without fields, accepted.
        let empty = json!({"method": "elicitation/create", "params": {"message": "OK?",
            "requestedSchema": {"type": "object", "properties": {}}}});
        assert_eq!(
            answered(&empty, &accept(&[])),
            json!({"action": "accept", "content": {}})
        );
        assert!(failure(&empty, &accept(&["x=1"])).contains("its fields: none"));
    }

    #[test]
    fn requests_this_client_cannot_read() {
        assert!(failure(&json!({"method": "elicitation/create"}), &accept(&[])).contains("params"));
        let no_schema = json!({"method": "elicitation/create", "params": {"message": "m"}});
        assert!(failure(&no_schema, &accept(&[])).contains("no requestedSchema"));
        assert!(failure(&no_schema, &InputPolicy::Prompt).contains("no requestedSchema"));
        let no_url =
            json!({"method": "elicitation/create", "params": {"mode": "url", "message": "m"}});
        assert!(failure(&no_url, &accept(&[])).contains("no url"));
    }

    #[test]
    fn printable_escapes_terminal_tricks() {
        assert_eq!(printable("a\nb", true), "a\nb");
        assert_eq!(printable("a\nb", false), "a\\u{a}b");
        assert_eq!(
            printable("x\u{1b}[2Ky\u{202e}z", true),
            "x\\u{1b}[2Ky\\u{202e}z"
        );
    }
}
