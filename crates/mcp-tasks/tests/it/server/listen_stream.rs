//! What our server sends on a listen stream over Streamable HTTP, read
//! raw: the wire shapes against the schemas, the refusals, callers kept
//! apart, the per-caller bound, and streams that close.

use std::time::Duration;

use mcp_tasks::store::MemoryStore;
use mcp_tasks::{ListenMode, TasksClient};
use serde_json::{Value, json};

use crate::support::listening::{
    RawStream, http_client, listen_request, listening, patient_server, until_closed,
};
use crate::support::runtime_server::{runtime_on, serve_http, serve_http_with};
use crate::support::schema::check_def;
use crate::support::{Handler, RuntimeServer, task_of};

const WITHIN: Duration = Duration::from_secs(10);

/// The `tasks/get` result for `id`, read raw, without `resultType`.
async fn got(url: &str, token: Option<&str>, id: &str) -> Value {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tasks/get")
        .header("mcp-name", id)
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": id,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}})
            .to_string(),
        );
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    let mut result = answer["result"].clone();
    result.as_object_mut().unwrap().remove("resultType");
    result
}

fn without_meta(mut params: Value) -> Value {
    params.as_object_mut().unwrap().remove("_meta");
    params
}

#[tokio::test]
async fn the_stream_has_the_shapes_of_the_schemas() {
    let server = patient_server();
    let url = serve_http(server.clone()).await;
    let client = http_client(&url, None, Handler::default()).await;
    let task = task_of(&client, "gated", json!({})).await;
    let id = task.id.expose();

    let mut stream = RawStream::open(&url, None, &listen_request(json!("l-1"), &[id], true)).await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.headers["content-type"], "text/event-stream");
    assert_eq!(stream.headers["x-accel-buffering"], "no");

    let ack = stream
        .next_within(WITHIN)
        .await
        .expect("the acknowledgement");
    check_def("SubscriptionsAcknowledgedNotification", &ack).unwrap();
    check_def(
        "TaskSubscriptionAcknowledgedNotifications",
        &ack["params"]["notifications"],
    )
    .unwrap();
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l-1"
    );
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));

    // Each step of the tool, as tasks/get shows it at that moment.
    let mut last = Value::Null;
    for expected in ["step 2", "completed"] {
        // The tool may still be between "step 1" and its first gate.
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.open_gate();
        loop {
            let message = stream.next_within(WITHIN).await.expect("a notification");
            check_def("TaskStatusNotification", &message).unwrap();
            let params = &message["params"];
            assert_eq!(
                params["_meta"]["io.modelcontextprotocol/subscriptionId"],
                "l-1"
            );
            assert!(params.get("resultType").is_none());
            let reached = params["statusMessage"] == expected || params["status"] == expected;
            last = params.clone();
            if reached {
                break;
            }
        }
        if expected == "step 2" {
            // Held at the second gate: the notification is tasks/get's answer.
            assert_eq!(without_meta(last.clone()), got(&url, None, id).await);
        }
    }
    assert_eq!(last["status"], "completed");
    assert_eq!(last["result"]["content"][0]["text"], "gated done");

    // The last task finished: the stream ends with the listen result.
    let end = stream.next_within(WITHIN).await.expect("the listen result");
    check_def("SubscriptionsListenResultResponse", &end).unwrap();
    assert_eq!(end["id"], "l-1");
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "l-1"
    );
    assert!(stream.next_within(WITHIN).await.is_none(), "and closes");
    until_closed(&server).await;
}

#[tokio::test]
async fn listening_needs_the_extension_and_well_formed_ids() {
    let server = patient_server();
    let url = serve_http(server.clone()).await;
    let refused = RawStream::open(&url, None, &listen_request(json!(5), &["a"], false)).await;
    assert_eq!(refused.status, 400);
    let answer = refused.json().await;
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["error"]["code"], -32021);
    assert!(
        answer["error"]["data"]["requiredCapabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some()
    );
    let mut malformed = listen_request(json!(6), &[], true);
    malformed["params"]["notifications"]["taskIds"] = json!([1, 2]);
    let answer = RawStream::open(&url, None, &malformed).await.json().await;
    assert_eq!(answer["error"]["code"], -32602);
    assert_eq!(server.runtime.open_subscriptions(), 0);
}

