//! Integration tests of the `mcp-tasks` binary.

mod cli;
mod interactive;
