//! Integration tests of the `mcp-tasks` binary.

mod admin;
mod support;

mod admission;
mod bounded;
mod budget;
mod cli;
mod connect;
mod connections;
mod deploy;
mod docs;
mod drain;
mod flags;
mod gateway;
mod idempotent;
mod interactive;
mod journal;
mod legacy;
mod listen;
mod mistakes;
mod oauth;
mod oauth_keys;
mod oidc;
mod operator;
mod output;
mod rate;
mod replicas;
mod restart;
mod rolling;
mod serving;
mod signin;
mod team;
mod traces;
mod wait_many;
