//! One OpenTelemetry span per task (feature `otel`), from its creation to
//! the terminal status this process sees, with an event per status change;
//! without the feature, [`TaskSpans`] is zero-sized and its calls empty.
//! The server's runtime creates it and registers it as a [`TaskObserver`]
//! of its tasks only with the feature, while spans are on ([`set_spans`](super::set_spans)).
//!
//! * **Name and attributes.** `task {tool}` (kind `INTERNAL`), with
//!   `gen_ai.tool.name`, `mcp_tasks.task.hash` (the task's keyed hash,
//!   `TaskRuntime::task_hasher`: never its id, which is a bearer token) and,
//!   when it ends, `mcp_tasks.task.status`. A failed or cancelled task's
//!   span has status `ERROR` and `error.type` its status.
//! * **Parent and link.** The span is a child of the `tools/call` span
//!   that created it (so a trace shows the whole life of the call), and
//!   has a span link to it as well: the request span ends at once while the
//!   task's lives on, and tools that show a task span on its own follow the
//!   link back. The tool's work runs in the task span's context, so what it
//!   sends on (a gateway's upstream calls) belongs to the same trace.
//! * **Events.** One event `status` per status change, with
//!   `mcp_tasks.task.status` (`working`, `input_required`, `completed`,
//!   ...). Status *messages* are not recorded: a tool writes what it likes
//!   there (arguments, user data, an id it echoes), which an operator's
//!   trace store must not receive by default.
//! * **Replicas.** A span lives in the process that created the task and
//!   ends at the terminal status this process sees: its own tool ending, a
//!   cancel or an expiry it applies. A task taken over by another replica
//!   (after a crash) or ended by another replica's `tasks/cancel` ends here
//!   when this process hears of it; if this process dies first, the span
//!   is never exported (the replica that takes over starts no new span:
//!   its events are in that replica's request spans). A task that is
//!   never heard to end (this process stopped) is dropped at shutdown
//!   without being exported.
//! * **Cost.** Only tasks whose creating request is sampled get a span and
//!   a place in the table; the others cost one check.

#[cfg(feature = "otel")]
use std::collections::HashMap;
use std::future::Future;
#[cfg(feature = "otel")]
use std::sync::Mutex;

#[cfg(feature = "otel")]
use opentelemetry::trace::{Link, SpanKind, Status, TraceContextExt, Tracer};
#[cfg(feature = "otel")]
use opentelemetry::{Context, KeyValue};

use super::Trace;
use super::observe::{TaskEnded, TaskObserver};
#[cfg(feature = "otel")]
use super::otel;
use crate::store::TaskRecord;
use crate::task::{TaskId, TaskStatus};

/// The task spans of the tasks this process created and has not seen end
/// (zero-sized without `otel`).
#[derive(Debug, Default)]
pub(crate) struct TaskSpans {
    /// Each open span, with the last status it recorded.
    #[cfg(feature = "otel")]
    live: Mutex<HashMap<TaskId, (Context, Option<TaskStatus>)>>,
}

#[cfg(not(feature = "otel"))]
const _: () = assert!(size_of::<TaskSpans>() == 0);

#[cfg(feature = "otel")]
impl TaskSpans {
    /// The trace context the tool of task `id` works in: the task's span,
    /// named by the hash `hash` gives, when the creating `request` is
    /// sampled; else the current context. `hash` is awaited only then.
    pub(crate) async fn work<H>(&self, id: &TaskId, tool: &str, request: Trace, hash: H) -> Trace
    where
        H: Future<Output = Option<String>>,
    {
        if !request.is_sampled() {
            return Trace::current();
        }
        match hash.await {
            Some(hash) => Trace {
                context: self.start(id, hash, tool, &request.context),
            },
            None => Trace::current(),
        }
    }

    /// Starts the span of task `id` (named by `hash`) of `tool`, created by
    /// the request whose context is `request`, and returns a context holding
    /// it, for the tool's work.
    fn start(&self, id: &TaskId, hash: String, tool: &str, request: &Context) -> Context {
        let tracer = otel::tracer();
        let mut builder = tracer
            .span_builder(format!("task {tool}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                KeyValue::new("mcp_tasks.task.hash", hash),
            ]);
        let creator = request.span().span_context().clone();
        if creator.is_valid() {
            builder = builder.with_links(vec![Link::with_context(creator)]);
        }
        let span = builder.start_with_context(&tracer, request);
        let context = request.with_span(span);
        if let Ok(mut live) = self.live.lock() {
            live.insert(id.clone(), (context.clone(), None));
        }
        context
    }

    /// Whether task `id` has an open span here.
    pub(crate) fn tracks(&self, id: &TaskId) -> bool {
        self.live.lock().is_ok_and(|live| live.contains_key(id))
    }