#[tokio::test]
async fn another_callers_task_is_left_out_like_an_unknown_one() {
    let server = patient_server();
    let url = serve_http(server.clone()).await;
    let alice = http_client(&url, Some("alice"), Handler::default()).await;
    let task = task_of(&alice, "gated", json!({})).await;
    let id = task.id.expose();

    let mut bobs = RawStream::open(
        &url,
        Some("bob"),
        &listen_request(json!(1), &[id, "no-such-task"], true),
    )
    .await;
    let ack = bobs.next_within(WITHIN).await.unwrap();
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": []}));
    let end = bobs
        .next_within(WITHIN)
        .await
        .expect("nothing to report: the end");
    assert_eq!(end["id"], 1);
    assert!(end.get("result").is_some());

    let mut alices = RawStream::open(
        &url,
        Some("alice"),
        &listen_request(json!(2), &["no-such-task", id], true),
    )
    .await;
    let ack = alices.next_within(WITHIN).await.unwrap();
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}));
    drop(alices);

    // Bob's client insisting on listening to Alice's task learns nothing.
    let bob = http_client(&url, Some("bob"), Handler::default()).await;
    let error = bob
        .await_task(&task, &listening(ListenMode::Required))
        .await
        .unwrap_err();
    assert!(matches!(error, mcp_tasks::Error::ListenDeclined), "{error}");
    server.open_gate();
    server.open_gate();
    alice
        .await_task(&task, &listening(ListenMode::Required))
        .await
        .unwrap();
}

#[tokio::test]
async fn each_caller_has_a_bound_on_open_streams() {
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_poll_interval(Duration::from_secs(600))
            .with_max_listen_streams_per_caller(2)
            .build(),
    );
    // Callers with tokens: principals of their own, however anonymous
    // callers are counted.
    let (carol, dave) = (
        "carol-token-0123456789abcdef",
        "dave-token-0123456789abcdef",
    );
    let tokens = mcp_tasks::server::auth::BearerTokens::new()
        .with_token(carol, Some(carol))
        .unwrap()
        .with_token(dave, Some(dave))
        .unwrap();
    let url = serve_http_with(server.clone(), |recipe| recipe.with_bearer_tokens(tokens)).await;
    let client = http_client(&url, Some(carol), Handler::default()).await;
    let task = task_of(&client, "gated", json!({})).await;
    let id = task.id.expose();
    let listen = |n: u64| listen_request(json!(n), &[id], true);

    let mut first = RawStream::open(&url, Some(carol), &listen(1)).await;
    let mut second = RawStream::open(&url, Some(carol), &listen(2)).await;
    for stream in [&mut first, &mut second] {
        let ack = stream.next_within(WITHIN).await.unwrap();
        assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]));
    }
    assert_eq!(server.runtime.open_subscriptions(), 2);
    // The third is refused at once, before any acknowledgement.
    let third = RawStream::open(&url, Some(carol), &listen(3)).await;
    assert_eq!(third.status, 503);
    assert_eq!(third.headers["retry-after"], "5");
    let refusal = third.json().await;
    assert_eq!(refusal["id"], 3);
    assert_eq!(refusal["error"]["code"], -32603);
    assert_eq!(
        refusal["error"]["data"],
        json!({"reason": "listenStreams", "retryAfterMs": 5000, "maxListenStreamsPerCaller": 2})
    );
    assert_eq!(server.runtime.open_subscriptions(), 2);

    // Another caller is not affected; a closed stream frees its place.
    let mut dave = RawStream::open(&url, Some(dave), &listen(4)).await;
    assert_eq!(dave.status, 200);
    assert_eq!(
        dave.next_within(WITHIN).await.unwrap()["params"]["notifications"]["taskIds"],
        json!([])
    );
    drop(first);
    tokio::time::timeout(WITHIN, async {
        while server.runtime.open_subscriptions() > 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the closed stream is freed");
    let mut fourth = RawStream::open(&url, Some(carol), &listen(5)).await;
    let ack = fourth.next_within(WITHIN).await.unwrap();
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]));
}

#[tokio::test]
async fn closed_streams_leave_nothing_behind() {
    let server = patient_server();
    let url = serve_http(server.clone()).await;
    let client: TasksClient<Handler> = http_client(&url, None, Handler::default()).await;
    let task = task_of(&client, "gated", json!({})).await;
    let id = task.id.expose();
    let mut streams = Vec::new();
    for n in 0..50 {
        let mut stream = RawStream::open(&url, None, &listen_request(json!(n), &[id], true)).await;
        stream.next_within(WITHIN).await.expect("acknowledged");
        streams.push(stream);
    }
    assert_eq!(server.runtime.open_subscriptions(), 50);
    drop(streams);
    until_closed(&server).await;
    // The task goes on, and a new stream still hears it.
    let mut stream =
        RawStream::open(&url, None, &listen_request(json!("again"), &[id], true)).await;
    stream.next_within(WITHIN).await.expect("acknowledged");
    server.open_gate();
    let heard = stream.next_within(WITHIN).await.expect("step 2");
    assert_eq!(heard["params"]["statusMessage"], "step 2");
}
