//! What every fuzz target does with its input: detect, then parse into a `CollectSink` and fill durations as
//! `normalize` does. Parsing must never panic and never fail on content (only I/O fails, and a slice never does).

use infertrace_adapter::{Adapter, CollectSink, HEAD_BYTES, ParseContext, ParseOptions};

/// Runs `adapter` over `data` as `normalize --format <id>` would.
pub fn parse(adapter: &dyn Adapter, data: &[u8]) {
    let _ = adapter.detect(&data[..data.len().min(HEAD_BYTES)]);
    let options = ParseOptions::default();
    let ctx = ParseContext { source_file: "fuzz/input.log", options: &options, modified: None };
    let mut sink = CollectSink::default();
    let mut input = data;
    adapter.parse(&mut input, &ctx, &mut sink).expect("parsing a byte slice never fails: only I/O may");
    for mut row in sink.requests {
        let _ = row.fill_durations();
    }
}

/// Runs every adapter of `adapters` over `data`.
pub fn parse_all(adapters: &[&dyn Adapter], data: &[u8]) {
    for adapter in adapters {
        parse(*adapter, data);
    }
}
