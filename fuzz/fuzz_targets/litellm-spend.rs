#![no_main]
//! The `litellm-spend` adapter: detection on the head, then a parse that must neither panic nor fail.

libfuzzer_sys::fuzz_target!(|data: &[u8]| infertrace_fuzz::parse_id("litellm-spend", data));
