//! The bodies of the `tasks/*` fast path, and of a `tools/call` that made
//! a task, written straight into bytes.
//!
//! They are the JSON that serializing rmcp's `GetTaskResult` through a
//! `serde_json::Value` writes (keys in sorted order, the stored result's
//! JSON text as it is), and the JSON rmcp's `ServerJsonRpcMessage` of a
//! `CreateTaskResult` writes, without serde's buffering; the tests below
//! check both against the serde path for every status. A record this
//! writer does not handle (an `input_required` task, whose requests rmcp's
//! types normalize, or a result kept as a tree) is written by the serde
//! path.

use rmcp::model::{CreateTaskResult, RequestId};
use serde_json::Value;

use crate::server::engine::wire::push_timestamp;
use crate::store::PackedRecord;
use crate::task::{TaskStatus, saturating_millis};

/// `{"id":…,"jsonrpc":"2.0","result":{…}}` answering `tasks/get` with
/// `record`, or `None` when the serde path must write it.
pub(super) fn get_task_answer(id: &Value, record: &PackedRecord) -> Option<Vec<u8>> {
    let (status, result, error) = match record.status() {
        TaskStatus::InputRequired => return None,
        TaskStatus::Completed => ("completed", Some(object_text(record.result_text())?), None),
        TaskStatus::Failed => ("failed", None, Some(object_text(record.error_text())?)),
        TaskStatus::Cancelled => ("cancelled", None, None),
        // Unknown statuses read as working, as in `wire::detailed_task`.
        _ => ("working", None, None),
    };
    let mut out =
        String::with_capacity(256 + result.map_or(0, str::len) + error.map_or(0, str::len));
    out.push_str("{\"id\":");
    push_json(&mut out, id)?;
    out.push_str(",\"jsonrpc\":\"2.0\",\"result\":{\"createdAt\":\"");
    push_timestamp(&mut out, record.created_at());
    out.push('"');
    if let Some(error) = error {
        out.push_str(",\"error\":");
        out.push_str(error);
    }
    out.push_str(",\"lastUpdatedAt\":\"");
    push_timestamp(&mut out, record.updated_at());
    out.push('"');
    if let Some(poll) = record.poll_interval() {
        out.push_str(",\"pollIntervalMs\":");
        push_int(&mut out, saturating_millis(poll));
    }
    if let Some(result) = result {
        out.push_str(",\"result\":");
        out.push_str(result);
    }
    out.push_str(",\"resultType\":\"complete\",\"status\":\"");
    out.push_str(status);
    out.push('"');
    if let Some(message) = record.status_message() {
        out.push_str(",\"statusMessage\":");
        push_str(&mut out, message)?;
    }
    out.push_str(",\"taskId\":");
    push_str(&mut out, record.id())?;
    out.push_str(",\"ttlMs\":");
    match record.ttl().as_millis() {
        Some(ttl) => push_int(&mut out, ttl),
        None => out.push_str("null"),
    }
    out.push_str("}}");
    Some(out.into_bytes())
}

/// `{"id":…,"jsonrpc":"2.0","result":{"resultType":"task",…}}`: the
/// answer of a `tools/call` that made a task, as rmcp's serde writes it
/// (its `CreateTaskResult` flattens the `Task` into the result, which
/// serde buffers through a map), or `None` when serde must write it: a
/// result with `_meta`, or a status this writer does not know.
pub(super) fn create_task_answer(id: &RequestId, created: &CreateTaskResult) -> Option<Vec<u8>> {
    if created.meta.is_some() {
        return None;
    }
    let task = &created.task;
    let status = match task.status {
        rmcp::model::TaskStatus::Working => "working",
        rmcp::model::TaskStatus::InputRequired => "input_required",
        rmcp::model::TaskStatus::Completed => "completed",
        rmcp::model::TaskStatus::Failed => "failed",
        rmcp::model::TaskStatus::Cancelled => "cancelled",
        _ => return None,
    };
    let mut out = String::with_capacity(256);
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    match id {
        RequestId::Number(n) => push_int(&mut out, *n),
        RequestId::String(text) => push_str(&mut out, text)?,
    }
    out.push_str(",\"result\":{\"resultType\":");
    push_str(&mut out, created.result_type.as_str())?;
    out.push_str(",\"taskId\":");
    push_str(&mut out, &task.task_id)?;
    out.push_str(",\"status\":\"");
    out.push_str(status);
    out.push('"');
    if let Some(message) = &task.status_message {
        out.push_str(",\"statusMessage\":");
        push_str(&mut out, message)?;
    }
    out.push_str(",\"createdAt\":");
    push_str(&mut out, &task.created_at)?;
    out.push_str(",\"lastUpdatedAt\":");
    push_str(&mut out, &task.last_updated_at)?;
    out.push_str(",\"ttlMs\":");
    match task.ttl_ms {
        Some(ttl) => push_int(&mut out, ttl),
        None => out.push_str("null"),
    }
    if let Some(poll) = task.poll_interval_ms {
        out.push_str(",\"pollIntervalMs\":");
        push_int(&mut out, poll);
    }
    out.push_str("}}");
    Some(out.into_bytes())
}

/// `{"id":…,"jsonrpc":"2.0","result":{"resultType":"complete"}}`: the ack
/// of `tasks/update` and `tasks/cancel`.
pub(super) fn ack_answer(id: &Value) -> Option<Vec<u8>> {
    let mut out = String::with_capacity(80);
    out.push_str("{\"id\":");
    push_json(&mut out, id)?;
    out.push_str(",\"jsonrpc\":\"2.0\",\"result\":{\"resultType\":\"complete\"}}");
    Some(out.into_bytes())
}

