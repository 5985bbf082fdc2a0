//! Task ids never reach a program's log, whatever it logs: a program that
//! embeds the client, the server runtime (over a pipe and over the
//! Streamable HTTP recipe) and the gateway, with a subscriber that records
//! every event and span of every target at `trace`, runs tasks end to end
//! (created, polled and listened to, answered, cancelled) and its log holds
//! none of their ids (see `mcp_tasks::quiet`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::client::legacy;
use mcp_tasks::gateway::{Gateway, GatewayOptions, Upstream};
use mcp_tasks::server::http::StreamableHttpServer;
use mcp_tasks::server::{StdioTransport, TaskRuntime};
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{
    CallOptions, CallResponse, ConnectOptions, Endpoint, ListenMode, TaskOutcome, TaskState,
    TaskStatus, TasksClient, quiet,
};
use mcp_tasks_conformance::FixtureServer;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, Implementation, InputResponses,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::json;
use tracing::dispatcher::{self, Dispatch};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{Interest, Subscriber};
use tracing::{Event, Metadata};

use crate::support::{args, waiting};

/// A program's subscriber that writes down every event (its target, level
/// and every field) and every span (its name and every value recorded).
#[derive(Clone, Default)]
struct Capture {
    text: Arc<Mutex<String>>,
    next: Arc<AtomicU64>,
}

impl Capture {
    fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    fn write(&self, line: &str) {
        let mut text = self.text.lock().unwrap();
        text.push_str(line);
        text.push('\n');
    }
}

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut line = Line(format!("span {}", span.metadata().name()));
        span.record(&mut line);
        self.write(&line.0);
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, values: &Record<'_>) {
        let mut line = Line("record".to_owned());
        values.record(&mut line);
        self.write(&line.0);
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let mut line = Line(format!("{} {}", metadata.target(), metadata.level()));
        event.record(&mut line);
        self.write(&line.0);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// A client that declares form elicitation; input is answered with
/// `tasks/update`.
#[derive(Debug, Clone, Default)]
struct Forms;

impl ClientHandler for Forms {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        ClientConfig::new(capabilities, Implementation::new("logs-test", "0"))
    }
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

fn fixture() -> (FixtureServer, TaskRuntime) {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(20))
        .build();
    let server = FixtureServer::new(runtime.clone()).expect("a random key");
    (server, runtime)
}

/// A client over Streamable HTTP, made by `TasksClient::connect` (which
/// starts it in the quiet scope itself: the test does not), that listens.
async fn http_client<H: ClientHandler>(handler: H, url: &str) -> TasksClient<legacy::Handler> {
    let options = ConnectOptions::default().with_lifecycle(lifecycle());
    let client = TasksClient::connect(Endpoint::url(url), handler, options)
        .await
        .expect("connect over HTTP");
    assert!(client.can_listen());
    client
}

async fn task<H: ClientHandler>(
    client: &TasksClient<H>,
    tool: &str,
    arguments: serde_json::Value,
) -> TaskState {
    match client
        .call_tool(tool, args(arguments), CallOptions::default())
        .await
        .expect("tools/call")
    {
        CallResponse::Task(state) => state,
        other => panic!("{tool} should be a task: {other:?}"),
    }
}

/// A 2025-11-25 client over Streamable HTTP (a session of the recipe's),
/// made by `TasksClient::connect`.
async fn legacy_http_client(url: &str) -> TasksClient<legacy::Handler> {
    let options = ConnectOptions::default().with_lifecycle(ClientLifecycleMode::Initialize);
    TasksClient::connect(Endpoint::url(url), Forms, options)
        .await
        .expect("open a session over HTTP")
}

