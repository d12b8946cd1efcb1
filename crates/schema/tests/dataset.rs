//! The dataset writer and reader: round trip of every column, version checks, atomic placement.

use std::fs;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float64Type, TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type};
use infertrace_schema::{
    Assumptions, CacheEvent, CacheEventKind, CacheTier, Dataset, DatasetError, DatasetWriter, DiagnosticSummary,
    EngineSample, MANIFEST_FIELDS, Manifest, Producer, RequestRow, RowCounts, SCHEMA_VERSION, Status, Table,
    WorkloadClass, cache_event, metrics, request, sample,
};

/// Name, type and nullability of every column: what a reader relies on (metadata and dictionary ids aside).
fn columns(schema: &arrow::datatypes::Schema) -> Vec<(String, arrow::datatypes::DataType, bool)> {
    schema.fields().iter().map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable())).collect()
}

fn manifest() -> Manifest {
    Manifest::generated(
        Producer { name: "test".into(), version: "0".into() },
        Assumptions {
            year: Some(2025),
            utc_offset: "+00:00".into(),
            start: "1970-01-01T00:00:00Z".into(),
            block_size: None,
        },
    )
}

/// A request with every column set to a distinct value.
fn full_request() -> RequestRow {
    RequestRow {
        request_id: "cmpl-1".into(),
        source: "vllm-log".into(),
        column_sources: Some("ttft_s=aiperf;queue_s=vllm-log".into()),
        model: Some("llama".into()),
        session_id: Some("s1".into()),
        turn: Some(3),
        instance: Some("node-0".into()),
        prefill_instance: Some("p0".into()),
        decode_instance: Some("d0".into()),
        arrival_time: Some(1_000),
        scheduled_time: Some(2_000),
        first_token_time: Some(3_000),
        prefill_end_time: Some(2_900),
        decode_start_time: Some(3_100),
        last_token_time: Some(9_000),
        completion_time: Some(9_500),
        queue_s: Some(0.25),
        prefill_s: Some(0.5),
        ttft_s: Some(1.5),
        tpot_s: Some(0.02),
        decode_s: Some(4.0),
        e2e_s: Some(6.0),
        kv_transfer_s: Some(0.1),
        kv_transfer_bytes: Some(u64::MAX),
        input_tokens: Some(4096),
        cached_tokens: Some(2048),
        cached_tokens_gpu: Some(1024),
        cached_tokens_cpu: Some(512),
        cached_tokens_disk: Some(256),
        cached_tokens_remote: Some(256),
        output_tokens: Some(300),
        reasoning_tokens: Some(200),
        max_tokens: Some(1024),
        prefix_hashes: Some(vec![7, u64::MAX]),
        block_size: Some(16),
        retrieved_docs: Some(4),
        tool_calls: Some(2),
        workload_class: Some(WorkloadClass::Agent),
        status: Status::Timeout,
        finish_reason: Some("length".into()),
        http_status: Some(504),
        error: Some("deadline".into()),
        source_file: Some("logs/a.log".into()),
        source_line: Some(42),
    }
}

