use std::sync::Mutex;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::*;

/// A server that accepts only the token it holds now, and records the
/// `Authorization` header of every request.
#[derive(Clone, Default)]
struct Gate {
    accepted: Arc<Mutex<String>>,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

const CHALLENGE: &str = r#"Bearer error="invalid_token", resource_metadata="http://x/.well-known/oauth-protected-resource/mcp""#;

const NARROW: &str = r#"Bearer error="insufficient_scope", scope="tasks:write""#;

async fn gate(State(gate): State<Gate>, headers: HeaderMap) -> Response {
    let header = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    gate.seen.lock().unwrap().push(header.clone());
    let wanted = format!("Bearer {}", gate.accepted.lock().unwrap());
    if header.as_deref() == Some("Bearer narrow") {
        (StatusCode::FORBIDDEN, [("www-authenticate", NARROW)]).into_response()
    } else if header.as_deref() == Some(wanted.as_str()) {
        StatusCode::ACCEPTED.into_response()
    } else {
        (StatusCode::UNAUTHORIZED, [("www-authenticate", CHALLENGE)]).into_response()
    }
}

async fn serve(gate_state: Gate) -> Arc<str> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/mcp", axum::routing::any(gate))
        .with_state(gate_state);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url.into()
}

/// A source that hands out `current`, and after a 401 `next` (if any).
#[derive(Debug, Default)]
struct Script {
    current: Mutex<Option<String>>,
    next: Mutex<Option<String>>,
    rejections: Mutex<Vec<(Option<String>, String)>>,
    scopes: Mutex<Vec<String>>,
}

impl BearerSource for Script {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, BearerError>> {
        Box::pin(async move { Ok(self.current.lock().unwrap().clone()) })
    }

    fn rejected<'a>(
        &'a self,
        sent: Option<&'a str>,
        challenge: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, BearerError>> {
        Box::pin(async move {
            self.rejections
                .lock()
                .unwrap()
                .push((sent.map(str::to_owned), challenge.to_owned()));
            let next = self.next.lock().unwrap().take();
            if let Some(next) = &next {
                *self.current.lock().unwrap() = Some(next.clone());
            }
            Ok(next)
        })
    }

    fn insufficient_scope(&self, challenge: &str) {
        self.scopes.lock().unwrap().push(challenge.to_owned());
    }
}

fn notification() -> ClientJsonRpcMessage {
    serde_json::from_value(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .unwrap()
}

async fn post(
    client: &BearerClient<reqwest::Client>,
    uri: &Arc<str>,
    fixed: Option<&str>,
) -> Result<StreamableHttpPostResponse, Failure<reqwest::Error>> {
    client
        .post_message(
            uri.clone(),
            notification(),
            None,
            fixed.map(str::to_owned),
            HashMap::new(),
        )
        .await
}

#[tokio::test]
async fn every_request_carries_the_token_the_source_has_then() {
    let gate = Gate::default();
    let uri = serve(gate.clone()).await;
    let script = Arc::new(Script::default());
    let client = BearerClient::new(reqwest::Client::new(), script.clone());
    for token in ["first", "second"] {
        *gate.accepted.lock().unwrap() = token.into();
        *script.current.lock().unwrap() = Some(token.into());
        let answer = post(&client, &uri, Some("fixed")).await.unwrap();
        assert!(matches!(answer, StreamableHttpPostResponse::Accepted));
    }
    assert_eq!(
        *gate.seen.lock().unwrap(),
        [Some("Bearer first".into()), Some("Bearer second".into())],
        "the source's token, not the fixed one"
    );
    assert!(script.rejections.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_401_asks_the_source_once_and_the_request_goes_again_with_its_new_token() {
    let gate = Gate::default();
    let uri = serve(gate.clone()).await;
    *gate.accepted.lock().unwrap() = "fresh".into();
    let script = Arc::new(Script::default());
    *script.current.lock().unwrap() = Some("stale".into());
    *script.next.lock().unwrap() = Some("fresh".into());
    let client = BearerClient::new(reqwest::Client::new(), script.clone());
    let answer = post(&client, &uri, None).await.unwrap();
    assert!(matches!(answer, StreamableHttpPostResponse::Accepted));
    assert_eq!(
        *gate.seen.lock().unwrap(),
        [Some("Bearer stale".into()), Some("Bearer fresh".into())]
    );
    assert_eq!(
        *script.rejections.lock().unwrap(),
        [(Some("stale".into()), CHALLENGE.into())],
        "the source is told which token was refused, and the challenge"
    );
}

#[tokio::test]
async fn without_a_new_token_the_401_stands_and_nothing_is_sent_again() {
    let gate = Gate::default();
    let uri = serve(gate.clone()).await;
    *gate.accepted.lock().unwrap() = "never-given".into();
    let script = Arc::new(Script::default());
    let client = BearerClient::new(reqwest::Client::new(), script.clone());
    // No token at all: sent without one, refused, the source has none.
    let error = post(&client, &uri, None).await.unwrap_err();
    let StreamableHttpError::AuthRequired(refusal) = error else {
        panic!("a 401, got {error}");
    };
    assert_eq!(refusal.www_authenticate_header, CHALLENGE);
    assert_eq!(*gate.seen.lock().unwrap(), [None]);
    // The same token again is not sent twice.
    *script.current.lock().unwrap() = Some("same".into());
    *script.next.lock().unwrap() = Some("same".into());
    assert!(matches!(
        post(&client, &uri, None).await,
        Err(StreamableHttpError::AuthRequired(_))
    ));
    assert_eq!(gate.seen.lock().unwrap().len(), 2);
    assert_eq!(script.rejections.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_source_without_a_token_leaves_the_fixed_one() {
    let gate = Gate::default();
    let uri = serve(gate.clone()).await;
    *gate.accepted.lock().unwrap() = "fixed".into();
    let client = BearerClient::new(reqwest::Client::new(), Arc::new(Script::default()));
    assert!(post(&client, &uri, Some("fixed")).await.is_ok());
    assert_eq!(*gate.seen.lock().unwrap(), [Some("Bearer fixed".into())]);
}

#[derive(Debug)]
struct Broken;

impl BearerSource for Broken {
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, BearerError>> {
        Box::pin(async { Err("the token file cannot be read".into()) })
    }

    fn rejected<'a>(
        &'a self,
        _: Option<&'a str>,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, BearerError>> {
        Box::pin(async { Ok(None) })
    }
}

#[tokio::test]
async fn a_source_that_fails_fails_the_request_with_its_reason_before_sending() {
    let gate = Gate::default();
    let uri = serve(gate.clone()).await;
    let client = BearerClient::new(reqwest::Client::new(), Arc::new(Broken));
    let error = post(&client, &uri, None).await.unwrap_err();
    assert!(
        error.to_string().contains("the token file cannot be read"),
        "{error}"
    );
    assert!(gate.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_403_for_a_scope_is_told_to_the_source_and_not_sent_again() {
    let gate = Gate::default();
    let uri = serve(gate.clone()).await;
    let script = Arc::new(Script::default());
    *script.current.lock().unwrap() = Some("narrow".into());
    *script.next.lock().unwrap() = Some("other".into());
    let client = BearerClient::new(reqwest::Client::new(), script.clone());
    let error = post(&client, &uri, None).await.unwrap_err();
    assert!(
        matches!(error, StreamableHttpError::InsufficientScope(_)),
        "{error}"
    );
    assert_eq!(*script.scopes.lock().unwrap(), [NARROW]);
    assert!(script.rejections.lock().unwrap().is_empty(), "not a 401");
    assert_eq!(gate.seen.lock().unwrap().len(), 1, "sent once");
}
