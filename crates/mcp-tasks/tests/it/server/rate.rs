//! The per-caller creation rate (`with_rate_per_caller`) and whom caps and
//! rates count against (`with_quota_by_header`): in process under a paused
//! clock, and over real HTTP on 127.0.0.1 through the serving recipe.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::server::CreationRate;
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{CallOptions, CallResponse, TasksClient};
use rmcp::service::serve_client_with_lifecycle;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::runtime_server::{runtime_on, serve_http, serve_http_with};
use crate::support::{Handler, RuntimeServer, in_process, lifecycle, task_of};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

fn rate(text: &str, burst: u32) -> CreationRate {
    text.parse::<CreationRate>()
        .unwrap()
        .with_burst(NonZeroU32::new(burst).unwrap())
}

async fn http_client(url: &str, token: &str) -> TasksClient<Handler> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    let running = serve_client_with_lifecycle(Handler::default(), transport, lifecycle())
        .await
        .expect("connect over HTTP");
    TasksClient::new(running)
}

/// A 2026-07-28 `tools/call` of `forever` posted as is, with `token`.
async fn post_call(url: &str, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "forever")
        .header("authorization", format!("Bearer {token}"))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "forever", "arguments": {},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities":
                        {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
            .to_string(),
        )
        .send()
        .await
        .expect("the server answers")
}

/// The `data` of a refusal for rate, checked for its shape.
fn rate_refusal(error: &Value) -> &Value {
    assert_eq!(error["code"], -32603, "{error}");
    let data = &error["data"];
    assert_eq!(data["reason"], "rateLimited", "{error}");
    assert!(data["retryAfterMs"].as_u64().is_some(), "{error}");
    data
}

#[tokio::test(start_paused = true)]
async fn a_caller_past_its_rate_is_refused_until_the_hint_has_passed() {
    let runtime = runtime_on(MemoryStore::new())
        .with_rate_per_caller(Some(rate("1/s", 2)))
        .build();
    let client = in_process(RuntimeServer::new(runtime)).await;
    task_of(&client, "forever", json!({})).await;
    task_of(&client, "forever", json!({})).await;
    let refused = client
        .call_tool("forever", (), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(-32603), "{refused}");
    let rpc = refused.rpc_error().expect("a JSON-RPC error");
    assert!(
        rpc.message.contains("faster than 1/s (bursts of 2)"),
        "{}",
        rpc.message
    );
    let data = rpc.data.clone().expect("data");
    assert_eq!(data["ratePerCaller"], "1/s", "{data}");
    assert_eq!(data["rateBurst"], 2, "{data}");
    let retry_after = rate_refusal(&json!({"code": -32603, "data": data}))["retryAfterMs"]
        .as_u64()
        .unwrap();
    assert!(
        (1..=1000).contains(&retry_after),
        "one creation a second: {retry_after}"
    );
    // A synchronous call is no creation: neither counted nor refused.
    let sync = client
        .call_tool(
            "slow",
            crate::support::args(json!({"ms": 1})),
            CallOptions::default().with_declare_tasks(false),
        )
        .await
        .unwrap();
    assert!(matches!(sync, CallResponse::Complete(_)), "{sync:?}");
    tokio::time::sleep(Duration::from_millis(retry_after)).await;
    task_of(&client, "forever", json!({})).await;
    assert!(
        client
            .call_tool("forever", (), CallOptions::default())
            .await
            .is_err(),
        "one creation an interval past the burst"
    );
}

