//! `TasksClient::connect`: one call to a connected client that listens,
//! against our runtime over Streamable HTTP on 127.0.0.1 (with a bearer
//! token), rmcp's own task server as a real child process, and a client
//! built by hand, which polls and says so once.
//! (`mcp-tasks serve --stdio` as a child, listening, is in the CLI's tests;
//! a 2025-11-25 server through `connect` is in `legacy_http.rs`.)

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use mcp_tasks::client::bearer::{BearerError, BearerSource};
use mcp_tasks::client::journal::{Journal, MemoryJournal, ServerRef};
use mcp_tasks::server::auth::BearerTokens;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    AwaitOptions, CallOptions, ConnectOptions, Endpoint, Era, Error, ErrorKind, ListenMode,
    TasksClient,
};
use serde::Serialize;
use serde_json::json;

use crate::client::transports::server_binary;
use crate::support::runtime_server::{runtime_on, serve_http, serve_http_with};
use crate::support::{Handler, RuntimeServer, completed_text, in_process};

/// A server that suggests polling every 10 minutes: a wait that polls
/// would end at its deadline, one that listens ends with the task.
fn patient_server() -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_poll_interval(Duration::from_secs(600))
            .build(),
    )
}

/// Waits that allow the server's 10 minutes and end after 20 s.
fn patient_wait() -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_interval_bounds(Duration::from_millis(10), Duration::from_secs(600))
}

/// The arguments of the `slow` tool, as a struct.
#[derive(Serialize)]
struct Slow {
    ms: u64,
}

const TOKEN: &str = "connect-test-token-0123456789";

#[tokio::test]
async fn over_http_a_connected_client_listens_with_its_headers() {
    let server = patient_server();
    let tokens = BearerTokens::new()
        .with_token(TOKEN, Some("tester"))
        .unwrap();
    let url = serve_http_with(server.clone(), |recipe| recipe.with_bearer_tokens(tokens)).await;
    let journal = Arc::new(MemoryJournal::new());
    let endpoint = Endpoint::url(&url)
        .with_header("Authorization", format!("Bearer {TOKEN}"))
        .expect("a URL takes headers");
    let client = TasksClient::connect(
        endpoint,
        Handler::default(),
        ConnectOptions::default().with_journal(journal.clone()),
    )
    .await
    .expect("connect over HTTP");
    assert!(client.can_listen());
    assert_eq!(client.era(), Era::Extension);
    assert!(client.server_supports());
    assert!(
        client.running().service().inner::<Handler>().is_some(),
        "the caller's handler, wrapped"
    );

    // The task's end is heard (a poll would come 10 minutes late), with
    // the token on the listen stream too; arguments from a struct.
    let outcome = client
        .call_and_await(
            "slow",
            Slow { ms: 200 },
            CallOptions::default(),
            &patient_wait().with_listen(ListenMode::Required),
        )
        .await
        .expect("heard the task finish");
    assert_eq!(completed_text(&outcome), "slept 200 ms");

    // Arguments from json!, listening as it can (the default).
    let outcome = client
        .call_and_await(
            "slow",
            json!({"ms": 100}),
            CallOptions::default(),
            &patient_wait(),
        )
        .await
        .expect("heard the task finish");
    assert_eq!(completed_text(&outcome), "slept 100 ms");

    // The journal names the endpoint, without its headers.
    let entries = journal.list().await.unwrap();
    assert_eq!(entries.len(), 2);
    assert!(
        entries
            .iter()
            .all(|entry| entry.server == ServerRef::Url(url.clone()))
    );
    assert!(entries.iter().all(|entry| entry.is_finished()));
    client.close().await;
}

#[tokio::test]
async fn without_the_token_the_lifecycle_fails() {
    let tokens = BearerTokens::new().with_token(TOKEN, None).unwrap();
    let url = serve_http_with(patient_server(), |recipe| recipe.with_bearer_tokens(tokens)).await;
    let error = TasksClient::connect(Endpoint::url(url), (), ConnectOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Lifecycle { .. }), "{error}");
    assert_eq!(error.kind(), ErrorKind::Connect);
}

/// A bearer source that hands out `stale` until the server refuses it,
/// then the good token; counts how often it is asked.
#[derive(Debug, Default)]
struct Renewing {
    renewed: std::sync::atomic::AtomicBool,
    asked: std::sync::atomic::AtomicUsize,
    refused: Mutex<Vec<Option<String>>>,
}

impl BearerSource for Renewing {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, BearerError>> {
        use std::sync::atomic::Ordering;
        self.asked.fetch_add(1, Ordering::SeqCst);
        let token = match self.renewed.load(Ordering::SeqCst) {
            true => TOKEN,
            false => "stale-token-0123456789",
        };
        Box::pin(async move { Ok(Some(token.to_owned())) })
    }

    fn rejected<'a>(
        &'a self,
        sent: Option<&'a str>,
        _challenge: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, BearerError>> {
        self.refused.lock().unwrap().push(sent.map(str::to_owned));
        self.renewed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(Some(TOKEN.to_owned())) })
    }
}

