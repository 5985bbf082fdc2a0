//! Elicitation forms: the `requestedSchema` of an `elicitation/create`
//! request in form mode, read once and used to list, fill and check answers.
//!
//! A [`Form`] is read with rmcp's own
//! [`ElicitationSchema`](rmcp::model::ElicitationSchema) types, from a
//! schema value ([`Form::from_schema`]) or from the JSON a peer sent
//! ([`Form::from_value`]). It lists its [`Field`]s in schema order, each with
//! its name, title, description, required flag, default and [`Kind`]; it
//! checks an answer's `content` and returns it normalized
//! ([`Form::validate`]); it fills in defaults ([`Form::fill_defaults`],
//! [`Form::defaults`]). A field converts text a person typed to its value
//! ([`Field::parse`]) and describes what it takes in one line
//! ([`Field::hint`]). An answer, typed, is an [`Elicited`]. This module is
//! there whatever the crate's features.
//!
//! ```
//! use mcp_tasks::form::{ContentError, Form, Kind};
//! use serde_json::json;
//!
//! let form = Form::from_value(&json!({"type": "object", "properties": {
//!     "name": {"type": "string", "title": "Your name"},
//!     "age": {"type": "integer", "minimum": 0},
//!     "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"], "default": "s"},
//! }, "required": ["name", "age"]}))?;
//! let age = form.field("age").unwrap();
//! assert!(matches!(age.kind(), Kind::Integer { minimum: Some(0), .. }));
//! assert_eq!(age.hint().as_deref(), Some("a whole number, at least 0"));
//!
//! // Text typed by a person, then the defaults, then the check.
//! let mut content = serde_json::Map::new();
//! content.insert("name".into(), form.field("name").unwrap().parse("Ada")?);
//! content.insert("age".into(), json!(36.0));
//! form.fill_defaults(&mut content);
//! let content = form.validate(&content)?;
//! assert_eq!(json!(content), json!({"name": "Ada", "age": 36, "size": "s"}));
//!
//! let error = form.validate(&serde_json::Map::new()).unwrap_err();
//! assert_eq!(error, ContentError::Missing { field: "name".into() });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Field order
//!
//! Fields come in schema order: rmcp's
//! [`property_order`](rmcp::model::ElicitationSchema::property_order), which
//! keeps the order of the wire. A [`serde_json::Value`] has lost that order
//! unless serde_json is built with its `preserve_order` feature (without it,
//! an object's keys are sorted). [`Form::from_value`] checks this at run time
//! and, when the order is lost, lists the required fields first (in the
//! order of `required`) and then the others by name.

use rmcp::model::StringFormat;
use serde_json::{Map, Value};

mod answer;
mod format;
mod read;
mod value;

#[cfg(test)]
mod tests;

pub use answer::{AnswerError, Elicited};
pub use read::SchemaError;
pub use value::{ContentError, ValueError};

/// An elicitation form: its fields in schema order.
#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    fields: Vec<Field>,
}

/// One field of a form: a property of the requested schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    name: String,
    title: Option<String>,
    description: Option<String>,
    required: bool,
    default: Option<Value>,
    kind: Kind,
}

/// What a field takes.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Kind {
    /// A string (`"type": "string"`).
    Text {
        /// The format it must be in, if any.
        format: Option<StringFormat>,
        /// The least number of characters.
        min_length: Option<u32>,
        /// The greatest number of characters.
        max_length: Option<u32>,
    },
    /// A number (`"type": "number"`).
    Number {
        /// The least value allowed.
        minimum: Option<f64>,
        /// The greatest value allowed.
        maximum: Option<f64>,
    },
    /// A whole number (`"type": "integer"`).
    Integer {
        /// The least value allowed.
        minimum: Option<i64>,
        /// The greatest value allowed.
        maximum: Option<i64>,
    },
    /// `true` or `false`.
    Boolean,
    /// One of a list of strings (`enum`, with the legacy `enumNames`, or
    /// `oneOf` of `{const, title}`).
    Select {
        /// The options, in schema order.
        choices: Vec<Choice>,
    },
    /// An array of strings from a list (`"type": "array"` whose `items`
    /// have an `enum` or an `anyOf` of `{const, title}`).
    MultiSelect {
        /// The options, in schema order.
        choices: Vec<Choice>,
        /// How many options are taken.
        count: ItemCount,
    },
}

/// One option of a select.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Choice {
    /// The value sent.
    pub value: String,
    /// The text shown (the value when the schema gives no title).
    pub title: String,
}

/// How many options a multi-select takes (`minItems`, `maxItems`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ItemCount {
    /// The least number of options (0 when the schema sets none).
    pub min: u64,
    /// The greatest number of options.
    pub max: Option<u64>,
}

impl ItemCount {
    /// Checks that `selected` options are allowed.
    pub fn check(self, selected: usize) -> Result<(), ValueError> {
        let selected = u64::try_from(selected).unwrap_or(u64::MAX);
        if selected < self.min {
            return Err(ValueError::TooFew { min: self.min });
        }
        match self.max {
            Some(max) if selected > max => Err(ValueError::TooMany { max }),
            _ => Ok(()),
        }
    }
}

impl Form {
    /// The fields, in schema order (see [the module docs](self#field-order)).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|field| field.name == name)
    }

    /// Checks an answer's `content` against the form: no field the form
    /// does not have, every required field present, each value of its
    /// field's type and within its bounds, options or format. Returns the
    /// content normalized (an integral number for an integer field, a
    /// multi-select without repeats).
    pub fn validate(
        &self,
        content: &Map<String, Value>,
    ) -> Result<Map<String, Value>, ContentError> {
        if let Some(unknown) = content.keys().find(|name| self.field(name).is_none()) {
            return Err(ContentError::Unknown {
                field: unknown.clone(),
            });
        }
        let mut normalized = Map::new();
        for field in &self.fields {
            match content.get(&field.name) {
                Some(value) => {
                    let value = field
                        .check(value)
                        .map_err(|problem| ContentError::Invalid {
                            field: field.name.clone(),
                            problem,
                        })?;
                    normalized.insert(field.name.clone(), value);
                }
                None if field.required => {
                    return Err(ContentError::Missing {
                        field: field.name.clone(),
                    });
                }
                None => {}
            }
        }
        Ok(normalized)
    }

    /// Puts the default of every field that has one and no value yet into
    /// `content`.
    pub fn fill_defaults(&self, content: &mut Map<String, Value>) {
        for field in &self.fields {
            if let Some(default) = &field.default
                && !content.contains_key(&field.name)
            {
                content.insert(field.name.clone(), default.clone());
            }
        }
    }

    /// The content of all defaults: every field that has one, with it.
    pub fn defaults(&self) -> Map<String, Value> {
        let mut content = Map::new();
        self.fill_defaults(&mut content);
        content
    }
}

impl Field {
    /// The property name: the key in `content`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema's `title`, if it has a non-empty one.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The text to show for the field: its title, else its name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// The schema's `description`, if it has a non-empty one.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Whether the schema's `required` lists the field.
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// The schema's `default`, normalized as [`Field::check`] does; a
    /// default the field itself does not accept is dropped.
    pub fn default(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    /// What the field takes.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }
}
