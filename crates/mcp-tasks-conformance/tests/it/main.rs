//! Integration tests of the `conformance-server` binary.

mod server;
