//! A server over newline-delimited JSON-RPC (`StdioTransport`) reads the
//! plain `tools/call`s of a 2026-07-28 client ahead of rmcp, from their
//! bytes (see the transport's docs). Checked here on the raw wire of an
//! in-process pipe: every answer is the one rmcp's own reading gives, and a
//! call read ahead keeps its turn (a cancellation sent right behind it
//! cancels it).

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_tasks::store::MemoryStore;
use serde_json::{Value, json};

use crate::support::old_client::OldClient;
use crate::support::runtime_server::{RuntimeServer, runtime_on};

/// A raw connection (no `initialize`) to a fresh server, reading calls
/// ahead or not.
fn connect(read_ahead: bool) -> OldClient {
    let server = RuntimeServer::new(runtime_on(MemoryStore::new()).build());
    OldClient::stdio_reading_ahead(server, read_ahead)
}

fn meta(extension: bool) -> Value {
    let capabilities = if extension {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities})
}

fn call(id: u64, name: &str, arguments: &Value, meta: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta}})
}

/// An answer with what differs from task to task (its id and times) blanked.
fn comparable(mut answer: Value) -> Value {
    if let Some(result) = answer.get_mut("result").and_then(Value::as_object_mut) {
        for key in ["taskId", "createdAt", "lastUpdatedAt"] {
            if result.contains_key(key) {
                result.insert(key.into(), json!("…"));
            }
        }
    }
    answer
}

/// The answers to `requests`, by id, and every other message the server wrote.
async fn answers(read_ahead: bool, requests: &[Value]) -> (BTreeMap<String, Value>, Vec<Value>) {
    let mut client = connect(read_ahead);
    client.send_at_once(requests).await;
    let expected = requests.iter().filter(|r| r.get("id").is_some()).count();
    let (mut answers, mut others) = (BTreeMap::new(), Vec::new());
    while answers.len() < expected {
        let message = client
            .next_within(Duration::from_secs(20))
            .await
            .expect("the server answers");
        match message.get("id") {
            Some(id) if message.get("method").is_none() => {
                answers.insert(id.to_string(), comparable(message));
            }
            _ => others.push(message),
        }
    }
    (answers, others)
}

#[tokio::test]
async fn calls_read_ahead_are_answered_as_rmcp_answers_them() {
    let mut wrong_version = meta(true);
    wrong_version["io.modelcontextprotocol/protocolVersion"] = json!("2025-06-18");
    let mut progress = meta(false);
    progress["progressToken"] = json!("p");
    let requests = [
        // Read ahead: plain calls naming 2026-07-28.
        call(1, "slow", &json!({"ms": 5, "sync": true}), &meta(false)),
        call(2, "forbidden_tool", &json!({}), &meta(true)),
        call(3, "required_job", &json!({}), &meta(false)),
        call(4, "required_job", &json!({}), &meta(true)),
        call(5, "no_such_tool", &json!({}), &meta(true)),
        call(6, "slow", &json!({"ms": "not a number"}), &meta(true)),
        // Left to rmcp: another version, a progress token, another method.
        call(7, "forbidden_tool", &json!({}), &wrong_version),
        call(8, "slow", &json!({"ms": 1, "sync": true}), &progress),
        json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
    ];
    let (fast, fast_others) = answers(true, &requests).await;
    let (rmcp, rmcp_others) = answers(false, &requests).await;
    assert_eq!(fast.len(), 9, "{fast:#?}");
    for (id, answer) in &rmcp {
        assert_eq!(fast.get(id), Some(answer), "request {id}");
    }
    assert_eq!(fast_others, rmcp_others);
    // The answers are what the calls ask for (not all the same error).
    assert_eq!(fast["1"]["result"]["content"][0]["text"], "slept 5 ms");
    assert_eq!(fast["2"]["result"]["content"][0]["text"], "is task: false");
    assert_eq!(fast["3"]["error"]["code"], -32021);
    assert_eq!(fast["4"]["result"]["resultType"], "task");
    assert!(fast["8"]["result"].is_object(), "{:#}", fast["8"]);
}

#[tokio::test(start_paused = true)]
async fn a_call_read_ahead_keeps_its_turn() {
    for read_ahead in [true, false] {
        let mut client = connect(read_ahead);
        // A call that would answer after a minute, its cancellation right
        // behind it in the same write, then a ping.
        client
            .send_at_once(&[
                call(
                    1,
                    "slow",
                    &json!({"ms": 60_000, "sync": true}),
                    &meta(false),
                ),
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 1, "reason": "changed my mind"}}),
                json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            ])
            .await;
        let pong = client.next_within(Duration::from_secs(20)).await;
        let pong = pong.expect("the ping is answered");
        assert_eq!(pong["id"], 2, "read ahead: {read_ahead}: {pong}");
        // Two minutes on (the paused clock runs them at once): the cancelled
        // call never answers.
        let late = client.next_within(Duration::from_secs(120)).await;
        assert!(
            late.is_none(),
            "read ahead: {read_ahead}: the call answered: {late:?}"
        );
    }
}