#[test]
fn every_request_column_survives_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut writer = DatasetWriter::create(&out, false).unwrap();
    writer.push_request(&full_request()).unwrap();
    writer
        .push_request(&RequestRow { request_id: "bare".into(), source: "mooncake".into(), ..Default::default() })
        .unwrap();
    writer
        .push_sample(&EngineSample {
            time: 5,
            source: "vllm-log".into(),
            instance: None,
            metric: metrics::KV_CACHE_USAGE.into(),
            value: 0.75,
            source_file: None,
            source_line: Some(9),
        })
        .unwrap();
    writer
        .push_cache_event(&CacheEvent {
            time: Some(6),
            source: "vllm-kv-events".into(),
            tier: Some(CacheTier::Cpu),
            event: CacheEventKind::Lookup,
            blocks: Some(8),
            hit_blocks: Some(5),
            latency_s: Some(0.001),
            ..Default::default()
        })
        .unwrap();
    let written = writer.finish(manifest()).unwrap();
    assert_eq!(written.rows, RowCounts { requests: 2, samples: 1, cache_events: 1 });

    let dataset = Dataset::open(&out).unwrap();
    assert_eq!(dataset.manifest, written);
    let r = &dataset.requests;
    assert_eq!(columns(&r.schema()), columns(&RequestRow::schema()));
    assert_eq!(r.schema().metadata()["infertrace.schema_version"], "1");
    let col = |name: &str| r.column_by_name(name).unwrap().clone();
    let text = |name: &str| {
        let array = col(name);
        let dict = array.as_dictionary::<arrow::datatypes::Int32Type>();
        let values = dict.values().as_string::<i32>();
        dict.keys().iter().map(|k| k.map(|k| values.value(k as usize).to_owned())).collect::<Vec<_>>()
    };
    assert_eq!(col(request::REQUEST_ID).as_string::<i32>().value(0), "cmpl-1");
    assert_eq!(text(request::SOURCE), [Some("vllm-log".into()), Some("mooncake".into())]);
    assert_eq!(text(request::WORKLOAD_CLASS), [Some("agent".into()), None]);
    assert_eq!(text(request::STATUS), [Some("timeout".into()), Some("unknown".into())]);
    assert_eq!(text(request::DECODE_INSTANCE), [Some("d0".into()), None]);
    let times = col(request::COMPLETION_TIME);
    assert_eq!(times.as_primitive::<TimestampNanosecondType>().value(0), 9_500);
    assert!(times.is_null(1));
    assert_eq!(col(request::TPOT_S).as_primitive::<Float64Type>().value(0), 0.02);
    assert_eq!(col(request::KV_TRANSFER_BYTES).as_primitive::<UInt64Type>().value(0), u64::MAX);
    assert_eq!(col(request::REASONING_TOKENS).as_primitive::<UInt32Type>().value(0), 200);
    assert_eq!(col(request::HTTP_STATUS).as_primitive::<UInt16Type>().value(0), 504);
    let hashes = col(request::PREFIX_HASHES);
    let hashes = hashes.as_list::<i32>();
    assert_eq!(hashes.value(0).as_primitive::<UInt64Type>().values().to_vec(), [7, u64::MAX]);
    assert!(hashes.is_null(1));
    // Every nullable column of the bare row is null; the three required ones are not.
    for (i, field) in r.schema().fields().iter().enumerate() {
        assert_eq!(r.column(i).is_null(1), field.is_nullable(), "{}", field.name());
    }
    assert_eq!(dataset.samples.column_by_name(sample::VALUE).unwrap().as_primitive::<Float64Type>().value(0), 0.75);
    let hit = dataset.cache_events.column_by_name(cache_event::HIT_BLOCKS).unwrap();
    assert_eq!(hit.as_primitive::<UInt32Type>().value(0), 5);
}

#[test]
fn rows_read_back_equal_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let bare = RequestRow { request_id: "bare".into(), source: "mooncake".into(), ..Default::default() };
    let sample = EngineSample {
        time: 5,
        source: "vllm-log".into(),
        instance: Some("i".into()),
        metric: metrics::KV_CACHE_USAGE.into(),
        value: 0.75,
        source_file: None,
        source_line: Some(9),
    };
    let event = CacheEvent {
        time: Some(6),
        source: "vllm-kv-events".into(),
        tier: Some(CacheTier::Cpu),
        event: CacheEventKind::Lookup,
        blocks: Some(8),
        hit_blocks: Some(5),
        latency_s: Some(0.001),
        ..Default::default()
    };
    let mut writer = DatasetWriter::create(&out, false).unwrap();
    writer.push_request(&full_request()).unwrap();
    writer.push_request(&bare).unwrap();
    writer.push_sample(&sample).unwrap();
    writer.push_cache_event(&event).unwrap();
    writer.finish(manifest()).unwrap();
    let dataset = Dataset::open(&out).unwrap();
    assert_eq!(RequestRow::from_batch(&dataset.requests).unwrap(), [full_request(), bare]);
    assert_eq!(EngineSample::from_batch(&dataset.samples).unwrap(), [sample]);
    assert_eq!(CacheEvent::from_batch(&dataset.cache_events).unwrap(), [event]);
}

