//! The client against a hostile server over real transports: HTTP on
//! loopback (the server in this process, so its request counts can be
//! asserted) and a `hostile-server` child process over stdio. Every
//! scenario ends with the right outcome or a clear error, inside the
//! deadline, with a bounded number of requests. Real time: each scenario
//! takes at most a few seconds, and every test runs under a timeout of its
//! own ([`bounded`]), so that a regression fails instead of hanging.

use std::time::{Duration, Instant};

use mcp_tasks::client::{ConnectOptions, Endpoint, LineCheck};
use mcp_tasks::error::ProtocolViolation;
use mcp_tasks::{AwaitOptions, CallOptions, CallResponse, Error, TaskOutcome, TasksClient};
use mcp_tasks_conformance::hostile::{Hostile, Scenario, serve_http};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, RequestContext, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_hostile-server");

/// Declares form elicitation and answers every form with a name.
#[derive(Debug, Clone, Default)]
struct Forms;

impl ClientHandler for Forms {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        ClientConfig::new(capabilities, Implementation::new("hostile-tests", "0"))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"})))
    }
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// The hostile server over HTTP in this process, and a client of it.
async fn over_http(scenario: Scenario) -> (TasksClient<Forms>, Hostile) {
    let hostile = Hostile::new(scenario);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_http(hostile.clone(), listener));
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::from_config(config);
    let running = serve_client_with_lifecycle(Forms, transport, lifecycle())
        .await
        .expect("discover");
    (TasksClient::new(running), hostile)
}

/// The hostile server as a child process over stdio, and a client of it
/// that hears of the lines rmcp drops ([`LineCheck`]). The process lives as
/// long as the returned child.
async fn over_stdio(scenario: &str) -> (TasksClient<Forms>, tokio::process::Child) {
    let mut child = tokio::process::Command::new(BIN)
        .arg(scenario)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the hostile server starts");
    let stdout = child.stdout.take().expect("piped");
    let stdin = child.stdin.take().expect("piped");
    let (check, stdout) = LineCheck::stdio(stdout);
    let running = serve_client_with_lifecycle(Forms, (stdout, stdin), lifecycle())
        .await
        .expect("discover");
    (TasksClient::new(running).with_line_check(check), child)
}

/// Runs a test's body, failing it if it is not over in 60 s.
async fn bounded<F: std::future::Future>(body: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("the test ran past 60 s: a wait did not end")
}

/// Calls the tool (the server always makes a task) and waits with `options`.
async fn run<H: ClientHandler>(
    client: &TasksClient<H>,
    options: &AwaitOptions,
) -> (Result<TaskOutcome, Error>, Duration) {
    let CallResponse::Task(state) = client
        .call_tool("anything", (), CallOptions::default())
        .await
        .expect("tools/call")
    else {
        panic!("the hostile server always makes a task")
    };
    let started = Instant::now();
    let outcome = client.await_task(&state, options).await;
    (outcome, started.elapsed())
}

fn within(deadline: Duration) -> AwaitOptions {
    AwaitOptions::default().with_deadline(Some(deadline))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn violation(outcome: &Result<TaskOutcome, Error>) -> &ProtocolViolation {
    match outcome {
        Err(Error::Protocol { violation, .. }) => violation,
        other => panic!("a protocol error expected, got {other:?}"),
    }
}

#[tokio::test]
async fn hostile_poll_intervals_are_clamped_over_http() {
    bounded(async {
        // (pollIntervalMs, the most tasks/get in one second: 1 s / clamped interval + 1).
        for (interval, at_most, at_least) in [
            (json!(0), 21, 10),
            (json!(-5), 21, 10),
            (json!(120.7), 10, 6),
            (json!(1e15), 1, 1),
            (json!("soon"), 2, 1),
        ] {
            let (client, hostile) = over_http(Scenario::PollInterval(interval.clone())).await;
            let (outcome, took) = run(&client, &within(ms(1000))).await;
            assert!(
                matches!(outcome, Err(Error::Timeout { .. })),
                "{interval}: {outcome:?}"
            );
            assert!(
                took < ms(1500),
                "{interval}: ended at the deadline, not after: {took:?}"
            );
            let gets = hostile.count("tasks/get");
            assert!(
                (at_least..=at_most).contains(&gets),
                "{interval}: {gets} tasks/get in 1 s, expected {at_least}..={at_most}"
            );
        }
    })
    .await
}

#[tokio::test]
async fn a_completed_task_wins_over_a_flapping_status() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::Flap).await;
        let (outcome, _) = run(&client, &within(ms(2000))).await;
        let Ok(TaskOutcome::Completed(result)) = outcome else {
            panic!("completed: {outcome:?}")
        };
        assert_eq!(result.content[0].as_text().unwrap().text, "done");
        assert_eq!(hostile.count("tasks/get"), 1);
    })
    .await
}

