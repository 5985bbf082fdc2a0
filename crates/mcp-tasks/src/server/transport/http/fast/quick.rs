//! The `tasks/get` and `tasks/cancel` fast path read straight from the body's
//! bytes: their one reader.
//!
//! A poll is most of a task server's traffic, and reading its body into a
//! `serde_json::Value` (a map per object, a `String` per key and value) and
//! dropping it again was the largest cost left on the fast path. [`accept`]
//! reads the few fields the path needs with typed visitors that borrow
//! strings from the body where they have no escapes, and checks everything
//! else as strictly as the `Value` parse does without building it.
//!
//! It takes exactly what the guard and [`tasks::accept`](super::tasks::accept)
//! take together from the `Value` of the same body, and gives the same
//! [`Call`] for it, so that the server need not read a poll the `Value` way
//! at all: a key given twice counts by its last value (as in the `Value`,
//! whatever shape the earlier ones have), a field of the wrong shape is
//! refused when it is the one that counts, a value of any shape where no
//! field is read is checked and left. What it refuses goes on to the guard,
//! which answers a malformed body, and then to rmcp. The tests below and
//! the fuzz target `server_reads_request` check the two readings against
//! each other.

use std::borrow::Cow;
use std::fmt;

use http::HeaderMap;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::tasks::{Call, Method, Trace, headers_fit};
use crate::task::TASKS_EXTENSION;

const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// The call, when `body` is a `tasks/get` or `tasks/cancel` request (as
/// `method`, the `Mcp-Method` header, names) that the fast path answers;
/// `None` hands it on.
pub(crate) fn accept(method: &str, headers: &HeaderMap, body: &[u8]) -> Option<Call> {
    let method = match method {
        "tasks/get" => Method::Get,
        "tasks/cancel" => Method::Cancel,
        _ => return None,
    };
    // Checked once here, so the parser need not check each string again.
    let body = std::str::from_utf8(body).ok()?;
    let Shaped(message) = serde_json::from_str::<Shaped<Message<'_>>>(body).ok()?;
    let message = message?;
    if message.jsonrpc?.0?.0 != "2.0" || message.method?.0?.0 != method.name() {
        return None;
    }
    let id = match message.id? {
        id @ (Value::String(_) | Value::Number(_)) => id,
        _ => return None,
    };
    let params = message.params?.0?;
    let meta = params.meta?.0?;
    let version = meta.version?.0?;
    if !meta.declared? {
        return None;
    }
    let task_id = params.task_id?.0?.0;
    if !headers_fit(headers, &version.0, &task_id) {
        return None;
    }
    let trace = Trace {
        parent: meta
            .traceparent
            .and_then(|text| text.0)
            .map(|text| text.0.into_owned()),
        state: meta
            .tracestate
            .and_then(|text| text.0)
            .map(|text| text.0.into_owned()),
    };
    Some(Call::new(id, task_id.into_owned(), method).with_trace(trace))
}

/// A string, borrowed from the body when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(text)))
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }
    fn visit_string<E: de::Error>(self, text: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(text)))
    }
}

/// A field's value: `Some` when it has the shape read, `None` when it is
/// any other JSON value (checked by [`Strict`] all the same), which the
/// `Value` path refuses too where it reads the field.
struct Shaped<T>(Option<T>);

/// The visits of the JSON values of other shapes than the one read:
/// checked as [`Strict`] checks them, and `$other`. A string or an object
/// is added where it is not the shape read.
macro_rules! other_shapes {
    ($other:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Strict.visit_seq(seq)?;
            Ok($other)
        }
    };
}

impl<'de> de::Deserialize<'de> for Shaped<Text<'de>> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShapedText;
        impl<'de> Visitor<'de> for ShapedText {
            type Value = Shaped<Text<'de>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                TextVisitor.visit_borrowed_str(text).map(Some).map(Shaped)
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                TextVisitor.visit_str(text).map(Some).map(Shaped)
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                TextVisitor.visit_string(text).map(Some).map(Shaped)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Strict.visit_map(map)?;
                Ok(Shaped(None))
            }
            other_shapes!(Shaped(None));
        }
        deserializer.deserialize_any(ShapedText)
    }
}

/// Reads an object's fields: `field` reads the value of each key it knows
/// (a later one in the place of an earlier one: the last counts) and
/// returns `true`, or returns `false`, and the value is checked by
/// [`Strict`] and left.
fn read_object<'de, A, F>(mut map: A, mut field: F) -> Result<(), A::Error>
where
    A: MapAccess<'de>,
    F: FnMut(&str, &mut A) -> Result<bool, A::Error>,
{
    while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
        if !field(&key, &mut map)? {
            map.next_value_seed(Strict)?;
        }
    }
    Ok(())
}

