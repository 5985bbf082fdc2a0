//! One call, one run: a `tools/call` that may have reached the server is
//! sent again only to a server that declares it honours idempotency keys,
//! and such a server (ours) runs a call under one key once, synchronous
//! calls included; a synchronous call waits as long as its deadline, not a
//! per-request constant. Over real HTTP on 127.0.0.1 (through a proxy that
//! loses an answer, or a port that refuses connections for a while), and in
//! process under a paused clock for the long waits.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::client::{ConnectOptions, Endpoint, Stage};
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, TasksClient};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use crate::support::lossy_proxy::LossyProxy;
use crate::support::runtime_server::serve_http;
use crate::support::{Handler, RuntimeServer, args, completed_text, in_process};

/// A client of `url`, connected as a user's program connects.
async fn connect(url: &str) -> TasksClient<mcp_tasks::client::legacy::Handler> {
    TasksClient::connect(
        Endpoint::url(url),
        Handler::default(),
        ConnectOptions::default(),
    )
    .await
    .expect("connect")
}

/// `server` over HTTP behind a proxy that loses the first `tools/call`'s
/// answer, and a client connected through the proxy.
async fn behind_a_lossy_proxy(
    server: &RuntimeServer,
) -> (
    Arc<LossyProxy>,
    TasksClient<mcp_tasks::client::legacy::Handler>,
) {
    let url = serve_http(server.clone()).await;
    let upstream = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let (proxy, address) = LossyProxy::start(upstream.to_owned()).await;
    let client = connect(&format!("http://{address}/mcp")).await;
    (proxy, client)
}

fn text_of(response: &CallResponse) -> String {
    match response {
        CallResponse::Complete(result) => result
            .content
            .first()
            .and_then(|content| content.as_text())
            .map(|text| text.text.clone())
            .unwrap_or_default(),
        other => panic!("expected a result, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_server_declares_it_honours_keys_and_a_server_that_does_not_is_told_apart() {
    let ours = RuntimeServer::in_memory();
    let client = connect(&serve_http(ours.clone()).await).await;
    assert!(client.server_honours_idempotency());
    let other = RuntimeServer::in_memory().undeclared();
    let client = connect(&serve_http(other).await).await;
    assert!(!client.server_honours_idempotency());
}

/// The worst case, on a server that says nothing of keys: the
/// answer of a synchronous call with a side effect is lost; the client
/// does not send it again, and says the call may have run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_call_is_not_sent_again_to_a_server_that_does_not_honour_keys() {
    let server = RuntimeServer::in_memory().undeclared();
    let (proxy, client) = behind_a_lossy_proxy(&server).await;
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(30)));
    let error = client
        .call_and_await(
            "pay",
            args(json!({"amount": 5})),
            CallOptions::default(),
            &options,
        )
        .await
        .expect_err("the answer was lost");
    assert!(error.may_have_run(), "{error}");
    assert!(proxy.lost_one());
    assert_eq!(proxy.calls(), 1, "sent once");
    assert_eq!(server.payments(), 1, "run once");
    let message = error.to_string();
    assert!(
        message.contains("may have run") && message.contains("not sent again"),
        "{message}"
    );
    assert!(
        std::error::Error::source(&error).is_some(),
        "the transport failure is its source"
    );
}

/// The same loss on our server, which declares it honours keys: the call
/// is sent again, and the synchronous tool's first answer comes back
/// without a second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_synchronous_call_is_sent_again_to_our_server_and_runs_once() {
    let server = RuntimeServer::in_memory();
    let (proxy, client) = behind_a_lossy_proxy(&server).await;
    let answer = client
        .call_tool("pay", args(json!({"amount": 7})), CallOptions::default())
        .await
        .expect("answered on the second send");
    assert_eq!(text_of(&answer), "paid 7");
    assert!(proxy.lost_one());
    assert_eq!(proxy.calls(), 2, "sent twice");
    assert_eq!(server.payments(), 1, "run once");
}

/// A `tools/call` of `pay` (a forbidden tool: it runs synchronously)
/// posted as is, under the idempotency key `key`.
async fn pay(url: &str, arguments: Value, key: &str) -> Value {
    crate::server::idempotent::call(
        url,
        crate::server::idempotent::ALICE,
        "pay",
        arguments,
        Some(json!(key)),
    )
    .await
}

