//! Datasets as DataFusion tables: several datasets at once, plain and partitioned, every table, projection and the
//! schema-version check. Expected values are written by hand from the rows below.

use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array as _, AsArray as _};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::displayable;
use futures::StreamExt as _;
use infertrace_query::{Datasets, QueryOptions, Session};
use infertrace_schema::{
    Assumptions, CacheEvent, CacheEventKind, CacheTier, DatasetWriter, EngineSample, Manifest, PartitionKey, Producer,
    RequestRow, SCHEMA_VERSION, Status,
};

fn manifest() -> Manifest {
    let producer = Producer { name: "test".into(), version: "0".into() };
    Manifest::generated(
        producer,
        Assumptions { year: None, utc_offset: "+00:00".into(), start: "1970-01-01T00:00:00Z".into(), block_size: None },
    )
}

/// Three requests (on instance `DP0 TP0`, on none, on `DP1`), two samples and one cache event; ids start with
/// `prefix` so that the rows of two datasets differ.
fn write(dir: &Path, prefix: &str, partition: Option<PartitionKey>) {
    let mut writer = DatasetWriter::create_partitioned(dir, false, partition).unwrap();
    let requests =
        [(Some("DP0 TP0"), 0.5, 100, Status::Ok), (None, 1.5, 200, Status::Ok), (Some("DP1"), 2.5, 300, Status::Error)];
    for (i, (instance, ttft, input, status)) in requests.into_iter().enumerate() {
        writer
            .push_request(&RequestRow {
                request_id: format!("{prefix}-{i}"),
                source: "vllm-log".into(),
                instance: instance.map(Into::into),
                arrival_time: Some(1_000_000_000 * (i as i64 + 1)),
                ttft_s: Some(ttft),
                input_tokens: Some(input),
                status,
                prefix_hashes: Some(vec![7, 8 + i as u64]),
                ..RequestRow::default()
            })
            .unwrap();
    }
    for (metric, value) in [("kv_cache_usage", 0.25), ("requests_waiting", 3.0)] {
        writer
            .push_sample(&EngineSample {
                time: 5_000_000_000,
                source: "vllm-log".into(),
                instance: Some("DP0 TP0".into()),
                metric: metric.into(),
                value,
                source_file: None,
                source_line: None,
            })
            .unwrap();
    }
    writer
        .push_cache_event(&CacheEvent {
            time: Some(6_000_000_000),
            source: "vllm-kv-events".into(),
            tier: Some(CacheTier::Gpu),
            event: CacheEventKind::Stored,
            blocks: Some(4),
            ..CacheEvent::default()
        })
        .unwrap();
    writer.finish(manifest()).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap()
}

/// The result of `query` over `dirs`, as a text table.
fn query(dirs: &[PathBuf], query: &str) -> String {
    runtime().block_on(async {
        let datasets = Datasets::open(dirs, &QueryOptions::default()).await.unwrap();
        let batches = datasets.sql(query).await.unwrap().collect().await.unwrap();
        pretty_format_batches(&batches).unwrap().to_string()
    })
}

fn two_datasets() -> (tempfile::TempDir, Vec<PathBuf>) {
    let root = tempfile::tempdir().unwrap();
    let (plain, by_instance) = (root.path().join("plain"), root.path().join("by-instance"));
    write(&plain, "a", None);
    write(&by_instance, "b", Some(PartitionKey::Instance));
    // The partitioned dataset really is: `instance` lives in the directory names only.
    assert!(by_instance.join("requests/instance=DP0%20TP0/part-0.parquet").is_file());
    assert!(by_instance.join("requests/instance=__HIVE_DEFAULT_PARTITION__/part-0.parquet").is_file());
    (root, vec![plain, by_instance])
}

