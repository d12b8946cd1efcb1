#![no_main]
//! The `otel-genai` adapter: detection on the head, then a parse that must neither panic nor fail.

libfuzzer_sys::fuzz_target!(|data: &[u8]| infertrace_fuzz::parse_id("otel-genai", data));
