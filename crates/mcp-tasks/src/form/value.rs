//! A field's values: checking one, reading one from text, the one-line
//! hint, and the errors of both.

use std::fmt::Write as _;

use rmcp::model::StringFormat;
use serde_json::{Number, Value};

use super::{Choice, Field, Kind, format};

/// Why a value does not fit a field. Its message reads after the field's
/// name: "must be at most 150".
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// A value of the wrong type, or text that does not read as one.
    #[error("must be {expected}")]
    WrongType {
        /// What the field takes, such as "a whole number".
        expected: &'static str,
    },
    /// A string shorter than `minLength`.
    #[error("must be at least {min} characters long")]
    TooShort {
        /// The least number of characters.
        min: u32,
    },
    /// A string longer than `maxLength`.
    #[error("must be at most {max} characters long")]
    TooLong {
        /// The greatest number of characters.
        max: u32,
    },
    /// A string not in the field's format.
    #[error("must be {}", format_noun(*format))]
    Format {
        /// The format it is not in.
        format: StringFormat,
    },
    /// A number below `minimum`.
    #[error("must be at least {}", show_number(minimum))]
    TooSmall {
        /// The least value allowed.
        minimum: Number,
    },
    /// A number above `maximum`.
    #[error("must be at most {}", show_number(maximum))]
    TooLarge {
        /// The greatest value allowed.
        maximum: Number,
    },
    /// A string that is not one of a select's options.
    #[error("{given:?} is not one of {}", list_choices(choices))]
    NotAChoice {
        /// The string given.
        given: String,
        /// The options.
        choices: Vec<Choice>,
    },
    /// Fewer options than `minItems`.
    #[error("takes at least {min} {}", options(*min))]
    TooFew {
        /// The least number of options.
        min: u64,
    },
    /// More options than `maxItems`.
    #[error("takes at most {max} {}", options(*max))]
    TooMany {
        /// The greatest number of options.
        max: u64,
    },
}

/// Why an answer's `content` does not fit its form.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
    /// A required field has no value.
    #[error("the required field {field:?} has no value")]
    Missing {
        /// The field's name.
        field: String,
    },
    /// A value for a field the form does not have.
    #[error("the form has no field {field:?}")]
    Unknown {
        /// The name given.
        field: String,
    },
    /// A value that does not fit its field.
    #[error("the field {field:?} {problem}")]
    Invalid {
        /// The field's name.
        field: String,
        /// What is wrong with the value.
        problem: ValueError,
    },
}

impl ContentError {
    /// The name of the field at fault.
    pub fn field(&self) -> &str {
        match self {
            Self::Missing { field } | Self::Unknown { field } | Self::Invalid { field, .. } => {
                field
            }
        }
    }
}

