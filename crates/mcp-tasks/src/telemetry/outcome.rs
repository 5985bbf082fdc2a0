//! How a request ended, as its span says it ([`Outcome`]), and what says it
//! of an error ([`SpanError`]): the server's rmcp `ErrorData` here, the
//! client's error in the client half. Whatever the features, so that the
//! halves name them without `cfg`; only feature `otel` reads them.

#![cfg_attr(
    not(all(feature = "client", feature = "server", feature = "http-server")),
    allow(dead_code, reason = "each half uses its own part")
)]

use rmcp::ErrorData;

/// How a request ended, for its span.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "otel"),
    allow(dead_code, reason = "read by the spans of feature `otel`")
)]
pub(crate) enum Outcome<'a> {
    /// Answered with a result.
    Answered,
    /// Answered with a `CallToolResult` whose `isError` is true.
    ToolError,
    /// Answered with a JSON-RPC error.
    Error { code: i64, message: &'a str },
    /// No answer (the transport failed, the wait ended): `error.type` is
    /// the class given.
    Failed(&'static str),
}

/// An error a request's span can end with: what its span says of it.
pub(crate) trait SpanError {
    /// The error as the span's outcome.
    #[cfg_attr(
        not(feature = "otel"),
        allow(dead_code, reason = "read by the spans of feature `otel`")
    )]
    fn outcome(&self) -> Outcome<'_>;
}

impl SpanError for ErrorData {
    fn outcome(&self) -> Outcome<'_> {
        Outcome::Error {
            code: i64::from(self.code.0),
            message: &self.message,
        }
    }
}
