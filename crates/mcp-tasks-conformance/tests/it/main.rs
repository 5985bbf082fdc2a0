//! Integration tests of the `conformance-server` binary, and of the client
//! against the `hostile-server`.

mod faults;
mod gateway;
mod gateway_budget;
mod gateway_http;
mod gateway_mrtr;
mod gateway_roots;
mod gateway_sync;
mod gateway_tasks;
mod hostile;
mod logs;
mod server;
mod support;
