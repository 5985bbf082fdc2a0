//! Filling an elicitation form as an automated user who accepts: a field's
//! default when it has one, else a value that fits its kind and bounds. The
//! form is read by the library ([`mcp_tasks::form`]).

use mcp_tasks::form::{Form, Kind};
use rmcp::model::StringFormat;
use serde_json::{Value, json};

/// The content of an accepted form: one value for every field (its
/// default, or one made up for its kind). A form without fields gets an
/// empty object.
pub(crate) fn fill(form: &Form) -> Value {
    let mut content = form.defaults();
    for field in form.fields() {
        if !content.contains_key(field.name())
            && let Some(value) = value_for(field.kind())
        {
            content.insert(field.name().to_owned(), value);
        }
    }
    Value::Object(content)
}

/// A value of `kind` within its bounds, or `None` for a kind this client
/// does not know.
fn value_for(kind: &Kind) -> Option<Value> {
    Some(match kind {
        Kind::Boolean => Value::Bool(true),
        Kind::Integer { minimum, maximum } => {
            json!(minimum.unwrap_or_else(|| maximum.map_or(1, |max| max.min(1))))
        }
        Kind::Number { minimum, maximum } => {
            json!(minimum.unwrap_or_else(|| maximum.map_or(1.0, |max| max.min(1.0))))
        }
        Kind::Text {
            format,
            min_length,
            max_length,
        } => Value::String(string_for(*format, *min_length, *max_length)),
        Kind::Select { choices } => Value::String(choices.first()?.value.clone()),
        Kind::MultiSelect { choices, count } => {
            let wanted = count.min.max(1).min(count.max.unwrap_or(u64::MAX));
            let wanted = usize::try_from(wanted).unwrap_or(usize::MAX);
            choices
                .iter()
                .take(wanted)
                .map(|choice| Value::String(choice.value.clone()))
                .collect()
        }
        _ => return None,
    })
}

/// A string in `format` whose length is within the bounds.
fn string_for(format: Option<StringFormat>, min: Option<u32>, max: Option<u32>) -> String {
    let mut text = match format {
        Some(StringFormat::Email) => "conformance@example.com".to_owned(),
        Some(StringFormat::Uri) => "https://example.com/".to_owned(),
        Some(StringFormat::Date) => "2026-07-28".to_owned(),
        Some(StringFormat::DateTime) => "2026-07-28T00:00:00Z".to_owned(),
        _ => "conformance".to_owned(),
    };
    let length = |bound: u32| usize::try_from(bound).unwrap_or(usize::MAX);
    if let Some(min) = min.map(length) {
        while text.chars().count() < min {
            text.push('x');
        }
    }
    if let Some(max) = max.map(length) {
        text = text.chars().take(max).collect();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(schema: &Value) -> Form {
        Form::from_value(schema).unwrap()
    }

    #[test]
    fn defaults_win_and_types_get_values() {
        let schema = json!({"type": "object", "properties": {
            "confirmed": {"type": "boolean"},
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "minimum": 18},
            "score": {"type": "number"},
            "status": {"type": "string", "enum": ["active", "inactive"]},
            "color": {"type": "string", "oneOf": [{"const": "red", "title": "Red"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "email": {"type": "string", "format": "email"},
            "code": {"type": "string", "maxLength": 4}
        }});
        let content = fill(&form(&schema));
        assert_eq!(
            content,
            json!({"confirmed": true, "name": "John Doe", "age": 18, "score": 1.0,
                "status": "active", "color": "red", "tags": ["a"],
                "email": "conformance@example.com", "code": "conf"})
        );
        let Value::Object(content) = content else {
            panic!("not an object");
        };
        form(&schema).validate(&content).unwrap();
    }

    #[test]
    fn bounds_are_kept() {
        let schema = json!({"type": "object", "properties": {
            "few": {"type": "integer", "maximum": -3},
            "small": {"type": "number", "maximum": 0.5},
            "long": {"type": "string", "minLength": 15},
            "picks": {"type": "array", "minItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}},
            "bad_default": {"type": "integer", "maximum": 3, "default": 5}
        }});
        let content = fill(&form(&schema));
        assert_eq!(
            content,
            json!({"few": -3, "small": 0.5, "long": "conformancexxxx", "picks": ["a", "b"],
                "bad_default": 1})
        );
        let Value::Object(content) = content else {
            panic!("not an object");
        };
        form(&schema).validate(&content).unwrap();
    }

    #[test]
    fn no_fields_no_content() {
        assert_eq!(
            fill(&form(&json!({"type": "object", "properties": {}}))),
            json!({})
        );
    }
}
