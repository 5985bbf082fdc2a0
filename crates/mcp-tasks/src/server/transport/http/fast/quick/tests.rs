//! The bytes reader held to the `Value` reader: the same call for every
//! body, keys given twice, fields of every shape, random polls.

use http::HeaderValue;
use serde_json::json;

use super::*;
use crate::server::transport::http::fast::tasks;
use crate::server::transport::http::guard;

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
fn object(rng: &mut Rng, keys: &[&str], value: &mut dyn FnMut(&mut Rng, &str) -> String) -> String {
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
