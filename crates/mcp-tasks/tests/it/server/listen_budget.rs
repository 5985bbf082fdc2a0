//! The listen budget: streams never starve requests. A server full of
//! listen streams, from many callers, refuses the next one at once (503,
//! `Retry-After`, the JSON-RPC refusal) and still answers `tasks/get`,
//! creations and cancels; a wait refused a stream polls instead.

use std::time::Duration;

use mcp_tasks::server::TaskRuntime;
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{ListenMode, TaskStatus};
use rmcp::model::{ServerCapabilities, ServerConfig, SubscriptionFilter};
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use crate::support::counting::counted_client;
use crate::support::listening::{RawStream, TRANSPORTS, http_client, listen_request, listening};
use crate::support::runtime_server::{runtime_on, serve_http, serve_http_with};
use crate::support::{Handler, RuntimeServer, completed_text, task_of};

/// A guard against a hang, not a speed bound.
const WITHIN: Duration = Duration::from_secs(10);

const CALLERS: usize = 8;
const PER_CALLER: usize = 3;
const BUDGET: usize = CALLERS * PER_CALLER;

/// The bearer token of caller `name`.
fn token_of(name: &str) -> String {
    format!("{name}-token-0123456789abcdef")
}

/// `future`, or a failure naming `what` when it hangs.
async fn answered<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WITHIN, future)
        .await
        .unwrap_or_else(|_| panic!("{what} was not answered"))
}

