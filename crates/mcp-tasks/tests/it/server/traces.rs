//! OpenTelemetry spans (feature `otel`), exported to the SDK's in-memory
//! exporter: a `traceparent` in a request's `params._meta` parents the
//! server's span on rmcp's path and on the fast paths, a task gets a span
//! named by its hash with an event per status, and the client writes its
//! span's context into the `_meta` of what it sends.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mcp_tasks::TaskId;
use mcp_tasks::client::CallOptions;
use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::text_map_propagator::FieldIter;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, TraceContextExt, TraceId, Tracer,
};
use opentelemetry::{Context, KeyValue, Value as OtelValue, global};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    InMemorySpanExporter, SamplingDecision, SamplingResult, SdkTracerProvider, ShouldSample,
    SpanData,
};
use serde_json::{Value, json};

use crate::support::listening::http_client;
use crate::support::runtime_server::serve_http;
use crate::support::{Handler, RuntimeServer};

/// The exporter every sampled span of this test process goes to (the
/// provider and the propagator are global, as an application installs
/// them). Only this file's traces are sampled, and only sampled contexts
/// are written into `_meta`, so the other tests of this binary send and
/// see exactly what they did without it.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_sampler(OnlyTheseTraces)
            .with_simple_exporter(exporter.clone())
            .build();
        global::set_tracer_provider(provider);
        global::set_text_map_propagator(SampledOnly(TraceContextPropagator::new()));
        exporter
    })
}

/// The name of this file's own root span.
const HOST: &str = "host work";

/// Samples a span whose parent is sampled (a `traceparent` this file sent
/// with the sampled flag, or its spans' children) and this file's root
/// span; drops every other.
#[derive(Debug, Clone)]
struct OnlyTheseTraces;

impl ShouldSample for OnlyTheseTraces {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        _trace: TraceId,
        name: &str,
        _kind: &SpanKind,
        _attributes: &[KeyValue],
        _links: &[Link],
    ) -> SamplingResult {
        let parent = parent.map(|parent| parent.span().span_context().clone());
        let sampled = name == HOST || parent.as_ref().is_some_and(SpanContext::is_sampled);
        SamplingResult {
            decision: if sampled {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: parent
                .map(|parent| parent.trace_state().clone())
                .unwrap_or_default(),
        }
    }
}

/// The W3C propagator, writing sampled contexts only.
#[derive(Debug)]
struct SampledOnly(TraceContextPropagator);

impl TextMapPropagator for SampledOnly {
    fn inject_context(&self, context: &Context, injector: &mut dyn Injector) {
        if context.span().span_context().is_sampled() {
            self.0.inject_context(context, injector);
        }
    }

    fn extract_with_context(&self, context: &Context, extractor: &dyn Extractor) -> Context {
        self.0.extract_with_context(context, extractor)
    }

    fn fields(&self) -> FieldIter<'_> {
        self.0.fields()
    }
}

/// The finished spans of trace `trace` (hex), once `done` holds for them.
async fn spans_of(trace: &str, done: impl Fn(&[SpanData]) -> bool) -> Vec<SpanData> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let spans: Vec<SpanData> = exporter()
            .get_finished_spans()
            .expect("the exporter")
            .into_iter()
            .filter(|span| span.span_context.trace_id().to_string() == trace)
            .collect();
        if done(&spans) {
            return spans;
        }
        assert!(Instant::now() < deadline, "spans of {trace}: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str, kind: &SpanKind) -> &'a SpanData {
    spans
        .iter()
        .find(|span| span.name == name && span.span_kind == *kind)
        .unwrap_or_else(|| panic!("no {kind:?} span {name}: {spans:#?}"))
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| match &kv.value {
            OtelValue::String(text) => text.to_string(),
            other => other.to_string(),
        })
}

const HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", "2026-07-28"),
];

/// Posts a 2026-07-28 request of `method` with `params`, its `_meta`
/// carrying `traceparent`; returns the answer.
async fn post(url: &str, method: &str, name: &str, params: Value, traceparent: &str) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "traceparent": traceparent,
        "tracestate": "congo=t61rcWkgMzE",
    });
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let mut request = reqwest::Client::new()
        .post(url)
        .header("Mcp-Method", method)
        .header("Mcp-Name", name)
        .body(body.to_string());
    for (header, value) in HEADERS {
        request = request.header(header, value);
    }
    let answer = request.send().await.expect("an answer");
    serde_json::from_slice(&answer.bytes().await.expect("a body")).expect("JSON")
}

