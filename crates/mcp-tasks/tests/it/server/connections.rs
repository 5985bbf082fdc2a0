//! The serving recipe's connections over real HTTP/1.1 on 127.0.0.1, each
//! a kept-alive socket the test holds: a refusal for load closes its
//! connection, an idle connection makes room for a new one at the bound,
//! and one idle past the idle timeout is closed while a busy one (a listen
//! stream) is not.

use std::time::{Duration, Instant};

use mcp_tasks::server::CreationRate;
use mcp_tasks::store::MemoryStore;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::RuntimeServer;
use crate::support::listening::{RawStream, listen_request};
use crate::support::runtime_server::{runtime_on, serve_http_with};

/// A guard against a hang, not a speed bound.
const WITHIN: Duration = Duration::from_secs(10);

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// One answer read from a kept-alive connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The status line and the headers, in lower case.
    head: String,
    body: Value,
}

impl Answer {
    fn closes(&self) -> bool {
        self.head.contains("\r\nconnection: close\r\n")
    }
}

/// A raw HTTP/1.1 connection the test keeps open between requests (no
/// `Connection: close` asked), as a pooling client does.
struct Kept {
    stream: TcpStream,
    host: String,
    read: Vec<u8>,
}

impl Kept {
    async fn connect(url: &str) -> Self {
        let host = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Self {
            stream: TcpStream::connect(&host).await.unwrap(),
            host,
            read: Vec::new(),
        }
    }

    /// POSTs `body` as JSON-RPC method `method` (naming `name`, if any)
    /// and reads the answer.
    async fn post(&mut self, method: &str, name: Option<&str>, body: &str) -> Answer {
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: {method}\r\n",
            self.host
        );
        if let Some(name) = name {
            request.push_str(&format!("Mcp-Name: {name}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.stream.write_all(request.as_bytes()).await.unwrap();
        tokio::time::timeout(WITHIN, self.answer())
            .await
            .expect("an answer")
    }

    async fn discover(&mut self) -> Answer {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META}}}}}"#);
        self.post("server/discover", None, &body).await
    }

    async fn fill(&mut self) {
        let mut buffer = [0u8; 4096];
        let read = self.stream.read(&mut buffer).await.expect("readable");
        assert!(read > 0, "the connection closed before the answer ended");
        self.read.extend_from_slice(&buffer[..read]);
    }

    /// The next answer (a body of a `Content-Length`, or chunked).
    async fn answer(&mut self) -> Answer {
        let end = loop {
            if let Some(end) = self.read.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            self.fill().await;
        };
        let head = String::from_utf8(self.read[..end].to_vec())
            .unwrap()
            .to_ascii_lowercase();
        self.read.drain(..end + 4);
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let length = head.lines().find_map(|line| {
            line.strip_prefix("content-length: ")
                .map(|length| length.trim().parse::<usize>().unwrap())
        });
        let body = match length {
            Some(length) => {
                while self.read.len() < length {
                    self.fill().await;
                }
                self.read.drain(..length).collect()
            }
            None => self.chunked().await,
        };
        Answer {
            status,
            head,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        }
    }

    async fn chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line = loop {
                if let Some(end) = self.read.windows(2).position(|w| w == b"\r\n") {
                    break end;
                }
                self.fill().await;
            };
            let size = std::str::from_utf8(&self.read[..line]).unwrap();
            let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
            self.read.drain(..line + 2);
            while self.read.len() < size + 2 {
                self.fill().await;
            }
            body.extend(self.read.drain(..size));
            self.read.drain(..2);
            if size == 0 {
                return body;
            }
        }
    }

    /// Whether the server closes the connection within `within` (the end
    /// of the stream, or a reset).
    async fn closed_within(&mut self, within: Duration) -> bool {
        let mut buffer = [0u8; 1024];
        tokio::time::timeout(within, async {
            loop {
                match self.stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await
        .is_ok()
    }
}

/// A `tools/call` of the `forever` tool as a task.
fn forever_call(id: u32) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"forever","arguments":{{}},{META}}}}}"#
    )
}

fn cancel(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":{{"taskId":"{id}",{META}}}}}"#
    )
}

