//! What every fuzz target does with its input: detect, then parse into a `CollectSink` and fill durations as
//! `normalize` does. Parsing must never panic and never fail on content (only I/O fails, and a slice never does).
//!
//! There is one target per format id of `infertrace formats` (`fuzz_targets/<id>.rs`, kept in step with the registry
//! by a test in `xtask`) and one, `normalize`, for detection followed by the adapter it picks.

use std::sync::LazyLock;

use infertrace::registry;
use infertrace_adapter::{Adapter, CollectSink, HEAD_BYTES, ParseContext, ParseOptions};
use infertrace_adapter_mapped::{InputKind, MappedAdapter, Mapping};

/// The mapped CSV and JSONL adapters under the in-house mapping of `testdata/mapped/in-house`: they need a mapping,
/// and that one maps every column kind.
static MAPPED: LazyLock<[MappedAdapter; 2]> = LazyLock::new(|| {
    let mapping = || Mapping::from_toml(include_str!("../../testdata/mapped/in-house/mapping.toml")).unwrap();
    [MappedAdapter::new(InputKind::Csv, mapping()), MappedAdapter::new(InputKind::Jsonl, mapping())]
});

/// Runs the adapter of format `id` over `data`. Panics on an unknown id, which is a bug in the target.
pub fn parse_id(id: &str, data: &[u8]) {
    let adapter: &dyn Adapter = match id {
        "csv" => &MAPPED[0],
        "jsonl" => &MAPPED[1],
        _ => registry::by_id(id).unwrap_or_else(|| panic!("no adapter has the id {id}")),
    };
    parse(adapter, data);
}

/// Runs `adapter` over `data` as `normalize --format <id>` would.
pub fn parse(adapter: &dyn Adapter, data: &[u8]) {
    let _ = adapter.detect(&data[..data.len().min(HEAD_BYTES)]);
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "fuzz/input.log", options: &options, modified: None, sidecars: None };
    let mut sink = CollectSink::default();
    let mut input = data;
    adapter.parse(&mut input, &ctx, &mut sink).expect("parsing a byte slice never fails: only I/O may");
    for mut row in sink.requests {
        let _ = row.fill_durations();
    }
}