#[tokio::test]
async fn a_full_listen_budget_refuses_the_next_stream_and_requests_are_answered() {
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_poll_interval(Duration::from_secs(600))
            .with_max_listen_streams(BUDGET)
            .with_max_listen_streams_per_caller(PER_CALLER)
            .build(),
    );
    // Callers with a token each (so each is a principal of its own, however
    // anonymous callers are counted); every stream holds a connection, and
    // a few more than the budget are left.
    let names: Vec<String> = (0..CALLERS)
        .map(|caller| format!("listener-{caller}"))
        .chain(["one-more".to_owned(), "late".to_owned()])
        .collect();
    let mut tokens = BearerTokens::new();
    for name in &names {
        tokens = tokens.with_token(&token_of(name), Some(name)).unwrap();
    }
    let url = serve_http_with(server.clone(), |recipe| {
        recipe
            .with_max_connections(BUDGET + 8)
            .with_bearer_tokens(tokens)
    })
    .await;

    // The flood: every caller (a header of its own) as many streams as it may.
    let mut streams = Vec::new();
    let mut tasks = Vec::new();
    for name in &names[..CALLERS] {
        let token = token_of(name);
        let client = http_client(&url, Some(&token), Handler::default()).await;
        let task = task_of(&client, "forever", json!({})).await;
        drop(client);
        let id = task.id.expose().to_owned();
        for n in 0..PER_CALLER {
            let mut stream =
                RawStream::open(&url, Some(&token), &listen_request(json!(n), &[&id], true)).await;
            assert_eq!(stream.status, 200, "stream {n} of {token}");
            let ack = stream.next_within(WITHIN).await.expect("acknowledged");
            assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]));
            streams.push(stream);
        }
        tasks.push((token, task));
    }
    assert_eq!(server.runtime.open_subscriptions(), BUDGET);

    // One more, from a caller with no stream yet: refused at once, clearly.
    let (token, task) = &tasks[0];
    let extra = RawStream::open(
        &url,
        Some(&token_of("one-more")),
        &listen_request(json!("extra"), &[task.id.expose()], true),
    )
    .await;
    assert_eq!(extra.status, 503);
    assert_eq!(extra.headers["retry-after"], "5");
    assert_eq!(extra.headers["content-type"], "application/json");
    let refusal = answered("the refusal's body", extra.json()).await;
    assert_eq!(refusal["id"], "extra");
    assert_eq!(refusal["error"]["code"], -32603);
    assert_eq!(
        refusal["error"]["data"],
        json!({"reason": "listenStreams", "retryAfterMs": 5000, "maxListenStreams": BUDGET})
    );
    assert_eq!(server.runtime.open_subscriptions(), BUDGET);

    // Meanwhile the reserve answers: a new caller connects and creates a
    // task, tasks/get is read, and a cancel goes through.
    let late = answered(
        "a new connection",
        http_client(&url, Some(&token_of("late")), Handler::default()),
    )
    .await;
    let created = answered("a creation", task_of(&late, "forever", json!({}))).await;
    let got = answered("tasks/get", late.get(&created.id)).await.unwrap();
    assert_eq!(got.status, TaskStatus::Working);
    let owner = http_client(&url, Some(token), Handler::default()).await;
    answered("tasks/get of a listened task", owner.get(&task.id))
        .await
        .unwrap();
    answered("a cancel", owner.cancel(&task.id)).await.unwrap();

    // The cancel reaches that caller's streams, which end and free their places.
    for stream in &mut streams[..PER_CALLER] {
        let mut heard = Value::Null;
        while heard["params"]["status"] != "cancelled" {
            heard = stream
                .next_within(WITHIN)
                .await
                .expect("the cancel is heard");
        }
    }
    answered("the ended streams' places", async {
        while server.runtime.open_subscriptions() > BUDGET - PER_CALLER {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let mut again = RawStream::open(
        &url,
        Some(&token_of("late")),
        &listen_request(json!("again"), &[created.id.expose()], true),
    )
    .await;
    assert_eq!(again.status, 200);
    let ack = again.next_within(WITHIN).await.expect("acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([created.id.expose()])
    );
}

/// A wait refused a stream for load polls to the end, even when it asks
/// to listen: over HTTP (a 503) and over stdio (the JSON-RPC refusal).
#[tokio::test]
async fn a_wait_refused_a_stream_polls_instead() {
    for transport in TRANSPORTS {
        // Polls every 20 ms; one stream in all, held by another caller.
        let server = RuntimeServer::new(
            runtime_on(MemoryStore::new())
                .with_max_listen_streams(1)
                .build(),
        );
        let url = serve_http(server.clone()).await;
        let filler = http_client(&url, Some("filler"), Handler::default()).await;
        let held = task_of(&filler, "forever", json!({})).await;
        let mut holding = RawStream::open(
            &url,
            Some("filler"),
            &listen_request(json!(1), &[held.id.expose()], true),
        )
        .await;
        holding.next_within(WITHIN).await.expect("acknowledged");

        for mode in [ListenMode::Auto, ListenMode::Required] {
            let (client, counts) = counted_client(&server, transport).await;
            let task = task_of(&client, "gated", json!({})).await;
            let waiting = {
                let client = client.clone();
                let task = task.clone();
                tokio::spawn(async move { client.await_task(&task, &listening(mode)).await })
            };
            // Refused, then polling: only then may the task go on.
            answered("the listen attempt and a poll after it", async {
                while counts.of("subscriptions/listen") == 0 || counts.of("tasks/get") == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            assert_eq!(server.runtime.open_subscriptions(), 1, "{transport:?}");
            server.open_gate();
            server.open_gate();
            let outcome = answered("the polling wait", waiting)
                .await
                .unwrap()
                .unwrap_or_else(|error| panic!("{transport:?} {mode:?}: {error}"));
            assert_eq!(completed_text(&outcome), "gated done");
            assert_eq!(
                counts.of("subscriptions/listen"),
                1,
                "{transport:?} {mode:?}: one attempt, then polls"
            );
        }
    }
}

/// A server whose rmcp side serves listens for tool list changes (as the
/// gateway does), holding each until its client goes.
#[derive(Clone)]
struct ToolListens {
    runtime: TaskRuntime,
}

impl ServerHandler for ToolListens {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        context.cancelled().await;
        Ok(())
    }

    mcp_tasks::delegate_task_methods!(runtime);
}

/// A listen rmcp serves (tool list changes) holds its connection as long
/// as a task listen: it takes a place in the same budget.
#[tokio::test]
async fn a_listen_without_task_ids_counts_against_the_budget() {
    let runtime = runtime_on(MemoryStore::new())
        .with_max_listen_streams(1)
        .build();
    let server = ToolListens {
        runtime: runtime.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(StreamableHttpServer::new(server, runtime.clone()).serve(listener));

    let mut tools = listen_request(json!("tools"), &[], true);
    tools["params"]["notifications"] = json!({"toolsListChanged": true});
    let mut held = RawStream::open(&url, None, &tools).await;
    assert_eq!(held.status, 200);
    held.next_within(WITHIN).await.expect("acknowledged");
    assert_eq!(runtime.open_subscriptions(), 1);

    let refused = RawStream::open(&url, None, &listen_request(json!(2), &["a-task"], true)).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json().await["error"]["data"]["maxListenStreams"], 1);
    drop(held);
    answered("the closed stream's place", async {
        while runtime.open_subscriptions() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}
