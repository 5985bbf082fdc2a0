//! Answering input requests: interactively on a terminal (`--input prompt`),
//! from `--answer FIELD=VALUE` values (`--input accept`), by declining, or
//! not at all (`--input fail`).
//!
//! Form fields are asked in schema order when serde_json keeps object order
//! (its `preserve_order` feature); this workspace builds serde_json without
//! it, so object keys arrive sorted and fields are asked required first (in
//! the order of the schema's `required` list), then the others
//! alphabetically. [`field_order`] checks at run time, so turning the
//! feature on gives schema order with no code change.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Map, Value, json};

/// How input requests are answered (`--input` and `--answer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InputPolicy {
    /// Ask on the terminal (blocking; the caller runs it off the runtime).
    Prompt,
    /// Accept: forms are filled from these `--answer` values (field name to
    /// raw text) and the schema's defaults; URL requests are accepted.
    Accept(BTreeMap<String, String>),
    /// Decline every elicitation.
    Decline,
    /// Answer nothing: the caller reports the input requirement.
    Fail,
}

impl InputPolicy {
    /// The policy for `--input MODE` with these `--answer FIELD=VALUE`
    /// values (split at the first `=`). `--answer` goes with `accept` only.
    pub(crate) fn parse(mode: &str, answers: &[String]) -> anyhow::Result<Self> {
        let policy = match mode {
            "prompt" => Self::Prompt,
            "decline" => Self::Decline,
            "fail" => Self::Fail,
            "accept" => {
                let mut values = BTreeMap::new();
                for answer in answers {
                    let Some((field, value)) = answer.split_once('=') else {
                        bail!("--answer {answer:?} must look like FIELD=VALUE");
                    };
                    if field.is_empty() {
                        bail!("--answer {answer:?} has no field name before '='");
                    }
                    if values.insert(field.to_owned(), value.to_owned()).is_some() {
                        bail!("--answer {field}=... is given more than once");
                    }
                }
                return Ok(Self::Accept(values));
            }
            other => {
                bail!("--input {other:?} is not a mode: use prompt, accept, decline or fail")
            }
        };
        if !answers.is_empty() {
            bail!("--answer is used only with --input accept (this is --input {mode})");
        }
        Ok(policy)
    }
}

/// Answers one input request (`{method, params}` as the server sent it).
///
/// `Ok(None)` means it is not answered here: the policy is `Fail`, or the
/// request is `sampling/createMessage`, an unknown method or an unknown
/// elicitation mode; the caller then reports the input requirement.
/// `roots/list` is answered with `{"roots": []}` under every other policy:
/// this client exposes no roots. Errors are for forms that cannot be filled
/// (a missing required `--answer`, an `--answer` the form rejects, a schema
/// this client does not understand) and for terminal failures.
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
            json!({"action": "accept", "content": fill(&form, answers)?})
        }
        (_, elicitation) => ask(&elicitation, &mut Terminal)?,
    };
    Ok(Some(response))
}

// ----- the request -----

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
                let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
                Ok(Some(Self::Form {
                    message,
                    form: Form::parse(schema)?,
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

/// A form: its fields in the order they are asked.
#[derive(Clone, Debug, PartialEq)]
struct Form {
    fields: Vec<Field>,
}

#[derive(Clone, Debug, PartialEq)]
struct Field {
    name: String,
    title: Option<String>,
    description: Option<String>,
    required: bool,
    /// The schema's default, normalised; an invalid default is dropped.
    default: Option<Value>,
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Text {
        format: Option<Format>,
        min_length: Option<u64>,
        max_length: Option<u64>,
    },
    Number {
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    Select(Vec<Choice>),
    MultiSelect {
        choices: Vec<Choice>,
        counts: Counts,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Email,
    Uri,
    Date,
    DateTime,
}

/// One option of a select: the value sent and the text shown.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Choice {
    value: String,
    title: String,
}

/// How many options a multi-select takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    min: usize,
    max: Option<usize>,
    /// Nothing selected means "skip" (an optional field without default).
    allow_empty: bool,
}

impl Counts {
    fn check(self, selected: usize) -> Result<(), String> {
        if selected == 0 && self.allow_empty {
            return Ok(());
        }
        if selected < self.min {
            return Err(format!("choose at least {}", self.min));
        }
        match self.max {
            Some(max) if selected > max => Err(format!("choose at most {max}")),
            _ => Ok(()),
        }
    }
}

impl Form {
    fn parse(schema: &Value) -> anyhow::Result<Self> {
        let empty = Map::new();
        let properties = match schema.get("properties") {
            None => &empty,
            Some(Value::Object(properties)) => properties,
            Some(_) => bail!("the form's requestedSchema.properties is not an object"),
        };
        let mut required = Vec::new();
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !properties.contains_key(name) {
                bail!("the form requires the field {name:?} but does not define it");
            }
            if !required.contains(&name) {
                required.push(name);
            }
        }
        let fields = field_order(properties, &required)
            .into_iter()
            .map(|name| Field::parse(name, &properties[name], required.contains(&name)))
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { fields })
    }

    fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|field| field.name == name)
    }
}

