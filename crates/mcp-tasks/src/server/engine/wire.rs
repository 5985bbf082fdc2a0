//! From stored records to the extension's wire shapes (rmcp's `Task` and
//! `DetailedTask`), from tool outcomes to stored JSON, and the JSON-RPC
//! errors the runtime answers with.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ClientCapabilities, DetailedTask, ErrorCode, InputRequests, JsonObject, Task,
    TaskPayload,
};
use serde_json::{Value, json};

use crate::store::{PackedRecord, StoreError, StoreErrorKind, TaskRecord};
use crate::task::{TaskId, TaskStatus, UnixMillis};

/// A fresh task id made at `now` (the runtime's clock): the time
/// (milliseconds since the Unix epoch, 12 hex digits), then 128 bits from
/// the system's CSPRNG (32 hex digits).
/// The random part is what makes it unguessable; the time in front makes
/// ids sort by creation, so an index on them (SQLite's) grows at its end
/// instead of writing a page at random for every new task, as UUIDv7 does
/// for the same reason. The time says no more than the task's `createdAt`
/// (the runtime reads its clock once for both).
pub(crate) fn new_task_id(now: UnixMillis) -> Result<TaskId, ErrorData> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| ErrorData::internal_error(format!("no randomness: {error}"), None))?;
    let millis = now.as_millis();
    let mut id = String::with_capacity(44);
    for shift in (0..12).rev() {
        id.push(char::from(HEX[(millis >> (4 * shift)) as usize & 0x0f]));
    }
    for byte in bytes {
        id.push(char::from(HEX[usize::from(byte >> 4)]));
        id.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    Ok(TaskId::new(id))
}

/// RFC 3339 in UTC with milliseconds, as the extension's timestamps are sent.
pub(crate) fn timestamp(at: UnixMillis) -> String {
    let mut text = String::with_capacity(24);
    push_timestamp(&mut text, at);
    text
}