#[tokio::test]
async fn over_http_a_caller_past_its_rate_gets_503_with_retry_after_and_others_are_served() {
    let tokens = BearerTokens::new()
        .with_token(ALICE, Some("alice"))
        .unwrap()
        .with_token(BOB, Some("bob"))
        .unwrap();
    // 10 a minute: a creation every 6 s past the burst, so the refusals
    // below hold however slow the machine.
    let runtime = runtime_on(MemoryStore::new())
        .with_rate_per_caller(Some(rate("10/min", 2)))
        .build();
    let url = serve_http_with(RuntimeServer::new(runtime), |recipe| {
        recipe.with_bearer_tokens(Arc::new(tokens))
    })
    .await;
    for _ in 0..2 {
        let created = post_call(&url, ALICE).await;
        assert_eq!(created.status(), 200);
    }
    let refused = post_call(&url, ALICE).await;
    assert_eq!(refused.status(), 503);
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("whole seconds");
    let body: Value = refused.json().await.unwrap();
    let data = rate_refusal(&body["error"]);
    assert_eq!(data["ratePerCaller"], "10/min", "{body}");
    assert_eq!(data["rateBurst"], 2, "{body}");
    let retry_after_ms = data["retryAfterMs"].as_u64().unwrap();
    assert!((1..=6000).contains(&retry_after_ms), "{body}");
    assert_eq!(retry_after, retry_after_ms.div_ceil(1000), "rounded up");

    // The library's client reads the 503's body as the server's error.
    let alice = http_client(&url, ALICE).await;
    let error = alice
        .call_tool("forever", (), CallOptions::default())
        .await
        .unwrap_err();
    let rpc = error.rpc_error().unwrap_or_else(|| panic!("{error}"));
    assert!(
        rpc.message.contains("faster than 10/min"),
        "{}",
        rpc.message
    );
    rate_refusal(&json!({"code": rpc.code, "data": rpc.data}));

    // Another (authenticated) caller has its own rate.
    let bob = http_client(&url, BOB).await;
    task_of(&bob, "forever", json!({})).await;

    // Once the hint has passed, the caller is served again.
    let last = post_call(&url, ALICE).await;
    let wait = if last.status() == 503 {
        let body: Value = last.json().await.unwrap();
        rate_refusal(&body["error"])["retryAfterMs"]
            .as_u64()
            .unwrap()
    } else {
        0
    };
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let served = post_call(&url, ALICE).await;
    assert_eq!(served.status(), 200);
    let body: Value = served.json().await.unwrap();
    assert_eq!(body["result"]["status"], "working", "{body}");
}

#[tokio::test]
async fn unauthenticated_callers_share_one_cap_unless_counted_by_header() {
    for by_header in [false, true] {
        let runtime = runtime_on(MemoryStore::new())
            .with_max_tasks_per_caller(Some(2))
            .with_quota_by_header(by_header)
            .build();
        let url = serve_http(RuntimeServer::new(runtime)).await;
        // No tokens file: each header is a caller of its own (its tasks are
        // its own), but not for the cap unless counted by header.
        let first = http_client(&url, "one").await;
        let second = http_client(&url, "two").await;
        let third = http_client(&url, "three").await;
        task_of(&first, "forever", json!({})).await;
        task_of(&second, "forever", json!({})).await;
        let answer = third.call_tool("forever", (), CallOptions::default()).await;
        if by_header {
            assert!(matches!(answer, Ok(CallResponse::Task(_))), "{answer:?}");
        } else {
            let error = answer.unwrap_err();
            let rpc = error.rpc_error().unwrap_or_else(|| panic!("{error}"));
            assert_eq!(
                rpc.data.as_ref().map(|data| &data["maxTasksPerCaller"]),
                Some(&json!(2))
            );
        }
    }
}

#[tokio::test]
async fn authenticated_callers_each_have_their_own_cap() {
    let tokens = BearerTokens::new()
        .with_token(ALICE, Some("alice"))
        .unwrap()
        .with_token(BOB, Some("bob"))
        .unwrap();
    let runtime = runtime_on(MemoryStore::new())
        .with_max_tasks_per_caller(Some(1))
        .build();
    let url = serve_http_with(RuntimeServer::new(runtime), |recipe| {
        recipe.with_bearer_tokens(Arc::new(tokens))
    })
    .await;
    let alice = http_client(&url, ALICE).await;
    let bob = http_client(&url, BOB).await;
    task_of(&alice, "forever", json!({})).await;
    assert!(
        alice
            .call_tool("forever", (), CallOptions::default())
            .await
            .is_err(),
        "alice is at her cap"
    );
    task_of(&bob, "forever", json!({})).await;
}
