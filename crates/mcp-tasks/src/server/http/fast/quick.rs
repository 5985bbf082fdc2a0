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

use super::tasks::{Call, Method, headers_fit};
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
    Some(Call::new(id, task_id.into_owned(), method))
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
}

object!(Meta, "the request's _meta", |map, key, out| {
    Ok(match key {
        VERSION_KEY => set(&mut out.version, map.next_value()?),
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
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;
    use crate::server::http::fast::tasks;
    use crate::server::http::guard;

    fn headers(name: Option<&str>) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        if let Some(name) = name {
            map.insert("mcp-name", HeaderValue::from_str(name).unwrap());
        }
        map
    }

    /// What the guard and the `Value` fast path make of the same request.
    fn value_path(method: &str, headers: &HeaderMap, body: &[u8]) -> Option<Call> {
        serde_json::from_slice::<Value>(body)
            .ok()
            .filter(|message| guard::not_a_message(message).is_none())
            .and_then(|message| tasks::accept(method, headers, &message))
    }

    fn poll(method: &str, id: &Value, task_id: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"taskId": task_id,
            "_meta": {VERSION_KEY: "2026-07-28",
                CAPABILITIES_KEY: {"extensions": {TASKS_EXTENSION: {}}}}}})
    }

    fn bytes(message: &Value) -> Vec<u8> {
        serde_json::to_vec(message).unwrap()
    }

    #[test]
    fn reads_polls_as_the_value_path_does() {
        let mut extra = poll("tasks/get", &json!(7), "t1");
        extra["params"]["other"] = json!({"nested": [1, -2.5e-3, true, null, "x\"y"]});
        extra["params"]["_meta"]["progressToken"] = json!("p");
        extra["params"]["_meta"][CAPABILITIES_KEY]["sampling"] = json!({});
        extra["params"]["_meta"][CAPABILITIES_KEY]["extensions"]["other/ext"] = json!([]);
        extra["trailing"] = json!("\u{1F600}");
        let escaped = br#"{"params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol\/tasks":null}},"io.modelcontextprotocol\u002fprotocolVersion":"2026-07-28"},"taskId":"t\u0031"},"method":"tasks\/cancel","id":"c\n1","jsonrpc":"2\u002e0"}"#;
        let cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
            (
                "tasks/get",
                bytes(&poll("tasks/get", &json!(7), "t1")),
                Some("t1"),
            ),
            (
                "tasks/get",
                bytes(&poll("tasks/get", &json!(7), "t1")),
                None,
            ),
            (
                "tasks/get",
                bytes(&poll("tasks/get", &json!(1.5), "t1")),
                None,
            ),
            (
                "tasks/get",
                bytes(&poll("tasks/get", &json!(-3), "t1")),
                None,
            ),
            (
                "tasks/cancel",
                bytes(&poll("tasks/cancel", &json!("a"), "t1")),
                Some("t1"),
            ),
            ("tasks/get", bytes(&extra), Some("t1")),
            ("tasks/cancel", escaped.to_vec(), Some("t1")),
            (
                "tasks/get",
                format!(
                    " \n{}\t ",
                    String::from_utf8(bytes(&poll("tasks/get", &json!(1), "t"))).unwrap()
                )
                .into_bytes(),
                None,
            ),
        ];
        // Keys given twice: the last one counts, whatever the shape of the
        // earlier ones, as in the `Value`.
        let text = String::from_utf8(bytes(&poll("tasks/get", &json!(7), "t1"))).unwrap();
        let twice = |from: &str, to: &str| (text.replacen(from, to, 1).into_bytes(), Some("t1"));
        let mut cases: Vec<(&str, Vec<u8>, Option<&str>)> = cases;
        for (body, name) in [
            twice("\"id\":7", "\"id\":7,\"id\":8"),
            twice("\"id\":7", "\"id\":{\"x\":[1]},\"id\":8"),
            twice("\"taskId\":\"t1\"", "\"taskId\":\"t0\",\"taskId\":\"t1\""),
            twice("\"taskId\":\"t1\"", "\"taskId\":5,\"taskId\":\"t1\""),
            twice(
                "\"jsonrpc\":\"2.0\"",
                "\"jsonrpc\":null,\"jsonrpc\":\"2.0\"",
            ),
            twice(
                "\"method\":\"tasks/get\"",
                "\"method\":[\"x\"],\"method\":\"tasks/get\"",
            ),
            twice("\"params\":", "\"params\":\"p\",\"params\":"),
            twice("\"params\":", "\"params\":{\"taskId\":\"t1\"},\"params\":"),
            twice("\"_meta\":", "\"_meta\":[],\"_meta\":"),
            twice("\"extensions\":", "\"extensions\":true,\"extensions\":"),
            twice(
                "\"io.modelcontextprotocol/clientCapabilities\":",
                "\"io.modelcontextprotocol/clientCapabilities\":{},\"io.modelcontextprotocol/clientCapabilities\":",
            ),
            twice(
                "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"",
                "\"io.modelcontextprotocol/protocolVersion\":2,\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"",
            ),
        ] {
            cases.push(("tasks/get", body, name));
        }
        for (method, body, name) in cases {
            let headers = headers(name);
            let quick = accept(method, &headers, &body);
            assert!(quick.is_some(), "{}", String::from_utf8_lossy(&body));
            assert_eq!(
                quick,
                value_path(method, &headers, &body),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    #[test]
    fn refuses_what_the_value_path_refuses() {
        let good = poll("tasks/get", &json!(7), "t1");
        let text = String::from_utf8(bytes(&good)).unwrap();
        let with = |path: &[&str], value: Value| {
            let mut message = good.clone();
            let mut at = &mut message;
            for key in &path[..path.len() - 1] {
                at = &mut at[*key];
            }
            at[path[path.len() - 1]] = value;
            bytes(&message)
        };
        // (body, what the Value path makes of it)
        let cases: Vec<(Vec<u8>, bool)> = vec![
            // A key twice, the last one of the wrong shape.
            (
                text.replacen("\"id\":7", "\"id\":7,\"id\":null", 1)
                    .into_bytes(),
                false,
            ),
            (
                text.replacen("\"taskId\":\"t1\"", "\"taskId\":\"t1\",\"taskId\":[]", 1)
                    .into_bytes(),
                false,
            ),
            (
                format!("{},\"params\":5}}", &text[..text.len() - 1]).into_bytes(),
                false,
            ),
            (
                text.replacen(
                    "\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}",
                    "\"extensions\":{\"io.modelcontextprotocol/tasks\":{}},\"extensions\":{}",
                    1,
                )
                .into_bytes(),
                false,
            ),
            // Not an object, or params not one.
            (format!("[{text}]").into_bytes(), false),
            (with(&["params"], json!(["t1"])), false),
            // Escapes and numbers the Value parse refuses, where they are not read.
            (
                text.replacen("\"params\"", "\"x\":\"\\ud800\",\"params\"", 1)
                    .into_bytes(),
                false,
            ),
            (
                text.replacen("\"params\"", "\"x\":1e400,\"params\"", 1)
                    .into_bytes(),
                false,
            ),
            (
                text.replacen("\"params\"", "\"x\":\"\u{0}\",\"params\"", 1)
                    .into_bytes(),
                false,
            ),
            (
                [&b"{\"x\":\"\xff\","[..], &text.as_bytes()[1..]].concat(),
                false,
            ),
            (format!("{text}x").into_bytes(), false),
            // Not a poll the fast path answers.
            (with(&["method"], json!("tasks/cancel")), false),
            (with(&["jsonrpc"], json!("1.0")), false),
            (with(&["id"], json!({"x": 1})), false),
            (with(&["id"], Value::Null), false),
            (with(&["params", "taskId"], json!(5)), false),
            (
                with(&["params", "_meta", VERSION_KEY], json!("2025-11-25")),
                false,
            ),
            (
                with(&["params", "_meta", CAPABILITIES_KEY], json!({})),
                false,
            ),
            (
                with(
                    &["params", "_meta", CAPABILITIES_KEY, "extensions"],
                    json!({}),
                ),
                false,
            ),
            (
                with(
                    &["params", "_meta", CAPABILITIES_KEY, "extensions"],
                    json!([TASKS_EXTENSION]),
                ),
                false,
            ),
            (with(&["params", "_meta"], json!(null)), false),
        ];
        for (body, slow) in cases {
            let headers = headers(Some("t1"));
            assert_eq!(
                accept("tasks/get", &headers, &body),
                None,
                "{}",
                String::from_utf8_lossy(&body)
            );
            assert_eq!(
                value_path("tasks/get", &headers, &body).is_some(),
                slow,
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
        let body = bytes(&good);
        for (method, headers) in [
            ("tasks/update", headers(Some("t1"))),
            ("tools/call", headers(Some("t1"))),
            ("tasks/get", headers(Some("t2"))),
            ("tasks/get", HeaderMap::new()),
        ] {
            assert_eq!(
                accept(method, &headers, &body),
                None,
                "{method} {headers:?}"
            );
        }
    }

    #[test]
    fn every_small_mutation_of_a_poll_is_read_as_the_value_path_reads_it() {
        let special = b"\"\\{}[],:0e-. u\xff";
        let escaped = br#"{"params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol\/tasks":{}}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"taskId":"t1"},"method":"tasks/get","id":"\u0037","jsonrpc":"2.0"}"#;
        let headers = headers(None);
        let mut accepted = 0;
        for base in [bytes(&poll("tasks/get", &json!(7), "t1")), escaped.to_vec()] {
            let mut variants = Vec::new();
            for at in 0..base.len() {
                let mut deleted = base.clone();
                deleted.remove(at);
                variants.push(deleted);
                for &byte in special {
                    let mut replaced = base.clone();
                    replaced[at] = byte;
                    variants.push(replaced);
                    let mut inserted = base.clone();
                    inserted.insert(at, byte);
                    variants.push(inserted);
                }
            }
            for body in variants {
                let quick = accept("tasks/get", &headers, &body);
                accepted += usize::from(quick.is_some());
                assert_eq!(
                    quick,
                    value_path("tasks/get", &headers, &body),
                    "{}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
        // Changes inside the task id, the id and ignored text keep a poll.
        assert!(accepted > 100, "{accepted}");
    }

    /// A small xorshift generator: reproducible cases without a dependency.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len())]
        }
    }

    /// An object with each key of `keys` (a key listed twice may come
    /// twice) most of the time, in a random order, each with a value
    /// `value` makes for it.
    fn object(
        rng: &mut Rng,
        keys: &[&str],
        value: &mut dyn FnMut(&mut Rng, &str) -> String,
    ) -> String {
        let mut entries: Vec<String> = Vec::new();
        for key in keys {
            if rng.below(6) != 0 {
                let entry = format!(
                    "{}:{}",
                    serde_json::to_string(key).unwrap(),
                    value(rng, key)
                );
                entries.insert(rng.below(entries.len() + 1), entry);
            }
        }
        let space = rng.pick(&["", " ", "\n"]);
        format!("{{{space}{}{space}}}", entries.join(","))
    }

    /// A value of some other shape than the one read.
    fn other(rng: &mut Rng) -> String {
        rng.pick(&[
            "null",
            "5",
            "-1.5e3",
            "true",
            "[]",
            "[1,{\"a\":null}]",
            "{}",
            "\"s\"",
        ])
        .to_owned()
    }

    fn extensions(rng: &mut Rng) -> String {
        if rng.below(8) == 0 {
            return other(rng);
        }
        object(
            rng,
            &[TASKS_EXTENSION, "other/ext", TASKS_EXTENSION],
            &mut |rng, _| other(rng),
        )
    }

    fn capabilities(rng: &mut Rng) -> String {
        if rng.below(8) == 0 {
            return other(rng);
        }
        object(
            rng,
            &["extensions", "sampling", "extensions"],
            &mut |rng, key| match key {
                "extensions" => extensions(rng),
                _ => other(rng),
            },
        )
    }

    fn meta(rng: &mut Rng) -> String {
        if rng.below(8) == 0 {
            return other(rng);
        }
        object(
            rng,
            &[
                VERSION_KEY,
                CAPABILITIES_KEY,
                "progressToken",
                CAPABILITIES_KEY,
            ],
            &mut |rng, key| match key {
                VERSION_KEY => rng
                    .pick(&["\"2026-07-28\"", "\"2026-07-28\"", "\"2025-11-25\"", "2"])
                    .to_owned(),
                CAPABILITIES_KEY => capabilities(rng),
                _ => other(rng),
            },
        )
    }

    fn params(rng: &mut Rng) -> String {
        if rng.below(8) == 0 {
            return other(rng);
        }
        object(
            rng,
            &["taskId", "_meta", "other", "_meta"],
            &mut |rng, key| match key {
                "taskId" => rng
                    .pick(&["\"t1\"", "\"t1\"", "\"t\\u0031\"", "\"t2\"", "1"])
                    .to_owned(),
                "_meta" => meta(rng),
                _ => other(rng),
            },
        )
    }

    fn message(rng: &mut Rng) -> String {
        object(
            rng,
            &["jsonrpc", "id", "method", "params", "x", "params"],
            &mut |rng, key| match key {
                "jsonrpc" => rng.pick(&["\"2.0\"", "\"2.0\"", "\"1.0\"", "2"]).to_owned(),
                "id" => rng
                    .pick(&["7", "\"r\"", "1.5", "7", "null", "{}", "[7]"])
                    .to_owned(),
                "method" => rng
                    .pick(&["\"tasks/get\"", "\"tasks/get\"", "\"tasks/cancel\"", "3"])
                    .to_owned(),
                "params" => params(rng),
                _ => other(rng),
            },
        )
    }

    #[test]
    fn random_polls_with_keys_given_twice_are_read_as_the_value_path_reads_them() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for _ in 0..20_000 {
            let body = message(&mut rng);
            let method = rng.pick(&["tasks/get", "tasks/get", "tasks/cancel"]);
            let headers = headers([Some("t1"), None, Some("t2")][rng.below(3)]);
            let quick = accept(method, &headers, body.as_bytes());
            accepted += usize::from(quick.is_some());
            assert_eq!(
                quick,
                value_path(method, &headers, body.as_bytes()),
                "{method} {body}"
            );
        }
        // Enough of them are polls the fast path answers.
        assert!(accepted > 100, "{accepted}");
    }
}
