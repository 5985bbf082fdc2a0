//! Filling an elicitation form from its requested schema, as an automated
//! user who accepts: a property's `default` when it has one, else a value
//! that fits its type and constraints.

use serde_json::{Map, Value, json};

/// The content of an accepted form: one value for every property of
/// `schema` (a `requestedSchema` object). A schema without properties gets
/// an empty object.
pub(crate) fn fill(schema: &Value) -> Value {
    let mut content = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(value) = value_for(property) {
                content.insert(name.clone(), value);
            }
        }
    }
    Value::Object(content)
}

/// A value for one property, or `None` for a type a form cannot hold.
fn value_for(property: &Value) -> Option<Value> {
    if let Some(default) = property.get("default") {
        return Some(default.clone());
    }
    if let Some(first) = first_choice(property) {
        return Some(first);
    }
    match property.get("type").and_then(Value::as_str) {
        Some("boolean") => Some(Value::Bool(true)),
        Some("integer") => {
            let minimum = property.get("minimum").and_then(Value::as_i64).unwrap_or(1);
            Some(json!(minimum))
        }
        Some("number") => {
            let minimum = property
                .get("minimum")
                .and_then(Value::as_f64)
                .unwrap_or(1.0);
            Some(json!(minimum))
        }
        Some("string") => Some(Value::String(string_for(property))),
        Some("array") => {
            let items = property.get("items").unwrap_or(&Value::Null);
            Some(Value::Array(first_choice(items).into_iter().collect()))
        }
        _ => None,
    }
}

/// The first option of an enumeration: `enum`, or `oneOf`/`anyOf` of `const`s.
fn first_choice(schema: &Value) -> Option<Value> {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.first())
    {
        return Some(first.clone());
    }
    ["oneOf", "anyOf"].iter().find_map(|key| {
        schema
            .get(*key)
            .and_then(Value::as_array)
            .and_then(|options| options.first())
            .and_then(|option| option.get("const"))
            .cloned()
    })
}

/// A string that fits the property's `format` and length bounds.
fn string_for(property: &Value) -> String {
    let mut text = match property.get("format").and_then(Value::as_str) {
        Some("email") => "conformance@example.com".to_owned(),
        Some("uri") => "https://example.com/".to_owned(),
        Some("date") => "2026-07-28".to_owned(),
        Some("date-time") => "2026-07-28T00:00:00Z".to_owned(),
        _ => "conformance".to_owned(),
    };
    let length = |key: &str| {
        property
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    if let Some(min) = length("minLength") {
        while text.chars().count() < min {
            text.push('x');
        }
    }
    if let Some(max) = length("maxLength") {
        text = text.chars().take(max).collect();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            fill(&schema),
            json!({"confirmed": true, "name": "John Doe", "age": 18, "score": 1.0,
                "status": "active", "color": "red", "tags": ["a"],
                "email": "conformance@example.com", "code": "conf"})
        );
    }

    #[test]
    fn no_properties_no_content() {
        assert_eq!(fill(&json!({"type": "object"})), json!({}));
        assert_eq!(fill(&Value::Null), json!({}));
    }
}
