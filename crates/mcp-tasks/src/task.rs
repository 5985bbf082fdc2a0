//! The shared vocabulary of the Tasks extension: task ids, statuses, TTLs,
//! timestamps, JSON-RPC error objects and the extension's identifier.
//!
//! Both halves use these types: the client when it reads what a server
//! reported (into its own task state), the server and its stores to keep
//! and describe tasks.

use std::fmt;
use std::time::Duration;

use rmcp::model::ErrorData;
use serde_json::Value;
/// The identifier of the Tasks extension, as declared in capabilities.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// A task id.
///
/// Task ids act as bearer tokens: whoever holds one can read, answer and
/// cancel the task. `Debug` and `Display` therefore never print it; call
/// [`TaskId::expose`] where the id itself must be shown or stored.
///
/// It is serialized as the id itself (stores keep it), so treat serialized
/// records as secrets too.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    /// Wraps a task id received from a server or typed by a user.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id itself. Treat it as a secret: do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Consumes the wrapper and returns the id itself.
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TaskId(<redacted>)")
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<task id redacted>")
    }
}

impl From<String> for TaskId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

impl From<&str> for TaskId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

/// The status of a task.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskStatus {
    /// The request is being processed.
    Working,
    /// The server waits for input from the client (`tasks/update`).
    InputRequired,
    /// The request returned a result (which may have `isError: true`). Terminal.
    Completed,
    /// The request ended with a JSON-RPC error. Terminal.
    Failed,
    /// The request was cancelled before it finished. Terminal.
    Cancelled,
    /// A status this library does not know, kept as sent.
    Unknown(String),
}

impl TaskStatus {
    /// Reads a status from its wire name; unknown names become [`TaskStatus::Unknown`].
    pub fn from_wire(name: &str) -> Self {
        match name {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            other => Self::Unknown(other.to_owned()),
        }
    }

    /// The wire name of the status.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Unknown(other) => other,
        }
    }

    /// `completed`, `failed` and `cancelled` are terminal: they never change.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialized as its wire name.
impl serde::Serialize for TaskStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for TaskStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(deserializer)?;
        Ok(Self::from_wire(&name))
    }
}

/// How long a task is kept, counted from its creation.
///
/// Serialized as on the wire: a number of milliseconds, or `null` for
/// [`Ttl::Unlimited`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ttl {
    /// `ttlMs: null`: kept without limit.
    Unlimited,
    /// Kept for this long after creation.
    Limited(Duration),
}

impl Ttl {
    /// A limited TTL of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Self::Limited(Duration::from_millis(millis))
    }

    /// The limit, or `None` when unlimited.
    pub fn limit(self) -> Option<Duration> {
        match self {
            Self::Unlimited => None,
            Self::Limited(limit) => Some(limit),
        }
    }

    /// The limit in whole milliseconds (saturating), or `None` when unlimited:
    /// the wire's `ttlMs`.
    pub fn as_millis(self) -> Option<u64> {
        self.limit().map(saturating_millis)
    }
}

impl From<Option<Duration>> for Ttl {
    /// `None` is unlimited.
    fn from(limit: Option<Duration>) -> Self {
        limit.map_or(Self::Unlimited, Self::Limited)
    }
}

impl serde::Serialize for Ttl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_millis().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Ttl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let millis = <Option<u64> as serde::Deserialize>::deserialize(deserializer)?;
        Ok(millis.map_or(Self::Unlimited, Self::from_millis))
    }
}

/// A point in time in milliseconds since the Unix epoch: when a task was
/// created, last changed, or expires, as a server keeps it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct UnixMillis(u64);

impl UnixMillis {
    /// The epoch itself.
    pub const EPOCH: Self = Self(0);

    /// `millis` milliseconds after the epoch.
    pub const fn new(millis: u64) -> Self {
        Self(millis)
    }

    /// The milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The system clock's time (the epoch if the clock is before it).
    pub fn now() -> Self {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(Self::EPOCH, |since| Self(saturating_millis(since)))
    }

    /// This time plus `duration`, saturating at the end of time.
    #[must_use]
    pub fn saturating_add(self, duration: Duration) -> Self {
        Self(self.0.saturating_add(saturating_millis(duration)))
    }

    /// How long after `earlier` this is; zero when it is not later.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for UnixMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms after the Unix epoch", self.0)
    }
}

/// A count with its thousands separated by commas, as the messages about
/// sizes write it: `16,777,216`.
#[cfg_attr(
    not(any(feature = "client", feature = "server")),
    allow(dead_code, reason = "written by the client and the server")
)]
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A duration in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn saturating_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A timestamp as a server sent it (ISO 8601 / RFC 3339 text), kept as sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Timestamp(String);

impl Timestamp {
    /// Wraps a timestamp string.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A JSON-RPC error object as a peer sent it: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The error message.
    pub message: String,
    /// Extra data, if any.
    pub data: Option<Value>,
}

impl RpcError {
    /// Reads an error object leniently: a missing code becomes -32603 and a
    /// missing message becomes empty, so that a sloppy server's failure is
    /// still reported as a failure.
    pub fn from_json(value: &Value) -> Self {
        let code = value.get("code").and_then(lenient_i64).unwrap_or(-32603);
        let message = value
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let data = value.get("data").cloned();
        Self {
            code,
            message,
            data,
        }
    }
}