    /// Task `record` was created or changed status (the runtime's observer
    /// calls, after each store write: the exact order of this process's
    /// changes): an event when the status differs from the last one
    /// recorded. A terminal status waits for [`TaskSpans::ended`], which
    /// follows.
    pub(crate) fn changed(&self, record: &TaskRecord) {
        self.status(record, None);
    }

    /// Task `record` has the status it has now: an event when it differs
    /// from the last one recorded. A terminal status ends the span with
    /// `outcome` when given; without one the span waits for
    /// [`TaskSpans::ended`], which follows.
    fn status(&self, record: &TaskRecord, outcome: Option<&str>) {
        let status = record.status();
        let context = {
            let Ok(mut live) = self.live.lock() else {
                return;
            };
            let Some((context, last)) = live.get_mut(record.id()) else {
                return;
            };
            if last.as_ref() == Some(status) {
                return;
            }
            *last = Some(status.clone());
            let context = context.clone();
            if outcome.is_some() {
                live.remove(record.id());
            }
            context
        };
        context.span().add_event(
            "status",
            vec![KeyValue::new(
                "mcp_tasks.task.status",
                status.as_str().to_owned(),
            )],
        );
        if let Some(outcome) = outcome {
            end(&context, status, outcome);
        }
    }

    /// Ends the span of the task `record` that ended as `outcome`.
    pub(crate) fn ended(&self, record: &TaskRecord, outcome: &str) {
        let context = self
            .live
            .lock()
            .ok()
            .and_then(|mut live| live.remove(record.id()));
        if let Some((context, _)) = context {
            end(&context, record.status(), outcome);
        }
    }

    /// Task `record` was read after a change heard on the change feed
    /// (another replica may have made it): its span ends when the status is
    /// terminal. Other statuses are left to the observer's calls, which
    /// keep their order (a read may come after a later change).
    pub(crate) fn heard(&self, record: &TaskRecord) {
        let status = record.status();
        if status.is_terminal() {
            self.status(record, Some(status.as_str()));
        }
    }

    /// Task `id` is gone (removed, purged) without this process seeing it
    /// end: its span ends as it is.
    pub(crate) fn removed(&self, id: &TaskId) {
        let context = self.live.lock().ok().and_then(|mut live| live.remove(id));
        if let Some((context, _)) = context {
            context.span().end();
        }
    }
}

/// The runtime's calls after each store write (`observe.rs`): the exact
/// order of this process's changes. Registered only with `otel`.
impl TaskObserver for TaskSpans {
    fn task_created(&self, record: &TaskRecord, _tool: &str) {
        self.changed(record);
    }

    fn status_changed(&self, _before: &TaskStatus, record: &TaskRecord) {
        self.changed(record);
    }

    fn task_ended(&self, ended: &TaskEnded<'_>) {
        self.ended(ended.record, ended.outcome.as_str());
    }

    fn task_removed(&self, id: &TaskId) {
        self.removed(id);
    }
}

/// Ends a task span at terminal `status`, reached as `outcome`
/// (`completed`, `failed`, `cancelled`, `expired`).
#[cfg(feature = "otel")]
fn end(context: &Context, status: &TaskStatus, outcome: &str) {
    let span = context.span();
    span.set_attribute(KeyValue::new(
        "mcp_tasks.task.status",
        status.as_str().to_owned(),
    ));
    span.set_attribute(KeyValue::new("mcp_tasks.task.outcome", outcome.to_owned()));
    if outcome != "completed" {
        span.set_attribute(KeyValue::new("error.type", outcome.to_owned()));
        span.set_status(Status::error(outcome.to_owned()));
    }
    span.end();
}

/// Without `otel`: no span, and every call empty.
#[cfg(not(feature = "otel"))]
impl TaskSpans {
    /// The current context; `hash` is never awaited.
    #[inline]
    pub(crate) fn work<'a, H>(
        &'a self,
        id: &'a TaskId,
        tool: &'a str,
        request: Trace,
        hash: H,
    ) -> impl Future<Output = Trace> + Send + 'a
    where
        H: Future<Output = Option<String>> + Send + 'a,
    {
        let _ = (id, tool, request, hash);
        std::future::ready(Trace::default())
    }

    /// No task has a span.
    #[inline]
    pub(crate) fn tracks(&self, id: &TaskId) -> bool {
        let _ = id;
        false
    }

    /// Nothing to record.
    #[inline]
    pub(crate) fn changed(&self, record: &TaskRecord) {
        let _ = record;
    }

    /// Nothing to end.
    #[inline]
    pub(crate) fn ended(&self, record: &TaskRecord, outcome: &str) {
        let _ = (record, outcome);
    }

    /// Nothing to end.
    #[inline]
    pub(crate) fn heard(&self, record: &TaskRecord) {
        let _ = record;
    }

    /// Nothing to end.
    #[inline]
    pub(crate) fn removed(&self, id: &TaskId) {
        let _ = id;
    }
}