/// [`timestamp`], appended to `out`: `2026-07-28T10:30:00.123Z`. Years up to
/// 9999 are written here; later ones (and times past what chrono reads) as
/// chrono writes them.
pub(crate) fn push_timestamp(out: &mut String, at: UnixMillis) {
    const MILLIS_PER_DAY: u64 = 86_400_000;
    // 10000-01-01T00:00:00Z: the first time with a five-digit year.
    const YEAR_10000: u64 = 253_402_300_800_000;
    let millis = at.as_millis();
    if millis >= YEAR_10000 {
        let text = i64::try_from(millis)
            .ok()
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        out.push_str(text.as_deref().unwrap_or("1970-01-01T00:00:00.000Z"));
        return;
    }
    let (days, in_day) = (millis / MILLIS_PER_DAY, millis % MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let digits = |out: &mut String, value: u64, width: usize| {
        let mut buffer = [b'0'; 4];
        let mut rest = value;
        for slot in buffer[..width].iter_mut().rev() {
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        for &digit in &buffer[..width] {
            out.push(char::from(digit));
        }
    };
    digits(out, year, 4);
    out.push('-');
    digits(out, month, 2);
    out.push('-');
    digits(out, day, 2);
    out.push('T');
    digits(out, in_day / 3_600_000, 2);
    out.push(':');
    digits(out, in_day / 60_000 % 60, 2);
    out.push(':');
    digits(out, in_day / 1_000 % 60, 2);
    out.push('.');
    digits(out, in_day % 1_000, 3);
    out.push('Z');
}

/// The (year, month, day) of `days` after 1970-01-01 in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`, for days >= 0).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The wire status of a record's status: a status this library does not
/// know reads as `working`.
fn wire_status(status: &TaskStatus) -> rmcp::model::TaskStatus {
    match status {
        TaskStatus::InputRequired => rmcp::model::TaskStatus::InputRequired,
        TaskStatus::Completed => rmcp::model::TaskStatus::Completed,
        TaskStatus::Failed => rmcp::model::TaskStatus::Failed,
        TaskStatus::Cancelled => rmcp::model::TaskStatus::Cancelled,
        _ => rmcp::model::TaskStatus::Working,
    }
}

/// The task fields of a record (`CreateTaskResult`, and the base of `tasks/get`).
pub(crate) fn wire_task(record: &TaskRecord) -> Task {
    let mut task = Task::new(
        record.id().expose(),
        wire_status(record.status()),
        timestamp(record.created_at()),
        timestamp(record.updated_at()),
    );
    task.ttl_ms = record.ttl().as_millis();
    task.poll_interval_ms = record.poll_interval().map(crate::task::saturating_millis);
    task.status_message = record.status_message().map(str::to_owned);
    task
}

/// [`wire_task`] of a packed record.
pub(crate) fn wire_task_packed(record: &PackedRecord) -> Task {
    let mut task = Task::new(
        record.id(),
        wire_status(record.status()),
        timestamp(record.created_at()),
        timestamp(record.updated_at()),
    );
    task.ttl_ms = record.ttl().as_millis();
    task.poll_interval_ms = record.poll_interval().map(crate::task::saturating_millis);
    task.status_message = record.status_message().map(str::to_owned);
    task
}

/// The `DetailedTask` of a record: what `tasks/get` answers.
pub(crate) fn detailed_task(record: &PackedRecord) -> Result<DetailedTask, ErrorData> {
    let missing =
        |what: &str| ErrorData::internal_error(format!("the stored task has no {what}"), None);
    let object = |value: Option<Value>, what: &str| match value {
        Some(Value::Object(object)) => Ok(object),
        _ => Err(missing(what)),
    };
    let payload = match record.status() {
        TaskStatus::InputRequired => {
            let mut requests = InputRequests::new();
            for (key, request) in record.input_requests() {
                let request = serde_json::from_value(request.clone()).map_err(|error| {
                    ErrorData::internal_error(format!("stored input request: {error}"), None)
                })?;
                requests.insert(key.clone(), request);
            }
            TaskPayload::InputRequired {
                input_requests: requests,
            }
        }
        TaskStatus::Completed => TaskPayload::Completed {
            result: object(record.result_value(), "result")?,
        },
        TaskStatus::Failed => TaskPayload::Failed {
            error: object(record.error_value(), "error")?,
        },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    Ok(DetailedTask::new(wire_task_packed(record), payload))
}

/// A tool result as a completed task keeps it (with `resultType: complete`).
pub(crate) fn result_json(result: &CallToolResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or_else(|_| json!({"content": []}));
    if let Value::Object(fields) = &mut value {
        fields.insert("resultType".into(), json!("complete"));
    }
    value
}

/// A JSON-RPC error as a failed task keeps it.
pub(crate) fn error_json(error: &ErrorData) -> Value {
    let mut fields = JsonObject::new();
    fields.insert("code".into(), json!(error.code.0));
    fields.insert("message".into(), json!(error.message));
    if let Some(data) = &error.data {
        fields.insert("data".into(), data.clone());
    }
    Value::Object(fields)
}

/// The JSON-RPC error a failed task keeps ([`error_json`]), read back;
/// -32603 with `fallback` for what is not one.
pub(crate) fn error_from_json(error: &Value, fallback: &str) -> ErrorData {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .and_then(|code| i32::try_from(code).ok())
        .unwrap_or(ErrorCode::INTERNAL_ERROR.0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or(fallback)
        .to_owned();
    ErrorData::new(ErrorCode(code), message, error.get("data").cloned())
}

/// -32021 naming the Tasks extension.
pub(crate) fn tasks_required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// The one -32602 for unknown, expired and foreign task ids alike.
pub(crate) fn task_not_found() -> ErrorData {
    ErrorData::invalid_params("Failed to retrieve task: Task not found", None)
}

pub(crate) fn tool_panicked() -> ErrorData {
    ErrorData::internal_error("internal error: the tool panicked", None)
}

/// A store failure, logged here (without ids) and answered as -32603 with
/// what the caller can do about it.
#[expect(
    clippy::needless_pass_by_value,
    reason = "used as a `map_err` function"
)]
pub(crate) fn store_failure(error: StoreError) -> ErrorData {
    tracing::error!(%error, "task store failure");
    let message = match error.kind() {
        StoreErrorKind::Full => {
            "internal error: the task store is full; no task can be created or changed until \
             the server has room again"
        }
        StoreErrorKind::Unavailable => {
            "internal error: the task store cannot be reached; try again shortly"
        }
        _ => "internal error: the task store failed",
    };
    ErrorData::internal_error(message, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrono_timestamp(at: u64) -> String {
        i64::try_from(at)
            .ok()
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned())
    }

    #[test]
    fn timestamps_are_written_as_chrono_writes_them() {
        let mut at: u64 = 0;
        let mut samples = vec![
            0,
            1,
            999,
            86_399_999,
            86_400_000,
            951_782_400_000,     // 2000-02-29
            4_107_542_400_000,   // 2100-03-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            253_402_300_800_000, // year 10000: chrono's form
            i64::MAX as u64,
            u64::MAX,
        ];
        // Every month boundary and leap day for four centuries, in steps.
        while at < 13_000_000_000_000 {
            samples.push(at);
            at += 7_777_777_777;
        }
        for at in samples {
            assert_eq!(timestamp(UnixMillis::new(at)), chrono_timestamp(at), "{at}");
        }
    }

    #[test]
    fn task_ids_are_the_time_then_128_random_bits_in_hex() {
        let millis = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
        };
        let before = millis();
        let one = new_task_id(UnixMillis::now()).unwrap();
        let two = new_task_id(UnixMillis::now()).unwrap();
        let after = millis();
        for id in [&one, &two] {
            let id = id.expose();
            assert_eq!(id.len(), 44, "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{id}"
            );
            let made = u128::from_str_radix(&id[..12], 16).unwrap();
            assert!((before..=after).contains(&made), "{id}");
        }
        assert_ne!(one, two);
        assert_ne!(one.expose()[12..], two.expose()[12..], "the random part");
        assert!(
            one.expose()[..12] <= two.expose()[..12],
            "ids sort by creation"
        );
    }

    #[test]
    fn a_fixed_clock_gives_task_ids_its_time() {
        use crate::server::{Clock, ManualClock};
        let clock = ManualClock::new(UnixMillis::new(0x0123_4567_89ab));
        let one = new_task_id(clock.now()).unwrap();
        let two = new_task_id(clock.now()).unwrap();
        assert_eq!(&one.expose()[..12], "0123456789ab");
        assert_eq!(&two.expose()[..12], "0123456789ab");
        assert_ne!(one, two, "the random part differs");
        assert_eq!(one.expose().len(), 44);
        // Only the low 48 bits of the time fit its 12 digits, as before.
        let late = new_task_id(UnixMillis::new(0xfff0_0000_0000_0001)).unwrap();
        assert_eq!(&late.expose()[..12], "000000000001");
    }
}
