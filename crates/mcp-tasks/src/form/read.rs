//! Reading a form from rmcp's [`ElicitationSchema`] or from the raw JSON
//! `requestedSchema` a peer sent.

use std::collections::BTreeMap;

use rmcp::model::{
    ConstTitle, ElicitationSchema, EnumSchema, MultiSelectEnumSchema, PrimitiveSchemaDefinition,
    SingleSelectEnumSchema,
};
use serde_json::{Map, Number, Value};

use super::{Choice, Field, Form, ItemCount, Kind};

/// Why a requested schema cannot be read as a form.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema is not an object schema (`"type": "object"` with
    /// `properties`) that rmcp can read.
    #[error("the requested schema is not an object schema of form fields")]
    NotAForm {
        /// Why rmcp could not read it.
        #[source]
        source: serde_json::Error,
    },
    /// A property whose schema is not one a form field can have (a nested
    /// object, an enum of numbers, an unknown `format`, an empty enum...).
    #[error("the field {field:?} has a schema a form cannot hold: {schema}")]
    UnsupportedField {
        /// The property's name.
        field: String,
        /// The property's schema, as sent.
        schema: Value,
    },
    /// `required` names a property the schema does not define.
    #[error("the form requires the field {field:?} but does not define it")]
    UndefinedRequired {
        /// The name `required` lists.
        field: String,
    },
}

/// Keywords that decide what a field takes. rmcp skips keywords a
/// property's type does not have (`{"type": "string", "enum": [1, 2]}`
/// reads as plain text); a property losing one of these is refused.
const DECISIVE: [&str; 6] = ["enum", "enumNames", "oneOf", "anyOf", "items", "format"];

impl Form {
    /// Reads a form from rmcp's schema type, in the order of its
    /// `property_order` (then any property it leaves out, by name).
    pub fn from_schema(schema: &ElicitationSchema) -> Result<Self, SchemaError> {
        build(schema, &BTreeMap::new(), false)
    }

    /// Reads a form from the JSON `requestedSchema` a peer sent, with
    /// rmcp's deserialization. A property's `default` that keeps rmcp from
    /// reading the property (`"default": 4.0` on an integer) is read here
    /// instead, and kept if the field accepts it. See [the module
    /// docs](super#field-order) for the order of the fields.
    pub fn from_value(schema: &Value) -> Result<Self, SchemaError> {
        let mut repaired = schema.clone();
        let mut defaults = BTreeMap::new();
        if let Some(Value::Object(properties)) = repaired.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if let Some(default) = read_property(name, property)? {
                    defaults.insert(name.clone(), default);
                }
            }
        }
        let schema: ElicitationSchema =
            serde_json::from_value(repaired).map_err(|source| SchemaError::NotAForm { source })?;
        build(&schema, &defaults, !map_keeps_order())
    }
}

/// Checks that rmcp reads `property` whole. A `default` that keeps it from
/// being read at all is taken out of `property` and returned.
fn read_property(name: &str, property: &mut Value) -> Result<Option<Value>, SchemaError> {
    let sent = property.clone();
    let unsupported = || SchemaError::UnsupportedField {
        field: name.to_owned(),
        schema: sent.clone(),
    };
    let mut default = None;
    let definition = match serde_json::from_value::<PrimitiveSchemaDefinition>(property.clone()) {
        Ok(definition) => definition,
        Err(_) => {
            default = property
                .as_object_mut()
                .and_then(|object| object.remove("default"));
            if default.is_none() {
                return Err(unsupported());
            }
            serde_json::from_value(property.clone()).map_err(|_| unsupported())?
        }
    };
    let read = serde_json::to_value(&definition).unwrap_or(Value::Null);
    if DECISIVE
        .iter()
        .any(|keyword| sent.get(keyword).is_some() && read.get(keyword).is_none())
    {
        return Err(unsupported());
    }
    Ok(default)
}

/// The form of `schema`. `defaults` are defaults read from the JSON in
/// place of the schema's own; `sorted` says the property order is only
/// alphabetical, so required fields go first.
fn build(
    schema: &ElicitationSchema,
    defaults: &BTreeMap<String, Value>,
    sorted: bool,
) -> Result<Form, SchemaError> {
    let properties = &schema.properties;
    let mut required: Vec<&str> = Vec::new();
    for name in schema.required.iter().flatten() {
        if !properties.contains_key(name) {
            return Err(SchemaError::UndefinedRequired {
                field: name.clone(),
            });
        }
        if !required.contains(&name.as_str()) {
            required.push(name);
        }
    }
    let mut order: Vec<&str> = Vec::with_capacity(properties.len());
    if sorted {
        order.extend(&required);
    }
    let listed = schema.property_order.iter().flatten().map(String::as_str);
    for name in listed.chain(properties.keys().map(String::as_str)) {
        if properties.contains_key(name) && !order.contains(&name) {
            order.push(name);
        }
    }
    let fields = order
        .into_iter()
        .map(|name| {
            field(
                name,
                &properties[name],
                required.contains(&name),
                defaults.get(name),
            )
        })
        .collect::<Result<_, _>>()?;
    Ok(Form { fields })
}

