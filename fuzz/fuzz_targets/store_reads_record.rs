//! Fuzz target: `mcp_tasks::__fuzz::store_reads_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_tasks::__fuzz::store_reads_record(data));