/// Whether serde_json's `Map` keeps insertion order (`preserve_order`).
fn map_keeps_order() -> bool {
    let mut map = Map::new();
    map.insert("b".into(), Value::Null);
    map.insert("a".into(), Value::Null);
    map.keys().next().is_some_and(|key| key == "b")
}

/// The order fields are asked in: the schema's order when serde_json keeps
/// it; otherwise required fields (as `required` lists them), then the rest
/// alphabetically.
fn field_order<'a>(properties: &'a Map<String, Value>, required: &[&str]) -> Vec<&'a str> {
    let names = properties.keys().map(String::as_str);
    if map_keeps_order() {
        return names.collect();
    }
    let mut order: Vec<&str> = required
        .iter()
        .filter_map(|name| properties.get_key_value(*name).map(|(key, _)| key.as_str()))
        .collect();
    order.extend(names.filter(|name| !required.contains(name)));
    order
}

fn text_of(schema: &Value, key: &str) -> Option<String> {
    schema.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn count_of(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

impl Field {
    fn parse(name: &str, schema: &Value, required: bool) -> anyhow::Result<Self> {
        let unsupported =
            || anyhow!("the form's field {name:?} has a schema this client cannot fill: {schema}");
        let kind_of = schema.get("type").and_then(Value::as_str);
        let kind = if let Some(choices) = single_choices(schema) {
            if !matches!(kind_of, None | Some("string")) {
                return Err(unsupported());
            }
            Kind::Select(choices.ok_or_else(unsupported)?)
        } else {
            match kind_of {
                Some("string") => Kind::Text {
                    format: match schema.get("format").and_then(Value::as_str) {
                        Some("email") => Some(Format::Email),
                        Some("uri") => Some(Format::Uri),
                        Some("date") => Some(Format::Date),
                        Some("date-time") => Some(Format::DateTime),
                        _ => None,
                    },
                    min_length: count_of(schema, "minLength"),
                    max_length: count_of(schema, "maxLength"),
                },
                Some(kind @ ("number" | "integer")) => Kind::Number {
                    integer: kind == "integer",
                    minimum: schema.get("minimum").and_then(Value::as_f64),
                    maximum: schema.get("maximum").and_then(Value::as_f64),
                },
                Some("boolean") => Kind::Boolean,
                Some("array") => {
                    let items = schema.get("items").unwrap_or(&Value::Null);
                    let choices = single_choices(items)
                        .or_else(|| titled_choices(items, "anyOf"))
                        .flatten()
                        .ok_or_else(unsupported)?;
                    let to_usize = |count: u64| usize::try_from(count).unwrap_or(usize::MAX);
                    Kind::MultiSelect {
                        choices,
                        counts: Counts {
                            min: count_of(schema, "minItems").map_or(0, to_usize),
                            max: count_of(schema, "maxItems").map(to_usize),
                            allow_empty: false,
                        },
                    }
                }
                _ => return Err(unsupported()),
            }
        };
        let mut field = Self {
            name: name.to_owned(),
            title: text_of(schema, "title").filter(|title| !title.is_empty()),
            description: text_of(schema, "description").filter(|text| !text.is_empty()),
            required,
            default: None,
            kind,
        };
        field.default = schema
            .get("default")
            .and_then(|value| field.check(value.clone()).ok());
        if let Kind::MultiSelect { counts, .. } = &mut field.kind {
            counts.allow_empty = !required && field.default.is_none();
        }
        Ok(field)
    }

    /// The text shown for the field.
    fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// Checks a typed value against the field, returning it normalised
    /// (an integral number for an integer field).
    fn check(&self, value: Value) -> Result<Value, String> {
        match (&self.kind, value) {
            (
                Kind::Text {
                    format,
                    min_length,
                    max_length,
                },
                Value::String(text),
            ) => {
                let length = text.chars().count() as u64;
                if let Some(min) = min_length.filter(|min| length < *min) {
                    return Err(format!("must be at least {min} characters long"));
                }
                if let Some(max) = max_length.filter(|max| length > *max) {
                    return Err(format!("must be at most {max} characters long"));
                }
                if let Some(format) = format {
                    format.check(&text)?;
                }
                Ok(Value::String(text))
            }
            (
                Kind::Number {
                    integer,
                    minimum,
                    maximum,
                },
                Value::Number(number),
            ) => {
                let value = number.as_f64().ok_or("must be a number")?;
                let number = if *integer {
                    if let Some(whole) = number.as_i64() {
                        Value::from(whole)
                    } else if value.fract() == 0.0 && value.abs() < 9.0e15 {
                        Value::from(value as i64)
                    } else {
                        return Err("must be a whole number".into());
                    }
                } else {
                    Value::Number(number)
                };
                if let Some(min) = minimum.filter(|min| value < *min) {
                    return Err(format!("must be at least {}", show_number(min)));
                }
                if let Some(max) = maximum.filter(|max| value > *max) {
                    return Err(format!("must be at most {}", show_number(max)));
                }
                Ok(number)
            }
            (Kind::Boolean, value @ Value::Bool(_)) => Ok(value),
            (Kind::Select(choices), Value::String(text)) => {
                if choices.iter().any(|choice| choice.value == text) {
                    Ok(Value::String(text))
                } else {
                    Err(format!("must be one of {}", list_choices(choices)))
                }
            }
            (Kind::MultiSelect { choices, counts }, Value::Array(items)) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(text) if choices.iter().any(|c| c.value == text) => {
                            if !values.contains(&text) {
                                values.push(text);
                            }
                        }
                        _ => {
                            return Err(format!(
                                "takes only values among {}",
                                list_choices(choices)
                            ));
                        }
                    }
                }
                let counts = Counts {
                    allow_empty: false,
                    ..*counts
                };
                counts.check(values.len())?;
                Ok(Value::from(values))
            }
            (kind, _) => Err(format!("must be {}", kind.noun())),
        }
    }

    /// Converts raw text (an `--answer` value or what was typed) to the
    /// field's type and checks it. Enum fields take the value or its title;
    /// multi-selects take a comma-separated list; booleans take
    /// true/false/yes/no.
    fn parse_value(&self, raw: &str) -> Result<Value, String> {
        let value = match &self.kind {
            Kind::Text { format: None, .. } => Value::String(raw.to_owned()),
            Kind::Text { .. } => Value::String(raw.trim().to_owned()),
            Kind::Number { .. } => {
                let raw = raw.trim();
                if let Ok(whole) = raw.parse::<i64>() {
                    Value::from(whole)
                } else {
                    raw.parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(Value::Number)
                        .ok_or_else(|| format!("must be {}", self.kind.noun()))?
                }
            }
            Kind::Boolean => match raw.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" => Value::Bool(true),
                "false" | "no" | "n" => Value::Bool(false),
                _ => return Err("must be true/false or yes/no".into()),
            },
            Kind::Select(choices) => Value::String(choose(choices, raw)?),
            Kind::MultiSelect { choices, .. } => raw
                .split(',')
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .map(|part| choose(choices, part).map(Value::String))
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        };
        self.check(value)
    }

    /// A one-line hint on what the field takes.
    fn hint(&self) -> Option<String> {
        let hint = match &self.kind {
            Kind::Text { format, .. } => match format {
                Some(Format::Email) => "an email address".to_owned(),
                Some(Format::Uri) => "a URI, e.g. https://example.com/".to_owned(),
                Some(Format::Date) => "a date, YYYY-MM-DD".to_owned(),
                Some(Format::DateTime) => "a date and time, e.g. 2026-07-28T09:30:00Z".to_owned(),
                None => return None,
            },
            Kind::Number {
                integer,
                minimum,
                maximum,
            } => {
                let mut hint = self.kind.noun().to_owned();
                match (minimum, maximum) {
                    (Some(min), Some(max)) => {
                        let _ =
                            write!(hint, " from {} to {}", show_number(*min), show_number(*max));
                    }
                    (Some(min), None) => {
                        let _ = write!(hint, ", at least {}", show_number(*min));
                    }
                    (None, Some(max)) => {
                        let _ = write!(hint, ", at most {}", show_number(*max));
                    }
                    (None, None) if *integer => {}
                    (None, None) => return None,
                }
                hint
            }
            Kind::MultiSelect { counts, .. } => match (counts.min, counts.max) {
                (0, None) => return None,
                (min, None) => format!("choose at least {min}"),
                (0, Some(max)) => format!("choose at most {max}"),
                (min, Some(max)) if min == max => format!("choose {min}"),
                (min, Some(max)) => format!("choose {min} to {max}"),
            },
            Kind::Boolean | Kind::Select(_) => return None,
        };
        Some(hint)
    }
}