fn text(text: Option<&std::borrow::Cow<'static, str>>) -> Option<String> {
    text.filter(|text| !text.is_empty())
        .map(|text| text.to_string())
}

fn untitled(values: &[String]) -> Vec<Choice> {
    values
        .iter()
        .map(|value| Choice {
            value: value.clone(),
            title: value.clone(),
        })
        .collect()
}

fn titled(options: &[ConstTitle]) -> Vec<Choice> {
    options
        .iter()
        .map(|option| Choice {
            value: option.const_.clone(),
            title: if option.title.is_empty() {
                option.const_.clone()
            } else {
                option.title.clone()
            },
        })
        .collect()
}

fn strings(values: Option<&Vec<String>>) -> Option<Value> {
    values.map(|values| Value::from(values.clone()))
}

/// The field of one property. `sent_default`, when given, replaces the
/// schema's default.
fn field(
    name: &str,
    definition: &PrimitiveSchemaDefinition,
    required: bool,
    sent_default: Option<&Value>,
) -> Result<Field, SchemaError> {
    use PrimitiveSchemaDefinition as Definition;
    let unsupported = || SchemaError::UnsupportedField {
        field: name.to_owned(),
        schema: serde_json::to_value(definition).unwrap_or(Value::Null),
    };
    let (title, description, default, kind) = match definition {
        Definition::String(schema) => (
            &schema.title,
            &schema.description,
            schema.default.clone().map(Value::String),
            Kind::Text {
                format: schema.format,
                min_length: schema.min_length,
                max_length: schema.max_length,
            },
        ),
        Definition::Number(schema) => (
            &schema.title,
            &schema.description,
            schema.default.and_then(Number::from_f64).map(Value::Number),
            Kind::Number {
                minimum: schema.minimum,
                maximum: schema.maximum,
            },
        ),
        Definition::Integer(schema) => (
            &schema.title,
            &schema.description,
            schema.default.map(Value::from),
            Kind::Integer {
                minimum: schema.minimum,
                maximum: schema.maximum,
            },
        ),
        Definition::Boolean(schema) => (
            &schema.title,
            &schema.description,
            schema.default.map(Value::Bool),
            Kind::Boolean,
        ),
        Definition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Untitled(schema))) => (
            &schema.title,
            &schema.description,
            schema.default.clone().map(Value::String),
            Kind::Select {
                choices: untitled(&schema.enum_),
            },
        ),
        Definition::Enum(EnumSchema::Single(SingleSelectEnumSchema::Titled(schema))) => (
            &schema.title,
            &schema.description,
            schema.default.clone().map(Value::String),
            Kind::Select {
                choices: titled(&schema.one_of),
            },
        ),
        Definition::Enum(EnumSchema::Legacy(schema)) => {
            let names = schema.enum_names.as_deref().unwrap_or_default();
            let choices = schema
                .enum_
                .iter()
                .enumerate()
                .map(|(index, value)| Choice {
                    value: value.clone(),
                    title: names
                        .get(index)
                        .filter(|name| !name.is_empty())
                        .unwrap_or(value)
                        .clone(),
                })
                .collect();
            (
                &schema.title,
                &schema.description,
                schema.default.clone().map(Value::String),
                Kind::Select { choices },
            )
        }
        Definition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Untitled(schema))) => (
            &schema.title,
            &schema.description,
            strings(schema.default.as_ref()),
            Kind::MultiSelect {
                choices: untitled(&schema.items.enum_),
                count: ItemCount {
                    min: schema.min_items.unwrap_or(0),
                    max: schema.max_items,
                },
            },
        ),
        Definition::Enum(EnumSchema::Multi(MultiSelectEnumSchema::Titled(schema))) => (
            &schema.title,
            &schema.description,
            strings(schema.default.as_ref()),
            Kind::MultiSelect {
                choices: titled(&schema.items.any_of),
                count: ItemCount {
                    min: schema.min_items.unwrap_or(0),
                    max: schema.max_items,
                },
            },
        ),
        _ => return Err(unsupported()),
    };
    if let Kind::Select { choices } | Kind::MultiSelect { choices, .. } = &kind
        && choices.is_empty()
    {
        return Err(unsupported());
    }
    let mut field = Field {
        name: name.to_owned(),
        title: text(title.as_ref()),
        description: text(description.as_ref()),
        required,
        default: None,
        kind,
    };
    field.default = sent_default
        .cloned()
        .or(default)
        .and_then(|value| field.check(&value).ok());
    Ok(field)
}

/// Whether serde_json's `Map` keeps insertion order (its `preserve_order`
/// feature), so a `Value` still has the order of the wire.
pub(super) fn map_keeps_order() -> bool {
    let mut map = Map::new();
    map.insert("b".into(), Value::Null);
    map.insert("a".into(), Value::Null);
    map.keys().next().is_some_and(|key| key == "b")
}
