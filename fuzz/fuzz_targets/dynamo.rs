#![no_main]
//! Every Dynamo (and AIPerf, GenAI-Perf) adapter over the same bytes.

use infertrace_adapter_dynamo::{Aiperf, DynamoKvEvents, DynamoLog, DynamoMetrics, DynamoRequestTrace, GenaiPerf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    infertrace_fuzz::parse_all(
        &[&DynamoRequestTrace, &DynamoLog, &DynamoKvEvents, &DynamoMetrics, &Aiperf, &GenaiPerf],
        data,
    );
});
