//! A small hand-built dataset whose figures the tests compute by hand, and the path from rows to HTML that the
//! CLI takes (write a dataset, open it, compute the metrics and the charts' series, render).
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use infertrace_engine::series::{Series, series_over};
use infertrace_engine::{Metrics, MetricsOptions, Slo, compute_over};
use infertrace_query::{QueryOptions, Session};
use infertrace_report::{ReportInput, render, series_options};
use infertrace_schema::{Assumptions, DatasetWriter, EngineSample, Manifest, Producer, RequestRow, Status, metrics};

pub const S: i64 = 1_000_000_000;
/// An arbitrary origin, so that instants are not small numbers.
pub const T0: i64 = 1_700_000_000 * S;
/// An instance name that would run script if it were not escaped.
pub const HOSTILE: &str = r#"<script>alert(1)</script> & "q" 'x'"#;
/// Text columns the report must never show.
pub const CANARIES: [&str; 4] = ["CANARY-REQUEST-ID", "CANARY-SESSION", "CANARY-ERROR", "CANARY-FINISH"];

pub fn at(seconds: f64) -> Option<i64> {
    Some(T0 + (seconds * 1e9).round() as i64)
}

fn request(arrival: f64, status: Status) -> RequestRow {
    RequestRow {
        request_id: CANARIES[0].into(),
        session_id: Some(CANARIES[1].into()),
        error: Some(CANARIES[2].into()),
        finish_reason: Some(CANARIES[3].into()),
        source: "test".into(),
        model: Some(r#"m&"1'"#.into()),
        instance: Some(HOSTILE.into()),
        arrival_time: at(arrival),
        status,
        ..RequestRow::default()
    }
}

/// Four requests. With durations derived from instants:
///
/// | row | queue | prefill | ttft | tpot            | decode | e2e | input | cached | output | status  |
/// |-----|-------|---------|------|-----------------|--------|-----|-------|--------|--------|---------|
/// | r1  | 0.2   | 0.3     | 0.5  | (2.5−0.5)/4=0.5 | 2      | 2.5 | 100   | 40     | 5      | ok      |
/// | r2  | 0.5   | 0.5     | 1    | (4−2)/2=1       | 2      | 3   | 200   | 0      | 3      | ok      |
/// | r3  | 1     | 1       | 2    | (8−4)/5=0.8     | 4      | 6   | 100   | 60     | 6      | error   |
/// | r4  | -     | -       | -    | -               | -      | -   | 100   | -      | -      | unknown |
pub fn rows() -> Vec<RequestRow> {
    vec![
        RequestRow {
            scheduled_time: at(0.2),
            first_token_time: at(0.5),
            last_token_time: at(2.5),
            input_tokens: Some(100),
            cached_tokens: Some(40),
            output_tokens: Some(5),
            ..request(0.0, Status::Ok)
        },
        RequestRow {
            scheduled_time: at(1.5),
            first_token_time: at(2.0),
            last_token_time: at(4.0),
            input_tokens: Some(200),
            cached_tokens: Some(0),
            output_tokens: Some(3),
            ..request(1.0, Status::Ok)
        },
        RequestRow {
            scheduled_time: at(3.0),
            first_token_time: at(4.0),
            last_token_time: at(8.0),
            input_tokens: Some(100),
            cached_tokens: Some(60),
            output_tokens: Some(6),
            ..request(2.0, Status::Error)
        },
        RequestRow { input_tokens: Some(100), ..request(3.0, Status::Unknown) },
    ]
}

/// KV usage of the hostile instance: 0.2 at 0 s, 0.8 at 1 s, 0.5 at 4 s; two queue depths of `engine-1`.
pub fn samples() -> Vec<EngineSample> {
    let sample = |t: f64, instance: &str, metric: &str, value: f64| EngineSample {
        time: at(t).unwrap(),
        source: "test".into(),
        instance: Some(instance.into()),
        metric: metric.into(),
        value,
        ..EngineSample::default()
    };
    vec![
        sample(0.0, HOSTILE, metrics::KV_CACHE_USAGE, 0.2),
        sample(1.0, HOSTILE, metrics::KV_CACHE_USAGE, 0.8),
        sample(4.0, HOSTILE, metrics::KV_CACHE_USAGE, 0.5),
        sample(0.0, "engine-1", metrics::REQUESTS_WAITING, 2.0),
        sample(2.0, "engine-1", metrics::REQUESTS_WAITING, 4.0),
    ]
}

/// Writes a dataset of `requests` and `samples` at `dir` and opens it.
pub fn write(dir: &Path, requests: &[RequestRow], samples: &[EngineSample]) -> PathBuf {
    let mut writer = DatasetWriter::create(dir, false).unwrap();
    for row in requests {
        writer.push_request(row).unwrap();
    }
    for row in samples {
        writer.push_sample(row).unwrap();
    }
    let manifest = Manifest::generated(
        Producer { name: "test".into(), version: "0".into() },
        Assumptions { year: None, utc_offset: "+00:00".into(), start: "1970-01-01T00:00:00Z".into(), block_size: None },
    );
    writer.finish(manifest).unwrap();
    dir.to_owned()
}

/// What the report is made of, as the CLI computes it: in one session, the metrics and then the series.
pub struct Read {
    pub series: Series,
    pub metrics: Metrics,
}

pub fn read(dir: &Path, slo: &str) -> Read {
    let options = MetricsOptions { slo: Slo::parse(slo).unwrap(), ..MetricsOptions::default() };
    let session = Session::open(&[dir.to_owned()], &QueryOptions::default()).unwrap();
    session.block_on(async {
        let metrics = compute_over(session.datasets(), &options, session.scratch()).await.unwrap();
        let series = series_over(session.datasets(), &series_options()).await.unwrap();
        Read { series, metrics }
    })
}

pub fn html(read: &Read, title: &str) -> String {
    render(&ReportInput { title, series: &read.series, metrics: &read.metrics })
}

/// The report of the hand-built dataset with `ttft=1.5s`, titled `title`.
pub fn fixture_html(dir: &Path, title: &str) -> String {
    let dataset = write(&dir.join("ds"), &rows(), &samples());
    html(&read(&dataset, "ttft=1.5s"), title)
}
