//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`) for rmcp.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod error;
pub mod task;

#[cfg(feature = "client")]
pub mod client;

pub use error::Error;
pub use task::{
    RpcError, TASKS_EXTENSION, TaskFailure, TaskId, TaskOutcome, TaskState, TaskStatus, Timestamp,
    Ttl,
};

#[cfg(feature = "client")]
pub use client::{
    AwaitFrom, AwaitOptions, CallOptions, CallResponse, InputMode, TasksClient,
    validate_input_response, with_tasks_extension,
};
