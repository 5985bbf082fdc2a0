//! Integration tests of the `conformance-server` binary, of the client
//! against the `hostile-server`, and of the task gateway in front of the
//! `plain-upstream` child process.

mod faults;
mod gateway;
mod hostile;
mod logs;
mod server;
mod support;