impl From<ErrorData> for RpcError {
    fn from(error: ErrorData) -> Self {
        Self {
            code: i64::from(error.code.0),
            message: error.message.into_owned(),
            data: error.data,
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// Reads an integer leniently: integers, floats (rounded) and numeric
/// strings are accepted.
fn lenient_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Number(number) => number
            .as_i64()
            .or_else(|| {
                number
                    .as_u64()
                    .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
            })
            .or_else(|| number.as_f64().map(saturating_f64_to_i64)),
        _ => None,
    }
}

fn saturating_f64_to_i64(float: f64) -> i64 {
    if float.is_nan() {
        0
    } else {
        // `as` saturates at the bounds.
        float.round() as i64
    }
}

/// The `_meta` key that ties a 2025-11-25 message to its task
/// (`{"taskId": ...}`), on the server's notifications and the client's
/// reading of them.
#[cfg_attr(
    not(feature = "server"),
    allow(
        dead_code,
        reason = "read by the server, and by the client's 2025-11-25 handler"
    )
)]
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The `_meta` key of a handle (`{"taskId": ...}`): the plain result a
/// server of this crate gives a caller that declared no tasks when the task
/// it started outlasts the window (see `TaskRuntimeBuilder::with_task_tools`
/// and docs/task-tools.md). `TasksClient` reads a result that carries it
/// as the task it names.
pub const HANDLE_META: &str = "io.github.mcp-tasks/handle";

/// An extension of this project (not of MCP) that a client declares on a
/// `tools/call` (in its `_meta`'s client capabilities, `extensions`, with
/// an empty settings object) beside the Tasks extension: a server of this
/// crate that answers it with a task already finished (its tool returned
/// in its first step) puts the task's outcome in the `CreateTaskResult`'s
/// `_meta`, under [`OUTCOME_META`], so that the caller needs no `tasks/get`
/// to read it. `TasksClient` declares it on every `tools/call` that
/// declares the Tasks extension; a server that does not know it ignores
/// it, as it ignores any extension it does not know. See INTEROP.md.
pub const CREATED_OUTCOME_EXTENSION: &str = "io.github.mcp-tasks/created-outcome";

/// The `_meta` key of a `CreateTaskResult` that carries its finished
/// task's outcome, for a call that declared [`CREATED_OUTCOME_EXTENSION`]:
/// `{"result": {...}}` for a completed task, `{"error": {...}}` for a
/// failed one, the very `result` or `error` a `tasks/get` would answer
/// with. `TasksClient` reads it into the task's state as it reads those of
/// `tasks/get` (`TaskState`'s `result` and `error`).
pub const OUTCOME_META: &str = "io.github.mcp-tasks/outcome";

/// `duration` as people read it in a message: `40ms`, `1.5s`, `12s`,
/// `3m05s`, `1h05m` (rounded to the unit shown). The library's errors write
/// durations so, and the CLI too.
pub fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 100 {
        return format!("{millis}ms");
    }
    let tenths = (millis + 50) / 100;
    if tenths < 100 {
        return format!("{}.{}s", tenths / 10, tenths % 10);
    }
    let secs = (millis + 500) / 1000;
    if secs < 60 {
        return format!("{secs}s");
    }
    if secs < 3600 {
        return format!("{}m{:02}s", secs / 60, secs % 60);
    }
    let minutes = (secs + 30) / 60;
    format!("{}h{:02}m", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn task_id_is_never_printed() {
        let id = TaskId::new("secret-123");
        assert!(!format!("{id:?}").contains("secret"));
        assert!(!format!("{id}").contains("secret"));
        assert_eq!(id.expose(), "secret-123");
        assert_eq!(serde_json::to_value(&id).unwrap(), json!("secret-123"));
    }

    #[test]
    fn ttl_serializes_as_on_the_wire() {
        assert_eq!(serde_json::to_value(Ttl::Unlimited).unwrap(), json!(null));
        assert_eq!(
            serde_json::to_value(Ttl::from_millis(1500)).unwrap(),
            json!(1500)
        );
        let read: Ttl = serde_json::from_value(json!(2000)).unwrap();
        assert_eq!(read, Ttl::Limited(Duration::from_secs(2)));
        let read: Ttl = serde_json::from_value(json!(null)).unwrap();
        assert_eq!(read, Ttl::Unlimited);
        assert_eq!(Ttl::from(None), Ttl::Unlimited);
        assert_eq!(Ttl::Limited(Duration::MAX).as_millis(), Some(u64::MAX));
    }

    #[test]
    fn unix_millis_saturate() {
        let at = UnixMillis::new(1_000);
        assert_eq!(
            at.saturating_add(Duration::from_millis(500)),
            UnixMillis::new(1_500)
        );
        assert_eq!(
            UnixMillis::new(u64::MAX).saturating_add(Duration::MAX),
            UnixMillis::new(u64::MAX)
        );
        assert_eq!(
            UnixMillis::new(1_500).saturating_since(at),
            Duration::from_millis(500)
        );
        assert_eq!(at.saturating_since(UnixMillis::new(2_000)), Duration::ZERO);
    }

    #[test]
    fn rpc_errors_are_read_leniently() {
        let error = RpcError::from_json(&json!({"code": -32603.0, "message": "boom", "data": 1}));
        assert_eq!(
            (error.code, error.message.as_str(), error.data),
            (-32603, "boom", Some(json!(1)))
        );
        let sloppy = RpcError::from_json(&json!({}));
        assert_eq!((sloppy.code, sloppy.message.as_str()), (-32603, ""));
    }
}
