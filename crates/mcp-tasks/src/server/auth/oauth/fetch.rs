//! Fetching JSON from an authorization server: a bounded time, a bounded
//! body, and errors that say which address failed and how (never a secret).

use std::time::Duration;

use serde::de::DeserializeOwned;

/// The largest document read from an authorization server.
const MAX_BODY_BYTES: usize = 1 << 20;

/// The HTTP client for authorization servers: `timeout` per request, at
/// most three redirects.
pub(super) fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::limited(3))
        .build()
        .map_err(|error| error.to_string())
}

/// Why a fetch failed.
#[derive(Debug)]
pub(super) enum FetchError {
    /// Not found (404): another address may be tried.
    NotFound,
    /// Anything else, said for a person.
    Other(String),
}

impl FetchError {
    pub(super) fn reason(&self) -> String {
        match self {
            Self::NotFound => "HTTP 404".to_owned(),
            Self::Other(reason) => reason.clone(),
        }
    }
}

/// GETs `url` and reads its JSON body as `T`.
pub(super) async fn get_json<T: DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
) -> Result<T, FetchError> {
    let response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|error| FetchError::Other(describe(&error)))?;
    read_json(response).await
}

/// Reads a response's JSON body as `T`, after its status.
pub(super) async fn read_json<T: DeserializeOwned>(
    mut response: reqwest::Response,
) -> Result<T, FetchError> {
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(FetchError::NotFound);
    }
    if !status.is_success() {
        return Err(FetchError::Other(format!("HTTP {}", status.as_u16())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| FetchError::Other(describe(&error)))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(FetchError::Other(format!(
                "the answer is larger than {MAX_BODY_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body)
        .map_err(|error| FetchError::Other(format!("the answer is not the JSON expected: {error}")))
}

/// A transport error, said without the URL's query (none of ours has one)
/// and with the cause that says the most.
pub(super) fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "no answer in time".to_owned();
    }
    if error.is_connect() {
        return "cannot connect".to_owned();
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
