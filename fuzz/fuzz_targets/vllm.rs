#![no_main]
//! Every vLLM adapter over the same bytes.

use infertrace_adapter_vllm::{VllmBench, VllmKvEvents, VllmLog, VllmMetrics, VllmOtlp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    infertrace_fuzz::parse_all(&[&VllmLog, &VllmBench, &VllmMetrics, &VllmOtlp, &VllmKvEvents], data);
});
