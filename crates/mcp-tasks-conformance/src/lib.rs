#![doc = include_str!("../README.md")]

pub mod hostile;
pub mod plain;
mod server;

pub use server::{FixtureServer, serve_http};
