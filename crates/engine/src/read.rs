//! Rows of a dataset's `requests` batch, as the serving replay reads them (until it reads them as a stream).

use arrow::array::{Array, ArrayRef, AsArray as _, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, TimestampNanosecondType, UInt32Type, UInt64Type};
use infertrace_schema::{Dataset, RequestRow, request};

/// The request rows of `dataset`, with the columns the metrics read, and durations still null filled from
/// their instants (as `normalize` does; a dataset written by another tool may not have them filled).
pub fn requests(dataset: &Dataset) -> Vec<RequestRow> {
    let batch = &dataset.requests;
    let text = |name| strings(batch, name);
    let time = |name| column(batch, name).map(|c| c.as_primitive::<TimestampNanosecondType>().clone());
    let float = |name| column(batch, name).map(|c| c.as_primitive::<Float64Type>().clone());
    let count = |name| column(batch, name).map(|c| c.as_primitive::<UInt32Type>().clone());
    let (source, model, instance, session, class, status) = (
        text(request::SOURCE),
        text(request::MODEL),
        text(request::INSTANCE),
        text(request::SESSION_ID),
        text(request::WORKLOAD_CLASS),
        text(request::STATUS),
    );
    let times = [
        request::ARRIVAL_TIME,
        request::SCHEDULED_TIME,
        request::FIRST_TOKEN_TIME,
        request::PREFILL_END_TIME,
        request::DECODE_START_TIME,
        request::LAST_TOKEN_TIME,
        request::COMPLETION_TIME,
    ]
    .map(time);
    let durations = [
        request::QUEUE_S,
        request::PREFILL_S,
        request::TTFT_S,
        request::TPOT_S,
        request::DECODE_S,
        request::E2E_S,
        request::KV_TRANSFER_S,
    ]
    .map(float);
    let counts = [
        request::INPUT_TOKENS,
        request::CACHED_TOKENS,
        request::CACHED_TOKENS_GPU,
        request::CACHED_TOKENS_CPU,
        request::CACHED_TOKENS_DISK,
        request::CACHED_TOKENS_REMOTE,
        request::OUTPUT_TOKENS,
        request::REASONING_TOKENS,
        request::BLOCK_SIZE,
    ]
    .map(count);
    let hashes = column(batch, request::PREFIX_HASHES).map(|c| c.as_list::<i32>().clone());
    (0..batch.num_rows())
        .map(|i| {
            let t = |k: usize| times[k].as_ref().and_then(|a| a.is_valid(i).then(|| a.value(i)));
            let d = |k: usize| durations[k].as_ref().and_then(|a| a.is_valid(i).then(|| a.value(i)));
            let n = |k: usize| counts[k].as_ref().and_then(|a| a.is_valid(i).then(|| a.value(i)));
            let s = |v: &[Option<String>]| v.get(i).cloned().flatten();
            let mut row = RequestRow {
                source: s(&source).unwrap_or_default(),
                model: s(&model),
                instance: s(&instance),
                session_id: s(&session),
                workload_class: s(&class).and_then(|c| infertrace_schema::WorkloadClass::parse(&c)),
                status: s(&status).and_then(|c| infertrace_schema::Status::parse(&c)).unwrap_or_default(),
                arrival_time: t(0),
                scheduled_time: t(1),
                first_token_time: t(2),
                prefill_end_time: t(3),
                decode_start_time: t(4),
                last_token_time: t(5),
                completion_time: t(6),
                queue_s: d(0),
                prefill_s: d(1),
                ttft_s: d(2),
                tpot_s: d(3),
                decode_s: d(4),
                e2e_s: d(5),
                kv_transfer_s: d(6),
                input_tokens: n(0),
                cached_tokens: n(1),
                cached_tokens_gpu: n(2),
                cached_tokens_cpu: n(3),
                cached_tokens_disk: n(4),
                cached_tokens_remote: n(5),
                output_tokens: n(6),
                reasoning_tokens: n(7),
                block_size: n(8),
                prefix_hashes: hashes
                    .as_ref()
                    .filter(|a| a.is_valid(i))
                    .map(|a| a.value(i).as_primitive::<UInt64Type>().iter().flatten().collect::<Vec<u64>>()),
                ..RequestRow::default()
            };
            // Negative spans stay null, as in `normalize`; nothing to report here.
            let _ = row.fill_durations();
            row
        })
        .collect()
}

fn column(batch: &RecordBatch, name: &str) -> Option<ArrayRef> {
    batch.column_by_name(name).cloned()
}

/// A text column (plain or dictionary-encoded) as owned strings; all null when the column is absent.
fn strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let Some(array) = column(batch, name).and_then(|c| cast(&c, &DataType::Utf8).ok()) else {
        return vec![None; batch.num_rows()];
    };
    array.as_string::<i32>().iter().map(|s| s.map(str::to_owned)).collect()
}
