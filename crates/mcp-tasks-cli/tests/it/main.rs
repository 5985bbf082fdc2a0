//! Integration tests of the `mcp-tasks` binary, end to end: every test runs
//! the real binary. A file is named for the command and flag it drives
//! (`serve_max_running`, `call_resend_under_key`), so that the end-to-end
//! test of a feature is told apart from its library tests
//! (`crates/mcp-tasks/tests/it/server/admission.rs`). The servers it starts
//! and reads the address of come from the workspace's test kit
//! (`mcp-tasks-testkit`).

mod admin;
mod support;

mod bounded;
mod call_2025_11_25;
mod call_resend_under_key;
mod cli;
mod deploy;
mod docs;
mod flags;
mod gateway;
mod gateway_restart;
mod interactive;
mod listen;
mod mistakes;
mod oidc;
mod operator;
mod operator_page;
mod otlp_endpoint;
mod output;
mod replicas;
mod rolling;
mod serve_default_bounds;
mod serve_drain_timeout;
mod serve_max_result_bytes;
mod serve_max_running;
mod serve_oauth_issuer;
mod serve_oauth_issuer_keys;
mod serve_rate_per_caller;
mod serve_rate_replicas;
mod serve_restart_sqlite;
mod serve_stdio_connect;
mod serve_store_postgres_outage;
mod serve_task_tools;
mod serving;
mod shared_store;
mod signin;
mod team;
mod wait_last_and_ls;
mod wait_many;
