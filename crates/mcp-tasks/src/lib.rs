#![doc = include_str!("../README.md")]
// The front page describes the whole crate; with some halves turned off, its
// links to them have nothing to point at.
#![cfg_attr(
    not(all(feature = "client", feature = "http", feature = "http-client")),
    allow(rustdoc::broken_intra_doc_links)
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod form;
pub mod private_files;
#[cfg(any(feature = "client", feature = "server"))]
pub mod quiet;
#[cfg(any(feature = "client", feature = "server"))]
mod stdio;
pub mod task;

#[cfg(feature = "client")]
pub mod client;

#[doc(hidden)]
pub use rmcp as __rmcp;

pub use form::Elicited;
pub use task::{RpcError, TASKS_EXTENSION, TaskId, TaskStatus, Timestamp, Ttl, UnixMillis};

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

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod __fuzz;