/// The text of a stored JSON object (the serde path refuses anything else).
fn object_text(text: Option<&str>) -> Option<&str> {
    text.filter(|text| text.starts_with('{'))
}

fn push_json(out: &mut String, value: &Value) -> Option<()> {
    out.push_str(&serde_json::to_string(value).ok()?);
    Some(())
}

/// `text` as a JSON string. serde_json escapes `"`, the backslash and the control
/// characters only; text without them is written as it is.
fn push_str(out: &mut String, text: &str) -> Option<()> {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(text).ok()?);
    }
    Some(())
}

/// An integer as JSON writes it (with `itoa`, as serde_json does).
fn push_int(out: &mut String, n: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::GetTaskResult;
    use serde_json::json;

    use super::*;
    use crate::server::engine::wire::detailed_task;
    use crate::store::{Change, Principal, TaskRecord};
    use crate::task::{TaskId, Ttl, UnixMillis};

    /// What the serde path writes.
    fn by_serde(id: &Value, record: &PackedRecord) -> Vec<u8> {
        let result = serde_json::to_value(GetTaskResult::new(detailed_task(record).unwrap()));
        json!({"jsonrpc": "2.0", "id": id, "result": result.unwrap()})
            .to_string()
            .into_bytes()
    }

    fn record(id: &str, ttl: Ttl, poll: Option<Duration>) -> TaskRecord {
        TaskRecord::new(
            TaskId::new(id),
            Principal::new("p"),
            UnixMillis::new(1_764_000_000_123),
            ttl,
            poll,
        )
    }

    fn after(record: &TaskRecord, change: &Change) -> TaskRecord {
        record
            .apply(
                change,
                UnixMillis::new(1_764_000_100_456),
                Duration::from_secs(60),
            )
            .unwrap()
            .into_record()
    }

    #[test]
    fn answers_are_what_the_serde_path_writes() {
        let working = record(
            "0123abcd",
            Ttl::from_millis(60_000),
            Some(Duration::from_millis(500)),
        );
        let odd_id = record("id \"with\" \\ quotes é", Ttl::Unlimited, None);
        let message = after(
            &working,
            &Change::StatusMessage("step \"2\" of 5 ✓\n".into()),
        );
        let done = after(
            &message,
            &Change::Complete(json!({"content": [{"type": "text", "text": "done"}],
                "isError": false, "structuredContent": {"n": 1.5, "z": [1, -2, 3e300]},
                "resultType": "complete"})),
        );
        let failed = after(
            &working,
            &Change::Fail(json!({"code": -32603, "message": "boom",
            "data": {"why": "x"}})),
        );
        let cancelled = after(&odd_id, &Change::Cancel);
        let expired = after(&working, &Change::Expire);
        for (id, record) in [
            (json!(7), working),
            (json!("req-1"), odd_id),
            (json!(-3), message),
            (json!(u64::MAX), done),
            (json!("é"), failed),
            (json!(0), cancelled),
            (json!(1), expired),
        ] {
            let packed = PackedRecord::pack(record);
            let fast = get_task_answer(&id, &packed).expect("written here");
            // The same JSON (the key order differs when serde_json keeps
            // insertion order, as some dependencies make it).
            let fast: Value = serde_json::from_slice(&fast).unwrap();
            let serde: Value = serde_json::from_slice(&by_serde(&id, &packed)).unwrap();
            assert_eq!(fast, serde);
        }
        let ack = ack_answer(&json!("a")).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&ack).unwrap(),
            json!({"jsonrpc": "2.0", "id": "a", "result": {"resultType": "complete"}})
        );
    }

    #[test]
    fn created_tasks_are_what_rmcps_serde_writes() {
        use rmcp::model::{ServerJsonRpcMessage, ServerResult, Task, TaskStatus as Status};
        let at = "2026-12-04T10:00:00.123Z";
        let working = Task::new("0123abcd", Status::Working, at, at);
        let answers = [
            (RequestId::Number(7), working.clone().with_ttl_ms(60_000)),
            (
                RequestId::Number(i64::MIN),
                working.with_poll_interval_ms(500),
            ),
            (
                RequestId::String("req \"1\" é".into()),
                Task::new("id \"with\" \\ quotes", Status::Completed, at, "later\n")
                    .with_status_message("step \"2\" of 5 ✓\n")
                    .with_ttl_ms(u64::MAX)
                    .with_poll_interval_ms(0),
            ),
            (
                RequestId::Number(-1),
                Task::new("f", Status::Failed, at, at),
            ),
            (
                RequestId::String("".into()),
                Task::new("c", Status::Cancelled, at, at),
            ),
            (
                RequestId::Number(0),
                Task::new("i", Status::InputRequired, at, at).with_status_message(""),
            ),
        ];
        for (id, task) in answers {
            let created = CreateTaskResult::new(task);
            let fast = create_task_answer(&id, &created).expect("written here");
            let serde = serde_json::to_vec(&ServerJsonRpcMessage::response(
                ServerResult::CreateTaskResult(created),
                id,
            ))
            .unwrap();
            // Byte for byte: rmcp's structs keep their fields' order.
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
        // A result with `_meta` is left to serde.
        let mut meta = rmcp::model::MetaObject::default();
        meta.insert("k".into(), json!(1));
        let mut with_meta = CreateTaskResult::new(Task::new("m", Status::Working, at, at));
        with_meta.meta = Some(meta);
        assert!(create_task_answer(&RequestId::Number(1), &with_meta).is_none());
    }

    #[test]
    fn input_requests_go_the_serde_way() {
        let asking = after(
            &record("t", Ttl::Unlimited, None),
            &Change::RequestInput {
                key: "k".into(),
                request: json!({"method": "roots/list"}),
            },
        );
        assert!(get_task_answer(&json!(1), &PackedRecord::pack(asking)).is_none());
    }
}