impl Kind {
    fn noun(&self) -> &'static str {
        match self {
            Self::Text { .. } => "a string",
            Self::Number { integer: true, .. } => "a whole number",
            Self::Number { .. } => "a number",
            Self::Boolean => "true or false",
            Self::Select(_) => "one of the options",
            Self::MultiSelect { .. } => "a list of options",
        }
    }
}

/// The options of a single select: `enum` (with `enumNames`) or `oneOf`
/// of `{const, title}`. `None` when the schema is not a select;
/// `Some(None)` when it is one this client cannot read.
fn single_choices(schema: &Value) -> Option<Option<Vec<Choice>>> {
    if let Some(values) = schema.get("enum") {
        let names = schema.get("enumNames").and_then(Value::as_array);
        let choices = values.as_array().and_then(|values| {
            values
                .iter()
                .enumerate()
                .map(|(index, value)| {
                    let value = value.as_str()?.to_owned();
                    let title = names
                        .and_then(|names| names.get(index))
                        .and_then(Value::as_str)
                        .map_or_else(|| value.clone(), str::to_owned);
                    Some(Choice { value, title })
                })
                .collect::<Option<Vec<_>>>()
        });
        return Some(choices.filter(|choices| !choices.is_empty()));
    }
    titled_choices(schema, "oneOf")
}