#[test]
fn requests_of_a_plain_and_a_partitioned_dataset_are_one_table() {
    let (_root, dirs) = two_datasets();
    let table = query(
        &dirs,
        "SELECT instance, count(*) AS requests, sum(input_tokens) AS input, avg(ttft_s) AS ttft \
         FROM requests GROUP BY instance ORDER BY instance NULLS FIRST",
    );
    let expected = "\
+----------+----------+-------+------+
| instance | requests | input | ttft |
+----------+----------+-------+------+
|          | 2        | 400   | 1.5  |
| DP0 TP0  | 2        | 200   | 0.5  |
| DP1      | 2        | 600   | 2.5  |
+----------+----------+-------+------+";
    assert_eq!(table, expected);
    // Each dataset's rows once, whatever its layout.
    let ids = query(&dirs, "SELECT request_id, status FROM requests WHERE ttft_s > 1 ORDER BY request_id");
    let expected = "\
+------------+--------+
| request_id | status |
+------------+--------+
| a-1        | ok     |
| a-2        | error  |
| b-1        | ok     |
| b-2        | error  |
+------------+--------+";
    assert_eq!(ids, expected);
}

#[test]
fn samples_and_cache_events_are_tables_too() {
    let (_root, dirs) = two_datasets();
    let samples = query(
        &dirs,
        "SELECT metric, instance, count(*) AS n, sum(value) AS total FROM samples GROUP BY metric, instance \
         ORDER BY metric",
    );
    let expected = "\
+------------------+----------+---+-------+
| metric           | instance | n | total |
+------------------+----------+---+-------+
| kv_cache_usage   | DP0 TP0  | 2 | 0.5   |
| requests_waiting | DP0 TP0  | 2 | 6.0   |
+------------------+----------+---+-------+";
    assert_eq!(samples, expected);
    let events = query(
        &dirs,
        "SELECT event, tier, sum(blocks) AS blocks, min(time) AS t FROM cache_events GROUP BY event, tier",
    );
    let expected = "\
+--------+------+--------+----------------------+
| event  | tier | blocks | t                    |
+--------+------+--------+----------------------+
| stored | gpu  | 8      | 1970-01-01T00:00:06Z |
+--------+------+--------+----------------------+";
    assert_eq!(events, expected);
}

#[test]
fn list_columns_unnest_for_prefix_reuse() {
    let (_root, dirs) = two_datasets();
    // Hash 7 is in all six requests, 8, 9 and 10 each in two.
    let table = query(
        &dirs,
        "SELECT h, count(*) AS n FROM (SELECT unnest(prefix_hashes) AS h FROM requests) GROUP BY h ORDER BY h",
    );
    let expected = "\
+----+---+
| h  | n |
+----+---+
| 7  | 6 |
| 8  | 2 |
| 9  | 2 |
| 10 | 2 |
+----+---+";
    assert_eq!(table, expected);
}

#[test]
fn a_scan_reads_only_the_columns_it_names() {
    let (_root, dirs) = two_datasets();
    runtime().block_on(async {
        let datasets = Datasets::open(&dirs, &QueryOptions::default()).await.unwrap();
        let frame = datasets.table::<RequestRow>(&["ttft_s", "instance"]).await.unwrap();
        let plan = frame.create_physical_plan().await.unwrap();
        let text = displayable(plan.as_ref()).indent(true).to_string();
        // One scan of the plain file and one per partition value, each reading `ttft_s` (and `instance` where the
        // file holds it), never the other columns such as `prefix_hashes`.
        let scans: Vec<&str> = text.lines().filter(|l| l.contains("DataSourceExec")).collect();
        assert_eq!(scans.len(), 4, "{text}");
        let projections: Vec<&str> =
            scans.iter().map(|scan| scan.split("projection=[").nth(1).unwrap().split(']').next().unwrap()).collect();
        // The parts' `instance` is their directory's value, a constant: the files give `ttft_s` only. Parts come in
        // the order of their values, the null partition first.
        let constant = |value| format!("CAST({value} AS Dictionary(Int32, Utf8)) as instance, ttft_s");
        let expected =
            ["instance, ttft_s".to_owned(), "NULL as instance, ttft_s".into(), constant("DP0 TP0"), constant("DP1")];
        assert_eq!(projections, expected, "{text}");
        let mut stream = datasets.scan::<RequestRow>(&["ttft_s", "instance"]).await.unwrap();
        let names: Vec<String> = stream.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["ttft_s", "instance"]);
        let mut rows = 0;
        while let Some(batch) = stream.next().await {
            rows += batch.unwrap().num_rows();
        }
        assert_eq!(rows, 6);
    });
}

