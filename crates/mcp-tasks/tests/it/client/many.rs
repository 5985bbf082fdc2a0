//! Awaiting many tasks at once (`await_each`, `await_all`, `await_any`)
//! against our runtime on both transports, counted on the server side, and
//! against scripted servers under a paused clock: outcomes as the tasks
//! finish, one listen stream for the set, one poll queue where the server
//! cannot listen, one resolver, one deadline, and the 2025-11-25 era.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks::client::many::POLLS_IN_FLIGHT;
use mcp_tasks::store::MemoryStore;
use mcp_tasks::{AwaitOptions, InputMode, ListenMode, TaskId, TaskOutcome, TaskStatus};
use rmcp::model::InputResponses;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::support::counting::{counted_client, counted_client_with};
use crate::support::legacy::{self, Server, all_tasks, reply, unknown};
use crate::support::listening::{TRANSPORTS, Transport};
use crate::support::runtime_server::runtime_on;
use crate::support::scripted::{self, Reply, ms};
use crate::support::{Handler, RuntimeServer, completed_text, task_of};

/// A server that suggests polling every 10 minutes: a wait that finishes
/// heard its task's notifications.
fn patient_server() -> RuntimeServer {
    RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_poll_interval(Duration::from_secs(600))
            .build(),
    )
}

/// Waits that allow the server's 10 minutes, listen as `mode`, and end after 20 s.
fn listening(mode: ListenMode) -> AwaitOptions {
    AwaitOptions::default()
        .with_deadline(Some(Duration::from_secs(20)))
        .with_interval_bounds(Duration::from_millis(10), Duration::from_secs(600))
        .with_listen(mode)
}

#[tokio::test]
async fn outcomes_come_as_the_tasks_finish_on_one_stream() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let (client, counts) = counted_client(&server, transport).await;
        // Given the slowest first: they finish in the reverse order.
        let mut tasks = Vec::new();
        for ms in [900, 700, 500, 300, 100] {
            tasks.push(task_of(&client, "slow", json!({"ms": ms})).await);
        }
        let mut outcomes = client.await_each(&tasks, &listening(ListenMode::Required));
        assert_eq!(outcomes.remaining(), 5);
        let mut order = Vec::new();
        while let Some((id, outcome)) = outcomes.next().await {
            let outcome = outcome.unwrap_or_else(|error| panic!("{transport:?}: {error}"));
            order.push(completed_text(&outcome));
            assert!(tasks.iter().any(|task| task.id == id));
            if order.len() == 1 {
                // The rest are still heard on the one stream.
                assert_eq!(server.runtime.open_subscriptions(), 1, "{transport:?}");
            }
        }
        assert_eq!(
            order,
            [
                "slept 100 ms",
                "slept 300 ms",
                "slept 500 ms",
                "slept 700 ms",
                "slept 900 ms"
            ],
            "{transport:?}"
        );
        assert_eq!(counts.of("subscriptions/listen"), 1, "{transport:?}");
        // One read of each task once the stream is open; the rest was heard.
        assert_eq!(counts.of("tasks/get"), 5, "{transport:?}");
    }
}

#[tokio::test]
async fn ids_alone_are_read_once_and_heard_and_any_takes_the_first() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let (client, counts) = counted_client(&server, transport).await;
        let slow = task_of(&client, "slow", json!({"ms": 600})).await;
        let quick = task_of(&client, "slow", json!({"ms": 100})).await;
        let ids = [slow.id.clone(), quick.id.clone(), quick.id.clone()];
        let first = client
            .await_any(&ids, &listening(ListenMode::Required))
            .await
            .expect("one task finished");
        assert_eq!(first.0, quick.id, "{transport:?}");
        assert_eq!(completed_text(&first.1.unwrap()), "slept 100 ms");
        // A repeated id is one task; its first read came after the stream opened.
        assert_eq!(counts.of("subscriptions/listen"), 1, "{transport:?}");
        assert_eq!(counts.of("tasks/get"), 2, "{transport:?}");
        // The set is over: its stream closes, and the other task runs on.
        tokio::time::timeout(Duration::from_secs(10), async {
            while server.runtime.open_subscriptions() > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the stream closes");
        let all = client
            .await_all([&slow.id], &listening(ListenMode::Required))
            .await;
        assert_eq!(completed_text(all[0].1.as_ref().unwrap()), "slept 600 ms");
    }
}