/// Options listed as `key: [{const, title}]` (`oneOf`, or `anyOf` in a
/// multi-select's `items`).
fn titled_choices(schema: &Value, key: &str) -> Option<Option<Vec<Choice>>> {
    let options = schema.get(key)?;
    let choices = options.as_array().and_then(|options| {
        options
            .iter()
            .map(|option| {
                let value = option.get("const")?.as_str()?.to_owned();
                let title = text_of(option, "title").unwrap_or_else(|| value.clone());
                Some(Choice { value, title })
            })
            .collect::<Option<Vec<_>>>()
    });
    Some(choices.filter(|choices| !choices.is_empty()))
}

/// The option `raw` names: its value, or else its title.
fn choose(choices: &[Choice], raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    choices
        .iter()
        .find(|choice| choice.value == raw)
        .or_else(|| choices.iter().find(|choice| choice.title == raw))
        .map(|choice| choice.value.clone())
        .ok_or_else(|| format!("{raw:?} is not one of {}", list_choices(choices)))
}

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

fn show_number(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1.0e15 {
        format!("{}", number as i64)
    } else {
        number.to_string()
    }
}

// ----- string formats -----

impl Format {
    fn check(self, text: &str) -> Result<(), String> {
        let (ok, what) = match self {
            Self::Email => (is_email(text), "an email address"),
            Self::Uri => (is_uri(text), "a URI (such as https://example.com/)"),
            Self::Date => (is_date(text), "a date (YYYY-MM-DD)"),
            Self::DateTime => (
                is_date_time(text),
                "a date and time (RFC 3339, such as 2026-07-28T09:30:00Z)",
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("must be {what}"))
        }
    }
}

