//! Entry points for the fuzz targets in `fuzz/` (feature `__fuzzing`): every
//! place that decodes what a peer sent, reachable with bytes. Not an API.

use http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::ServerResult;
use serde_json::Value;

/// What a client makes of a server's answer to `tools/call`, `tasks/get`,
/// `tasks/update` (and the outcome of any task it reads).
pub fn client_reads_answer(data: &[u8]) {
    let Ok(result) = serde_json::from_slice::<ServerResult>(data) else {
        return;
    };
    if let Ok(crate::CallResponse::Task(state)) = crate::client::read_call_result(result.clone()) {
        let _ = state.outcome();
    }
    if let Ok(state) = crate::client::read_task_result(result.clone()) {
        let _ = state.outcome();
        let _ = state.has_outcome();
    }
    let _ = crate::client::read_ack("tasks/update", result);
}

/// What a client makes of any JSON as a task (`CreateTaskResult`,
/// `tasks/get`, a notification's params).
pub fn client_reads_task(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(state) = crate::TaskState::from_json(value) {
        let _ = state.outcome();
    }
}

/// A line of a newline-delimited transport as listen mode reads it: the
/// client's demux and its reading of stream messages (a task
/// notification's params as a task state), and the server's rerouting of
/// `subscriptions/listen` requests; and as the line check reads it (its
/// shortcut for plain responses agrees with rmcp).
pub fn listen_lines(data: &[u8]) {
    use crate::stdio::LineFilter;
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let _ = crate::client::listen::routed::Demux::unrouted().filter(data, &mut cx);
    let _ = crate::server::transport::listen::stdio::Reroute.filter(data, &mut cx);
    // The line check's shortcut never passes a line rmcp drops.
    if crate::client::line_check::is_plain_response(data) {
        assert!(serde_json::from_slice::<rmcp::model::ServerJsonRpcMessage>(data).is_ok());
    }
    let Ok(message) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for id in [Value::from(1), Value::from("1")] {
        if let Some(crate::client::listen::Event::Task(params)) =
            crate::client::listen::classify(&message, &id)
            && let Ok(state) = crate::TaskState::from_json(params)
        {
            let _ = state.outcome();
        }
    }
}

/// An input request and an answer to it: validation, and the form.
pub fn input_request_and_answer(data: &[u8]) {
    let Ok(Value::Array(pair)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let (Some(request), Some(answer)) = (pair.first(), pair.get(1)) else {
        return;
    };
    let _ = crate::validate_input_response(request, answer);
    let schema = request
        .pointer("/params/requestedSchema")
        .unwrap_or(request);
    if let Ok(form) = crate::form::Form::from_value(schema) {
        if let Some(content) = answer.get("content").and_then(Value::as_object) {
            let _ = form.validate(content);
            let mut filled = content.clone();
            form.fill_defaults(&mut filled);
        }
        for field in form.fields() {
            let _ = field.hint();
            if let Some(text) = answer.as_str() {
                let _ = field.parse(text);
            }
        }
    }
}

/// The server's reading of an HTTP request: the guard, then the `tasks/*`
/// fast path. The input is `METHOD\nheader: value\n...\n\nBODY`. Checks
/// that the typed reading of `tasks/get` and `tasks/cancel` bodies, their
/// one reader, accepts exactly what the `Value` path accepts, with the same
/// call.
pub fn server_reads_request(data: &[u8]) {
    let split = data.windows(2).position(|pair| pair == b"\n\n");
    let (head, body) = match split {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let mut lines = head.lines();
    let method = lines.next().unwrap_or_default();
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':')
            && let (Ok(name), Ok(value)) = (
                HeaderName::try_from(name.trim()),
                HeaderValue::try_from(value.trim()),
            )
        {
            headers.append(name, value);
        }
    }
    let _ = crate::server::transport::http::guard::accepts_json_and_sse(&headers);
    let quick = crate::server::transport::http::fast::quick::accept(method, &headers, body);
    let slow = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(|message| crate::server::transport::http::guard::not_a_message(message).is_none())
        .and_then(|message| {
            crate::server::transport::http::fast::tasks::accept(method, &headers, &message)
        });
    if matches!(method, "tasks/get" | "tasks/cancel") {
        assert_eq!(
            quick, slow,
            "the typed reading of a poll differs from the Value path's"
        );
    } else {
        assert_eq!(quick, None, "the typed reading reads polls only");
    }
    // A `tools/call` read from its bytes reads as the `Value` path reads it.
    let (bytes, value) = crate::server::transport::http::fast::call::both_readings(&headers, body);
    if bytes.is_some() {
        assert_eq!(
            bytes, value,
            "the bytes reading of a tools/call differs from the Value path's"
        );
    }
    // The stdio transport's reading ahead (progress and logs allowed) is
    // rmcp's own reading of the line.
    if let Some(ahead) = crate::server::transport::stdio::read_call(body) {
        let rmcp: rmcp::service::RxJsonRpcMessage<rmcp::RoleServer> =
            serde_json::from_slice(body).expect("rmcp reads a call read ahead of it");
        assert_eq!(
            serde_json::to_value(ahead).ok(),
            serde_json::to_value(rmcp).ok(),
            "the stdio reading ahead of a tools/call differs from rmcp's"
        );
    }
}

/// A stored task record, and every change applied to it.
pub fn store_reads_record(data: &[u8]) {
    use crate::store::{Change, TaskRecord};
    let Ok(record) = serde_json::from_slice::<TaskRecord>(data) else {
        return;
    };
    let now = crate::UnixMillis::new(u64::from(data.first().copied().unwrap_or(0)) * 1000);
    let retention = std::time::Duration::from_secs(60);
    for change in [
        Change::StatusMessage("m".into()),
        Change::Checkpoint {
            state: Value::Null,
            message: Some("m".into()),
        },
        Change::RequestInput {
            key: "k".into(),
            request: Value::Null,
        },
        Change::ProvideInput([("k".to_owned(), Value::Null)].into()),
        Change::RequestCancel,
        Change::RequestCancelByOperator,
        Change::ExtendTtl(std::time::Duration::MAX),
        Change::KeepAlive,
        Change::Complete(Value::Null),
        Change::Fail(Value::Null),
        Change::Cancel,
        Change::Expire,
        Change::Abandon,
    ] {
        if let Ok(next) = record.apply(&change, now, retention) {
            assert_eq!(next.expected_version(), record.version());
            assert!(!record.status().is_terminal(), "a terminal record changed");
            // No extension goes past the maximum lifetime (a record read
            // past it already keeps its own expiry).
            let next = next.record();
            if let (Some(cap), Some(at)) = (next.max_expires_at(), next.expires_at())
                && !next.status().is_terminal()
            {
                assert!(
                    at <= cap.max(record.expires_at().unwrap_or(cap)),
                    "extended past the cap"
                );
            }
        }
    }
    let _ = serde_json::to_vec(&record);
}