impl Field {
    /// Checks a value against the field, returning it normalized: an
    /// integral number for an integer field (`5.0` becomes `5`), a
    /// multi-select without repeated options.
    pub fn check(&self, value: &Value) -> Result<Value, ValueError> {
        match (&self.kind, value) {
            (
                Kind::Text {
                    format,
                    min_length,
                    max_length,
                },
                Value::String(text),
            ) => {
                let length = text.chars().count();
                let fits = |bound: u32| usize::try_from(bound).unwrap_or(usize::MAX);
                if let Some(min) = min_length.filter(|min| length < fits(*min)) {
                    return Err(ValueError::TooShort { min });
                }
                if let Some(max) = max_length.filter(|max| length > fits(*max)) {
                    return Err(ValueError::TooLong { max });
                }
                if let Some(format) = format {
                    format::check(*format, text)?;
                }
                Ok(value.clone())
            }
            (Kind::Number { minimum, maximum }, Value::Number(number)) => {
                let wrong = ValueError::WrongType {
                    expected: self.kind.noun(),
                };
                let value = number.as_f64().ok_or(wrong)?;
                if let Some(min) = minimum
                    .filter(|min| value < *min)
                    .and_then(Number::from_f64)
                {
                    return Err(ValueError::TooSmall { minimum: min });
                }
                if let Some(max) = maximum
                    .filter(|max| value > *max)
                    .and_then(Number::from_f64)
                {
                    return Err(ValueError::TooLarge { maximum: max });
                }
                Ok(Value::Number(number.clone()))
            }
            (Kind::Integer { minimum, maximum }, Value::Number(number)) => {
                let whole = match number.as_i64() {
                    Some(whole) => whole,
                    None => match number.as_f64() {
                        Some(value) if value.fract() == 0.0 && value.abs() < 9.0e15 => value as i64,
                        _ => {
                            return Err(ValueError::WrongType {
                                expected: self.kind.noun(),
                            });
                        }
                    },
                };
                if let Some(min) = minimum.filter(|min| whole < *min) {
                    return Err(ValueError::TooSmall {
                        minimum: min.into(),
                    });
                }
                if let Some(max) = maximum.filter(|max| whole > *max) {
                    return Err(ValueError::TooLarge {
                        maximum: max.into(),
                    });
                }
                Ok(Value::from(whole))
            }
            (Kind::Boolean, Value::Bool(_)) => Ok(value.clone()),
            (Kind::Select { choices }, Value::String(text)) => {
                if choices.iter().any(|choice| choice.value == *text) {
                    Ok(value.clone())
                } else {
                    Err(ValueError::NotAChoice {
                        given: text.clone(),
                        choices: choices.clone(),
                    })
                }
            }
            (Kind::MultiSelect { choices, count }, Value::Array(items)) => {
                let mut values: Vec<&str> = Vec::with_capacity(items.len());
                for item in items {
                    let Value::String(text) = item else {
                        return Err(ValueError::WrongType {
                            expected: self.kind.noun(),
                        });
                    };
                    if !choices.iter().any(|choice| choice.value == *text) {
                        return Err(ValueError::NotAChoice {
                            given: text.clone(),
                            choices: choices.clone(),
                        });
                    }
                    if !values.contains(&text.as_str()) {
                        values.push(text);
                    }
                }
                count.check(values.len())?;
                Ok(Value::from(values))
            }
            (kind, _) => Err(ValueError::WrongType {
                expected: kind.noun(),
            }),
        }
    }