#[test]
fn a_dataset_of_a_newer_schema_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ds");
    write(&dir, "a", None);
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let newer = text.replace(&format!("\"schema_version\": {SCHEMA_VERSION}"), "\"schema_version\": 999");
    assert_ne!(text, newer);
    std::fs::write(&manifest, newer).unwrap();
    let error = runtime().block_on(Datasets::open(std::slice::from_ref(&dir), &QueryOptions::default())).unwrap_err();
    assert_eq!(error.to_string(), format!("cannot read dataset {}", dir.display()));
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(cause.contains("schema version 999") && cause.contains("upgrade infertrace"), "{cause}");
}

#[test]
fn an_empty_partitioned_table_is_an_empty_table() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ds");
    DatasetWriter::create_partitioned(&dir, false, Some(PartitionKey::Source)).unwrap().finish(manifest()).unwrap();
    let table = query(&[dir], "SELECT count(*) AS n, max(ttft_s) AS worst FROM requests");
    let expected = "\
+---+-------+
| n | worst |
+---+-------+
| 0 |       |
+---+-------+";
    assert_eq!(table, expected);
}

/// An ordered table numbers rows in input order: the datasets as given, then each table's files in path order (a
/// partitioned table's parts by directory name: `instance=DP0%20TP0`, `instance=DP1`, then the null partition),
/// then the rows of each file; a part's partition column comes back from its directory name.
#[test]
fn ordered_tables_number_rows_in_input_order() {
    let (_root, dirs) = two_datasets();
    let ordered = |dirs: Vec<PathBuf>| -> Vec<(u64, String, Option<String>)> {
        runtime().block_on(async {
            let datasets = Datasets::open(&dirs, &QueryOptions::default()).await.unwrap();
            datasets.register_ordered::<RequestRow>("ordered", &["request_id", "instance"]).unwrap();
            // Sorted by the ordinal: whatever order the engine returns rows in, the ordinal is theirs.
            let sql = "SELECT ordinal, request_id, CAST(instance AS VARCHAR) FROM ordered ORDER BY ordinal";
            let batches = datasets.sql(sql).await.unwrap().collect().await.unwrap();
            let mut rows = Vec::new();
            for batch in batches {
                let text = |i: usize| cast(batch.column(i), &DataType::Utf8).unwrap();
                let (ordinal, id, instance) = (batch.column(0).clone(), text(1), text(2));
                for row in 0..batch.num_rows() {
                    let instance = instance.as_string::<i32>();
                    rows.push((
                        ordinal.as_primitive::<UInt64Type>().value(row),
                        id.as_string::<i32>().value(row).to_owned(),
                        instance.is_valid(row).then(|| instance.value(row).to_owned()),
                    ));
                }
            }
            rows
        })
    };
    let row = |n: u64, id: &str, instance: Option<&str>| (n, id.to_owned(), instance.map(str::to_owned));
    assert_eq!(
        ordered(dirs.clone()),
        [
            row(0, "a-0", Some("DP0 TP0")),
            row(1, "a-1", None),
            row(2, "a-2", Some("DP1")),
            row(3, "b-0", Some("DP0 TP0")),
            row(4, "b-2", Some("DP1")),
            row(5, "b-1", None),
        ]
    );
    // The other way round, the partitioned dataset's rows come first.
    let reversed = ordered(dirs.into_iter().rev().collect());
    assert_eq!(reversed[0], row(0, "b-0", Some("DP0 TP0")));
    assert_eq!(reversed[3], row(3, "a-0", Some("DP0 TP0")));
}