#[tokio::test]
async fn over_http_a_bearer_source_gives_every_request_its_token_listen_streams_too() {
    let tokens = BearerTokens::new()
        .with_token(TOKEN, Some("tester"))
        .unwrap();
    let url = serve_http_with(patient_server(), |recipe| recipe.with_bearer_tokens(tokens)).await;
    let source = Arc::new(Renewing::default());
    // No header: every token comes from the source.
    let client = TasksClient::connect(
        Endpoint::url(&url),
        Handler::default(),
        ConnectOptions::default().with_bearer_source(source.clone()),
    )
    .await
    .expect("connected once the source renewed its token");
    assert_eq!(
        *source.refused.lock().unwrap(),
        [Some("stale-token-0123456789".to_owned())],
        "refused once, then sent again with the renewed token"
    );
    // Listening is required: a listen stream without the token would be
    // refused, and a poll comes 10 minutes late.
    let asked = source.asked.load(std::sync::atomic::Ordering::SeqCst);
    let outcome = client
        .call_and_await(
            "slow",
            Slow { ms: 300 },
            CallOptions::default(),
            &patient_wait().with_listen(ListenMode::Required),
        )
        .await
        .expect("heard the task finish on a listen stream");
    assert_eq!(completed_text(&outcome), "slept 300 ms");
    let asked = source.asked.load(std::sync::atomic::Ordering::SeqCst) - asked;
    assert!(
        asked >= 2,
        "asked for each request (the call, the stream): {asked}"
    );
    client.close().await;
}

#[tokio::test]
async fn a_child_process_is_reached_as_a_program_or_a_command_line() {
    let program = server_binary().display().to_string();
    let endpoints = [
        Endpoint::command(program.clone(), ["stdio"]),
        Endpoint::shell(format!("'{program}' stdio")),
    ];
    for endpoint in endpoints {
        let client = TasksClient::connect(endpoint.clone(), (), ConnectOptions::default())
            .await
            .unwrap_or_else(|error| panic!("{endpoint:?}: {error}"));
        assert!(client.can_listen(), "{endpoint:?}");
        // rmcp's task server refuses subscriptions/listen: the wait polls.
        let outcome = client
            .call_and_await(
                "slow",
                json!({"ms": 50}),
                CallOptions::default(),
                &AwaitOptions::default().with_deadline(Some(Duration::from_secs(20))),
            )
            .await
            .unwrap_or_else(|error| panic!("{endpoint:?}: {error}"));
        assert_eq!(completed_text(&outcome), "slept 50 ms", "{endpoint:?}");
        client.close().await;
    }
}

#[tokio::test]
async fn connecting_fails_with_errors_that_say_where() {
    let missing = TasksClient::connect(
        Endpoint::command("/nonexistent/mcp-server", [] as [&str; 0]),
        (),
        ConnectOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&missing, Error::Spawn { program, .. } if program == "/nonexistent/mcp-server"),
        "{missing}"
    );
    assert_eq!(missing.kind(), ErrorKind::Connect);

    let exits = TasksClient::connect(Endpoint::shell("true"), (), ConnectOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(exits, Error::Lifecycle { .. }), "{exits}");

    let silent = TasksClient::connect(
        Endpoint::command("sleep", ["30"]),
        (),
        ConnectOptions::default().with_timeout(Some(Duration::from_millis(300))),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(silent, Error::ConnectTimeout(timeout) if timeout == Duration::from_millis(300)),
        "{silent}"
    );

    let bad_header = TasksClient::connect(
        Endpoint::url("http://127.0.0.1:9/mcp")
            .with_header("Bad Name", "x")
            .expect("checked when sent"),
        (),
        ConnectOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&bad_header, Error::InvalidHeader { name } if name == "Bad Name"),
        "{bad_header}"
    );
}

/// Log lines, as the fmt subscriber writes them.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// The lines logged by this crate.
    fn ours(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|line| line.contains("mcp_tasks"))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test]
async fn a_client_built_by_hand_polls_and_says_so_once() {
    let lines = Lines::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer({
            let lines = lines.clone();
            move || lines.clone()
        })
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    let client = in_process(RuntimeServer::in_memory()).await;
    assert!(!client.can_listen(), "no listen channel");
    let ids = Arc::new(Mutex::new(Vec::new()));
    let options = AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_observer({
            let ids = ids.clone();
            move |state| ids.lock().unwrap().push(state.id.expose().to_owned())
        });
    for _ in 0..2 {
        let outcome = client
            .clone()
            .call_and_await("slow", json!({"ms": 30}), CallOptions::default(), &options)
            .await
            .unwrap();
        assert_eq!(completed_text(&outcome), "slept 30 ms");
    }
    let ours = lines.ours();
    let said: Vec<&String> = ours
        .iter()
        .filter(|line| line.contains("no listen channel"))
        .collect();
    assert_eq!(said.len(), 1, "once per client, clones included: {ours:#?}");
    assert!(said[0].contains("INFO"), "{}", said[0]);
    let ids = ids.lock().unwrap().clone();
    assert!(!ids.is_empty());
    for id in &ids {
        assert!(
            ours.iter().all(|line| !line.contains(id.as_str())),
            "a task id in the log: {ours:#?}"
        );
    }

    // Another client says it again, once.
    let other = in_process(RuntimeServer::in_memory()).await;
    other
        .call_and_await(
            "slow",
            json!({"ms": 1}),
            CallOptions::default(),
            &AwaitOptions::default(),
        )
        .await
        .unwrap();
    let said = lines
        .ours()
        .iter()
        .filter(|line| line.contains("no listen channel"))
        .count();
    assert_eq!(said, 2);
}

#[tokio::test]
async fn a_wait_that_must_listen_fails_on_a_client_without_a_channel() {
    // Built by hand over HTTP, without a listen channel.
    let url = serve_http(RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_poll_interval(Duration::from_millis(20))
            .build(),
    ))
    .await;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
    let running = rmcp::service::serve_client_with_lifecycle(
        Handler::default(),
        transport,
        crate::support::lifecycle(),
    )
    .await
    .unwrap();
    let client = TasksClient::new(running);
    assert!(!client.can_listen());
    let error = client
        .call_and_await(
            "slow",
            json!({"ms": 10}),
            CallOptions::default(),
            &AwaitOptions::default().with_listen(ListenMode::Required),
        )
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Usage, "{error}");
}
