//! OpenTelemetry traces across `mcp-tasks call` -> `mcp-tasks serve
//! --upstream-url` (the gateway) -> `mcp-tasks serve` (the upstream), each
//! exporting over OTLP/HTTP to a real receiver in this test: an axum server
//! on 127.0.0.1 that decodes every `ExportTraceServiceRequest` with the
//! `opentelemetry-proto` types. One trace must cross the three processes,
//! named and attributed as OpenTelemetry's semantic conventions for MCP
//! say, with a task span on each server whose events follow the statuses,
//! and no task id anywhere in what was exported.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;

use crate::support::{HttpServer, http_server_with_env, json_of, run_with_env};

/// What the receiver got: each request's bytes, and its spans with the
/// `service.name` of the process that sent them.
#[derive(Default)]
struct Received {
    bytes: Vec<Vec<u8>>,
    spans: Vec<(String, Span)>,
}

/// Starts the OTLP/HTTP receiver; returns its base URL.
fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let store = received.clone();
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move |body: Bytes| {
                    let store = store.clone();
                    async move {
                        let request = ExportTraceServiceRequest::decode(body.as_ref())
                            .expect("an ExportTraceServiceRequest");
                        let mut received = store.lock().expect("lock");
                        received.bytes.push(body.to_vec());
                        for resource in request.resource_spans {
                            let service = resource
                                .resource
                                .as_ref()
                                .and_then(|resource| {
                                    resource
                                        .attributes
                                        .iter()
                                        .find(|kv| kv.key == "service.name")
                                })
                                .and_then(|kv| text(kv.value.as_ref()?.value.as_ref()?))
                                .unwrap_or_default();
                            for scope in resource.scope_spans {
                                for span in scope.spans {
                                    received.spans.push((service.clone(), span));
                                }
                            }
                        }
                        // An empty ExportTraceServiceResponse.
                        (
                            [("content-type", "application/x-protobuf")],
                            Vec::<u8>::new(),
                        )
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            address_tx
                .send(listener.local_addr().expect("an address"))
                .expect("the test waits");
            axum::serve(listener, app).await
        })
    });
    let address = address_rx.recv().expect("the receiver listens");
    (format!("http://{address}"), received)
}

fn text(value: &Any) -> Option<String> {
    match value {
        Any::StringValue(text) => Some(text.clone()),
        _ => None,
    }
}