/// On the server: a synchronous call sent again under its key, while the
/// first still runs and after it ended, gets the first run's answer; the
/// key with other arguments is -32602; another key runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronous_call_under_one_key_runs_once_and_its_answer_is_given_again() {
    let server = RuntimeServer::in_memory();
    let url = serve_http(server.clone()).await;
    let first = tokio::spawn({
        let url = url.clone();
        async move { pay(&url, json!({"amount": 3, "ms": 400}), "k-1").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Sent again while the first still runs: it waits for the first's answer.
    let again = pay(&url, json!({"ms": 400, "amount": 3}), "k-1").await;
    let first = first.await.expect("join");
    assert_eq!(first["result"]["content"][0]["text"], "paid 3", "{first}");
    assert_eq!(again["result"], first["result"], "the same answer");
    assert_eq!(server.payments(), 1);
    // And after it ended.
    let later = pay(&url, json!({"amount": 3, "ms": 400}), "k-1").await;
    assert_eq!(later["result"], first["result"]);
    assert_eq!(server.payments(), 1);
    let other = pay(&url, json!({"amount": 4, "ms": 1}), "k-1").await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    let fresh = pay(&url, json!({"amount": 3, "ms": 1}), "k-2").await;
    assert_eq!(fresh["result"]["content"][0]["text"], "paid 3");
    assert_eq!(server.payments(), 2, "another key is another call");
}

/// A port that refuses connections while `refusing` (its open connections
/// cut, its listener closed), and passes them to `upstream` otherwise: a
/// server that is down for a moment.
async fn flaky_port(upstream: String) -> (String, tokio::sync::watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (refusing, mut state) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut listener = Some(listener);
        let mut pipes = tokio::task::JoinSet::new();
        loop {
            let Some(open) = listener.take() else {
                if state.changed().await.is_err() {
                    return;
                }
                if !*state.borrow() {
                    listener = Some(TcpListener::bind(address).await.expect("bind again"));
                }
                continue;
            };
            tokio::select! {
                accepted = open.accept() => {
                    if let Ok((mut client, _)) = accepted {
                        let upstream = upstream.clone();
                        pipes.spawn(async move {
                            if let Ok(mut server) = TcpStream::connect(&upstream).await {
                                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            }
                        });
                    }
                    listener = Some(open);
                }
                changed = state.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if *state.borrow() {
                        // Down: every connection cut, the port closed.
                        pipes.abort_all();
                    } else {
                        listener = Some(open);
                    }
                }
            }
        }
    });
    (format!("http://{address}/mcp"), refusing)
}

/// A call that provably never left (the connection was refused) is sent
/// again, to any server: nothing can have run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_connection_was_refused_is_sent_again_to_any_server() {
    let server = RuntimeServer::in_memory().undeclared();
    let url = serve_http(server.clone()).await;
    let upstream = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let (flaky, refusing) = flaky_port(upstream.to_owned()).await;
    // No kept-alive connection: a request on one the port cut a moment
    // before may have left (what this test is not about); each request here
    // opens its own connection, refused while the port is down.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("an HTTP client");
    let options = ConnectOptions::default().with_http_client(http);
    let client = TasksClient::connect(Endpoint::url(&flaky), Handler::default(), options)
        .await
        .expect("connect");
    assert!(!client.server_honours_idempotency());
    refusing.send(true).expect("the port closes");
    // Closed before the call: a connection the kernel queued while the
    // proxy had not dropped its listener yet would be reset, not refused
    // (a send that may have left, which this test is not about).
    let port = flaky
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    while tokio::net::TcpStream::connect(&port).await.is_ok() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let _ = refusing.send(false);
        // Kept open until the test ends.
        std::future::pending::<()>().await;
    });
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)));
    let started = tokio::time::Instant::now();
    let outcome = client
        .call_and_await(
            "pay",
            args(json!({"amount": 9})),
            CallOptions::default(),
            &options,
        )
        .await
        .expect("sent again once the port opened");
    assert_eq!(completed_text(&outcome), "paid 9");
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(server.payments(), 1);
}

/// A synchronous tool of 70 s under a deadline of 240 s: one run, its
/// result, at 70 s (a per-request timeout of 60 s used to cut it and send
/// it again, four times). Under the default deadline (60 s) the call ends
/// at 60 s saying no task was made; `call_tool` alone waits for the tool.
#[tokio::test(start_paused = true)]
async fn a_synchronous_call_waits_for_its_deadline_not_a_per_request_constant() {
    let server = RuntimeServer::in_memory();
    let client = in_process(server.clone()).await;
    let seventy = || args(json!({"amount": 1, "ms": 70_000}));
    let started = tokio::time::Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(240)));
    let outcome = client
        .call_and_await("pay", seventy(), CallOptions::default(), &options)
        .await
        .expect("the tool's result");
    assert_eq!(completed_text(&outcome), "paid 1");
    assert_eq!(started.elapsed(), Duration::from_secs(70));
    assert_eq!(server.payments(), 1);

    let started = tokio::time::Instant::now();
    let error = client
        .call_and_await(
            "pay",
            seventy(),
            CallOptions::default(),
            &AwaitOptions::default(),
        )
        .await
        .expect_err("past the default deadline");
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert!(error.is_timeout() && error.task_id().is_none(), "{error}");
    assert_eq!(error.timeout_stage(), Some(&Stage::Call { round: 1 }));
    assert!(error.to_string().contains("no task was made"), "{error}");
    assert_eq!(server.payments(), 2, "sent once, not again");

    let started = tokio::time::Instant::now();
    let answer = client
        .call_tool("pay", seventy(), CallOptions::default())
        .await
        .expect("call_tool waits for the tool");
    assert_eq!(text_of(&answer), "paid 1");
    assert_eq!(started.elapsed(), Duration::from_secs(70));
    assert_eq!(server.payments(), 3);
}
