use std::sync::Mutex;

use axum::body::Body as AxumBody;
use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};

use super::*;

/// An HTTP answer: status, headers, body.
type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// The one answer the test server gives to every request, as bytes.
#[derive(Clone, Default)]
struct Canned(Arc<Mutex<Answer>>);

impl Canned {
    fn set(&self, status: u16, headers: &[(&'static str, &str)], body: impl Into<Vec<u8>>) {
        let headers = headers
            .iter()
            .map(|(name, value)| (*name, (*value).to_owned()))
            .collect();
        *self.0.lock().unwrap() = (status, headers, body.into());
    }
}

async fn answer(State(canned): State<Canned>) -> Response {
    let (status, headers, body) = canned.0.lock().unwrap().clone();
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    response.body(AxumBody::from(body)).unwrap()
}

/// A server on a loopback port that answers every request with `canned`.
async fn serve(canned: Canned) -> Arc<str> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/mcp", axum::routing::any(answer))
        .with_state(canned);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url.into()
}

fn message(value: Value) -> ClientJsonRpcMessage {
    serde_json::from_value(value).unwrap()
}

fn request(id: u64, method: &str, params: &Value) -> ClientJsonRpcMessage {
    message(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

fn initialize() -> ClientJsonRpcMessage {
    request(
        0,
        "initialize",
        &json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}),
    )
}

fn initialize_result() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}},
        "serverInfo": {"name": "s", "version": "0"}}})
}

/// A link that has seen a 2025-11-25 `InitializeResult`.
fn legacy_link() -> Arc<Link> {
    let link = Arc::new(Link::default());
    link.observe_message(initialize_result().to_string().as_bytes());
    link
}

fn get(id: u64) -> ClientJsonRpcMessage {
    request(id, "tasks/get", &json!({"taskId": "t-1"}))
}

fn task_answer(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"taskId": "t-1", "status": "working",
        "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:30:00Z",
        "ttl": 60000, "pollInterval": 250}})
}

/// What a client made of an answer, in a form two clients can be compared by.
async fn outcome(result: Result<StreamableHttpPostResponse, Failure>) -> String {
    match result {
        Ok(StreamableHttpPostResponse::Accepted) => "accepted".into(),
        Ok(StreamableHttpPostResponse::Json(message, session)) => format!(
            "json {} session {session:?}",
            serde_json::to_string(&message).unwrap()
        ),
        Ok(StreamableHttpPostResponse::Sse(mut events, session)) => {
            let mut seen = Vec::new();
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => seen.push(format!("{:?} {:?}", event.event, event.data)),
                    Err(_) => {
                        seen.push("error".into());
                        break;
                    }
                }
            }
            format!("sse {seen:?} session {session:?}")
        }
        Err(StreamableHttpError::SessionExpired) => "session expired".into(),
        Err(StreamableHttpError::HttpStatus(error)) => {
            format!("status {} {:?}", error.status, error.retry_after)
        }
        Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => {
            format!("too large {max_size}")
        }
        Err(StreamableHttpError::UnexpectedServerResponse(_)) => "unexpected response".into(),
        Err(StreamableHttpError::UnexpectedContentType(content_type)) => {
            format!("content type {content_type:?}")
        }
        Err(StreamableHttpError::AuthRequired(error)) => {
            format!("auth {}", error.www_authenticate_header)
        }
        Err(StreamableHttpError::InsufficientScope(error)) => format!(
            "scope {} {:?}",
            error.www_authenticate_header, error.required_scope
        ),
        Err(StreamableHttpError::ReservedHeaderConflict(name)) => format!("reserved {name}"),
        Err(other) => format!("other {other}"),
        Ok(_) => "another response".into(),
    }
}

/// Sends `message` with the tap (on `link`) and with rmcp's own reqwest
/// client to a server answering `canned`, and returns both outcomes.
async fn both(
    url: &Arc<str>,
    link: &Arc<Link>,
    message: &ClientJsonRpcMessage,
    session: Option<&str>,
    limits: StreamableHttpResponseLimits,
) -> (String, String) {
    let tap = TapHttp::new(reqwest::Client::new(), link.clone());
    assert!(
        tap.reads_answer(message),
        "the tap reads this answer itself"
    );
    let session: Option<Arc<str>> = session.map(Into::into);
    let ours = tap
        .post_message_with_response_limits(
            url.clone(),
            message.clone(),
            session.clone(),
            None,
            HashMap::new(),
            limits,
        )
        .await;
    let rmcp = reqwest::Client::new()
        .post_message_with_response_limits(
            url.clone(),
            message.clone(),
            session,
            None,
            HashMap::new(),
            limits,
        )
        .await;
    (outcome(ours).await, outcome(rmcp).await)
}

const JSON: (&str, &str) = ("content-type", "application/json");
const SSE: (&str, &str) = ("content-type", "text/event-stream");

