//! Errors for people: one line saying what failed and what to do, without
//! Rust type paths or phrases said twice; `-v` adds the whole chain.
//!
//! rmcp's transport errors do not give their causes as `source()` (its
//! `ClientInitializeError::TransportError` and `StreamableHttpError::Client`
//! keep them in fields), so [`why_unreachable`] reads those fields itself.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use crate::connect::{Hint, Target};

/// `-v`'s count, for the details added to an error.
static VERBOSE: AtomicU8 = AtomicU8::new(0);

/// Records `-v`'s count (once, at start).
pub(crate) fn set_verbose(verbose: u8) {
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Whether `-v` was given: errors then carry their whole chain.
pub(crate) fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed) > 0
}

/// Whether stderr may be coloured: a terminal, and no `NO_COLOR`
/// (<https://no-color.org>: set and not empty).
pub(crate) fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// `error` and its causes, each said once, without type paths: each cause
/// that the text so far already says is left out (an error whose message
/// repeats its source's), and a bracketed Rust path (`[rmcp::...]`) is cut.
pub(crate) fn chain(error: &dyn StdError) -> String {
    let mut text = without_type_paths(&error.to_string());
    let mut source = error.source();
    while let Some(cause) = source {
        let said = without_type_paths(&cause.to_string());
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// `text` less its bracketed Rust paths (`Transport [a::b<c::D>] error`
/// reads `Transport error`).
fn without_type_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(" [") {
        let inner = &rest[open + 2..];
        let Some(close) = closing_bracket(inner) else {
            break;
        };
        let path = &inner[..close];
        out.push_str(&rest[..open]);
        // A Rust path: no space, and `::` before a name (not `[::1]`, an
        // IPv6 address); anything else is kept.
        let rust_path = !path.contains(' ')
            && path.split("::").skip(1).any(|after| {
                after
                    .chars()
                    .next()
                    .is_some_and(|first| first.is_alphabetic() || first == '_')
            });
        if !rust_path {
            out.push_str(&rest[open..open + 2 + close + 1]);
        }
        rest = &inner[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Where the `]` that closes a `[` just before `text` is.
fn closing_bracket(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, char) in text.char_indices() {
        match char {
            '[' => depth += 1,
            ']' if depth == 0 => return Some(at),
            ']' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The message for people of a connection to `target` that failed with
/// `error`: what failed and what to do, in one line; with `-v`, the whole
/// chain on a second.
pub(crate) fn unreachable(target: &Target, error: &anyhow::Error) -> String {
    // Only the connection's own failure is read for a known cause: a
    // sign-in's errors are written for people already.
    let why = error
        .downcast_ref::<mcp_tasks::Error>()
        .and_then(|_| why_unreachable(error.as_ref()));
    let line = match (error.downcast_ref::<Hint>(), why) {
        (Some(hint), _) => hint.0.clone(),
        (None, Some(why)) => why.say(target),
        (None, None) if error.downcast_ref::<mcp_tasks::Error>().is_some() => format!(
            "cannot connect to {}: {}",
            shown(target),
            chain(error.as_ref())
        ),
        (None, None) => chain(error.as_ref()),
    };
    with_details(line, error.as_ref())
}

/// `line`, and with `-v` the chain of `error` as its details.
pub(crate) fn with_details(line: String, error: &dyn StdError) -> String {
    if verbose() {
        format!("{line}\n  details: {}", details(error))
    } else {
        line
    }
}

/// The whole chain of `error`, and the causes rmcp keeps in fields (for `-v`).
fn details(error: &dyn StdError) -> String {
    let mut parts = vec![chain(error)];
    let mut pending: Vec<&(dyn StdError + 'static)> = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        pending.push(cause);
        source = cause.source();
    }
    let mut seen = 0;
    while let Some(cause) = pending.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        for inner in hidden_causes(cause) {
            let said = chain(inner);
            if !parts.iter().any(|part| part.contains(&said)) {
                parts.push(said);
            }
            pending.push(inner);
        }
    }
    parts.join("; ")
}

/// The target as the user gave it.
fn shown(target: &Target) -> String {
    match target {
        Target::Url(url) => url.clone(),
        Target::Stdio(command) => format!("{command:?} on stdio"),
    }
}

/// Why a connection failed, as far as the errors say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unreachable {
    /// Nothing listens at the address.
    Refused,
    /// The host name does not resolve.
    NoSuchHost,
    /// `https://` to a server that answered in plain HTTP.
    NotTls,
    /// `http://` to a server that did not answer in plain HTTP (HTTPS?).
    NotPlainHttp,
    /// The TLS handshake failed (the certificate, mostly).
    Tls(String),
    /// An HTTP status where an MCP answer was due, with the message of
    /// the JSON-RPC error in its body, if any.
    Status(u16, Option<String>),
    /// An answer that is neither JSON nor an event stream.
    ContentType(Option<String>),
    /// An answer that does not read as JSON-RPC.
    NotJsonRpc,
    /// 401, with its challenge (`error="invalid_token"`: the token was refused).
    Unauthorized { challenge: String },
    /// 403 for want of a scope.
    Forbidden,
    /// The peer closed the connection (a stdio child that exited).
    Closed,
    /// No answer in time.
    TimedOut,
}

impl Unreachable {
    /// One line for people about `target`.
    fn say(&self, target: &Target) -> String {
        let at = shown(target);
        let address = match target {
            Target::Url(url) => authority(url),
            Target::Stdio(_) => at.clone(),
        };
        match self {
            Self::Refused => format!(
                "nothing answers at {address} (connection refused): is the server running, and \
                 on this host and port?"
            ),
            Self::NoSuchHost => {
                format!(
                    "cannot resolve the host of {at}: check the URL (and that this machine \
                     can resolve names)"
                )
            }
            Self::NotTls => {
                format!("{address} answered in plain HTTP, not HTTPS: try the URL with http://")
            }
            Self::NotPlainHttp if at.starts_with("https://") => {
                format!("{address} closed the connection without an answer")
            }
            Self::NotPlainHttp => format!(
                "{address} dropped the request without an HTTP answer: if it serves HTTPS, use \
                 the URL with https://"
            ),
            Self::Tls(why) => format!("the TLS handshake with {address} failed: {why}"),
            Self::Status(404, _) => format!(
                "{at} answered HTTP 404: no MCP endpoint at this path (check the URL's path; \
                 mcp-tasks serve answers on /mcp)"
            ),
            Self::Status(status @ 300..=399, _) => format!(
                "{at} redirects elsewhere (HTTP {status}), which this client does not follow: \
                 give the URL it redirects to (https:// for a server that wants HTTPS?)"
            ),
            // The server said why (our own refusals do: a Host not allowed).
            Self::Status(status, Some(message)) => {
                format!("{at} refused the connection (HTTP {status}): {message}")
            }
            Self::Status(status, None) => format!(
                "{at} answered an MCP request with HTTP {status}: is this the server's MCP \
                 endpoint?"
            ),
            Self::ContentType(kind) => format!(
                "{at} answered with {}, not MCP: is this the server's MCP endpoint?",
                kind.as_deref().unwrap_or("no content type")
            ),
            Self::NotJsonRpc => format!(
                "{at} answered with something that is not MCP: is this the server's MCP endpoint?"
            ),
            Self::Unauthorized { challenge } if challenge.contains("invalid_token") => format!(
                "{at} refused the token (HTTP 401, {challenge}): check the Authorization header, \
                 or sign in again after mcp-tasks logout URL"
            ),
            Self::Unauthorized { challenge } => format!(
                "{at} needs a token (HTTP 401, {challenge}): give --header 'Authorization: Bearer \
                 TOKEN', or sign in with --oauth-client-id"
            ),
            Self::Forbidden => format!("{at} refused the token for want of a scope (403)"),
            Self::Closed => match target {
                Target::Stdio(_) => format!(
                    "{at} ended before the MCP handshake (its own message, if any, is above): \
                     check that the command runs and serves MCP on stdio"
                ),
                Target::Url(_) => {
                    format!("{at} closed the connection before the MCP handshake ended")
                }
            },
            Self::TimedOut => format!("{at} did not complete the MCP handshake in time"),
        }
    }
}

/// `host:port` of `url` (as given, when it does not parse).
fn authority(url: &str) -> String {
    let Ok(parsed) = url.parse::<http::Uri>() else {
        return url.to_owned();
    };
    let Some(host) = parsed.host() else {
        return url.to_owned();
    };
    let port = parsed
        .port_u16()
        .unwrap_or(if parsed.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    format!("{host}:{port}")
}

/// rmcp's causes that it keeps in fields rather than as `source()`.
fn hidden_causes<'a>(error: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    if let Some(init) = initialize_error(error) {
        return match init {
            ClientInitializeError::TransportError { error, .. } => vec![&*error.error],
            // The fallback's failure first: a server that answers neither
            // way said the most to the second.
            ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
                vec![&**fallback, &**discover]
            }
            _ => Vec::new(),
        };
    }
    if let Some(StreamableHttpError::Client(http)) =
        error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        return vec![http];
    }
    Vec::new()
}

/// rmcp's initialize error, as itself or boxed (a boxed source is a cause
/// of its own type: `Box<E>` is an error too).
fn initialize_error<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a ClientInitializeError> {
    error.downcast_ref::<ClientInitializeError>().or_else(|| {
        error
            .downcast_ref::<Box<ClientInitializeError>>()
            .map(|boxed| &**boxed)
    })
}

/// Why the connection failed, read from `error`'s causes (rmcp's fields
/// too), or `None` when nothing known is found.
pub(crate) fn why_unreachable(error: &(dyn StdError + 'static)) -> Option<Unreachable> {
    let mut pending = vec![error];
    let mut seen = 0;
    while let Some(error) = pending.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        if let Some(why) = known(error) {
            return Some(why);
        }
        // Causes in order: the first found wins.
        let mut next: Vec<_> = hidden_causes(error);
        next.extend(error.source());
        pending.extend(next.into_iter().rev());
    }
    None
}

/// What `error` itself says, if it is one of the errors this knows.
fn known(error: &(dyn StdError + 'static)) -> Option<Unreachable> {
    if let Some(init) = initialize_error(error) {
        return match init {
            ClientInitializeError::ConnectionClosed(_) => Some(Unreachable::Closed),
            _ => None,
        };
    }
    if let Some(mcp_tasks::Error::ConnectTimeout(_)) = error.downcast_ref::<mcp_tasks::Error>() {
        return Some(Unreachable::TimedOut);
    }
    if let Some(http) = error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        return match http {
            StreamableHttpError::HttpStatus(status) => {
                Some(Unreachable::Status(status.status, None))
            }
            StreamableHttpError::UnexpectedContentType(kind) => {
                Some(Unreachable::ContentType(kind.clone()))
            }
            // rmcp says a status it does not expect in words: "HTTP 404 Not Found".
            StreamableHttpError::UnexpectedServerResponse(said) => {
                Some(status_in(said).map_or(Unreachable::NotJsonRpc, |status| {
                    Unreachable::Status(status, error_message_in(said))
                }))
            }
            StreamableHttpError::Deserialize(_) => Some(Unreachable::NotJsonRpc),
            StreamableHttpError::AuthRequired(challenge) => Some(Unreachable::Unauthorized {
                challenge: challenge
                    .www_authenticate_header
                    .chars()
                    .filter(|char| !char.is_control())
                    .take(200)
                    .collect(),
            }),
            StreamableHttpError::InsufficientScope(_) => Some(Unreachable::Forbidden),
            StreamableHttpError::Client(http) => of_reqwest(http),
            _ => None,
        };
    }
    if let Some(http) = error.downcast_ref::<reqwest::Error>() {
        return of_reqwest(http);
    }
    // A stdio child that exited: its pipe is closed.
    if let Some(io) = error.downcast_ref::<std::io::Error>()
        && matches!(
            io.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::UnexpectedEof
        )
    {
        return Some(Unreachable::Closed);
    }
    None
}

/// The message of the JSON-RPC error in `HTTP 403 Forbidden: {"jsonrpc":...}`
/// (rmcp keeps the body's first bytes), printable and short.
fn error_message_in(said: &str) -> Option<String> {
    let body = &said[said.find('{')?..];
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let message = value.pointer("/error/message")?.as_str()?;
    let message: String = message
        .chars()
        .filter(|char| !char.is_control())
        .take(200)
        .collect();
    (!message.is_empty()).then_some(message)
}

/// The status of `HTTP 404 Not Found`.
fn status_in(said: &str) -> Option<u16> {
    let rest = said.trim_start().strip_prefix("HTTP ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .ok()
        .filter(|status| (100..600).contains(status))
}

/// What a failed HTTP request says: refused, no such host, TLS, or an
/// answer that is not HTTP.
fn of_reqwest(error: &reqwest::Error) -> Option<Unreachable> {
    if error.is_timeout() {
        return Some(Unreachable::TimedOut);
    }
    let mut causes = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Some(Unreachable::Refused),
                // A TLS server drops a request in plain HTTP.
                std::io::ErrorKind::ConnectionReset => return Some(Unreachable::NotPlainHttp),
                _ => {}
            }
        }
        causes.push(format!("{cause:?}"));
        source = cause.source();
    }
    let said = causes.join(" ");
    if said.contains("dns error") {
        return Some(Unreachable::NoSuchHost);
    }
    if said.contains("InvalidContentType") {
        return Some(Unreachable::NotTls);
    }
    if said.contains("InvalidCertificate") || said.contains("certificate") {
        return Some(Unreachable::Tls(
            "the server's certificate is not trusted here (self-signed, expired, or for \
             another name)"
                .into(),
        ));
    }
    if said.contains("Parse(Version)")
        || said.contains("invalid HTTP version")
        || said.contains("IncompleteMessage")
        || said.contains("connection closed before message completed")
    {
        return Some(Unreachable::NotPlainHttp);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_paths_are_cut_and_other_brackets_kept() {
        assert_eq!(
            without_type_paths(
                "Send message error Transport [rmcp::a::W<rmcp::b::S<x::C<y::T>>>] error: HTTP 501"
            ),
            "Send message error Transport error: HTTP 501"
        );
        assert_eq!(
            without_type_paths("a list [1, 2] and [x::Y]"),
            "a list [1, 2] and"
        );
        assert_eq!(without_type_paths("open [rmcp::x"), "open [rmcp::x");
        assert_eq!(
            without_type_paths("cannot listen on [::1]:8080"),
            "cannot listen on [::1]:8080"
        );
    }

    #[derive(Debug)]
    struct Outer(Inner);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "the upstream \"jobs\": {}", self.0)
        }
    }
    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }
    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("did not complete the handshake")
        }
    }
    impl StdError for Inner {}

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let error = Outer(Inner);
        assert_eq!(
            chain(&error),
            "the upstream \"jobs\": did not complete the handshake"
        );
    }

    #[test]
    fn a_refusal_says_the_servers_own_message() {
        assert_eq!(
            error_message_in(
                r#"HTTP 403 Forbidden: {"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Forbidden: the Host header is not allowed"}}"#
            )
            .as_deref(),
            Some("Forbidden: the Host header is not allowed")
        );
        assert_eq!(error_message_in("HTTP 403 Forbidden: <html>"), None);
    }

    #[test]
    fn a_status_said_in_words() {
        assert_eq!(status_in("HTTP 404 Not Found"), Some(404));
        assert_eq!(status_in("HTTP 99"), None);
        assert_eq!(status_in("no status"), None);
    }

    #[test]
    fn the_authority_of_a_url() {
        assert_eq!(authority("http://127.0.0.1:1/mcp"), "127.0.0.1:1");
        assert_eq!(authority("https://tasks.example/mcp"), "tasks.example:443");
        assert_eq!(authority("not a url"), "not a url");
    }
}