#[test]
fn rows_of_an_older_or_foreign_schema_read_by_name() {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
    // A batch with a plain-string `source`, an unknown status, an extra column and most columns missing.
    let batch = RecordBatch::try_from_iter([
        ("request_id", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
        ("source", Arc::new(StringArray::from(vec![Some("x"), None])) as ArrayRef),
        ("status", Arc::new(StringArray::from(vec!["ok", "exploded"])) as ArrayRef),
        ("input_tokens", Arc::new(UInt64Array::from(vec![Some(7), None])) as ArrayRef),
        ("not_a_column", Arc::new(UInt64Array::from(vec![1, 2])) as ArrayRef),
    ])
    .unwrap();
    let rows = RequestRow::from_batch(&batch).unwrap();
    assert_eq!(
        rows,
        [
            RequestRow {
                request_id: "a".into(),
                source: "x".into(),
                status: Status::Ok,
                input_tokens: Some(7),
                ..Default::default()
            },
            // Null required text reads as empty, an unknown status as the default (`unknown`).
            RequestRow { request_id: "b".into(), ..Default::default() },
        ]
    );
    // A column that cannot be cast is an error naming it.
    let bad =
        RecordBatch::try_from_iter([("prefix_hashes", Arc::new(StringArray::from(vec!["[1]"])) as ArrayRef)]).unwrap();
    let error = RequestRow::from_batch(&bad).unwrap_err().to_string();
    assert!(error.contains("prefix_hashes"), "{error}");
}

#[test]
fn empty_tables_keep_their_schema() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    DatasetWriter::create(&out, false).unwrap().finish(manifest()).unwrap();
    let dataset = Dataset::open(&out).unwrap();
    assert_eq!(dataset.requests.num_rows(), 0);
    assert_eq!(columns(&dataset.requests.schema()), columns(&RequestRow::schema()));
    assert_eq!(columns(&dataset.samples.schema()), columns(&EngineSample::schema()));
    assert_eq!(columns(&dataset.cache_events.schema()), columns(&CacheEvent::schema()));
}

#[test]
fn many_rows_span_batches_and_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut writer = DatasetWriter::create(&out, false).unwrap();
    let n = infertrace_schema::ROW_GROUP_ROWS + 1000;
    for i in 0..n {
        let row = RequestRow {
            request_id: i.to_string(),
            source: "t".into(),
            input_tokens: Some(i as u32),
            ..Default::default()
        };
        writer.push_request(&row).unwrap();
    }
    writer.finish(manifest()).unwrap();
    let dataset = Dataset::open(&out).unwrap();
    let tokens = dataset.requests.column_by_name(request::INPUT_TOKENS).unwrap().as_primitive::<UInt32Type>().clone();
    assert_eq!(tokens.len(), n);
    assert!(tokens.iter().enumerate().all(|(i, t)| t == Some(i as u32)));
}

/// Rows with long lists of prefix hashes end a row group once it holds more than `ROW_GROUP_BYTES` (16 MiB)
/// encoded, at the end of a batch (every `BATCH_LIST_BYTES`, 4 MiB: 256 rows of 2,048 hashes here, as the unit test
/// in `dataset.rs` checks), far below `ROW_GROUP_ROWS`: the memory the writer holds for such rows is bounded by
/// bytes, not by rows.
#[test]
fn long_lists_end_batches_and_row_groups_by_their_bytes() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    assert_eq!((infertrace_schema::BATCH_LIST_BYTES, infertrace_schema::ROW_GROUP_BYTES), (4 << 20, 16 << 20));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut writer = DatasetWriter::create(&out, false).unwrap();
    // 2,000 rows of 2,048 random 64-bit hashes: 31.25 MiB that delta encoding and zstd cannot shrink.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        state ^ (state >> 29)
    };
    for i in 0..2000u32 {
        let hashes: Vec<u64> = (0..2048).map(|_| next()).collect();
        let row = RequestRow {
            request_id: i.to_string(),
            source: "t".into(),
            prefix_hashes: Some(hashes),
            block_size: Some(16),
            ..Default::default()
        };
        writer.push_request(&row).unwrap();
    }
    writer.finish(manifest()).unwrap();
    let reader = SerializedFileReader::new(fs::File::open(out.join("requests.parquet")).unwrap()).unwrap();
    let rows: Vec<i64> = reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
    // Four batches hold exactly 16 MiB of hashes, which encode to a little more (random 64-bit deltas take all
    // their bits, plus block headers and the other columns): the row group is past its bound after the fourth.
    assert_eq!(rows, vec![1024, 976], "rows per row group");
}