/// `local@domain`: no spaces, a dotted domain of letters, digits and
/// hyphens (or an `[address literal]`).
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local.chars().all(|c| c.is_ascii_graphic() || !c.is_ascii())
        && !local.contains('@');
    let domain_ok = if let Some(literal) = domain.strip_prefix('[') {
        literal.ends_with(']') && literal.len() > 1
    } else {
        !domain.is_empty()
            && domain.len() <= 255
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_alphanumeric() || c == '-')
            })
    };
    local_ok && domain_ok
}

/// An absolute URI (RFC 3986): `scheme:rest`, printable ASCII, valid
/// percent-escapes.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut scheme_chars = scheme.chars();
    let scheme_ok = scheme_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme_chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok || rest.is_empty() {
        return false;
    }
    let bytes = rest.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' => {
                let hex = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(index + 1) && hex(index + 2)) {
                    return false;
                }
                index += 3;
                continue;
            }
            b if b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b) => {}
            _ => return false,
        }
        index += 1;
    }
    // Not just an empty authority ("http://").
    rest != "//"
}

fn digits(text: &str, count: usize) -> Option<u32> {
    (text.len() == count && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD` naming a real day.
fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(year), Some(month), Some(day), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (digits(year, 4), digits(month, 2), digits(day, 2))
    else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)`.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, None)
    } else {
        let Some(at) = time.rfind(['+', '-']) else {
            return false;
        };
        (&time[..at], Some(&time[at + 1..]))
    };
    let (clock, fraction) = match clock.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (clock, None),
    };
    if fraction.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let hms: Vec<&str> = clock.split(':').collect();
    let [hours, minutes, seconds] = hms[..] else {
        return false;
    };
    let clock_ok = digits(hours, 2).is_some_and(|h| h <= 23)
        && digits(minutes, 2).is_some_and(|m| m <= 59)
        && digits(seconds, 2).is_some_and(|s| s <= 60);
    let offset_ok = offset.is_none_or(|offset| {
        offset.split_once(':').is_some_and(|(hours, minutes)| {
            digits(hours, 2).is_some_and(|h| h <= 23) && digits(minutes, 2).is_some_and(|m| m <= 59)
        })
    });
    clock_ok && offset_ok
}

// ----- accept: filling a form from --answer values -----