#[tokio::test]
async fn a_json_body_is_read_and_rmcp_gets_what_its_own_client_would() {
    let canned = Canned::default();
    let url = serve(canned.clone()).await;
    let limits = StreamableHttpResponseLimits::default();

    // The InitializeResult, before the era is known: capabilities.tasks is kept.
    let link = Arc::new(Link::default());
    canned.set(
        200,
        &[JSON, ("mcp-session-id", "s-1")],
        initialize_result().to_string(),
    );
    let (ours, rmcp) = both(&url, &link, &initialize(), None, limits).await;
    assert_eq!(ours, rmcp);
    assert!(ours.contains(r#"session Some("s-1")"#), "{ours}");
    let tasks = link
        .server_tasks()
        .expect("the tap saw the InitializeResult");
    assert_eq!(
        tasks.map(|tasks| tasks.methods()),
        Some(vec!["tasks/get", "tasks/result", "tasks/cancel"])
    );

    // A tasks/get answer: kept with the ttl and pollInterval rmcp's types drop.
    canned.set(200, &[JSON], task_answer(7).to_string());
    let (ours, rmcp) = both(&url, &link, &get(7), Some("s-1"), limits).await;
    assert_eq!(ours, rmcp);
    assert!(
        !ours.contains("pollInterval"),
        "rmcp's parse drops it: {ours}"
    );
    let kept = link.take_answer(&rmcp::model::RequestId::Number(7));
    assert_eq!(kept, Some(task_answer(7)["result"].clone()));

    // A media type in other case and with parameters is JSON all the same.
    canned.set(
        200,
        &[("content-type", "Application/JSON; charset=utf-8")],
        task_answer(8).to_string(),
    );
    let (ours, rmcp) = both(&url, &link, &get(8), Some("s-1"), limits).await;
    assert_eq!(ours, rmcp);
    assert!(
        link.take_answer(&rmcp::model::RequestId::Number(8))
            .is_some()
    );
}

#[tokio::test]
async fn an_sse_answer_is_streamed_and_watched_and_other_answers_end_alike() {
    let canned = Canned::default();
    let url = serve(canned.clone()).await;
    let limits = StreamableHttpResponseLimits::default();
    let link = legacy_link();
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1}});
    let sse = format!(
        "event: message\r\ndata: {progress}\r\n\r\n: keep-alive\n\nid: 2\ndata: {}\n\n",
        task_answer(9)
    );
    // Status, headers, body, and the session the request is sent in.
    type Case<'a> = (u16, Vec<(&'static str, &'a str)>, String, Option<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        (200, vec![SSE], sse, Some("s-1")),
        (202, vec![], String::new(), Some("s-1")),
        (204, vec![JSON], String::new(), Some("s-1")),
        (
            404,
            vec![JSON],
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}"#
                .into(),
            Some("s-1"),
        ),
        (
            404,
            vec![("content-type", "text/plain")],
            "no such thing".into(),
            None,
        ),
        (
            400,
            vec![JSON],
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"bad"}}"#.into(),
            Some("s-1"),
        ),
        (
            400,
            vec![JSON],
            r#"{"nothing": "useful"}"#.into(),
            Some("s-1"),
        ),
        (
            500,
            vec![("content-type", "text/plain"), ("retry-after", "3")],
            "down".into(),
            Some("s-1"),
        ),
        (
            503,
            vec![JSON],
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"busy"}}"#.into(),
            Some("s-1"),
        ),
        (
            429,
            vec![JSON, ("retry-after", "1")],
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"slow down"}}"#.into(),
            Some("s-1"),
        ),
        (
            401,
            vec![JSON, ("www-authenticate", r#"Bearer realm="mcp""#)],
            "{}".into(),
            Some("s-1"),
        ),
        (
            403,
            vec![(
                "www-authenticate",
                r#"Bearer error="insufficient_scope", scope="tasks:read tasks:write""#,
            )],
            String::new(),
            Some("s-1"),
        ),
        (
            403,
            vec![JSON],
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"no"}}"#.into(),
            Some("s-1"),
        ),
        (
            200,
            vec![("content-type", "text/html")],
            "<html/>".into(),
            Some("s-1"),
        ),
        (200, vec![], "{}".into(), Some("s-1")),
        (200, vec![JSON], "not json".into(), Some("s-1")),
        (
            200,
            vec![JSON],
            format!("[{}]", task_answer(9)),
            Some("s-1"),
        ),
    ];
    for (status, headers, body, session) in cases {
        canned.set(status, &headers, body.clone());
        let (ours, rmcp) = both(&url, &link, &get(9), session, limits).await;
        assert_eq!(ours, rmcp, "HTTP {status} {headers:?} {body}");
    }
    // The SSE answer was watched (the last case, a batch, which rmcp cannot
    // take either, was not kept).
    assert_eq!(
        link.take_answer(&rmcp::model::RequestId::Number(9)),
        Some(task_answer(9)["result"].clone())
    );
    assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(9)), None);
}