#[tokio::test]
async fn a_server_that_refuses_listen_is_polled_by_one_queue() {
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_poll_interval(Duration::from_millis(100))
            .build(),
    );
    let (client, counts) =
        counted_client_with(&server, Transport::Http, Handler::default(), true).await;
    let n = 40;
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(task_of(&client, "slow", json!({"ms": 300 + 10 * i})).await);
    }
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(20)));
    let outcomes = client.await_all(&tasks, &options).await;
    assert_eq!(outcomes.len(), n);
    for (i, ((id, outcome), task)) in outcomes.iter().zip(&tasks).enumerate() {
        assert_eq!(id, &task.id, "in the order given");
        let text = completed_text(outcome.as_ref().unwrap());
        assert_eq!(text, format!("slept {} ms", 300 + 10 * i));
    }
    // Asked once for the whole set, refused, not asked again per task.
    assert_eq!(counts.of("subscriptions/listen"), 1);
    let gets = counts.of("tasks/get");
    let most = counts.most_in_flight("tasks/get");
    assert!(most <= POLLS_IN_FLIGHT, "{most} polls in flight at once");
    // Each task at its own 100 ms: a read at once, then about one per
    // interval for what is left of its 0.3-0.7 s.
    assert!(gets > n && gets <= 16 * n, "{gets} polls");
}

/// `pollIntervalMs` of scripted task `i`.
fn interval(i: usize) -> u64 {
    if i.is_multiple_of(2) { 1000 } else { 1100 }
}

#[tokio::test(start_paused = true)]
async fn each_task_is_polled_at_its_own_interval_and_reported_as_it_finishes() {
    const N: usize = 10;
    // Task i is completed from its (N - i)th read on: the last given
    // finishes first. The server does not serve listen.
    let mut reads = [0usize; N];
    let (client, log) =
        scripted::connect_listening(Handler::default(), move |method, params| match method {
            "tasks/get" => {
                let id = params["taskId"].as_str().unwrap_or_default();
                let i: usize = id.trim_start_matches("task-").parse().unwrap();
                reads[i] += 1;
                let status = if reads[i] >= N - i {
                    "completed"
                } else {
                    "working"
                };
                let mut state = scripted::get_value(
                    status,
                    json!({"taskId": id, "pollIntervalMs": interval(i)}),
                );
                if status == "completed" {
                    state["result"] = json!({"content": [{"type": "text", "text": id}]});
                }
                Reply::Result(state)
            }
            _ => Reply::Error(json!({"code": -32601, "message": "Method not found"})),
        })
        .await;
    let ids: Vec<TaskId> = (0..N).map(|i| TaskId::new(format!("task-{i}"))).collect();
    let started = Instant::now();
    let mut outcomes = client.await_each(&ids, &scripted_options());
    let mut seen = Vec::new();
    while let Some((id, outcome)) = outcomes.next().await {
        assert_eq!(completed_text(&outcome.unwrap()), id.expose());
        seen.push((id.expose().to_owned(), started.elapsed()));
    }
    let expected: Vec<(String, Duration)> = (0..N)
        .rev()
        .map(|i| (format!("task-{i}"), ms((N - 1 - i) as u64 * interval(i))))
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(log.of("subscriptions/listen").len(), 1);
    let gets = log.of("tasks/get");
    for i in 0..N {
        let id = format!("task-{i}");
        let at: Vec<Instant> = gets
            .iter()
            .filter(|get| get.params()["taskId"] == id.as_str())
            .map(|get| get.at)
            .collect();
        assert_eq!(at.len(), N - i, "{id}");
        assert_eq!(at[0], started, "{id} is read at once");
        for pair in at.windows(2) {
            assert_eq!(pair[1] - pair[0], ms(interval(i)), "{id}");
        }
    }
}

/// Waits on a scripted server: a minute, clamps that allow its intervals.
fn scripted_options() -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(Duration::from_secs(60)))
}

