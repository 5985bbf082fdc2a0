use std::sync::{Arc, Mutex};

use tracing::Instrument;

use super::*;

#[test]
fn quoted_strings_and_id_shaped_words_are_masked() {
    assert_eq!(
        mask(r#"Request { task_id: "0192af3c1d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a", n: 3 }"#),
        r#"Request { task_id: "…", n: 3 }"#
    );
    assert_eq!(
        mask(r#"String("a \"quoted\" id") and `tick`"#),
        r#"String("…") and `…`"#
    );
    assert_eq!(
        mask("task 550e8400-e29b-41d4-a716-446655440000 not found"),
        "task … not found"
    );
    // Words without a digit, and short ones, stay.
    assert_eq!(
        mask("close_with_timeout: 127.0.0.1:8080 in 5s"),
        "close_with_timeout: 127.0.0.1:8080 in 5s"
    );
    // An unterminated quote hides the rest.
    assert_eq!(mask(r#"got "abc"#), r#"got "…""#);
}

/// What a subscriber of the program's saw: one line per event
/// (`target level [span] fields`) and per span (`span name fields`).
#[derive(Clone, Default)]
struct Capture {
    lines: Arc<Mutex<Vec<String>>>,
    names: Arc<Mutex<HashMap<u64, &'static Metadata<'static>>>>,
    entered: Arc<Mutex<HashMap<std::thread::ThreadId, Vec<u64>>>>,
    next: Arc<AtomicU64>,
}

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl Capture {
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn current(&self) -> Option<(u64, &'static Metadata<'static>)> {
        let entered = self.entered.lock().unwrap();
        let id = *entered.get(&std::thread::current().id())?.last()?;
        Some((id, self.names.lock().unwrap().get(&id).copied()?))
    }

    fn name(&self, id: u64) -> Option<&'static str> {
        Some(self.names.lock().unwrap().get(&id)?.name())
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.names.lock().unwrap().insert(id, span.metadata());
        let mut line = Line(format!("span {}", span.metadata().name()));
        span.record(&mut line);
        self.lines.lock().unwrap().push(line.0);
        Id::from_u64(id)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let span = match event.parent() {
            Some(parent) => self.name(parent.into_u64()),
            None if event.is_contextual() => self.current().map(|(_, metadata)| metadata.name()),
            None => None,
        };
        let mut line = Line(format!(
            "{} {} [{}]",
            metadata.target(),
            metadata.level(),
            span.unwrap_or("-")
        ));
        event.record(&mut line);
        self.lines.lock().unwrap().push(line.0);
    }

    fn enter(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        entered
            .entry(std::thread::current().id())
            .or_default()
            .push(span.into_u64());
    }

    fn current_span(&self) -> Current {
        self.current().map_or_else(Current::none, |(id, metadata)| {
            Current::new(Id::from_u64(id), metadata)
        })
    }

    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        if let Some(stack) = entered.get_mut(&std::thread::current().id())
            && let Some(at) = stack.iter().rposition(|id| *id == span.into_u64())
        {
            stack.remove(at);
        }
    }
}

/// A multi-thread runtime whose threads all have `capture` as their
/// default subscriber, as a global one would be.
fn runtime(capture: &Capture) -> (tokio::runtime::Runtime, Dispatch) {
    let dispatch = Dispatch::new(capture.clone());
    let on_threads = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(dispatcher::set_default(&on_threads)))
        .build()
        .unwrap();
    (runtime, dispatch)
}

/// What rmcp does: a span made where it starts, around a task it spawns.
async fn rmcp_like() {
    let span = tracing::span!(target: "rmcp::service", Level::INFO, "serve_inner");
    let task = tokio::spawn(
        async {
            tokio::task::yield_now().await;
            tracing::debug!(target: "rmcp::service", request = "0192af3c1d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a", "received request");
            tracing::warn!(target: "rmcp::service", error = ?("0192af3c1d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a", 7), code = 7, "response error");
            tracing::info!(target: "the_program", "a handler's own event");
        }
        .instrument(span),
    );
    task.await.unwrap();
}

#[test]
fn rmcp_events_are_dropped_or_masked_in_the_scope_and_in_what_it_spawns() {
    let capture = Capture::default();
    let (runtime, dispatch) = runtime(&capture);
    dispatcher::with_default(&dispatch, || runtime.block_on(scope(rmcp_like())));
    let lines = capture.lines();
    assert!(
        lines.iter().all(|line| !line.contains("0192af3c")),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|line| line.contains("received request")));
    assert!(
        lines.contains(
            &r#"rmcp::service WARN [serve_inner] message=response error error=("…", 7) code=7"#
                .to_owned()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"the_program INFO [serve_inner] message=a handler's own event".to_owned()),
        "{lines:#?}"
    );
    // rmcp's span reaches the program as one of its own.
    assert!(lines.contains(&"span serve_inner".to_owned()), "{lines:#?}");
}

#[test]
fn outside_the_scope_nothing_changes() {
    let capture = Capture::default();
    let (runtime, dispatch) = runtime(&capture);
    dispatcher::with_default(&dispatch, || runtime.block_on(rmcp_like()));
    let lines = capture.lines();
    assert!(
        lines.iter().any(|line| line.contains("received request")
            && line.contains("0192af3c1d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a")),
        "{lines:#?}"
    );
}

#[test]
fn the_programs_spans_keep_their_parents_across_the_scope() {
    let capture = Capture::default();
    let (runtime, dispatch) = runtime(&capture);
    dispatcher::with_default(&dispatch, || {
        runtime.block_on(async {
            let request = tracing::info_span!(target: "the_program", "request");
            async {
                scope(async {
                    tracing::info!(target: "the_program", "in the scope");
                    let step = tracing::info_span!(target: "the_program", "step");
                    // A parent named explicitly, and the current span.
                    tracing::info!(target: "the_program", parent: &step, "in the step");
                    let current = tracing::Span::current();
                    tokio::spawn(
                        async { tracing::info!(target: "the_program", "spawned") }
                            .instrument(current),
                    )
                    .await
                    .unwrap();
                })
                .await;
            }
            .instrument(request)
            .await;
        });
    });
    let lines = capture.lines();
    for line in [
        "the_program INFO [request] message=in the scope",
        "the_program INFO [step] message=in the step",
        "the_program INFO [request] message=spawned",
    ] {
        assert!(lines.contains(&line.to_owned()), "{line} not in {lines:#?}");
    }
}

#[test]
fn without_a_subscriber_the_scope_does_nothing() {
    // No subscriber in this thread, and (in this test binary) no global one.
    if dispatcher::has_been_set() {
        return;
    }
    let seen = in_scope(|| THREAD.with(|thread| thread.borrow().depth));
    assert_eq!(seen, 0);
}