/// The form's content from `--answer` values (field name to raw text) and
/// the schema's defaults.
fn fill(form: &Form, answers: &BTreeMap<String, String>) -> anyhow::Result<Map<String, Value>> {
    let mut values = BTreeMap::new();
    for (name, raw) in answers {
        let Some(field) = form.field(name) else {
            let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
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
            .parse_value(raw)
            .map_err(|reason| anyhow!("--answer {name}={raw:?}: {reason}"))?;
        values.insert(name.clone(), value);
    }
    complete(form, values).map_err(|field| {
        let title = field
            .title
            .as_ref()
            .map(|title| format!(" ({title})"))
            .unwrap_or_default();
        anyhow!(
            "the form requires the field {:?}{title}, which has no default: pass --answer {}=VALUE",
            field.name,
            field.name
        )
    })
}

/// The content: `values` plus the defaults of fields without a value.
/// Errs with the first required field left without either.
fn complete(
    form: &Form,
    mut values: BTreeMap<String, Value>,
) -> Result<Map<String, Value>, &Field> {
    let mut content = Map::new();
    for field in &form.fields {
        match values.remove(&field.name).or_else(|| field.default.clone()) {
            Some(value) => {
                content.insert(field.name.clone(), value);
            }
            None if field.required => return Err(field),
            None => {}
        }
    }
    Ok(content)
}

// ----- prompt: asking on the terminal -----

/// What a prompt returned: `Ok(None)` when the user pressed Esc or Ctrl-C.
type Asked<T> = anyhow::Result<Option<T>>;

/// The questions the prompt mode asks, so the flow can run without a
/// terminal in tests.
trait Ui {
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
fn ask(elicitation: &Elicitation, ui: &mut dyn Ui) -> anyhow::Result<Value> {
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
            let fill_in = if form.fields.is_empty() {
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
            let mut values = BTreeMap::new();
            for field in &form.fields {
                match ask_field(field, ui)? {
                    Step::Value(value) => {
                        values.insert(field.name.clone(), value);
                    }
                    Step::Skip => {}
                    Step::Cancel => return Ok(action(CANCEL)),
                }
            }
            let content = complete(form, values)
                .map_err(|field| anyhow!("the required field {:?} has no answer", field.name))?;
            Ok(json!({"action": "accept", "content": content}))
        }
    }
}

fn ask_field(field: &Field, ui: &mut dyn Ui) -> anyhow::Result<Step> {
    let skippable = !field.required && field.default.is_none();
    let label = if field.required {
        field.label().to_owned()
    } else {
        format!("{} (optional)", field.label())
    };
    let mut help: Vec<String> = field.description.iter().cloned().collect();
    help.extend(field.hint());
    let option_titles =
        |choices: &[Choice]| -> Vec<String> { choices.iter().map(|c| c.title.clone()).collect() };
    match &field.kind {
        Kind::Text { .. } | Kind::Number { .. } => {
            if skippable {
                help.push("Enter to skip".into());
            }
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let default = field.default.as_ref().map(|value| match value {
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
                field.parse_value(input).map(drop)
            };
            let Some(input) = ui.text(&label, help.as_deref(), default.as_deref(), &validate)?
            else {
                return Ok(Step::Cancel);
            };
            if input.is_empty() && skippable {
                return Ok(Step::Skip);
            }
            field
                .parse_value(&input)
                .map(Step::Value)
                .map_err(|reason| anyhow!("the answer to {:?} {reason}", field.name))
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
            let default = field.default.as_ref().and_then(Value::as_bool);
            Ok(match ui.confirm(&label, help.as_deref(), default)? {
                None => Step::Cancel,
                Some(yes) => Step::Value(Value::Bool(yes)),
            })
        }
        Kind::Select(choices) => {
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let mut options = option_titles(choices);
            if skippable {
                options.push("(skip)".into());
            }
            let start = field
                .default
                .as_ref()
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
        Kind::MultiSelect { choices, counts } => {
            if skippable {
                help.push("select none to skip".into());
            }
            let help = (!help.is_empty()).then(|| help.join(" · "));
            let selected: Vec<usize> = field
                .default
                .as_ref()
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
                *counts,
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
                .check(Value::Array(values))
                .map(Step::Value)
                .map_err(|reason| anyhow!("the answer to {:?} {reason}", field.name))
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

/// The terminal, through inquire (prompts on stderr).
#[derive(Debug)]
struct Terminal;

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
    use std::collections::VecDeque;

    use mcp_tasks::validate_input_response;

    use super::*;

    /// A form with every kind of field.
    fn rich() -> Value {
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

    fn url_request() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "url",
            "message": "Sign in", "url": "https://example.com/auth?x=1&y=2"}})
    }

    fn accept(answers: &[&str]) -> InputPolicy {
        let answers: Vec<String> = answers.iter().map(|a| (*a).to_owned()).collect();
        InputPolicy::parse("accept", &answers).unwrap()
    }

    /// `answer`, checked with the client library's validation.
    fn answered(request: &Value, policy: &InputPolicy) -> Value {
        let response = answer(request, policy).unwrap().expect("an answer");
        validate_input_response(request, &response).unwrap();
        response
    }

    fn failure(request: &Value, policy: &InputPolicy) -> String {
        format!("{:#}", answer(request, policy).unwrap_err())
    }

    const REQUIRED: [&str; 4] = [
        "email=ada@example.com",
        "age=36",
        "color=#f00",
        "toppings=ham",
    ];

    #[test]
    fn parse_policies() {
        assert_eq!(
            InputPolicy::parse("prompt", &[]).unwrap(),
            InputPolicy::Prompt
        );
        assert_eq!(
            InputPolicy::parse("decline", &[]).unwrap(),
            InputPolicy::Decline
        );
        assert_eq!(InputPolicy::parse("fail", &[]).unwrap(), InputPolicy::Fail);
        let InputPolicy::Accept(values) = accept(&["a=1", "b=x=y", "c="]) else {
            panic!("not accept");
        };
        let expected: BTreeMap<String, String> = [("a", "1"), ("b", "x=y"), ("c", "")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(values, expected);
        let bad = [
            ("maybe", vec![], "not a mode"),
            ("accept", vec!["novalue"], "FIELD=VALUE"),
            ("accept", vec!["=1"], "no field name"),
            ("accept", vec!["a=1", "a=2"], "more than once"),
            ("decline", vec!["a=1"], "only with --input accept"),
            ("prompt", vec!["a=1"], "only with --input accept"),
        ];
        for (mode, answers, expected) in bad {
            let answers: Vec<String> = answers.into_iter().map(str::to_owned).collect();
            let error = InputPolicy::parse(mode, &answers).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

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
    fn schemas_this_client_rejects_or_repairs() {
        let form = |properties: Value, required: Value| {
            json!({"method": "elicitation/create", "params": {"message": "m",
                "requestedSchema": {"type": "object", "properties": properties, "required": required}}})
        };
        let nested = form(json!({"x": {"type": "object"}}), json!([]));
        assert!(failure(&nested, &accept(&[])).contains("cannot fill"));
        let numbers = form(json!({"x": {"type": "string", "enum": [1, 2]}}), json!([]));
        assert!(failure(&numbers, &accept(&[])).contains("cannot fill"));
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
        // An integer default written as 4.0 is sent as 4; enum without type.
        let loose = form(
            json!({"n": {"type": "integer", "default": 4.0}, "e": {"enum": ["a", "b"]}}),
            json!(["e"]),
        );
        let response = answered(&loose, &accept(&["e=b"]));
        assert_eq!(response["content"], json!({"n": 4, "e": "b"}));
        assert_eq!(response["content"]["n"].as_i64(), Some(4));
    }

    #[test]
    fn field_order_is_required_first_unless_serde_json_keeps_order() {
        let Some(Elicitation::Form { form, .. }) = Elicitation::parse(&rich()).unwrap() else {
            panic!("not a form");
        };
        let names: Vec<&str> = form.fields.iter().map(|f| f.name.as_str()).collect();
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
    fn formats() {
        for good in [
            "a@b.co",
            "first.last+tag@sub.example.org",
            "x@[127.0.0.1]",
            "ü@bücher.de",
        ] {
            assert!(is_email(good), "{good}");
        }
        for bad in [
            "", "a", "@b.c", "a@", "a b@c.d", "a@b..c", ".a@b.c", "a@-b.c", "a@b_c.d",
        ] {
            assert!(!is_email(bad), "{bad}");
        }
        for good in [
            "https://example.com",
            "mailto:a@b.c",
            "urn:isbn:0451450523",
            "file:///tmp/x",
            "http://h/%41",
        ] {
            assert!(is_uri(good), "{good}");
        }
        for bad in [
            "",
            "example.com",
            "1http://x",
            "http://",
            "http:",
            "http://x/%4",
            "http://x/ y",
            "http://x/ü",
        ] {
            assert!(!is_uri(bad), "{bad}");
        }
        for good in ["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01"] {
            assert!(is_date(good), "{good}");
        }
        for bad in [
            "1900-02-29",
            "2023-13-01",
            "2023-00-10",
            "2023-04-31",
            "23-01-01",
            "2023-01-01x",
            "2023/01/01",
        ] {
            assert!(!is_date(bad), "{bad}");
        }
        for good in [
            "2026-07-28T09:30:00Z",
            "2026-07-28t09:30:00.123z",
            "2026-07-28T23:59:60-05:30",
            "2026-07-28T00:00:00+00:00",
        ] {
            assert!(is_date_time(good), "{good}");
        }
        for bad in [
            "2026-07-28",
            "2026-07-28T09:30Z",
            "2026-07-28T09:30:00",
            "2026-07-28T09:30:00.Z",
            "2026-07-28T24:00:00Z",
            "2026-07-28T09:30:00+0200",
            "2026-02-30T09:30:00Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
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

    // ----- the prompt flow, with a scripted user -----

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
        if map_keeps_order() {
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
            ["choose at least 1", "choose at most 2"]
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
                "m": {"type": "array", "minItems": 1, "items": {"enum": ["x", "y"]}},
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
        assert!(
            failure(
                &json!({"method": "elicitation/create", "params": {"mode": "url", "message": "m"}}),
                &accept(&[])
            )
            .contains("no url")
        );
    }

    // ----- the real terminal, in a pseudo-terminal -----

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
                "prompt::tests::pty_child",
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