    /// Reads text (typed by a person, or given on a command line) as the
    /// field's value and checks it. A formatted string and a number are
    /// trimmed; a boolean is true/false/yes/no/y/n (any case); a select takes
    /// an option's value or, failing that, its title; a multi-select takes
    /// a comma-separated list of those (empty: none).
    pub fn parse(&self, text: &str) -> Result<Value, ValueError> {
        let value = match &self.kind {
            Kind::Text { format: None, .. } => Value::String(text.to_owned()),
            Kind::Text { .. } => Value::String(text.trim().to_owned()),
            Kind::Number { .. } | Kind::Integer { .. } => {
                let text = text.trim();
                if let Ok(whole) = text.parse::<i64>() {
                    Value::from(whole)
                } else {
                    text.parse::<f64>()
                        .ok()
                        .and_then(Number::from_f64)
                        .map(Value::Number)
                        .ok_or(ValueError::WrongType {
                            expected: self.kind.noun(),
                        })?
                }
            }
            Kind::Boolean => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" => Value::Bool(true),
                "false" | "no" | "n" => Value::Bool(false),
                _ => {
                    return Err(ValueError::WrongType {
                        expected: "true/false or yes/no",
                    });
                }
            },
            Kind::Select { choices } => Value::String(choose(choices, text)?),
            Kind::MultiSelect { choices, .. } => text
                .split(',')
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .map(|part| choose(choices, part).map(Value::String))
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        };
        self.check(&value)
    }

    /// A one-line hint on what the field takes, such as "a whole number
    /// from 0 to 150" or "a date, YYYY-MM-DD"; `None` when its kind says
    /// it all (plain text, a boolean, a select).
    pub fn hint(&self) -> Option<String> {
        let bounds = |noun: &str, minimum: Option<Number>, maximum: Option<Number>| {
            let mut hint = noun.to_owned();
            match (minimum, maximum) {
                (Some(min), Some(max)) => {
                    let _ = write!(hint, " from {} to {}", show_number(&min), show_number(&max));
                }
                (Some(min), None) => {
                    let _ = write!(hint, ", at least {}", show_number(&min));
                }
                (None, Some(max)) => {
                    let _ = write!(hint, ", at most {}", show_number(&max));
                }
                (None, None) => {}
            }
            hint
        };
        let hint = match &self.kind {
            Kind::Text {
                format: Some(format),
                ..
            } => match format {
                StringFormat::Email => "an email address".to_owned(),
                StringFormat::Uri => "a URI, e.g. https://example.com/".to_owned(),
                StringFormat::Date => "a date, YYYY-MM-DD".to_owned(),
                StringFormat::DateTime => "a date and time, e.g. 2026-07-28T09:30:00Z".to_owned(),
                _ => return None,
            },
            Kind::Integer { minimum, maximum } => bounds(
                self.kind.noun(),
                minimum.map(Number::from),
                maximum.map(Number::from),
            ),
            Kind::Number {
                minimum: None,
                maximum: None,
            } => return None,
            Kind::Number { minimum, maximum } => bounds(
                self.kind.noun(),
                minimum.and_then(Number::from_f64),
                maximum.and_then(Number::from_f64),
            ),
            Kind::MultiSelect { count, .. } => match (count.min, count.max) {
                (0, None) => return None,
                (min, None) => format!("choose at least {min}"),
                (0, Some(max)) => format!("choose at most {max}"),
                (min, Some(max)) if min == max => format!("choose {min}"),
                (min, Some(max)) => format!("choose {min} to {max}"),
            },
            Kind::Text { format: None, .. } | Kind::Boolean | Kind::Select { .. } => return None,
        };
        Some(hint)
    }
}

impl Kind {
    /// What a value of this kind is, after "must be".
    fn noun(&self) -> &'static str {
        match self {
            Self::Text { .. } => "a string",
            Self::Integer { .. } => "a whole number",
            Self::Number { .. } => "a number",
            Self::Boolean => "true or false",
            Self::Select { .. } => "one of the options",
            Self::MultiSelect { .. } => "a list of options",
        }
    }
}

/// The value of the option `text` names: its value, or else its title.
fn choose(choices: &[Choice], text: &str) -> Result<String, ValueError> {
    let text = text.trim();
    choices
        .iter()
        .find(|choice| choice.value == text)
        .or_else(|| choices.iter().find(|choice| choice.title == text))
        .map(|choice| choice.value.clone())
        .ok_or_else(|| ValueError::NotAChoice {
            given: text.to_owned(),
            choices: choices.to_vec(),
        })
}

/// `"s" (Small), "m" (Medium)`: each value, and its title when it differs.
fn list_choices(choices: &[Choice]) -> String {
    let mut list = String::new();
    for (index, choice) in choices.iter().enumerate() {
        if index > 0 {
            list.push_str(", ");
        }
        let _ = write!(list, "{:?}", choice.value);
        if choice.title != choice.value {
            let _ = write!(list, " ({})", choice.title);
        }
    }
    list
}

fn options(count: u64) -> &'static str {
    if count == 1 { "option" } else { "options" }
}

/// A number as people write it: `2`, not `2.0`.
fn show_number(number: &Number) -> String {
    match number.as_f64() {
        Some(value) if number.is_f64() && value.fract() == 0.0 && value.abs() < 1.0e15 => {
            format!("{}", value as i64)
        }
        _ => number.to_string(),
    }
}

fn format_noun(format: StringFormat) -> &'static str {
    match format {
        StringFormat::Email => "an email address",
        StringFormat::Uri => "a URI (such as https://example.com/)",
        StringFormat::Date => "a date (YYYY-MM-DD)",
        StringFormat::DateTime => "a date and time (RFC 3339, such as 2026-07-28T09:30:00Z)",
        _ => "in the format the form asks for",
    }
}
