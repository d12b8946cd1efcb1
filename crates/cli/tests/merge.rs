//! `infertrace merge` end to end: one run seen by Dynamo's request trace (server) and AIPerf (client), normalized
//! separately, then merged by the binary.
//!
//! Expected values come from the two files of `testdata/dynamo/same-run/` (see testdata/README.md): the client
//! sends 1.5 ms before the frontend receives, and its TTFT is Dynamo's `ttft_ms` + transfer estimate + 1.5 ms.

mod common;

use std::fs;
use std::process::{Command, Output};

use infertrace_schema::{Dataset, RequestRow, Status, Table as _};

fn infertrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infertrace")).args(args).output().expect("the binary runs")
}

#[test]
fn a_server_trace_and_a_client_export_of_one_run_merge_by_request_id() {
    let dir = tempfile::tempdir().unwrap();
    let same_run = common::testdata().join("dynamo/same-run");
    let (server, client, merged) = (dir.path().join("server"), dir.path().join("client"), dir.path().join("merged"));
    common::run(&[same_run.join("dynamo-request-trace.000000.jsonl.gz")], &server);
    common::run(&[same_run.join("profile_export.jsonl")], &client);
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let output = infertrace(&["merge", &path(&server), &path(&client), "-o", &path(&merged)]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("request rows: 6 (aiperf 3, dynamo-request-trace 3)"), "{stdout}");
    assert!(
        stdout.contains("requests: 3, of which 3 from several sources (3 rows joined by id, 0 by time"),
        "{stdout}"
    );

    let dataset = Dataset::open(&merged).unwrap();
    let record = dataset.manifest.merge.as_ref().unwrap();
    assert_eq!(record.datasets, [path(&server), path(&client)]);
    assert_eq!((record.matched_by_id, record.merged_requests), (3, 3));
    // The inputs of both datasets, and the three KV hit events of the trace, carried over.
    let inputs: Vec<&str> = dataset.manifest.inputs.iter().map(|i| i.format.as_str()).collect();
    assert_eq!(inputs, ["dynamo-request-trace", "aiperf"]);
    assert_eq!(dataset.manifest.rows.cache_events, 3);

    let rows = RequestRow::from_batch(&dataset.requests).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.request_id.as_str()).collect();
    // By client arrival: request_start_ns …599998.5 ms, …600038.5 ms, …600088.5 ms.
    assert_eq!(
        ids,
        [
            "7609a2e7-aa53-4ab1-98f4-f35ecafefd25",
            "c35e4b1b-6775-4750-b875-94cd68e5ec15",
            "5b0e77aa-b305-423f-88d5-c00da1892599"
        ]
    );
    let first = &rows[0];
    assert_eq!(first.source, "aiperf+dynamo-request-trace");
    // Client: arrival = request_start_ns, TTFT 126.5 ms (Dynamo's 100 + 25 transfer + 1.5), e2e 173 ms.
    assert_eq!(first.arrival_time, Some(1_767_225_599_998_500_000));
    assert_eq!((first.ttft_s, first.e2e_s), (Some(0.1265), Some(0.173)));
    // Server: prefill_wait_time_ms 2, prefill_time_ms 98, transfer estimate 25 ms, counts and hit tokens.
    assert_eq!((first.queue_s, first.prefill_s, first.kv_transfer_s), (Some(0.002), Some(0.098), Some(0.025)));
    assert_eq!((first.input_tokens, first.output_tokens, first.cached_tokens), (Some(550), Some(9), Some(512)));
    assert_eq!(first.decode_instance.as_deref(), Some("9007199254740993/dp0"));
    let sources = first.column_sources.as_deref().unwrap();
    for pair in ["ttft_s=aiperf", "e2e_s=aiperf", "queue_s=dynamo-request-trace", "prefill_s=dynamo-request-trace"] {
        assert!(sources.split(';').any(|p| p == pair), "{pair} not in {sources}");
    }
    // The cancelled request: the client's outcome (HTTP 499), the server's TTFT (the client saw no token).
    let cancelled = &rows[1];
    assert_eq!((cancelled.status, cancelled.http_status), (Status::Aborted, Some(499)));
    assert_eq!((cancelled.ttft_s, cancelled.e2e_s), (Some(0.19), Some(0.503)));

    // An existing output is not replaced without --force.
    let again = infertrace(&["merge", &path(&server), &path(&client), "-o", &path(&merged)]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8(again.stderr).unwrap();
    assert!(stderr.starts_with("error: cannot write output") && stderr.lines().count() == 1, "{stderr}");
    let forced = infertrace(&["merge", &path(&server), &path(&client), "-o", &path(&merged), "--force"]);
    assert_eq!(forced.status.code(), Some(0));

    // The rows are read and sorted through the query engine: one thread and a 16 MiB budget write the same bytes.
    let small = dir.path().join("small");
    let args =
        ["merge", &path(&server), &path(&client), "-o", &path(&small), "--threads", "1", "--memory-limit", "16M"];
    assert_eq!(infertrace(&args).status.code(), Some(0));
    for table in ["requests.parquet", "samples.parquet", "cache_events.parquet"] {
        assert!(fs::read(merged.join(table)).unwrap() == fs::read(small.join(table)).unwrap(), "{table}");
    }

    // One source has nothing to match: its rows come out as they are, by arrival, every one unmatched.
    let alone = dir.path().join("alone");
    assert_eq!(infertrace(&["merge", &path(&server), "-o", &path(&alone)]).status.code(), Some(0));
    let dataset = Dataset::open(&alone).unwrap();
    let record = dataset.manifest.merge.as_ref().unwrap();
    assert_eq!(record.rows_in.get("dynamo-request-trace"), Some(&3));
    assert_eq!(record.unmatched.get("dynamo-request-trace"), Some(&3));
    assert_eq!((record.matched_by_id, record.merged_requests), (0, 0));
    let rows = RequestRow::from_batch(&dataset.requests).unwrap();
    let arrivals: Vec<i64> = rows.iter().map(|r| r.arrival_time.unwrap()).collect();
    assert!(arrivals.is_sorted() && rows.iter().all(|r| r.source == "dynamo-request-trace"), "{arrivals:?}");

    // The same dataset twice is refused: its rows would be merged with themselves.
    let twice = infertrace(&["merge", &path(&server), &path(&server), "-o", &path(&dir.path().join("twice"))]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8(twice.stderr).unwrap().contains("is given twice"));
}

#[test]
fn merging_something_that_is_not_a_dataset_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = infertrace(&["merge", "../../testdata/README.md", "-o", dir.path().join("m").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("error: cannot read dataset ../../testdata/README.md"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