#[tokio::test]
async fn bodies_past_the_limits_answer_their_request_with_the_bound() {
    let canned = Canned::default();
    let url = serve(canned.clone()).await;
    let link = legacy_link();
    let mut limits = StreamableHttpResponseLimits::default();
    limits.max_json_response_size = 64;
    limits.max_sse_event_size = 64;
    let too_large = |outcome: &str| {
        // An SSE event's data is shown quoted (twice): read without quotes.
        let outcome = outcome.replace(['\\', '"'], "");
        outcome.contains("id:3,error")
            && outcome.contains("mcpTasksClient:answerTooLarge")
            && outcome.contains("maxAnswerBytes:64")
    };
    canned.set(200, &[JSON], task_answer(3).to_string());
    let (ours, rmcp) = both(&url, &link, &get(3), Some("s-1"), limits).await;
    assert!(too_large(&ours), "{ours}");
    assert_eq!(rmcp, "too large 64", "rmcp's own client fails the POST");
    assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(3)), None);
    canned.set(200, &[SSE], format!("data: {}\n\n", task_answer(3)));
    let (ours, rmcp) = both(&url, &link, &get(3), Some("s-1"), limits).await;
    assert!(too_large(&ours) && ours.starts_with("sse"), "{ours}");
    assert!(rmcp.contains("error"), "{rmcp}");
    assert_eq!(link.take_answer(&rmcp::model::RequestId::Number(3)), None);

    // Answers the tap leaves to rmcp's client (a 2026-07-28 server's): its
    // bounds, read back from its errors the same way.
    let modern = TapHttp::new(reqwest::Client::new(), Arc::new(Link::default()));
    assert!(!modern.reads_answer(&get(3)));
    for content in [JSON, SSE] {
        let body = match content {
            SSE => format!("data: {}\n\n", task_answer(3)),
            _ => task_answer(3).to_string(),
        };
        canned.set(200, &[content], body);
        let answered = modern
            .post_message_with_response_limits(
                url.clone(),
                get(3),
                Some("s-1".into()),
                None,
                HashMap::new(),
                limits,
            )
            .await;
        let answered = outcome(answered).await;
        assert!(too_large(&answered), "{content:?}: {answered}");
    }
}

#[tokio::test]
async fn only_the_answers_the_era_needs_are_read_here_and_discover_turns_the_tap_off() {
    let undecided = TapHttp::new(reqwest::Client::new(), Arc::new(Link::default()));
    let legacy = TapHttp::new(reqwest::Client::new(), legacy_link());
    let notification = message(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let discover = request(1, "server/discover", &json!({}));
    let call = request(2, "tools/call", &json!({"name": "x"}));
    let list = request(3, "tools/list", &json!({}));
    let ping = request(4, "ping", &json!({}));
    assert!(undecided.reads_answer(&initialize()));
    for other in [&discover, &call, &get(5), &notification] {
        assert!(!undecided.reads_answer(other));
    }
    for read in [&call, &list, &get(5)] {
        assert!(legacy.reads_answer(read));
    }
    for other in [&initialize(), &discover, &ping, &notification] {
        assert!(!legacy.reads_answer(other));
    }

    // A 2026-07-28 server answers server/discover with a plain JSON body:
    // rmcp's client reads it, and its typed result turns the tap off.
    let canned = Canned::default();
    let url = serve(canned.clone()).await;
    let result = rmcp::model::DiscoverResult::new(
        vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        rmcp::model::ServerCapabilities::default(),
    );
    canned.set(
        200,
        &[JSON],
        json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string(),
    );
    let answer = undecided
        .post_message(url, discover, None, None, HashMap::new())
        .await;
    assert!(matches!(answer, Ok(StreamableHttpPostResponse::Json(..))));
    assert!(!undecided.link.tapping());
    assert!(!undecided.reads_answer(&initialize()));
}

#[test]
fn an_sse_event_is_measured_up_to_its_blank_line() {
    // A line counts with the newline that joins it to the next.
    let mut size = EventSize::new(11);
    assert!(size.fits(b"data: 1234\r"));
    assert!(
        size.fits(b"\n\r\n"),
        "a CRLF split across chunks ends one line"
    );
    assert!(size.fits(b"data: 1234\n\ndata: 1234\n\n"));
    assert!(!size.fits(b"data: 123456"), "one byte too many");
    let mut size = EventSize::new(11);
    assert!(size.fits(b"a: 1\nb: 2\nc"));
    assert!(!size.fits(b"c"), "the lines of one event add up");
}

#[test]
fn the_scope_of_a_challenge() {
    assert_eq!(
        required_scope(r#"Bearer error="insufficient_scope", scope="a b""#).as_deref(),
        Some("a b")
    );
    assert_eq!(
        required_scope("Bearer Scope=read:data, x=y").as_deref(),
        Some("read:data")
    );
    assert_eq!(required_scope("Bearer realm=x"), None);
    assert_eq!(required_scope("Bearer scope=").as_deref(), None);
}