/// A task end to end: one that asks for input (awaited with `listen`, by
/// polling where there is no stream), answered and awaited to its end; one
/// read with `tasks/get`, then cancelled. The ids of both.
async fn end_to_end<H: ClientHandler>(client: &TasksClient<H>, listen: ListenMode) -> Vec<String> {
    let options = waiting().with_listen(listen);
    let asking = task(client, "confirm_delete", json!({"filename": "notes.txt"})).await;
    let TaskOutcome::InputRequired { state: asked, .. } =
        client.await_task(&asking, &options).await.unwrap()
    else {
        panic!("expected input_required");
    };
    let key = asked
        .input_requests
        .keys()
        .next()
        .expect("one request")
        .clone();
    let mut answer = InputResponses::new();
    answer.insert(
        key,
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    client.update(&asked.id, answer).await.unwrap();
    let outcome = client.await_task(&asked.id, &options).await.unwrap();
    assert!(
        matches!(outcome, TaskOutcome::Completed(_)),
        "expected completed, got {outcome:?}"
    );

    let slow = task(client, "slow_compute", json!({"seconds": 30})).await;
    assert_eq!(
        client.get(&slow.id).await.unwrap().status,
        TaskStatus::Working
    );
    client.cancel_and_wait(&slow.id, &options).await.unwrap();
    vec![asking.id.expose().to_owned(), slow.id.expose().to_owned()]
}

/// The runtime behind `StdioTransport` on an in-process pipe, and a client
/// on the other end, both started in the quiet scope.
async fn over_a_pipe() -> Vec<String> {
    let (server, runtime) = fixture();
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let transport = StdioTransport::new(&runtime, read, write);
    tokio::spawn(async move {
        if let Ok(running) = quiet::scope(server.serve(transport)).await {
            let _ = running.waiting().await;
        }
    });
    let running = quiet::scope(serve_client_with_lifecycle(Forms, client_io, lifecycle()))
        .await
        .expect("connect over the pipe");
    end_to_end(&TasksClient::new(running), ListenMode::Auto).await
}

/// The runtime behind the Streamable HTTP recipe: its URL.
async fn serve_over_http() -> String {
    let (server, runtime) = fixture();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(StreamableHttpServer::new(server, runtime).serve(listener));
    url
}

/// The gateway in front of `upstream` (which makes tasks of its own),
/// behind the HTTP recipe: its URL.
async fn serve_gateway(upstream: &str) -> String {
    let runtime = TaskRuntime::builder(MemoryStore::new())
        .with_poll_interval(Duration::from_millis(20))
        .build();
    let gateway = Gateway::start(
        Upstream::url(upstream),
        runtime.clone(),
        GatewayOptions::default(),
    )
    .await
    .expect("the gateway starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(StreamableHttpServer::new(gateway, runtime).serve(listener));
    url
}

/// Runs `program` on a multi-thread runtime whose every thread has
/// `capture` as its default subscriber, as a program's global one would be.
fn with_capture<T>(capture: &Capture, program: impl Future<Output = T>) -> T {
    let dispatch = Dispatch::new(capture.clone());
    let on_threads = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(dispatcher::set_default(&on_threads)))
        .build()
        .unwrap();
    dispatcher::with_default(&dispatch, || runtime.block_on(program))
}

/// Every run of exactly 44 hex digits (the shape of the runtime's task ids)
/// in `text`.
fn id_shaped(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|word| word.len() == 44)
        .collect()
}

#[test]
fn task_ids_never_reach_a_programs_log_at_trace() {
    let capture = Capture::default();
    let (ids, control) = with_capture(&capture, async {
        let mut ids = over_a_pipe().await;
        let server = serve_over_http().await;
        let client = http_client(Forms, &server).await;
        ids.extend(end_to_end(&client, ListenMode::Required).await);
        let client = legacy_http_client(&server).await;
        ids.extend(end_to_end(&client, ListenMode::Auto).await);
        // The gateway in front of that server: its tasks, and those it
        // makes upstream (ids this test never sees, found by their shape).
        let gateway = serve_gateway(&server).await;
        let client = http_client((), &gateway).await;
        ids.extend(end_to_end(&client, ListenMode::Auto).await);

        // The control: a client that starts rmcp outside the scope logs
        // what rmcp logs, its task's id with it.
        let config = StreamableHttpClientTransportConfig::with_uri(server.clone());
        let transport = StreamableHttpClientTransport::from_config(config);
        let running = serve_client_with_lifecycle((), transport, lifecycle())
            .await
            .expect("connect outside the scope");
        let control = TasksClient::new(running);
        let state = task(&control, "slow_compute", json!({"seconds": 30})).await;
        control.cancel(&state.id).await.unwrap();
        (ids, state.id.expose().to_owned())
    });
    let text = capture.text();
    assert_eq!(ids.len(), 8, "{ids:?}");
    // The log is there, rmcp's part of it included: the test proves something.
    assert!(text.lines().count() > 100, "{text}");
    assert!(text.contains("span serve_inner"), "{text}");
    assert!(
        text.contains(&control),
        "the control's id is not in the log"
    );
    for id in &ids {
        assert!(!text.contains(id.as_str()), "task id {id} in the log");
    }
    let leaked: Vec<&str> = id_shaped(&text)
        .into_iter()
        .filter(|id| *id != control)
        .collect();
    assert!(leaked.is_empty(), "task ids in the log: {leaked:?}");
}