#[tokio::test]
async fn completed_without_a_result_is_a_protocol_error_after_three_polls() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::TerminalWithoutPayload).await;
        // No deadline: the wait ends on its own.
        let (outcome, took) = run(&client, &AwaitOptions::default().with_deadline(None)).await;
        assert!(
            matches!(
                violation(&outcome),
                ProtocolViolation::IncompleteTask { polls: 3, .. }
            ),
            "{outcome:?}"
        );
        assert_eq!(hostile.count("tasks/get"), 3);
        // At the interval (50 ms), never in a tight loop.
        assert!(took >= ms(100) && took < ms(1000), "{took:?}");
    })
    .await
}

#[tokio::test]
async fn a_body_that_is_not_json_is_a_protocol_error_after_three_answers() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::NotJson).await;
        let (outcome, took) = run(&client, &AwaitOptions::default().with_deadline(None)).await;
        assert!(
            matches!(
                violation(&outcome),
                ProtocolViolation::UnusableAnswers {
                    method: "tasks/get",
                    attempts: 3
                }
            ),
            "{outcome:?}"
        );
        assert_eq!(hostile.count("tasks/get"), 3);
        assert!(took < ms(2000), "{took:?}");
    })
    .await
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_a_protocol_error() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::InvalidUtf8).await;
        let (outcome, _) = run(&client, &AwaitOptions::default().with_deadline(None)).await;
        assert!(
            matches!(
                violation(&outcome),
                ProtocolViolation::UnusableAnswers { .. }
            ),
            "{outcome:?}"
        );
        assert_eq!(hostile.count("tasks/get"), 3);
    })
    .await
}

#[tokio::test]
async fn an_unknown_result_type_is_a_protocol_error_at_once() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::UnknownResultType).await;
        let (outcome, _) = run(&client, &within(ms(2000))).await;
        assert!(
            matches!(
                violation(&outcome),
                ProtocolViolation::UnknownResultType(kind) if kind == "later"
            ),
            "{outcome:?}"
        );
        assert_eq!(hostile.count("tasks/get"), 1);
    })
    .await
}

#[tokio::test]
async fn input_required_forever_stalls_after_one_answer() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::InputForever).await;
        let options = within(ms(5000)).with_stall_detection(5, false);
        let (outcome, took) = run(&client, &options).await;
        assert!(
            matches!(outcome, Err(Error::Stalled { polls: 5, .. })),
            "{outcome:?}"
        );
        assert_eq!(hostile.count("tasks/update"), 1, "the key is answered once");
        assert_eq!(hostile.count("tasks/get"), 6);
        assert!(took < ms(1000), "{took:?}");
    })
    .await
}