#[tokio::test]
async fn a_traceparent_in_meta_parents_the_server_spans_and_the_task_span() {
    exporter();
    let server = RuntimeServer::in_memory();
    let runtime = server.runtime.clone();
    let url = serve_http(server).await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = |span: &str| format!("00-{trace}-{span}-01");

    // tools/call (rmcp's handler, through the recipe's fast path), then
    // tasks/get and tasks/cancel (answered without rmcp), each with a parent.
    let created = post(
        &url,
        "tools/call",
        "forever",
        json!({"name": "forever", "arguments": {}}),
        &parent("00f067aa0ba902b7"),
    )
    .await;
    let id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let polled = post(
        &url,
        "tasks/get",
        &id,
        json!({"taskId": id}),
        &parent("00f067aa0ba902b8"),
    )
    .await;
    assert_eq!(polled["result"]["status"], "working", "{polled}");
    post(
        &url,
        "tasks/cancel",
        &id,
        json!({"taskId": id}),
        &parent("00f067aa0ba902b9"),
    )
    .await;
    let unknown = post(
        &url,
        "tasks/get",
        "nope",
        json!({"taskId": "nope"}),
        &parent("00f067aa0ba902ba"),
    )
    .await;
    let code = unknown["error"]["code"].as_i64().expect("an error");
    // A request no fast path takes: rmcp's service answers, in the span the
    // recipe's front made.
    let listed = post(
        &url,
        "tools/list",
        "",
        json!({}),
        &parent("00f067aa0ba902bb"),
    )
    .await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");

    let spans = spans_of(trace, |spans| {
        spans.iter().any(|span| span.name == "task forever") && spans.len() >= 6
    })
    .await;
    let call = named(&spans, "tools/call forever", &SpanKind::Server);
    assert_eq!(call.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(
        attribute(call, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        attribute(call, "gen_ai.tool.name").as_deref(),
        Some("forever")
    );
    assert_eq!(
        attribute(call, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attribute(call, "jsonrpc.request.id").as_deref(), Some("9"));
    assert_eq!(attribute(call, "network.transport").as_deref(), Some("tcp"));
    assert_eq!(
        attribute(call, "mcp.protocol.version").as_deref(),
        Some("2026-07-28")
    );
    // The tracestate came along with the parent.
    assert_eq!(
        call.span_context.trace_state().get("congo"),
        Some("t61rcWkgMzE")
    );
    let gets: Vec<_> = spans
        .iter()
        .filter(|span| span.name == "tasks/get" && span.span_kind == SpanKind::Server)
        .collect();
    assert!(
        gets.iter()
            .any(|span| span.parent_span_id.to_string() == "00f067aa0ba902b8"
                && attribute(span, "error.type").is_none())
    );
    let failed = gets
        .iter()
        .find(|span| span.parent_span_id.to_string() == "00f067aa0ba902ba")
        .expect("the unknown task's poll");
    assert_eq!(attribute(failed, "error.type"), Some(code.to_string()));
    assert_eq!(
        attribute(failed, "rpc.response.status_code"),
        Some(code.to_string())
    );
    let list = named(&spans, "tools/list", &SpanKind::Server);
    assert_eq!(list.parent_span_id.to_string(), "00f067aa0ba902bb");
    assert_eq!(attribute(list, "network.transport").as_deref(), Some("tcp"));
    let cancel = named(&spans, "tasks/cancel", &SpanKind::Server);
    assert_eq!(cancel.parent_span_id.to_string(), "00f067aa0ba902b9");

    // The task: the call's child, linked to it, named by its keyed hash,
    // its events the statuses, ended as cancelled.
    let task = named(&spans, "task forever", &SpanKind::Internal);
    assert_eq!(task.parent_span_id, call.span_context.span_id());
    assert_eq!(task.links.links.len(), 1);
    assert_eq!(
        task.links.links[0].span_context.span_id(),
        call.span_context.span_id()
    );
    let hasher = runtime.task_hasher().await.expect("the hasher");
    assert_eq!(
        attribute(task, "mcp_tasks.task.hash"),
        Some(hasher.hash(&TaskId::new(id.clone())))
    );
    let statuses: Vec<String> = task
        .events
        .events
        .iter()
        .map(|event| {
            assert_eq!(event.name, "status");
            event.attributes[0].value.to_string()
        })
        .collect();
    assert_eq!(statuses, ["working", "cancelled"]);
    assert_eq!(
        attribute(task, "mcp_tasks.task.outcome").as_deref(),
        Some("cancelled")
    );
    assert_eq!(attribute(task, "error.type").as_deref(), Some("cancelled"));

    // No span names the task by its id.
    let everything = format!("{spans:?}");
    assert!(!everything.contains(&id), "the task id is in a span");
}

#[tokio::test]
async fn the_client_writes_its_span_into_meta_and_the_server_continues_it() {
    exporter();
    let url = serve_http(RuntimeServer::in_memory()).await;
    let client = http_client(&url, None, Handler::default()).await;
    // A host's span, current while the client calls.
    let tracer = global::tracer("host");
    let host = tracer.start(HOST);
    let host_id = host.span_context().span_id();
    let trace = host.span_context().trace_id().to_string();
    let context = Context::current_with_span(host);
    client
        .call_tool("forever", json!({}), CallOptions::default())
        .with_context(context.clone())
        .await
        .expect("the call");
    context.span().end();

    let spans = spans_of(&trace, |spans| {
        spans
            .iter()
            .any(|span| span.name == "tools/call forever" && span.span_kind == SpanKind::Server)
            && spans
                .iter()
                .any(|span| span.name == "tools/call forever" && span.span_kind == SpanKind::Client)
    })
    .await;
    let sent = named(&spans, "tools/call forever", &SpanKind::Client);
    assert_eq!(sent.parent_span_id, host_id);
    assert_eq!(
        attribute(sent, "gen_ai.tool.name").as_deref(),
        Some("forever")
    );
    assert!(attribute(sent, "jsonrpc.request.id").is_some(), "{sent:#?}");
    let served = named(&spans, "tools/call forever", &SpanKind::Server);
    assert_eq!(served.parent_span_id, sent.span_context.span_id());
}
