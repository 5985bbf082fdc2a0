//! Fuzz target: `mcp_tasks::__fuzz::listen_lines`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_tasks::__fuzz::listen_lines(data));
