#![no_main]
//! The `normalize` path without the file system: the registry's detection on the head, then the chosen adapter.

use infertrace::registry;
use infertrace_adapter::HEAD_BYTES;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(adapter) = registry::detect(&data[..data.len().min(HEAD_BYTES)]) {
        infertrace_fuzz::parse(adapter, data);
    }
});