#[test]
fn a_session_walks_requests_in_replay_order_without_sorting_by_ordinal() {
    let (root, mut dirs) = two_datasets();
    // A third dataset whose first request has no arrival: it goes last, whatever its place in input order.
    let late = root.path().join("late");
    let mut writer = DatasetWriter::create(&late, false).unwrap();
    for (id, arrival) in [("c-0", None), ("c-1", Some(2_000_000_000))] {
        writer
            .push_request(&RequestRow {
                request_id: id.into(),
                source: "vllm-log".into(),
                arrival_time: arrival,
                ..RequestRow::default()
            })
            .unwrap();
    }
    writer.finish(manifest()).unwrap();
    dirs.push(late);
    let session = Session::open(&dirs, &QueryOptions { threads: 2, ..QueryOptions::default() }).unwrap();
    let frame = session.block_on(session.datasets().requests_by_arrival(&["request_id"])).unwrap();
    let mut walked = Vec::new();
    for batch in session.batches(frame).unwrap() {
        let batch = batch.unwrap();
        let (ids, ordinals) = (batch.column(0).as_string::<i32>(), batch.column(1).as_primitive::<UInt64Type>());
        walked.extend((0..batch.num_rows()).map(|i| (ids.value(i).to_owned(), ordinals.value(i))));
    }
    // Input order: a-0 a-1 a-2 (1, 2, 3 s), then b-0 b-2 b-1 (the partition directories in path order: 1, 3, 2 s),
    // then c-0 (none) c-1 (2 s). By arrival, ties in input order, no arrival last.
    let expected = [("a-0", 0), ("b-0", 3), ("a-1", 1), ("b-1", 5), ("c-1", 7), ("a-2", 2), ("b-2", 4), ("c-0", 6)];
    assert_eq!(walked, expected.map(|(id, n)| (id.to_owned(), n)));

    // An ordered table is declared sorted by its ordinal: asking for that order adds no sort to the plan.
    let plan = session
        .block_on(async {
            session.datasets().register_ordered::<RequestRow>("ordered", &["request_id"]).unwrap();
            session.datasets().sql("SELECT * FROM ordered ORDER BY ordinal").await.unwrap().create_physical_plan().await
        })
        .unwrap();
    let plan = displayable(plan.as_ref()).indent(false).to_string();
    assert!(!plan.contains("SortExec"), "{plan}");
    assert!(session.scratch().is_dir());
}

#[test]
fn a_dataset_given_twice_is_refused() {
    let (root, dirs) = two_datasets();
    // The same directory under another spelling: its rows would count twice in some figures, once in others.
    let again = root.path().join("plain/../plain");
    let error = runtime()
        .block_on(Datasets::open(&[dirs[0].clone(), dirs[1].clone(), again.clone()], &QueryOptions::default()))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "dataset {} is given twice (as {} and {}): give each dataset once",
            dirs[0].display(),
            dirs[0].display(),
            again.display()
        )
    );
}

#[test]
fn rows_already_in_arrival_order_are_read_without_a_sort() {
    let (root, dirs) = two_datasets();
    let plan_of = |dirs: &[PathBuf]| {
        let session = Session::open(dirs, &QueryOptions::default()).unwrap();
        session.block_on(async {
            let sorted = session.datasets().arrivals_sorted().await.unwrap();
            let frame = session.datasets().requests_by_arrival(&["request_id"]).await.unwrap();
            let plan = frame.create_physical_plan().await.unwrap();
            (sorted, displayable(plan.as_ref()).indent(false).to_string())
        })
    };
    // The plain dataset alone arrives at 1, 2, 3 s: read as it is.
    let (sorted, plan) = plan_of(&dirs[..1]);
    assert!(sorted && !plan.contains("SortExec"), "{plan}");
    // Then the partitioned one, whose parts come 1, 3, 2 s: sorted.
    let (sorted, plan) = plan_of(&dirs);
    assert!(!sorted && plan.contains("SortExec"), "{plan}");
    // A row without an arrival before one with: sorted too.
    let late = root.path().join("late");
    let mut writer = DatasetWriter::create(&late, false).unwrap();
    for arrival in [Some(S), None, Some(2 * S)] {
        let row = RequestRow { source: "x".into(), arrival_time: arrival, ..RequestRow::default() };
        writer.push_request(&row).unwrap();
    }
    writer.finish(manifest()).unwrap();
    assert!(!plan_of(&[late]).0);
    // Rows without one all at the end are in order.
    let tail = root.path().join("tail");
    let mut writer = DatasetWriter::create(&tail, false).unwrap();
    for arrival in [Some(S), Some(S), None, None] {
        let row = RequestRow { source: "x".into(), arrival_time: arrival, ..RequestRow::default() };
        writer.push_request(&row).unwrap();
    }
    writer.finish(manifest()).unwrap();
    assert!(plan_of(&[tail]).0);
}

const S: i64 = 1_000_000_000;
