//! What the tests of the binary share: running it, reading its one JSON
//! object, and the servers it is pointed at.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use mcp_tasks_conformance::hostile::{self, Hostile, Scenario};
use mcp_tasks_conformance::{FixtureServer, serve_http};
use serde_json::Value;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks");

/// The binary, with a journal of this test process (never the user's).
pub(crate) fn bin() -> Command {
    let mut command = Command::new(BIN);
    let journal = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-tests-journal-{}.sqlite3", std::process::id()));
    command.env("MCP_TASKS_JOURNAL", journal);
    command
}

/// The `--stdio` command line of a fresh in-memory server.
pub(crate) fn stdio_server() -> String {
    stdio_server_polling(50)
}

/// [`stdio_server`] suggesting polls every `ms`.
pub(crate) fn stdio_server_polling(ms: u64) -> String {
    format!("{BIN} serve --stdio --store memory --poll-interval {ms}")
}

/// Runs the binary with a 60 s limit.
pub(crate) fn run(args: &[&str]) -> Output {
    run_with_env(args, &[])
}

/// [`run`] with the environment variables `env` set.
pub(crate) fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = bin()
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("mcp-tasks {args:?} ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The exit code and the one JSON object on stdout.
pub(crate) fn json_of(output: &Output) -> (i32, Value) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|error| {
        panic!(
            "stdout is not one JSON object ({error}): {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().expect("an exit code"), value)
}

/// A server on HTTP; killed when dropped.
pub(crate) type HttpServer = crate::serving::Served;

pub(crate) fn http_server() -> HttpServer {
    http_server_polling(50)
}

/// [`http_server`] suggesting polls every `ms`.
pub(crate) fn http_server_polling(ms: u64) -> HttpServer {
    http_server_with(&["--poll-interval", &ms.to_string()])
}

/// An in-memory server on HTTP with the `serve` flags `extra`.
pub(crate) fn http_server_with(extra: &[&str]) -> HttpServer {
    http_server_with_env(extra, &[])
}

/// [`http_server_with`], with the environment variables `env` set.
pub(crate) fn http_server_with_env(extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
    let mut args = vec!["--http", "127.0.0.1:0", "--store", "memory"];
    args.extend_from_slice(extra);
    HttpServer::spawn(BIN, &args, env, None)
}

pub(crate) fn on_stdio<'a>(server: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![rest[0], "--stdio", server];
    args.extend_from_slice(&rest[1..]);
    args
}

/// Runs `serve` on a listener on 127.0.0.1, on a thread and tokio runtime of
/// its own for the rest of the test process; returns the URL of `/mcp`.
pub(crate) fn serve_in_background<F, Fut>(serve: F) -> String
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>>,
{
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            address_tx
                .send(listener.local_addr().expect("an address"))
                .expect("the test waits");
            serve(listener).await
        })
    });
    let address = address_rx.recv().expect("the server listens");
    format!("http://{address}/mcp")
}

/// The conformance fixture server over HTTP; returns its URL.
pub(crate) fn fixture_server() -> String {
    serve_in_background(|listener| async move {
        let tasks = mcp_tasks::server::TaskRuntime::builder(mcp_tasks::store::MemoryStore::new())
            .with_poll_interval(Duration::from_millis(50))
            .build();
        let server = FixtureServer::new(tasks).expect("a random key");
        serve_http(server, listener).await
    })
}

/// The hostile server of `mcp_tasks_conformance::hostile` over HTTP; returns
/// its URL and a handle that counts what it received.
pub(crate) fn hostile_server(scenario: Scenario) -> (String, Hostile) {
    let hostile = Hostile::new(scenario);
    let serving = hostile.clone();
    let url = serve_in_background(move |listener| hostile::serve_http(serving, listener));
    (url, hostile)
}

/// What one plain HTTP/1.1 request got back ([`raw_http`]).
pub(crate) struct RawAnswer {
    pub(crate) status: u16,
    /// The status line and the headers.
    pub(crate) head: String,
    pub(crate) body: String,
}

impl RawAnswer {
    /// The value of header `name` (any case), if the answer has it.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// One plain HTTP/1.1 request to `address` (`host:port`) on a connection
/// of its own (`Connection: close`, so the answer ends with it): for the
/// tests that check statuses and headers exactly as a proxy would see them.
/// `headers` are whole lines (`Name: value`).
pub(crate) fn raw_http(
    address: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> RawAnswer {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream
        .write_all(request.as_bytes())
        .expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    RawAnswer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