/// Fills `slot` with a known key's `value`, in the place of an earlier
/// one: `true`, the key is known.
fn set<T>(slot: &mut Option<T>, value: T) -> bool {
    *slot = Some(value);
    true
}

/// Implements `Deserialize` for [`Shaped`] structs read by [`read_object`]
/// from an object (serde's derive would also read one from an array).
macro_rules! object {
    ($type:ident, $expecting:literal, |$map:ident, $key:ident, $out:ident| $body:expr) => {
        impl<'de> de::Deserialize<'de> for Shaped<$type<'de>> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct ObjectVisitor;
                impl<'de> Visitor<'de> for ObjectVisitor {
                    type Value = Shaped<$type<'de>>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                        let mut $out = $type::default();
                        read_object(map, |$key, $map| $body)?;
                        Ok(Shaped(Some($out)))
                    }
                    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                        Ok(Shaped(None))
                    }
                    other_shapes!(Shaped(None));
                }
                deserializer.deserialize_any(ObjectVisitor)
            }
        }
    };
}

#[derive(Default)]
struct Message<'a> {
    jsonrpc: Option<Shaped<Text<'a>>>,
    id: Option<Value>,
    method: Option<Shaped<Text<'a>>>,
    params: Option<Shaped<Params<'a>>>,
}

object!(Message, "a JSON-RPC request", |map, key, out| {
    Ok(match key {
        "jsonrpc" => set(&mut out.jsonrpc, map.next_value()?),
        "id" => set(&mut out.id, map.next_value()?),
        "method" => set(&mut out.method, map.next_value()?),
        "params" => set(&mut out.params, map.next_value()?),
        _ => false,
    })
});

#[derive(Default)]
struct Params<'a> {
    task_id: Option<Shaped<Text<'a>>>,
    meta: Option<Shaped<Meta<'a>>>,
}

object!(Params, "the request's params", |map, key, out| {
    Ok(match key {
        "taskId" => set(&mut out.task_id, map.next_value()?),
        "_meta" => set(&mut out.meta, map.next_value()?),
        _ => false,
    })
});

#[derive(Default)]
struct Meta<'a> {
    version: Option<Shaped<Text<'a>>>,
    /// Whether `clientCapabilities.extensions` names the Tasks extension;
    /// `None` without `clientCapabilities`.
    declared: Option<bool>,
    /// W3C trace context (`traceparent`, `tracestate`), read for the
    /// request's span; a value of another shape is no context.
    traceparent: Option<Shaped<Text<'a>>>,
    tracestate: Option<Shaped<Text<'a>>>,
}

object!(Meta, "the request's _meta", |map, key, out| {
    Ok(match key {
        VERSION_KEY => set(&mut out.version, map.next_value()?),
        "traceparent" => set(&mut out.traceparent, map.next_value()?),
        "tracestate" => set(&mut out.tracestate, map.next_value()?),
        CAPABILITIES_KEY => {
            let Shaped(capabilities) = map.next_value::<Shaped<Capabilities<'_>>>()?;
            let declared = capabilities.and_then(|capabilities| capabilities.declared);
            set(&mut out.declared, declared.unwrap_or(false))
        }
        _ => false,
    })
});

#[derive(Default)]
struct Capabilities<'a> {
    /// Whether `extensions` names the Tasks extension; `None` without
    /// `extensions`.
    declared: Option<bool>,
    _body: std::marker::PhantomData<&'a str>,
}

object!(
    Capabilities,
    "the client's capabilities",
    |map, key, out| {
        Ok(match key {
            "extensions" => set(
                &mut out.declared,
                map.next_value_seed(Names(TASKS_EXTENSION))?,
            ),
            _ => false,
        })
    }
);

/// Whether a value is an object with the key `.0` (`false` for a value of
/// another shape); every value checked by [`Strict`]. A key may come twice
/// here: the `Value` path keeps one of them, and either way the key is
/// there.
struct Names(&'static str);

impl<'de> DeserializeSeed<'de> for Names {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Names {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            found |= key == self.0;
            map.next_value_seed(Strict)?;
        }
        Ok(found)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    other_shapes!(false);
}

/// Any JSON value, checked as strictly as reading it into a `Value` checks
/// it (strings with their escapes, numbers in range) and not kept. serde's
/// `IgnoredAny` is laxer: it lets a lone surrogate escape or an
/// out-of-range number through, which the `Value` parse refuses.
#[derive(Clone, Copy)]
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(StrictKey)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// An object's key, read as the `Value` parse reads keys (as a string).
struct StrictKey;

impl<'de> DeserializeSeed<'de> for StrictKey {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(Strict)
    }
}

#[cfg(test)]
mod tests;