#[test]
fn an_unfinished_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    {
        let mut writer = DatasetWriter::create(&out, false).unwrap();
        writer.push_request(&full_request()).unwrap();
        // Dropped without finish, as when an input fails half-way.
    }
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A replacement killed between its two renames leaves the previous dataset aside and none at the output; the
/// next writer for that output puts the previous one back first, and removes one left after a completed rename.
#[test]
fn a_replacement_killed_between_its_renames_is_recovered_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let aside = dir.path().join(".ds.infertrace-old");
    let mut first = manifest();
    first.producer.version = "previous".into();
    DatasetWriter::create(&out, false).unwrap().finish(first).unwrap();
    fs::rename(&out, &aside).unwrap();
    // Without --force the restored dataset is an existing output, as it was before the killed run.
    let error = DatasetWriter::create(&out, false).unwrap_err();
    assert!(matches!(error, DatasetError::Exists { .. }), "{error}");
    assert!(!aside.exists());
    assert_eq!(Dataset::open(&out).unwrap().manifest.producer.version, "previous");

    fs::create_dir(&aside).unwrap();
    fs::write(aside.join("manifest.json"), "{").unwrap();
    DatasetWriter::create(&out, true).unwrap().finish(manifest()).unwrap();
    let mut left: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    left.sort();
    assert_eq!(left, ["ds"], "the stale dataset aside was removed");
}

#[test]
fn readers_refuse_newer_schema_versions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut newer = manifest();
    newer.schema_version = SCHEMA_VERSION;
    DatasetWriter::create(&out, false).unwrap().finish(newer).unwrap();
    let path = out.join("manifest.json");
    let text = fs::read_to_string(&path).unwrap().replace("\"schema_version\": 1", "\"schema_version\": 99");
    fs::write(&path, text).unwrap();
    let error = Dataset::open(&out).unwrap_err();
    assert!(matches!(error, DatasetError::NewerSchema { found: 99, supported: 1, .. }), "{error}");
    assert!(error.to_string().contains("upgrade infertrace"));
}

#[test]
fn manifest_field_docs_match_what_is_serialized() {
    let mut m = manifest();
    m.assumptions.block_size = Some(16);
    m.skipped.push(infertrace_schema::SkippedInput { path: "README".into(), reason: "unrecognised".into() });
    let mut diagnostics = DiagnosticSummary::default();
    diagnostics.record("kind", 1, "message");
    m.inputs.push(infertrace_schema::InputEntry {
        path: "p".into(),
        bytes: 1,
        sha256: "s".into(),
        compression: "none".into(),
        format: "f".into(),
        format_version: None,
        clock_domain: infertrace_schema::ClockDomain::Utc,
        year: Some(infertrace_schema::YearAssumption { year: 2025, source: infertrace_schema::YearSource::Option }),
        lines: 1,
        records: RowCounts::default(),
        diagnostics,
        details: [("duration".to_owned(), serde_json::json!(1.5))].into_iter().collect(),
        drift: Some(infertrace_schema::DriftSummary {
            lines_used: Some(1),
            envelopes: [("plain".to_owned(), 1)].into_iter().collect(),
            times_from: [("record".to_owned(), 1)].into_iter().collect(),
            unknown_fields: [("MFU".to_owned(), 1)].into_iter().collect(),
        }),
    });
    m.merge = Some(infertrace_schema::MergeRecord {
        datasets: vec!["a".into()],
        client_sources: vec!["aiperf".into()],
        rows_in: [("aiperf".to_owned(), 2)].into_iter().collect(),
        unmatched: [("aiperf".to_owned(), 1)].into_iter().collect(),
        columns: [("ttft_s".to_owned(), [("aiperf".to_owned(), 1)].into_iter().collect())].into_iter().collect(),
        ..Default::default()
    });
    m.partition_by = Some("date".to_owned());
    m.hash_salt = Some(infertrace_schema::HashSalt::Keyed);
    m.capture = Some(infertrace_schema::CaptureRecord { complete: true, parts: 3 });
    m.cache_sim = Some(infertrace_schema::CacheSimRecord {
        tiers: vec![infertrace_schema::CacheSimTier::default()],
        model: Some(infertrace_schema::CacheSimModel::default()),
        ..Default::default()
    });
    fn paths(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    let key = if prefix.ends_with("by_kind") {
                        "<kind>"
                    } else if prefix.ends_with("details") {
                        "<key>"
                    } else if prefix.ends_with("envelopes") {
                        "<envelope>"
                    } else if prefix.ends_with("times_from") {
                        "<from>"
                    } else if prefix.ends_with("unknown_fields") {
                        "<name>"
                    } else if prefix.ends_with("rows_in")
                        || prefix.ends_with("unmatched")
                        || prefix.contains(".columns.")
                    {
                        "<source>"
                    } else if prefix.ends_with("columns") {
                        "<column>"
                    } else {
                        key
                    };
                    let p = if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") };
                    paths(&p, v, out);
                }
            }
            serde_json::Value::Array(items) => paths(&format!("{prefix}[]"), &items[0], out),
            _ => out.push(prefix.to_owned()),
        }
    }
    let mut serialized = Vec::new();
    paths("", &serde_json::to_value(&m).unwrap(), &mut serialized);
    let mut documented: Vec<String> = MANIFEST_FIELDS.iter().map(|(p, _)| (*p).to_owned()).collect();
    serialized.sort();
    documented.sort();
    assert_eq!(serialized, documented);
}

