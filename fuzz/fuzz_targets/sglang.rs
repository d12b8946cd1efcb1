#![no_main]
//! Every SGLang adapter over the same bytes.

use infertrace_adapter_sglang::{SglangBench, SglangKvEvents, SglangLog, SglangMetrics, SglangRequestMetrics};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    infertrace_fuzz::parse_all(
        &[&SglangLog, &SglangRequestMetrics, &SglangMetrics, &SglangKvEvents, &SglangBench],
        data,
    );
});
