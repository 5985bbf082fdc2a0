use std::collections::BTreeMap;

use rmcp::model::{
    ConstTitle, ElicitationSchema, EnumSchema, PrimitiveSchemaDefinition, StringFormat,
    StringSchema,
};
use serde_json::{Map, Value, json};

use super::read::map_keeps_order;
use super::*;

/// A schema with every kind of field.
fn rich() -> Value {
    json!({"type": "object", "properties": {
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
    }, "required": ["email", "age", "color", "toppings"]})
}

fn form() -> Form {
    Form::from_value(&rich()).unwrap()
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

fn choices(pairs: &[(&str, &str)]) -> Vec<Choice> {
    pairs
        .iter()
        .map(|(value, title)| Choice {
            value: (*value).to_owned(),
            title: (*title).to_owned(),
        })
        .collect()
}

#[test]
fn reads_every_kind() {
    let form = form();
    let kind = |name: &str| form.field(name).unwrap().kind().clone();
    assert_eq!(
        kind("email"),
        Kind::Text {
            format: Some(StringFormat::Email),
            min_length: None,
            max_length: None
        }
    );
    assert_eq!(
        kind("nickname"),
        Kind::Text {
            format: None,
            min_length: Some(2),
            max_length: Some(8)
        }
    );
    assert_eq!(
        kind("weight"),
        Kind::Number {
            minimum: Some(0.5),
            maximum: None
        }
    );
    assert_eq!(
        kind("age"),
        Kind::Integer {
            minimum: Some(0),
            maximum: Some(150)
        }
    );
    assert_eq!(kind("subscribe"), Kind::Boolean);
    assert_eq!(
        kind("size"),
        Kind::Select {
            choices: choices(&[("s", "Small"), ("m", "Medium"), ("l", "Large")])
        }
    );
    assert_eq!(
        kind("color"),
        Kind::Select {
            choices: choices(&[("#f00", "Red"), ("#0f0", "Green")])
        }
    );
    assert_eq!(
        kind("toppings"),
        Kind::MultiSelect {
            choices: choices(&[("ham", "Ham"), ("egg", "Egg"), ("kale", "Kale")]),
            count: ItemCount {
                min: 1,
                max: Some(2)
            }
        }
    );
    assert_eq!(
        kind("tags"),
        Kind::MultiSelect {
            choices: choices(&[("a", "a"), ("b", "b"), ("c", "c")]),
            count: ItemCount { min: 0, max: None }
        }
    );
    let age = form.field("age").unwrap();
    assert_eq!(
        (age.name(), age.title(), age.label(), age.description()),
        ("age", Some("Age"), "Age", Some("In years"))
    );
    assert!(age.is_required());
    let website = form.field("website").unwrap();
    assert_eq!((website.title(), website.label()), (None, "website"));
    assert!(!website.is_required());
    assert!(form.field("nope").is_none());
}

#[test]
fn reads_rmcp_schemas_in_property_order() {
    let mut properties = BTreeMap::new();
    properties.insert(
        "zeta".to_owned(),
        PrimitiveSchemaDefinition::String(StringSchema::email().title("Z")),
    );
    properties.insert(
        "alpha".to_owned(),
        PrimitiveSchemaDefinition::Enum(
            EnumSchema::builder(vec!["x".into(), "y".into()])
                .multiselect()
                .min_items(1)
                .unwrap()
                .build(),
        ),
    );
    properties.insert(
        "mid".to_owned(),
        PrimitiveSchemaDefinition::Enum(EnumSchema::Single(
            rmcp::model::SingleSelectEnumSchema::Titled(
                rmcp::model::TitledSingleSelectEnumSchema::new(vec![ConstTitle::new("c", "")]),
            ),
        )),
    );
    let mut schema = ElicitationSchema::new(properties).with_required(vec!["mid".into()]);
    schema.property_order = Some(vec!["zeta".into(), "mid".into()]);
    let form = Form::from_schema(&schema).unwrap();
    let names: Vec<&str> = form.fields().iter().map(Field::name).collect();
    // Listed ones in their order, then the rest by name; `required` does
    // not reorder a typed schema.
    assert_eq!(names, ["zeta", "mid", "alpha"]);
    assert_eq!(form.fields()[0].label(), "Z");
    assert!(form.fields()[1].is_required());
    // An empty title shows the value.
    assert_eq!(
        form.fields()[1].kind(),
        &Kind::Select {
            choices: choices(&[("c", "c")])
        }
    );
    assert!(matches!(
        form.fields()[2].kind(),
        Kind::MultiSelect {
            count: ItemCount { min: 1, max: None },
            ..
        }
    ));

    // rmcp's builder orders by name; a schema read from the wire keeps the
    // wire's order.
    let built = ElicitationSchema::builder()
        .required_email("email")
        .required_integer("age", 0, 150)
        .optional_bool("newsletter", false)
        .build()
        .unwrap();
    let form = Form::from_schema(&built).unwrap();
    let names: Vec<&str> = form.fields().iter().map(Field::name).collect();
    assert_eq!(names, ["age", "email", "newsletter"]);
    assert_eq!(
        form.field("newsletter").unwrap().default(),
        Some(&json!(false))
    );
    let wire: ElicitationSchema = serde_json::from_str(
        r#"{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "boolean"}}}"#,
    )
    .unwrap();
    let form = Form::from_schema(&wire).unwrap();
    let names: Vec<&str> = form.fields().iter().map(Field::name).collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn value_order_is_required_first_unless_serde_json_keeps_order() {
    let form = form();
    let names: Vec<&str> = form.fields().iter().map(Field::name).collect();
    if map_keeps_order() {
        assert_eq!(names[..3], ["email", "website", "birthday"]);
    } else {
        assert_eq!(
            names,
            [
                "email",
                "age",
                "color",
                "toppings",
                "birthday",
                "meeting",
                "nickname",
                "size",
                "subscribe",
                "tags",
                "website",
                "weight"
            ]
        );
    }
}

#[test]
fn defaults_are_normalized_or_dropped() {
    let form = form();
    assert_eq!(
        json!(form.defaults()),
        json!({"nickname": "Ada", "subscribe": false, "size": "m", "tags": ["a"]})
    );
    let mut content = object(json!({"nickname": "Bo", "age": 3}));
    form.fill_defaults(&mut content);
    assert_eq!(
        json!(content),
        json!({"nickname": "Bo", "age": 3, "subscribe": false, "size": "m", "tags": ["a"]})
    );

    let form = Form::from_value(&json!({"type": "object", "properties": {
        "n": {"type": "integer", "maximum": 3, "default": 5},
        "e": {"type": "string", "enum": ["a"], "default": "z"},
        "f": {"type": "number", "default": 2.0},
        "i": {"type": "integer", "default": 4.0},
        "s": {"type": "string", "default": 7},
        "m": {"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": ["b"]},
        "x": {"type": "string", "format": "email", "default": "not an email"},
    }}))
    .unwrap();
    let defaults = form.defaults();
    assert_eq!(json!(defaults), json!({"f": 2.0, "i": 4}));
    assert_eq!(defaults["i"].as_i64(), Some(4));
    assert!(matches!(
        form.field("i").unwrap().kind(),
        Kind::Integer { .. }
    ));
}

#[test]
fn validate_normalizes() {
    let form = form();
    let content = object(json!({
        "email": "ada@example.com", "age": 36.0, "color": "#f00",
        "toppings": ["ham", "egg", "ham"], "weight": 2, "tags": []
    }));
    let valid = form.validate(&content).unwrap();
    assert_eq!(
        json!(valid),
        json!({"email": "ada@example.com", "age": 36, "color": "#f00",
            "toppings": ["ham", "egg"], "weight": 2, "tags": []})
    );
    assert_eq!(valid["age"].as_i64(), Some(36));
    // Nothing required: an empty answer is fine.
    let empty = Form::from_value(&json!({"type": "object", "properties": {}})).unwrap();
    assert!(empty.fields().is_empty());
    assert_eq!(empty.validate(&Map::new()).unwrap(), Map::new());
}

#[test]
fn validate_errors_name_the_field() {
    let form = form();
    let base = json!({"email": "ada@example.com", "age": 36, "color": "#f00", "toppings": ["ham"]});
    form.validate(&object(base.clone())).unwrap();
    let with = |field: &str, value: Value| {
        let mut content = object(base.clone());
        content.insert(field.to_owned(), value);
        form.validate(&content).unwrap_err()
    };
    let cases = [
        (
            with("age", json!(1.5)),
            "the field \"age\" must be a whole number",
        ),
        (
            with("age", json!("36")),
            "the field \"age\" must be a whole number",
        ),
        (
            with("age", json!(151)),
            "the field \"age\" must be at most 150",
        ),
        (
            with("age", json!(-1)),
            "the field \"age\" must be at least 0",
        ),
        (
            with("weight", json!(0.25)),
            "the field \"weight\" must be at least 0.5",
        ),
        (
            with("weight", json!(true)),
            "the field \"weight\" must be a number",
        ),
        (
            with("email", json!("ada")),
            "the field \"email\" must be an email address",
        ),
        (
            with("nickname", json!("A")),
            "must be at least 2 characters long",
        ),
        (
            with("nickname", json!("Augusta Ada")),
            "must be at most 8 characters long",
        ),
        (
            with("subscribe", json!("yes")),
            "the field \"subscribe\" must be true or false",
        ),
        (
            with("size", json!("xl")),
            "\"xl\" is not one of \"s\" (Small), \"m\" (Medium), \"l\" (Large)",
        ),
        (with("size", json!(1)), "must be one of the options"),
        (with("toppings", json!([])), "takes at least 1 option"),
        (
            with("toppings", json!(["ham", "egg", "kale"])),
            "takes at most 2 options",
        ),
        (
            with("toppings", json!(["bacon"])),
            "\"bacon\" is not one of \"ham\" (Ham)",
        ),
        (with("toppings", json!([1])), "must be a list of options"),
        (with("toppings", json!("ham")), "must be a list of options"),
        (
            with("website", json!(null)),
            "the field \"website\" must be a string",
        ),
        (
            with("colour", json!("red")),
            "the form has no field \"colour\"",
        ),
    ];
    for (error, expected) in cases {
        assert!(error.to_string().contains(expected), "{error} / {expected}");
    }
    let missing = form
        .validate(&object(json!({"email": "a@b.c"})))
        .unwrap_err();
    assert_eq!(
        missing,
        ContentError::Missing {
            field: "age".into()
        }
    );
    assert_eq!(missing.field(), "age");
    assert_eq!(
        missing.to_string(),
        "the required field \"age\" has no value"
    );
    assert_eq!(
        with("age", json!(200)),
        ContentError::Invalid {
            field: "age".into(),
            problem: ValueError::TooLarge {
                maximum: 150.into()
            }
        }
    );
}

#[test]
fn parse_reads_text_for_every_kind() {
    let form = form();
    let parse = |name: &str, text: &str| form.field(name).unwrap().parse(text);
    assert_eq!(
        parse("email", " ada@example.com ").unwrap(),
        json!("ada@example.com")
    );
    assert_eq!(parse("nickname", " Lo ").unwrap(), json!(" Lo "));
    assert_eq!(parse("weight", " 61.5").unwrap(), json!(61.5));
    assert_eq!(parse("weight", "2").unwrap(), json!(2));
    assert_eq!(parse("age", "36").unwrap(), json!(36));
    assert_eq!(parse("age", "36.0").unwrap(), json!(36));
    for (text, value) in [
        ("yes", true),
        ("Y", true),
        ("TRUE", true),
        ("no", false),
        ("n", false),
        ("False", false),
    ] {
        assert_eq!(parse("subscribe", text).unwrap(), json!(value), "{text}");
    }
    assert_eq!(parse("size", "Large").unwrap(), json!("l"));
    assert_eq!(parse("size", "m").unwrap(), json!("m"));
    assert_eq!(parse("color", " Green ").unwrap(), json!("#0f0"));
    assert_eq!(
        parse("toppings", "ham, Egg").unwrap(),
        json!(["ham", "egg"])
    );
    assert_eq!(parse("tags", "").unwrap(), json!([]));
    let errors = [
        ("age", "abc", "must be a whole number"),
        ("age", "1.5", "must be a whole number"),
        ("weight", "heavy", "must be a number"),
        ("weight", "1e400", "must be a number"),
        ("subscribe", "maybe", "must be true/false or yes/no"),
        ("size", "xl", "\"xl\" is not one of"),
        ("toppings", "ham,bacon", "\"bacon\" is not one of"),
        ("toppings", "", "takes at least 1 option"),
        ("birthday", "2023-02-29", "must be a date (YYYY-MM-DD)"),
        ("meeting", "2026-07-28 09:30", "must be a date and time"),
        ("website", "example.com", "must be a URI"),
    ];
    for (name, text, expected) in errors {
        let error = parse(name, text).unwrap_err().to_string();
        assert!(error.contains(expected), "{name}={text}: {error}");
    }
}

#[test]
fn hints() {
    let form = form();
    let hint = |name: &str| form.field(name).unwrap().hint();
    assert_eq!(hint("email").as_deref(), Some("an email address"));
    assert_eq!(
        hint("website").as_deref(),
        Some("a URI, e.g. https://example.com/")
    );
    assert_eq!(hint("birthday").as_deref(), Some("a date, YYYY-MM-DD"));
    assert_eq!(
        hint("meeting").as_deref(),
        Some("a date and time, e.g. 2026-07-28T09:30:00Z")
    );
    assert_eq!(hint("age").as_deref(), Some("a whole number from 0 to 150"));
    assert_eq!(hint("weight").as_deref(), Some("a number, at least 0.5"));
    assert_eq!(hint("toppings").as_deref(), Some("choose 1 to 2"));
    for name in ["nickname", "subscribe", "size", "color", "tags"] {
        assert_eq!(hint(name), None, "{name}");
    }
    let more = Form::from_value(&json!({"type": "object", "properties": {
        "i": {"type": "integer"}, "n": {"type": "number", "maximum": 2.0},
        "a": {"type": "array", "minItems": 2, "items": {"type": "string", "enum": ["x"]}},
        "b": {"type": "array", "maxItems": 2, "items": {"type": "string", "enum": ["x"]}},
        "c": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "string", "enum": ["x"]}},
    }}))
    .unwrap();
    let hint = |name: &str| more.field(name).unwrap().hint();
    assert_eq!(hint("i").as_deref(), Some("a whole number"));
    assert_eq!(hint("n").as_deref(), Some("a number, at most 2"));
    assert_eq!(hint("a").as_deref(), Some("choose at least 2"));
    assert_eq!(hint("b").as_deref(), Some("choose at most 2"));
    assert_eq!(hint("c").as_deref(), Some("choose 2"));
}

