//! Idempotent creation through the binary, over a loopback TCP proxy in
//! front of `mcp-tasks serve --http`: a `call` whose first answer the proxy
//! loses sends the call again under its idempotency key and ends with one
//! task; a `call` killed while the proxy holds its answer (a crash between
//! send and answer) is taken up by `call --resume`, which finds the task
//! the first send made instead of making a second. The server's admin
//! listing counts the tasks.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::serving::Served;
use crate::support::{json_of, run};
use crate::wait_last_and_ls::{wait_output, with_journal};

/// What the proxy does with the answer of the first `tools/call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Closes the caller's connection once the answer came: it is lost.
    Lose,
    /// Keeps it (and the connection open) for as long as the proxy lives.
    Hold,
}

/// A loopback TCP proxy that passes everything both ways but the answer
/// of the first `tools/call`, which it loses or holds.
struct Proxy {
    address: String,
    /// `tools/call` requests that went through.
    calls: Arc<AtomicUsize>,
    /// Set once the first call's answer reached the proxy (so the server
    /// made the task) and was lost or held.
    answered: Arc<AtomicBool>,
}

impl Proxy {
    fn start(upstream: &str, answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let calls = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicBool::new(false));
        let first = Arc::new(AtomicBool::new(true));
        let upstream = upstream.to_owned();
        let (shared_calls, shared_answered) = (calls.clone(), answered.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let (calls, answered, first) =
                    (shared_calls.clone(), shared_answered.clone(), first.clone());
                std::thread::spawn(move || pipe(client, server, answer, calls, &answered, first));
            }
        });
        Self {
            address,
            calls,
            answered,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn answered(&self) -> bool {
        self.answered.load(Ordering::SeqCst)
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// One connection: client to server as it is (counting calls); server to
/// client as it is, unless this connection carried the first call.
fn pipe(
    mut client: TcpStream,
    mut server: TcpStream,
    answer: Answer,
    calls: Arc<AtomicUsize>,
    answered: &AtomicBool,
    first: Arc<AtomicBool>,
) {
    let losing = Arc::new(AtomicBool::new(false));
    let (mut client_in, mut server_out) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    let marked = losing.clone();
    let upward = std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = match client_in.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if contains(&buffer[..n], b"\"tools/call\"") {
                calls.fetch_add(1, Ordering::SeqCst);
                if first.swap(false, Ordering::SeqCst) {
                    marked.store(true, Ordering::SeqCst);
                }
            }
            if server_out.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = server_out.shutdown(Shutdown::Both);
    });
    let mut buffer = vec![0u8; 64 * 1024];
    let mut held = Vec::new();
    loop {
        let n = match server.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if losing.load(Ordering::SeqCst) {
            held.extend_from_slice(&buffer[..n]);
            if contains(&held, b"\"jsonrpc\"") {
                answered.store(true, Ordering::SeqCst);
                match answer {
                    Answer::Lose => break,
                    // Nothing more goes to the caller, whose connection
                    // stays open until it goes away.
                    Answer::Hold => {
                        let _ = upward.join();
                        return;
                    }
                }
            }
            continue;
        }
        if client.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upward.join();
}

fn serve() -> Served {
    let args = [
        "--http",
        "127.0.0.1:0",
        "--store",
        "memory",
        "--poll-interval",
        "50",
    ];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--admin", "127.0.0.1:0"]);
    Served::spawn(crate::support::BIN, &args, &[], None)
}

/// How many tasks the server holds, by its admin listing.
fn tasks_on(served: &Served) -> usize {
    let admin = format!("http://{}", served.admin);
    let (exit, listed) = json_of(&run(&["admin", "ls", "--server", &admin, "--json"]));
    assert_eq!(exit, 0, "{listed}");
    listed.as_array().expect("an array").len()
}

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches("/mcp")
}

fn result_text(value: &Value) -> &str {
    value["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn a_call_whose_first_answer_is_lost_ends_with_one_task() {
    let served = serve();
    let proxy = Proxy::start(host_port(&served.url), Answer::Lose);
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let url = proxy.url();
    let output = wait_output(
        with_journal(
            &journal,
            &[
                "call", "--url", &url, "long_job", "--arg", "steps=2", "--json",
            ],
        )
        .spawn()
        .expect("call starts"),
    );
    let (exit, value) = json_of(&output);
    assert_eq!(
        exit,
        0,
        "{value}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(result_text(&value), "done: 2 steps", "{value}");
    assert!(proxy.answered(), "the first answer was lost");
    assert_eq!(proxy.calls(), 2, "the call was sent again");
    assert_eq!(tasks_on(&served), 1, "one task on the server");
}

#[test]
fn call_resume_after_a_crash_between_send_and_answer_finds_the_task() {
    let served = serve();
    let proxy = Proxy::start(host_port(&served.url), Answer::Hold);
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = dir.path().join("journal.sqlite3");
    let url = proxy.url();
    let mut crashed = with_journal(
        &journal,
        &[
            "call", "--url", &url, "long_job", "--arg", "steps=2", "--json",
        ],
    )
    .spawn()
    .expect("call starts");
    // The call reached the server, which made its task and answered; the
    // answer is held: the CLI is between send and answer. It dies there.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !proxy.answered() {
        assert!(
            Instant::now() < deadline,
            "the server never answered the call"
        );
        assert!(
            crashed.try_wait().expect("wait").is_none(),
            "the call ended early"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    crashed.kill().expect("SIGKILL");
    let _ = crashed.wait();
    assert_eq!(tasks_on(&served), 1);

    let output = wait_output(
        with_journal(&journal, &["call", "--resume", "--json"])
            .spawn()
            .expect("resume starts"),
    );
    let (exit, value) = json_of(&output);
    assert_eq!(
        exit,
        0,
        "{value}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(result_text(&value), "done: 2 steps", "{value}");
    assert_eq!(
        proxy.calls(),
        2,
        "sent once more, through the journal's server"
    );
    assert_eq!(
        tasks_on(&served),
        1,
        "still one task: the resumed call found it"
    );

    // Answered: nothing is left to resume.
    let output = wait_output(
        with_journal(&journal, &["call", "--resume"])
            .spawn()
            .expect("starts"),
    );
    assert_eq!(output.status.code(), Some(64), "a usage error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no call whose answer never came"),
        "{stderr}"
    );
}
