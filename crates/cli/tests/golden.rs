//! One reviewed snapshot per input under `testdata/`: the manifest entry, the three tables read back from
//! Parquet, and the diagnostics.

mod common;

use std::fmt::Write as _;

use infertrace_schema::Dataset;
use infertrace_schema::render::render_rows;

fn render(dataset: &Dataset) -> String {
    let mut out = String::new();
    let input = &dataset.manifest.inputs[0];
    writeln!(out, "path: {}", input.path).unwrap();
    writeln!(out, "format: {} {}", input.format, input.format_version.as_deref().unwrap_or("-")).unwrap();
    writeln!(out, "compression: {}, clock: {}", input.compression, input.clock_domain).unwrap();
    if let Some(year) = &input.year {
        writeln!(out, "year: {} ({:?})", year.year, year.source).unwrap();
    }
    writeln!(out, "bytes: {}, sha256: {}", input.bytes, input.sha256).unwrap();
    writeln!(
        out,
        "lines: {}, requests: {}, samples: {}, cache_events: {}",
        input.lines, input.records.requests, input.records.samples, input.records.cache_events
    )
    .unwrap();
    for (key, value) in &input.details {
        writeln!(out, "detail {key}: {value}").unwrap();
    }
    if let Some(drift) = &input.drift {
        writeln!(out, "drift lines_used: {:?}", drift.lines_used).unwrap();
        writeln!(out, "drift envelopes: {:?}", drift.envelopes).unwrap();
        if !drift.times_from.is_empty() {
            writeln!(out, "drift times_from: {:?}", drift.times_from).unwrap();
        }
        if !drift.unknown_fields.is_empty() {
            writeln!(out, "drift unknown_fields: {:?}", drift.unknown_fields).unwrap();
        }
    }
    writeln!(out, "\ndiagnostics: {}", input.diagnostics.total).unwrap();
    for (kind, summary) in &input.diagnostics.by_kind {
        for d in &summary.first {
            writeln!(out, "  {kind} line {}: {}", d.line, d.message).unwrap();
        }
        if summary.count > summary.first.len() as u64 {
            writeln!(out, "  {kind}: {} more", summary.count - summary.first.len() as u64).unwrap();
        }
    }
    for (name, batch) in
        [("requests", &dataset.requests), ("samples", &dataset.samples), ("cache_events", &dataset.cache_events)]
    {
        writeln!(out, "\n{name}: {} rows", batch.num_rows()).unwrap();
        out.push_str(&render_rows(batch, 8, 2));
    }
    out
}

#[test]
fn golden() {
    // `testdata/mapped/` is left out: those inputs need their mapping (`--map`); `mapped.rs` tests them.
    insta::glob!(
        "../../../testdata",
        "{mooncake,azure-llm,vllm,sglang,dynamo,dcgm-exporter,node-exporter,genai,traces,traces/*}/*/*.*",
        |path| {
            // `traces/<format>/<generation>/` directories such as `1.x` match the pattern too.
            if path.is_dir() {
                return;
            }
            let relative = path.strip_prefix(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata").canonicalize().unwrap(),
            );
            let input = common::testdata().join(relative.unwrap());
            // Inputs without times of their own (Prometheus scrapes) fall back to the file's modification time, which
            // a clone sets to the day of the clone: pin it.
            common::pin_modified(path);
            let dir = tempfile::tempdir().unwrap();
            let output = dir.path().join("ds");
            // Formats whose timestamps lack a year would otherwise take it from the file's modification time, which a
            // fresh clone sets to the day of the clone.
            let options = infertrace_adapter::ParseOptions { year: Some(2025), ..Default::default() };
            common::run_with(&[input], &output, options);
            let dataset = Dataset::open(&output).unwrap();
            insta::assert_snapshot!(render(&dataset));
        }
    );
}
