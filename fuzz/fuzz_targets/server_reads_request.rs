//! Fuzz target: `mcp_tasks::__fuzz::server_reads_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_tasks::__fuzz::server_reads_request(data));
