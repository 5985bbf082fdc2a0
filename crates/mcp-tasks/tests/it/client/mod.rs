//! The client half: `TasksClient`'s call, await, input, cancel and listen
//! mode, its deadline and journal, the 2025-11-25 era it speaks, and one
//! code path on every transport.

mod await_task;
mod connect;
mod created_outcome;
mod deadline;
mod input;
mod journal;
mod legacy;
mod legacy_http;
mod listen;
mod many;
mod one_run;
mod resume;
mod steps;
mod transports;