#[tokio::test]
async fn a_key_reused_after_its_answer_is_answered_again_at_the_interval() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::KeysReused).await;
        let (outcome, _) = run(&client, &within(ms(1000))).await;
        assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
        let (gets, updates) = (hostile.count("tasks/get"), hostile.count("tasks/update"));
        assert!(gets <= 21, "{gets} tasks/get");
        // One answer per input_required poll (every other one); the deadline
        // may fall between a poll and its answer.
        assert!(
            (gets / 2..=gets.div_ceil(2)).contains(&updates),
            "{updates} tasks/update for {gets} tasks/get"
        );
    })
    .await
}

#[tokio::test]
async fn answers_that_never_come_end_at_the_deadline() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::NeverAnswers).await;
        let options = within(ms(1500)).with_request_timeout(ms(500));
        let (outcome, took) = run(&client, &options).await;
        assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
        assert!(took >= ms(1500) && took < ms(2500), "{took:?}");
        assert!(
            hostile.count("tasks/get") <= 3,
            "{}",
            hostile.count("tasks/get")
        );
    })
    .await
}

#[tokio::test]
async fn a_connection_dropped_mid_wait_is_retried_until_the_task_is_reachable() {
    bounded(async {
        let (client, hostile) = over_http(Scenario::Drop { recover_after: 3 }).await;
        let (outcome, _) = run(&client, &within(ms(5000))).await;
        assert!(
            matches!(outcome, Ok(TaskOutcome::Completed(_))),
            "{outcome:?}"
        );
        assert_eq!(
            hostile.count("tasks/get"),
            5,
            "one working, three cut off, one completed"
        );
    })
    .await
}

#[tokio::test]
async fn a_ten_megabyte_result_arrives_whole() {
    bounded(async {
        let (client, _) = over_http(Scenario::BigResult(10_000_000)).await;
        let (outcome, _) = run(&client, &within(ms(20_000))).await;
        let Ok(TaskOutcome::Completed(result)) = outcome else {
            panic!("completed: {outcome:?}")
        };
        assert_eq!(result.content[0].as_text().unwrap().text.len(), 10_000_000);
    })
    .await
}

/// A client of the hostile server made by `TasksClient::connect`, reading
/// answers of at most 64 KiB: the child process for `stdio`, else the
/// server in this process over HTTP.
async fn bounded_client(
    scenario: Scenario,
    name: &str,
    stdio: bool,
) -> TasksClient<mcp_tasks::client::legacy::Handler> {
    let endpoint = if stdio {
        Endpoint::command(BIN, [name])
    } else {
        let hostile = Hostile::new(scenario);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(serve_http(hostile, listener));
        Endpoint::url(url)
    };
    let options = ConnectOptions::default()
        .with_lifecycle(lifecycle())
        .with_max_answer_bytes(64 * 1024);
    TasksClient::connect(endpoint, Forms, options)
        .await
        .expect("connect")
}

#[tokio::test]
async fn an_answer_past_the_clients_bound_ends_the_wait_and_the_connection_goes_on() {
    bounded(async {
        for stdio in [true, false] {
            let client =
                bounded_client(Scenario::BigResult(200_000), "big-result=200000", stdio).await;
            // Polled: the hostile server does not answer a listen request.
            let options = within(ms(10_000)).with_listen(mcp_tasks::ListenMode::Poll);
            let (outcome, took) = run(&client, &options).await;
            let error = outcome.expect_err("past the bound");
            assert!(error.is_answer_too_large(), "stdio {stdio}: {error:?}");
            assert_eq!(error.answer_bound(), Some(64 * 1024));
            assert!(took < ms(5_000), "at once, not at the deadline: {took:?}");
            let Error::AnswerTooLarge { method, size, .. } = &error else {
                unreachable!()
            };
            assert_eq!(*method, "tasks/get");
            if stdio {
                // Counted to its end on stdio; not read further over HTTP.
                assert!(size.is_some_and(|size| size > 200_000), "{size:?}");
            }
            // The connection goes on: the same read fails the same way, at
            // once, and a cancel is acknowledged.
            let id = mcp_tasks::TaskId::new(mcp_tasks_conformance::hostile::TASK_ID);
            let again = client.get(&id).await.expect_err("past the bound again");
            assert!(again.is_answer_too_large(), "{again:?}");
            client.cancel(&id).await.expect("tasks/cancel is answered");
        }
    })
    .await
}

