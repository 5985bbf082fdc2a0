//! Integration tests of the `mcp-tasks` binary.

mod support;

mod cli;
mod interactive;
mod legacy;
mod listen;
mod replicas;
