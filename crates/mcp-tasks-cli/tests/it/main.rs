//! Integration tests of the `mcp-tasks` binary.

mod support;

mod cli;
mod deploy;
mod gateway;
mod interactive;
mod journal;
mod legacy;
mod listen;
mod replicas;
mod wait_many;