#[test]
fn diagnostic_summary_keeps_five_examples_per_kind() {
    let mut summary = DiagnosticSummary::default();
    for line in 1..=7 {
        summary.record("malformed-json", line, format!("bad {line}"));
    }
    summary.record("missing-field", 9, "x");
    assert_eq!(summary.total, 8);
    let malformed = &summary.by_kind["malformed-json"];
    assert_eq!(malformed.count, 7);
    assert_eq!(malformed.first.iter().map(|d| d.line).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
}

#[test]
fn durations_are_derived_from_instants() {
    const S: i64 = 1_000_000_000;
    let mut row = RequestRow {
        arrival_time: Some(10 * S),
        scheduled_time: Some(10 * S + S / 4),
        first_token_time: Some(12 * S),
        last_token_time: Some(17 * S),
        completion_time: Some(17 * S + S / 2),
        output_tokens: Some(101),
        ..Default::default()
    };
    assert!(row.fill_durations().is_empty());
    assert_eq!(row.queue_s, Some(0.25));
    assert_eq!(row.prefill_s, Some(1.75), "no prefill_end_time: first token ends prefill");
    assert_eq!(row.ttft_s, Some(2.0));
    assert_eq!(row.decode_s, Some(5.0));
    assert_eq!(row.tpot_s, Some(0.05), "5 s over 100 tokens after the first");
    assert_eq!(row.e2e_s, Some(7.5));

    // Given durations are kept; a negative one is reported and left null.
    let mut row = RequestRow {
        arrival_time: Some(5 * S),
        first_token_time: Some(4 * S),
        last_token_time: Some(6 * S),
        ttft_s: None,
        e2e_s: Some(9.0),
        output_tokens: Some(1),
        ..Default::default()
    };
    assert_eq!(row.fill_durations(), [request::TTFT_S]);
    assert_eq!(row.ttft_s, None);
    assert_eq!(row.e2e_s, Some(9.0));
    assert_eq!(row.tpot_s, None, "a single output token has no time per output token");
}

/// How the files are encoded, read back from their own metadata: timestamps delta-encoded without a dictionary,
/// ids as `DELTA_BYTE_ARRAY`, block hashes plain, dictionary text with dictionaries, and no statistics on the columns
/// whose values every row group interleaves (while the time column keeps its minimum and maximum).
#[test]
fn columns_carry_their_encodings_and_statistics() {
    use parquet::basic::Encoding;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut writer = DatasetWriter::create(&out, false).unwrap();
    writer.push_request(&full_request()).unwrap();
    for (hash, parent) in [(11, None), (12, Some(11))] {
        writer
            .push_cache_event(&CacheEvent {
                time: Some(3),
                source: "vllm-kv-events".into(),
                instance: Some("dp0".into()),
                tier: Some(CacheTier::Gpu),
                event: CacheEventKind::Stored,
                block_hash: Some(hash),
                parent_hash: parent,
                blocks: Some(1),
                source_file: Some("kv.jsonl".into()),
                ..Default::default()
            })
            .unwrap();
    }
    for (time, metric) in [(5, metrics::KV_CACHE_USAGE), (9, metrics::REQUESTS_RUNNING)] {
        writer
            .push_sample(&EngineSample {
                time,
                source: "sglang-log".into(),
                instance: Some("TP0".into()),
                metric: metric.into(),
                value: 0.5,
                source_file: Some("a.log".into()),
                source_line: Some(1),
            })
            .unwrap();
    }
    writer.finish(manifest()).unwrap();

    let open = |table: &str| SerializedFileReader::new(fs::File::open(out.join(format!("{table}.parquet"))).unwrap());
    let samples = open("samples").unwrap();
    let group = samples.metadata().row_group(0);
    let column = |name: &str| group.columns().iter().find(|c| c.column_path().string() == name).unwrap().clone();
    let time = column("time");
    assert!(time.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED), "{:?}", time.encodings().collect::<Vec<_>>());
    assert!(time.dictionary_page_offset().is_none());
    match time.statistics() {
        Some(Statistics::Int64(s)) => assert_eq!((s.min_opt(), s.max_opt()), (Some(&5), Some(&9))),
        other => panic!("time statistics: {other:?}"),
    }
    for name in ["metric", "instance"] {
        let c = column(name);
        assert!(c.dictionary_page_offset().is_some(), "{name} keeps its dictionary");
        assert!(c.statistics().is_none(), "{name} has no statistics: {:?}", c.statistics());
    }
    assert!(column("source_file").statistics().is_some(), "source_file keeps its statistics");
    assert!(column("value").dictionary_page_offset().is_none(), "floats are plain");

    let requests = open("requests").unwrap();
    let group = requests.metadata().row_group(0);
    let column = |name: &str| group.columns().iter().find(|c| c.column_path().string() == name).unwrap().clone();
    // Ids: no dictionary, each value as its prefix shared with the one before and the rest.
    for name in ["request_id", "session_id", "error"] {
        let c = column(name);
        assert!(c.dictionary_page_offset().is_none(), "{name} has no dictionary");
        let encodings: Vec<Encoding> = c.encodings().collect();
        assert!(encodings.contains(&Encoding::DELTA_BYTE_ARRAY), "{name}: {encodings:?}");
        assert!(
            !encodings.contains(&Encoding::RLE_DICTIONARY) && !encodings.contains(&Encoding::PLAIN),
            "{encodings:?}"
        );
    }
    assert!(column("prefix_hashes.list.item").encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED));
    // The instance of a request is not a sample's: it keeps its statistics.
    assert!(column("instance").statistics().is_some());

    let events = open("cache_events").unwrap();
    let group = events.metadata().row_group(0);
    let column = |name: &str| group.columns().iter().find(|c| c.column_path().string() == name).unwrap().clone();
    // Block hashes are random 64-bit values: plain, no dictionary.
    for name in ["block_hash", "parent_hash"] {
        let c = column(name);
        assert!(c.dictionary_page_offset().is_none(), "{name} has no dictionary");
        assert!(c.encodings().all(|e| e != Encoding::RLE_DICTIONARY), "{:?}", c.encodings().collect::<Vec<_>>());
        assert!(c.statistics().is_some(), "{name} keeps its statistics");
    }
    // What happened, where and on which tier interleave in every row group: dictionaries, no statistics.
    for name in ["event", "tier", "instance"] {
        let c = column(name);
        assert!(c.dictionary_page_offset().is_some(), "{name} keeps its dictionary");
        assert!(c.statistics().is_none(), "{name} has no statistics: {:?}", c.statistics());
    }
    assert!(column("source_file").statistics().is_some(), "source_file keeps its statistics");
}
