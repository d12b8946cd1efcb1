#![no_main]
//! Every production-trace adapter over the same bytes.

use infertrace_adapter_traces::{
    AzureLlm, BailianTrace, BurstGpt, LlmServingSim, Mooncake, MooncakeDelta, RagPulse, TraceLab, WekaTrace,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    infertrace_fuzz::parse_all(
        &[
            &Mooncake,
            &MooncakeDelta,
            &AzureLlm,
            &WekaTrace,
            &BailianTrace,
            &BurstGpt,
            &LlmServingSim,
            &RagPulse,
            &TraceLab,
        ],
        data,
    );
});
