#![no_main]
//! The mapped CSV and JSONL adapters, under the in-house mapping of `testdata/mapped/in-house`.

use std::sync::LazyLock;

use infertrace_adapter_mapped::{InputKind, MappedAdapter, Mapping};
use libfuzzer_sys::fuzz_target;

static ADAPTERS: LazyLock<[MappedAdapter; 2]> = LazyLock::new(|| {
    let mapping = || Mapping::from_toml(include_str!("../../testdata/mapped/in-house/mapping.toml")).unwrap();
    [MappedAdapter::new(InputKind::Csv, mapping()), MappedAdapter::new(InputKind::Jsonl, mapping())]
});

fuzz_target!(|data: &[u8]| {
    for adapter in ADAPTERS.iter() {
        infertrace_fuzz::parse(adapter, data);
    }
});
