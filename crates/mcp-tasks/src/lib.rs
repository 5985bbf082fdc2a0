#![doc = include_str!("../README.md")]
// The front page describes the whole crate. Built with every feature (as
// docs.rs and CI build it), its links are intra-doc links, checked; with
// some features off, the items behind them do not exist, so the links go to
// their docs.rs pages instead (reference definitions, which take precedence).
#![cfg_attr(
    not(all(
        feature = "gateway",
        feature = "http-server",
        feature = "http-client",
        feature = "contract"
    )),
    doc = include_str!("front_page_links.md")
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod form;
pub mod idempotency;
pub mod private_files;
#[cfg(any(feature = "client", feature = "server"))]
pub mod quiet;
#[cfg(any(feature = "client", feature = "server"))]
mod stdio;
pub mod task;
#[cfg(any(feature = "client", feature = "server"))]
mod telemetry;

#[cfg(feature = "client")]
pub mod client;

#[doc(hidden)]
pub use rmcp as __rmcp;

pub use form::Elicited;
pub use idempotency::{
    IDEMPOTENCY_EXTENSION, IDEMPOTENCY_KEY_META, IdempotencyKey, InvalidIdempotencyKey,
};
pub use task::{
    CREATED_OUTCOME_EXTENSION, HANDLE_META, OUTCOME_META, RpcError, TASKS_EXTENSION, TaskId,
    TaskStatus, Timestamp, Ttl, UnixMillis,
};

#[cfg(any(feature = "client", feature = "server"))]
pub use telemetry::set_spans;

#[cfg(feature = "client")]
pub use client::{
    AwaitFrom, AwaitOptions, CallOptions, CallResponse, ConnectOptions, Endpoint, Era, Error,
    ErrorKind, InputMode, ListenChannel, ListenMode, TaskFailure, TaskOutcome, TaskState,
    TasksClient, error, validate_input_response, with_tasks_extension,
};

#[cfg(feature = "store")]
pub mod store;

#[cfg(feature = "server")]
pub mod server;

#[cfg(feature = "gateway")]
pub mod gateway;

#[cfg(feature = "__fuzzing")]
#[doc(hidden)]
pub mod __fuzz;

/// The library guide, `docs/library.md`, whose Rust blocks run as doc tests.
#[cfg(all(doctest, feature = "http-client"))]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryGuide;
