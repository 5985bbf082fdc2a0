//! Fuzz target: `mcp_tasks::__fuzz::client_reads_answer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_tasks::__fuzz::client_reads_answer(data));
