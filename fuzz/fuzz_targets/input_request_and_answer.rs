//! Fuzz target: `mcp_tasks::__fuzz::input_request_and_answer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_tasks::__fuzz::input_request_and_answer(data));