#[test]
fn item_count() {
    let count = ItemCount {
        min: 1,
        max: Some(2),
    };
    assert_eq!(count.check(0), Err(ValueError::TooFew { min: 1 }));
    count.check(1).unwrap();
    count.check(2).unwrap();
    assert_eq!(count.check(3), Err(ValueError::TooMany { max: 2 }));
    ItemCount::default().check(0).unwrap();
}

#[test]
fn schema_errors() {
    let form = |properties: Value, required: Value| {
        Form::from_value(&json!({"type": "object", "properties": properties, "required": required}))
    };
    let unsupported = [
        json!({"type": "object"}),
        json!({"type": "string", "enum": [1, 2]}),
        json!({"type": "number", "enum": [1, 2]}),
        json!({"type": "string", "enum": []}),
        json!({"type": "string", "format": "hostname"}),
        json!({"type": "integer", "minimum": 0.5}),
        json!({"type": "array", "items": {"type": "string"}}),
        json!({"enum": ["a", "b"]}),
        json!("string"),
    ];
    for schema in unsupported {
        let error = form(json!({"x": schema}), json!([])).unwrap_err();
        assert!(
            matches!(&error, SchemaError::UnsupportedField { field, schema: sent } if field == "x" && *sent == schema),
            "{schema}: {error:?}"
        );
        assert!(error.to_string().contains("cannot hold"), "{error}");
    }
    let error = form(json!({}), json!(["x"])).unwrap_err();
    assert!(matches!(&error, SchemaError::UndefinedRequired { field } if field == "x"));
    assert_eq!(
        error.to_string(),
        "the form requires the field \"x\" but does not define it"
    );
    for not_a_form in [
        Value::Null,
        json!({"type": "object"}),
        json!({"type": "array", "properties": {}}),
        json!({"type": "object", "properties": {}, "required": "x"}),
        json!({"properties": {}}),
    ] {
        let error = Form::from_value(&not_a_form).unwrap_err();
        assert!(
            matches!(error, SchemaError::NotAForm { .. }),
            "{not_a_form}: {error:?}"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
    // Keywords rmcp does not model and that do not decide the kind are ignored.
    let lenient = form(
        json!({"x": {"type": "string", "pattern": "^a", "x-extra": 1}}),
        json!(["x", "x"]),
    )
    .unwrap();
    assert_eq!(lenient.fields().len(), 1);
    assert!(lenient.fields()[0].is_required());
}