/// A server exporting its spans to `endpoint` as `service`; stopped with
/// [`HttpServer::interrupt`] (so it flushes them).
fn exporting_server(service: &str, endpoint: &str, extra: &[&str]) -> HttpServer {
    let mut flags = vec!["--poll-interval", "50", "--otlp-endpoint", endpoint];
    flags.extend_from_slice(extra);
    http_server_with_env(
        &flags,
        &[
            ("OTEL_SERVICE_NAME", service),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    )
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|kv| kv.key == key)?;
    match value.value.as_ref()?.value.as_ref()? {
        Any::StringValue(text) => Some(text.clone()),
        Any::IntValue(number) => Some(number.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The one span of `service` named `name` of `kind` (panics on none or many).
fn one<'a>(spans: &'a [(String, Span)], service: &str, name: &str, kind: SpanKind) -> &'a Span {
    let found: Vec<&Span> = spans
        .iter()
        .filter(|(from, span)| from == service && span.name == name && span.kind == kind as i32)
        .map(|(_, span)| span)
        .collect();
    let names: Vec<_> = spans
        .iter()
        .map(|(from, span)| format!("{from}: {} ({})", span.name, span.kind))
        .collect();
    assert_eq!(found.len(), 1, "{service} {name}: {names:#?}");
    found[0]
}

/// The statuses a task span's events record, in order.
fn statuses(span: &Span) -> Vec<String> {
    span.events
        .iter()
        .filter(|event| event.name == "status")
        .filter_map(|event| {
            let kv = event
                .attributes
                .iter()
                .find(|kv| kv.key == "mcp_tasks.task.status")?;
            text(kv.value.as_ref()?.value.as_ref()?)
        })
        .collect()
}

/// Asserts the attributes the conventions give a `tools/call` span.
fn is_tool_call(span: &Span, tool: &str) {
    assert_eq!(
        attribute(span, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(attribute(span, "gen_ai.tool.name").as_deref(), Some(tool));
    assert_eq!(
        attribute(span, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert!(attribute(span, "jsonrpc.request.id").is_some(), "{span:#?}");
}

#[test]
fn one_trace_crosses_the_client_the_gateway_and_the_upstream() {
    let (endpoint, received) = receiver();
    let mut upstream = exporting_server("upstream", &endpoint, &[]);
    let mut gateway = exporting_server("gateway", &endpoint, &["--upstream-url", &upstream.url]);
    let output = run_with_env(
        &[
            "call",
            "--url",
            &gateway.url,
            "--json",
            "confirm_action",
            "--answer",
            "confirm=true",
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "client"),
        ],
    );
    let (code, value) = json_of(&output);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["status"], "completed");
    let task_id = value["taskId"].as_str().expect("a task id").to_owned();
    gateway.interrupt();
    upstream.interrupt();

    // The client flushed on exit and the servers on SIGINT: every span is in.
    let received = received.lock().expect("lock");
    let spans = &received.spans;

    // client -> gateway: the client's span is the gateway's request span's parent.
    let client = one(
        spans,
        "client",
        "tools/call confirm_action",
        SpanKind::Client,
    );
    is_tool_call(client, "confirm_action");
    let trace = client.trace_id.clone();
    let served = one(
        spans,
        "gateway",
        "tools/call confirm_action",
        SpanKind::Server,
    );
    is_tool_call(served, "confirm_action");
    assert_eq!(
        attribute(served, "network.transport").as_deref(),
        Some("tcp")
    );
    assert_eq!(
        attribute(served, "mcp.protocol.version").as_deref(),
        Some("2026-07-28")
    );
    assert_eq!(served.trace_id, trace);
    assert_eq!(served.parent_span_id, client.span_id);

    // The gateway's task: a child of (and linked to) its request span, its
    // events the statuses the client went through, named by hash only.
    let task = one(spans, "gateway", "task confirm_action", SpanKind::Internal);
    assert_eq!(task.trace_id, trace);
    assert_eq!(task.parent_span_id, served.span_id);
    assert!(
        task.links
            .iter()
            .any(|link| link.span_id == served.span_id && link.trace_id == trace),
        "{task:#?}"
    );
    let hash = attribute(task, "mcp_tasks.task.hash").expect("the task's hash");
    assert!(hash.starts_with("th_"), "{hash}");
    assert_eq!(
        statuses(task),
        ["working", "input_required", "working", "completed"],
        "{task:#?}"
    );
    assert_eq!(
        attribute(task, "mcp_tasks.task.status").as_deref(),
        Some("completed")
    );

    // gateway -> upstream: the upstream decides first whether the call is a
    // task, so the gateway's call upstream is its request span's child, and
    // the upstream's request span is that call's.
    let onward = one(
        spans,
        "gateway",
        "tools/call confirm_action",
        SpanKind::Client,
    );
    assert_eq!(onward.trace_id, trace);
    assert_eq!(onward.parent_span_id, served.span_id);
    let upstream_served = one(
        spans,
        "upstream",
        "tools/call confirm_action",
        SpanKind::Server,
    );
    assert_eq!(upstream_served.trace_id, trace);
    assert_eq!(upstream_served.parent_span_id, onward.span_id);
    let upstream_task = one(spans, "upstream", "task confirm_action", SpanKind::Internal);
    assert_eq!(upstream_task.trace_id, trace);
    assert_eq!(upstream_task.parent_span_id, upstream_served.span_id);
    assert_eq!(
        statuses(upstream_task),
        ["working", "input_required", "working", "completed"]
    );

    // The answer went as tasks/update, client to gateway (the gateway's fast
    // path), then from the gateway's task to the upstream's task (its
    // change relayed in the task span's context).
    let sent = one(spans, "client", "tasks/update", SpanKind::Client);
    let answered = one(spans, "gateway", "tasks/update", SpanKind::Server);
    assert_eq!(answered.trace_id, sent.trace_id);
    assert_eq!(answered.parent_span_id, sent.span_id);
    assert_eq!(
        attribute(answered, "mcp.method.name").as_deref(),
        Some("tasks/update")
    );
    let relayed = one(spans, "gateway", "tasks/update", SpanKind::Client);
    assert_eq!(relayed.trace_id, trace);
    assert_eq!(relayed.parent_span_id, task.span_id);
    let upstream_answered = one(spans, "upstream", "tasks/update", SpanKind::Server);
    assert_eq!(upstream_answered.parent_span_id, relayed.span_id);

    // Every span of the three processes is in that one trace...
    for (service, span) in spans
        .iter()
        .filter(|(_, span)| span.name.contains("confirm_action"))
    {
        assert_eq!(hex(&span.trace_id), hex(&trace), "{service}: {}", span.name);
    }
    // ... and no task id is anywhere in what was exported: not the
    // gateway's (the client printed it), nor any other (an id is 44
    // lowercase hex digits; nothing exported is such a run).
    for bytes in &received.bytes {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains(&task_id), "the task id was exported");
        let mut run = 0;
        for character in text.chars() {
            run = if character.is_ascii_digit() || ('a'..='f').contains(&character) {
                run + 1
            } else {
                0
            };
            assert!(run < 44, "a run of 44 hex digits was exported: {text:?}");
        }
    }
}