#[tokio::test]
async fn a_refusal_for_load_closes_its_connection() {
    // One listen stream, and one creation an hour.
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_max_listen_streams(1)
            .with_rate_per_caller(Some("1/h".parse::<CreationRate>().unwrap()))
            .build(),
    );
    let url = serve_http_with(server, |recipe| recipe).await;
    let mut kept = Kept::connect(&url).await;
    let created = kept
        .post("tools/call", Some("forever"), &forever_call(1))
        .await;
    assert_eq!(created.status, 200, "{created:?}");
    assert!(
        !created.closes(),
        "an answer keeps its connection: {created:?}"
    );
    let task = created.body["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stream = RawStream::open(&url, None, &listen_request(json!(1), &[&task], true)).await;
    assert_eq!(stream.status, 200);
    stream.next_within(WITHIN).await.expect("acknowledged");

    // Past the listen budget, on the kept connection: 503, then closed.
    let listen = listen_request(json!(2), &[&task], true).to_string();
    let refused = kept.post("subscriptions/listen", None, &listen).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.body["error"]["data"]["reason"], "listenStreams");
    assert!(
        refused.head.contains("\r\nretry-after: 5\r\n"),
        "{refused:?}"
    );
    assert!(refused.closes(), "{refused:?}");
    assert!(kept.closed_within(WITHIN).await, "closed after the refusal");

    // Past the creation rate, on a new kept connection: the same.
    let mut kept = Kept::connect(&url).await;
    assert_eq!(kept.discover().await.status, 200);
    let refused = kept
        .post("tools/call", Some("forever"), &forever_call(3))
        .await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.body["error"]["data"]["reason"], "rateLimited");
    assert!(refused.closes(), "{refused:?}");
    assert!(kept.closed_within(WITHIN).await, "closed after the refusal");
}

#[tokio::test]
async fn at_the_bound_the_longest_idle_connection_makes_room() {
    let server = RuntimeServer::new(
        runtime_on(MemoryStore::new())
            .with_max_listen_streams(1)
            .build(),
    );
    let url = serve_http_with(server, |recipe| recipe.with_max_connections(3)).await;
    // Three kept-alive connections, answered in turn, then idle.
    let mut first = Kept::connect(&url).await;
    let mut second = Kept::connect(&url).await;
    let mut third = Kept::connect(&url).await;
    for kept in [&mut first, &mut second, &mut third] {
        assert_eq!(kept.discover().await.status, 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A fourth is served: the first, idle for the longest, made room.
    let mut fourth = Kept::connect(&url).await;
    let answer = fourth.discover().await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        first.closed_within(WITHIN).await,
        "the longest idle is closed"
    );
    for kept in [&mut second, &mut third, &mut fourth] {
        let answer = kept.discover().await;
        assert_eq!(answer.status, 200, "the others stay open: {answer:?}");
    }
}

#[tokio::test]
async fn an_idle_connection_closes_after_the_idle_timeout_and_a_stream_does_not() {
    const IDLE: Duration = Duration::from_millis(400);
    let url = serve_http_with(RuntimeServer::in_memory(), |recipe| {
        recipe.with_idle_timeout(IDLE)
    })
    .await;
    let mut kept = Kept::connect(&url).await;
    let created = kept
        .post("tools/call", Some("forever"), &forever_call(1))
        .await;
    let task = created.body["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stream = RawStream::open(&url, None, &listen_request(json!(1), &[&task], true)).await;
    stream.next_within(WITHIN).await.expect("acknowledged");
    // Requests every 100 ms for twice the idle timeout: one connection.
    let started = Instant::now();
    while started.elapsed() < 2 * IDLE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(kept.discover().await.status, 200);
    }
    let answered = Instant::now();
    assert!(kept.closed_within(WITHIN).await, "closed once idle");
    let idle = answered.elapsed();
    assert!(
        idle >= IDLE - Duration::from_millis(5) && idle < IDLE + Duration::from_secs(2),
        "closed after {idle:?} idle"
    );
    // The stream, open all along, still hears its task.
    let mut kept = Kept::connect(&url).await;
    let cancelled = kept.post("tasks/cancel", Some(&task), &cancel(&task)).await;
    assert_eq!(cancelled.status, 200, "{cancelled:?}");
    let mut heard = Value::Null;
    while heard["params"]["status"] != "cancelled" {
        heard = stream
            .next_within(WITHIN)
            .await
            .expect("the cancel is heard");
    }
}