#[tokio::test]
async fn one_resolver_answers_two_tasks_one_at_a_time() {
    for transport in TRANSPORTS {
        let server = patient_server();
        let (client, counts) = counted_client(&server, transport).await;
        let tasks = [
            task_of(&client, "ask", json!({})).await,
            task_of(&client, "slow", json!({"ms": 50})).await,
            task_of(&client, "ask", json!({"after_ms": 20})).await,
        ];
        let asked: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let busy = Arc::new(AtomicBool::new(false));
        let (record, held) = (asked.clone(), busy.clone());
        let input = InputMode::resolver(move |requests: BTreeMap<String, Value>| {
            let (record, held) = (record.clone(), held.clone());
            async move {
                assert!(!held.swap(true, Ordering::SeqCst), "one task at a time");
                // A person takes a moment: the other task asks meanwhile.
                tokio::time::sleep(Duration::from_millis(100)).await;
                record
                    .lock()
                    .unwrap()
                    .push(requests.keys().cloned().collect());
                let mut responses = InputResponses::new();
                for key in requests.keys() {
                    responses.insert(
                        key.clone(),
                        json!({"action": "accept", "content": {"name": "Ada"}}),
                    );
                }
                held.store(false, Ordering::SeqCst);
                Ok(responses)
            }
        });
        let options = listening(ListenMode::Required).with_input(input);
        let outcomes = client.await_all(&tasks, &options).await;
        let texts: Vec<String> = outcomes
            .iter()
            .map(|(_, outcome)| completed_text(outcome.as_ref().unwrap()))
            .collect();
        assert_eq!(
            texts,
            ["Hello, Ada!", "slept 50 ms", "Hello, Ada!"],
            "{transport:?}"
        );
        // Each task's key answered once, by the one resolver.
        assert_eq!(
            *asked.lock().unwrap(),
            [vec!["name".to_owned()], vec!["name".to_owned()]],
            "{transport:?}"
        );
        assert_eq!(counts.of("tasks/update"), 2, "{transport:?}");
        assert_eq!(counts.of("subscriptions/listen"), 1, "{transport:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_the_set_after_the_finished_ones() {
    let server = patient_server();
    let (client, counts) = counted_client(&server, Transport::Stdio).await;
    let tasks = [
        task_of(&client, "forever", json!({"ms": 1000})).await,
        task_of(&client, "slow", json!({"ms": 300})).await,
        task_of(&client, "forever", json!({"ms": 1000})).await,
        task_of(&client, "slow", json!({"ms": 100})).await,
    ];
    let started = Instant::now();
    let options = listening(ListenMode::Auto).with_deadline(Some(Duration::from_secs(5)));
    let mut outcomes = client.await_each(&tasks, &options);
    let mut seen = Vec::new();
    while let Some((id, outcome)) = outcomes.next().await {
        let given = tasks.iter().position(|task| task.id == id).unwrap();
        seen.push((given, started.elapsed(), outcome));
    }
    let order: Vec<usize> = seen.iter().map(|(given, _, _)| *given).collect();
    assert_eq!(&order[..2], [3, 1], "the finished ones first");
    assert!(seen[1].1 < Duration::from_secs(1));
    for (given, at, outcome) in &seen[..2] {
        assert!(
            matches!(outcome, Ok(TaskOutcome::Completed(_))),
            "{given} at {at:?}"
        );
    }
    for (given, at, outcome) in &seen[2..] {
        assert!([0, 2].contains(given));
        assert_eq!(*at, Duration::from_secs(5), "one deadline for the set");
        let error = outcome.as_ref().unwrap_err();
        assert!(error.is_timeout(), "{error}");
        assert_eq!(error.task_id(), Some(&tasks[*given].id));
        assert_eq!(error.last_status(), Some(&TaskStatus::Working));
    }
    assert_eq!(counts.of("subscriptions/listen"), 1);
}

/// A 2025-11-25 server whose tasks `task-<n>` complete at their nth
/// `tasks/get` (`task-0` never), answering the held `tasks/result` then.
fn legacy_tasks() -> impl FnMut(&Value) -> Vec<Value> + Send + 'static {
    let mut reads: HashMap<String, usize> = HashMap::new();
    let mut held: HashMap<String, Value> = HashMap::new();
    move |m| {
        let id = m["params"]["taskId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let done_at: usize = id.trim_start_matches("task-").parse().unwrap_or(0);
        let task = |status: &str| {
            json!({"taskId": id, "status": status, "createdAt": "2025-11-25T10:30:00Z",
                "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": 60000, "pollInterval": 1000})
        };
        match m["method"].as_str() {
            Some("tasks/get") => {
                let read = reads.entry(id.clone()).or_default();
                *read += 1;
                if done_at == 0 || *read < done_at {
                    return vec![reply(m, task("working"))];
                }
                let mut out = vec![reply(m, task("completed"))];
                if let Some(request) = held.remove(&id) {
                    out.push(reply(
                        &request,
                        json!({"content": [{"type": "text", "text": id}]}),
                    ));
                }
                out
            }
            Some("tasks/result") => {
                let read = reads.get(&id).copied().unwrap_or(0);
                if done_at != 0 && read >= done_at {
                    return vec![reply(m, json!({"content": [{"type": "text", "text": id}]}))];
                }
                held.insert(id, m.clone());
                Vec::new()
            }
            _ => unknown(m),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_2025_era_awaits_each_task_concurrently_with_one_deadline() {
    let connected = legacy::connect(
        Server::legacy(all_tasks()),
        Handler::default(),
        legacy_tasks(),
    )
    .await;
    let ids: Vec<TaskId> = ["task-3", "task-0", "task-1"]
        .into_iter()
        .map(TaskId::new)
        .collect();
    let started = Instant::now();
    let options = AwaitOptions::default().with_deadline(Some(Duration::from_secs(5)));
    let mut outcomes = connected.client.await_each(&ids, &options);
    let mut seen = Vec::new();
    while let Some((id, outcome)) = outcomes.next().await {
        seen.push((id.expose().to_owned(), started.elapsed(), outcome));
    }
    let names: Vec<&str> = seen.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(names, ["task-1", "task-3", "task-0"]);
    assert_eq!(completed_text(seen[0].2.as_ref().unwrap()), "task-1");
    assert_eq!(seen[1].1, Duration::from_secs(2), "its third read");
    assert_eq!(completed_text(seen[1].2.as_ref().unwrap()), "task-3");
    assert_eq!(seen[2].1, Duration::from_secs(5));
    assert!(seen[2].2.as_ref().unwrap_err().is_timeout());
    // No listen stream in that era; each task has its own tasks/result.
    assert!(connected.log.of("subscriptions/listen").is_empty());
    assert_eq!(connected.log.of("tasks/result").len(), 3);
}
