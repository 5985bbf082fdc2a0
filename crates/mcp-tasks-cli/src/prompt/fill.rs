//! `--input accept`: filling forms from `--answer FIELD=VALUE` values and
//! the schemas' defaults, and sharing the `--answer`s out among the forms
//! of one round.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail};
use mcp_tasks::client::InputError;
use mcp_tasks::form::{ContentError, Field, Form};
use rmcp::model::InputResponses;
use serde_json::{Map, Value};

use super::{Elicitation, InputPolicy, answer};

/// The form's content from `--answer` values (field name to raw text) and
/// the schema's defaults.
pub(super) fn fill(
    form: &Form,
    answers: &BTreeMap<String, String>,
) -> anyhow::Result<Map<String, Value>> {
    let mut content = Map::new();
    for (name, raw) in answers {
        let Some(field) = form.field(name) else {
            let names: Vec<&str> = form.fields().iter().map(Field::name).collect();
            bail!(
                "--answer {name}=...: the form has no field {name:?} (its fields: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        };
        let value = field
            .parse(raw)
            .map_err(|reason| anyhow!("--answer {name}={raw:?}: {reason}"))?;
        content.insert(name.clone(), value);
    }
    form.fill_defaults(&mut content);
    form.validate(&content).map_err(|error| match &error {
        ContentError::Missing { field } => {
            let title = form
                .field(field)
                .and_then(Field::title)
                .map(|title| format!(" ({title})"))
                .unwrap_or_default();
            anyhow!(
                "the form requires the field {field:?}{title}, which has no default: pass --answer {field}=VALUE"
            )
        }
        _ => anyhow!(error),
    })
}

/// Answers each request (key to `{method, params}`) as the policy says;
/// keys it cannot answer are left out. Under `--input accept`, each form
/// gets the `--answer`s that name one of its fields. Errors, which end the
/// wait and which the caller reports as a usage error: a request that
/// cannot be answered as asked (under its key), and an `--answer` that
/// names a field of no form (under the round's first key).
pub(crate) fn answer_all(
    requests: &BTreeMap<String, Value>,
    policy: &InputPolicy,
) -> Result<InputResponses, InputError> {
    let cannot = |key: &str, error: anyhow::Error| InputError::new(key, format!("{error:#}"));
    let mut fields = BTreeMap::new();
    if let InputPolicy::Accept(answers) = policy {
        for (key, request) in requests {
            fields.insert(key, fields_of(request).map_err(|error| cannot(key, error))?);
        }
        let known: BTreeSet<&String> = fields.values().flatten().collect();
        if let Some(unknown) = answers.keys().find(|name| !known.contains(name)) {
            let first = requests.keys().next().map_or("", String::as_str);
            return Err(InputError::new(
                first,
                format!("--answer {unknown}=... names no field of the forms the server sent"),
            ));
        }
    }
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let own;
        let policy = match (policy, fields.get(key)) {
            (InputPolicy::Accept(answers), Some(fields)) => {
                own = InputPolicy::Accept(
                    answers
                        .iter()
                        .filter(|(name, _)| fields.contains(name))
                        .map(|(name, value)| (name.clone(), value.clone()))
                        .collect(),
                );
                &own
            }
            (other, _) => other,
        };
        if let Some(response) = answer(request, policy).map_err(|error| cannot(key, error))? {
            responses.insert(key.clone(), response);
        }
    }
    Ok(responses)
}

/// The names of the fields of `request`'s form; none for other requests.
fn fields_of(request: &Value) -> anyhow::Result<Vec<String>> {
    if request.get("method").and_then(Value::as_str) != Some("elicitation/create") {
        return Ok(Vec::new());
    }
    Ok(match Elicitation::parse(request)? {
        Some(Elicitation::Form { form, .. }) => form
            .fields()
            .iter()
            .map(|field| field.name().to_owned())
            .collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{accept, answered, failure, rich};
    use super::*;

    const REQUIRED: [&str; 4] = [
        "email=ada@example.com",
        "age=36",
        "color=#f00",
        "toppings=ham",
    ];

    #[test]
    fn accept_converts_every_kind() {
        let policy = accept(&[
            "email= ada@example.com ",
            "website=https://example.com/a?b=c%20d",
            "birthday=1815-12-10",
            "meeting=2026-07-28T09:30:00.5+02:00",
            "nickname=Lovelace",
            "weight=61.5",
            "age=36",
            "subscribe=yes",
            "size=Large",
            "color=Green",
            "toppings=ham, Egg",
            "tags=",
        ]);
        let response = answered(&rich(), &policy);
        assert_eq!(
            response,
            json!({"action": "accept", "content": {
                "email": "ada@example.com", "website": "https://example.com/a?b=c%20d",
                "birthday": "1815-12-10", "meeting": "2026-07-28T09:30:00.5+02:00",
                "nickname": "Lovelace", "weight": 61.5, "age": 36, "subscribe": true,
                "size": "l", "color": "#0f0", "toppings": ["ham", "egg"], "tags": []
            }})
        );
        let response = answered(
            &rich(),
            &accept(
                &["weight=2", "subscribe=False", "size=s"]
                    .iter()
                    .chain(&REQUIRED)
                    .copied()
                    .collect::<Vec<_>>(),
            ),
        );
        assert_eq!(response["content"]["weight"], json!(2));
        assert_eq!(response["content"]["subscribe"], json!(false));
        assert_eq!(response["content"]["size"], json!("s"));
    }

    #[test]
    fn accept_fills_defaults() {
        let response = answered(&rich(), &accept(&REQUIRED));
        assert_eq!(
            response,
            json!({"action": "accept", "content": {
                "email": "ada@example.com", "age": 36, "color": "#f00", "toppings": ["ham"],
                "nickname": "Ada", "subscribe": false, "size": "m", "tags": ["a"]
            }})
        );
    }

    #[test]
    fn accept_errors() {
        let error = failure(
            &rich(),
            &accept(&["email=ada@example.com", "color=#f00", "toppings=egg"]),
        );
        assert!(
            error.contains("\"age\" (Age)") && error.contains("--answer age=VALUE"),
            "{error}"
        );
        let with = |extra: &str| {
            let mut answers = REQUIRED.to_vec();
            answers.retain(|a| a.split('=').next() != extra.split('=').next());
            answers.push(extra);
            accept(&answers)
        };
        let bad = [
            ("colour=red", "no field \"colour\""),
            ("age=abc", "must be a whole number"),
            ("age=1.5", "whole number"),
            ("age=151", "at most 150"),
            ("age=-1", "at least 0"),
            ("weight=0.25", "at least 0.5"),
            ("weight=heavy", "must be a number"),
            ("email=ada", "must be an email"),
            ("email=ada@ex ample.com", "must be an email"),
            ("website=example.com", "must be a URI"),
            ("website=https://exa mple.com", "must be a URI"),
            ("birthday=2023-02-29", "must be a date"),
            ("birthday=2023-2-1", "must be a date"),
            ("meeting=2026-07-28 09:30", "must be a date and time"),
            ("meeting=2026-07-28T25:00:00Z", "must be a date and time"),
            ("nickname=A", "at least 2 characters"),
            ("nickname=Augusta Ada", "at most 8 characters"),
            ("subscribe=maybe", "true/false or yes/no"),
            (
                "size=xl",
                "not one of \"s\" (Small), \"m\" (Medium), \"l\" (Large)",
            ),
            ("color=blue", "not one of"),
            ("toppings=ham,egg,kale", "at most 2"),
            ("toppings=", "at least 1"),
            ("toppings=ham,bacon", "\"bacon\" is not one of"),
        ];
        for (extra, expected) in bad {
            let error = failure(&rich(), &with(extra));
            assert!(error.contains(expected), "{extra}: {error}");
        }
    }

    #[test]
    fn schemas_this_client_rejects_or_repairs() {
        let form = |properties: Value, required: Value| {
            json!({"method": "elicitation/create", "params": {"message": "m",
                "requestedSchema": {"type": "object", "properties": properties, "required": required}}})
        };
        let nested = form(json!({"x": {"type": "object"}}), json!([]));
        assert!(failure(&nested, &accept(&[])).contains("cannot hold"));
        let numbers = form(json!({"x": {"type": "string", "enum": [1, 2]}}), json!([]));
        assert!(failure(&numbers, &accept(&[])).contains("cannot hold"));
        // rmcp reads an enum only with its `"type": "string"`.
        let untyped = form(json!({"e": {"enum": ["a", "b"]}}), json!(["e"]));
        assert!(failure(&untyped, &accept(&["e=b"])).contains("cannot hold"));
        let undefined = form(json!({}), json!(["x"]));
        assert!(failure(&undefined, &accept(&[])).contains("does not define"));
        assert!(failure(&json!({"method": "elicitation/create"}), &accept(&[])).contains("params"));
        // Invalid defaults are dropped: the field is then required from the user.
        let bad_default = form(
            json!({"n": {"type": "integer", "maximum": 3, "default": 5},
                   "e": {"type": "string", "enum": ["a"], "default": "z"},
                   "f": {"type": "number", "default": 2.0}}),
            json!(["n", "e"]),
        );
        assert!(failure(&bad_default, &accept(&["e=a"])).contains("--answer n=VALUE"));
        assert!(failure(&bad_default, &accept(&["n=1"])).contains("--answer e=VALUE"));
        let response = answered(&bad_default, &accept(&["n=1", "e=a"]));
        assert_eq!(response["content"], json!({"n": 1, "e": "a", "f": 2.0}));
        // An integer default written as 4.0 is sent as 4.
        let loose = form(
            json!({"n": {"type": "integer", "default": 4.0}, "e": {"type": "string", "enum": ["a", "b"]}}),
            json!(["e"]),
        );
        let response = answered(&loose, &accept(&["e=b"]));
        assert_eq!(response["content"], json!({"n": 4, "e": "b"}));
        assert_eq!(response["content"]["n"].as_i64(), Some(4));
    }

    fn form_request(properties: &Value) -> Value {
        json!({"method": "elicitation/create", "params": {"message": "m",
            "requestedSchema": {"type": "object", "properties": properties}}})
    }

    #[test]
    fn answer_all_shares_answers_out_among_the_forms() {
        let requests: BTreeMap<String, Value> = [
            ("a", form_request(&json!({"name": {"type": "string"}}))),
            ("b", form_request(&json!({"age": {"type": "integer"}}))),
            ("c", json!({"method": "roots/list"})),
            ("d", json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}})),
        ]
        .map(|(key, request)| (key.to_owned(), request))
        .into();
        let responses = answer_all(&requests, &accept(&["name=Ada", "age=36"])).unwrap();
        assert_eq!(
            json!(responses),
            json!({
                "a": {"action": "accept", "content": {"name": "Ada"}},
                "b": {"action": "accept", "content": {"age": 36}},
                "c": {"roots": []}
            })
        );
        let declined = answer_all(&requests, &InputPolicy::Decline).unwrap();
        assert_eq!(declined.len(), 3);
        assert_eq!(declined["a"], json!({"action": "decline"}));

        let error = answer_all(&requests, &accept(&["name=Ada", "nick=x"])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "input request \"a\" cannot be answered: --answer nick=... names no field of the forms the server sent"
        );
        let error = answer_all(&requests, &accept(&["age=old"])).unwrap_err();
        assert_eq!(error.key(), "b");
        assert_eq!(
            error.to_string(),
            "input request \"b\" cannot be answered: --answer age=\"old\": must be a whole number"
        );
        // A form the library cannot read is named as such, before the
        // --answer that names its field.
        let mut unreadable = requests;
        unreadable.insert("e".into(), form_request(&json!({"x": {"type": "object"}})));
        let error = answer_all(&unreadable, &accept(&["x=1"])).unwrap_err();
        assert_eq!(error.key(), "e");
        let error = error.to_string();
        assert!(
            error.starts_with(
                "input request \"e\" cannot be answered: the field \"x\" has a schema"
            ),
            "{error}"
        );
    }
}