/// What a scenario must end with.
type Expected = fn(&Result<TaskOutcome, Error>) -> bool;

/// A wait over stdio that counts the states it read.
async fn over_stdio_counting(
    scenario: &str,
    options: AwaitOptions,
) -> (Result<TaskOutcome, Error>, Duration, usize) {
    let (client, _child) = over_stdio(scenario).await;
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    let options = options.with_observer(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let (outcome, took) = run(&client, &options).await;
    (
        outcome,
        took,
        seen.load(std::sync::atomic::Ordering::Relaxed),
    )
}

#[tokio::test]
async fn over_stdio_every_scenario_ends_inside_the_deadline() {
    bounded(async {
        let deadline = ms(1500);
        let options = || within(deadline).with_request_timeout(ms(500));
        let cases: [(&str, Expected, usize); 7] = [
            ("poll=0", |o| matches!(o, Err(Error::Timeout { .. })), 32),
            (
                "terminal-without-payload",
                |o| {
                    matches!(
                        o,
                        Err(Error::Protocol {
                            violation: ProtocolViolation::IncompleteTask { .. },
                            ..
                        })
                    )
                },
                4,
            ),
            (
                "unknown-result-type",
                |o| matches!(o, Err(Error::Protocol { .. })),
                1,
            ),
            // rmcp's stdio transport drops a line that is not JSON-RPC (or not
            // UTF-8); the client's line check reports it, as an unusable answer.
            ("not-json", unusable_get, 1),
            (
                "never-answers",
                |o| matches!(o, Err(Error::Timeout { .. })),
                1,
            ),
            // The server process exits: the transport is closed, at once.
            (
                "drop=1",
                |o| matches!(o, Err(error) if error.is_transport()),
                2,
            ),
            ("invalid-utf8", unusable_get, 1),
        ];
        let mut failures = Vec::new();
        for (scenario, expected, most_states) in cases {
            let (outcome, took, states) = over_stdio_counting(scenario, options()).await;
            if !expected(&outcome) || took > deadline + ms(500) || states > most_states {
                failures.push(format!(
                    "{scenario}: {outcome:?} after {took:?} with {states} states read"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    })
    .await
}

/// Three `tasks/get` answered with lines that are not JSON-RPC messages.
fn unusable_get(outcome: &Result<TaskOutcome, Error>) -> bool {
    matches!(
        outcome,
        Err(Error::Protocol {
            violation: ProtocolViolation::UnusableAnswers {
                method: "tasks/get",
                attempts: 3
            },
            ..
        })
    )
}

#[tokio::test]
async fn over_stdio_garbage_ends_the_wait_without_a_deadline() {
    bounded(async {
        for scenario in ["not-json", "invalid-utf8"] {
            let (outcome, took, states) =
                over_stdio_counting(scenario, AwaitOptions::default().with_deadline(None)).await;
            assert!(unusable_get(&outcome), "{scenario}: {outcome:?}");
            assert_eq!(states, 1, "{scenario}: only the seed state was read");
            // Three polls at the interval (50 ms) or the backoff (100 ms).
            assert!(took < ms(2000), "{scenario}: {took:?}");
        }
    })
    .await
}

#[test]
fn scenarios_parse_from_their_names() {
    assert_eq!(
        Scenario::parse("poll=0"),
        Some(Scenario::PollInterval(json!(0)))
    );
    assert_eq!(
        Scenario::parse("drop=2"),
        Some(Scenario::Drop { recover_after: 2 })
    );
    assert_eq!(
        Scenario::parse("big-result=10"),
        Some(Scenario::BigResult(10))
    );
    assert_eq!(Scenario::parse("nonsense"), None);
    assert_eq!(Scenario::parse("poll=not json"), None);
}
