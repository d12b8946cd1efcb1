//! `Prefill batch` / `Decode batch` scheduler lines: a head, then `key: value` fields joined by `, `.
//!
//! Heads by release (reference `sglang.md` §2.2-2.3): `Prefill batch. ` (0.3–0.5.3), `Prefill batch(mixed
//! #running-req: N). ` (0.3.0–0.3.4), `Prefill batch [N], ` (0.5.4; later with SGLANG_LOG_FORWARD_ITERS=1),
//! `Prefill batch, ` (0.5.5+); the same for `Decode batch`. Fields come and go per release (`cache hit rate` until
//! 0.4.3, `largest-len` in 0.4.4, `{cuda,cpu,npu,musa} graph`, `full`/`swa token usage`, `mamba usage`,
//! `#pending-token`, PD queues renamed `#prealloc-req` → `#bootstrap-req`, …) and lines may end with `, `:
//! [`FIELDS`] maps each known key to a canonical metric (or to nothing, for flags and estimates), and a key outside
//! the table is reported — it is a newer release's field or a line broken by terminal wrapping.
//!
//! Before 0.3 (samples only): `new fill batch. #seq: N. #cached_token: N. #new_token: N. #remaining_req: N.
//! #running_req: N. tree_cache_hit_rate: P%.` and a head-less decode line `#running-req: N, #token: N, …`.

use std::sync::LazyLock;

use ahash::HashMap;
use infertrace_adapter::fragments::for_each_pair;
use infertrace_schema::metrics;
use regex::Regex;

/// What a field's value means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// A number as printed.
    Plain,
    /// A percentage, stored as a fraction.
    Percent,
}

/// Known batch-line keys → canonical metric (`None`: known, deliberately not kept).
const FIELDS: &[(&str, Option<&str>, Unit)] = &[
    ("#new-seq", Some(metrics::BATCH_REQUESTS), Unit::Plain),
    ("#new-token", Some(metrics::BATCH_TOKENS), Unit::Plain),
    ("#cached-token", Some(metrics::PREFILL_CACHED_TOKENS), Unit::Plain),
    ("cache hit rate", Some(metrics::PREFIX_CACHE_HIT_RATE), Unit::Percent),
    ("token usage", Some(metrics::KV_CACHE_USAGE), Unit::Plain),
    ("full token usage", Some(metrics::KV_CACHE_USAGE), Unit::Plain),
    ("swa token usage", Some(metrics::SWA_KV_CACHE_USAGE), Unit::Plain),
    ("mamba usage", Some(metrics::MAMBA_CACHE_USAGE), Unit::Plain),
    ("#token", Some(metrics::KV_CACHE_TOKENS), Unit::Plain),
    ("#full token", Some(metrics::KV_CACHE_TOKENS), Unit::Plain),
    ("#running-req", Some(metrics::REQUESTS_RUNNING), Unit::Plain),
    ("#queue-req", Some(metrics::REQUESTS_WAITING), Unit::Plain),
    ("gen throughput (token/s)", Some(metrics::GENERATION_THROUGHPUT_TPS), Unit::Plain),
    ("input throughput (token/s)", Some(metrics::PROMPT_THROUGHPUT_TPS), Unit::Plain),
    ("accept len", Some(metrics::SPEC_ACCEPT_LENGTH), Unit::Plain),
    ("accept rate", Some(metrics::SPEC_ACCEPT_RATE), Unit::Plain),
    ("#pending-token", Some(metrics::PENDING_TOKENS), Unit::Plain),
    ("#retracted-req", Some(metrics::REQUESTS_RETRACTED), Unit::Plain),
    ("#unbootstrapped-req", Some(metrics::REQUESTS_BOOTSTRAPPING), Unit::Plain),
    ("#prealloc-req", Some(metrics::REQUESTS_BOOTSTRAPPING), Unit::Plain),
    ("#bootstrap-req", Some(metrics::REQUESTS_BOOTSTRAPPING), Unit::Plain),
    ("#transferring-req", Some(metrics::REQUESTS_TRANSFERRING), Unit::Plain),
    ("#inflight-req", Some(metrics::REQUESTS_TRANSFERRING), Unit::Plain),
    ("#transfer-req", Some(metrics::REQUESTS_TRANSFERRING), Unit::Plain),
    ("pre-allocated usage", Some(metrics::PREALLOCATED_KV_CACHE_USAGE), Unit::Plain),
    // Known fields without a canonical metric: flags, sizes and estimates.
    ("cuda graph", None, Unit::Plain),
    ("cpu graph", None, Unit::Plain),
    ("npu graph", None, Unit::Plain),
    ("musa graph", None, Unit::Plain),
    ("largest-len", None, Unit::Plain),
    ("time", None, Unit::Plain),
    ("#swa token", None, Unit::Plain),
    ("mamba num", None, Unit::Plain),
    ("#gpu token", None, Unit::Plain),
    ("gpu token usage", None, Unit::Plain),
    ("#cpu token", None, Unit::Plain),
    ("cpu token usage", None, Unit::Plain),
    ("#replay-token", None, Unit::Plain),
    ("#optimistic-req", None, Unit::Plain),
    ("#host-receive-req", None, Unit::Plain),
    ("waiting-image-req", None, Unit::Plain),
    ("cap len", None, Unit::Plain),
    ("block accept len", None, Unit::Plain),
    ("fwd occupancy", None, Unit::Percent),
    ("est. prefill TFLOPS/s (per GPU)", None, Unit::Plain),
    ("est. decode TFLOPS/s (per GPU)", None, Unit::Plain),
    ("est. read BW (GB/s per GPU)", None, Unit::Plain),
    ("est. write BW (GB/s per GPU)", None, Unit::Plain),
];

/// [`FIELDS`] by key (the first entry of a key, as a search of the table finds).
static FIELD_INDEX: LazyLock<HashMap<&'static str, (Option<&'static str>, Unit)>> = LazyLock::new(|| {
    let mut index = HashMap::default();
    for &(key, metric, unit) in FIELDS {
        index.entry(key).or_insert((metric, unit));
    }
    index
});

/// Legacy (pre-0.3) keys.
const LEGACY_FIELDS: &[(&str, &str, Unit)] = &[
    ("#seq", metrics::BATCH_REQUESTS, Unit::Plain),
    ("#cached_token", metrics::PREFILL_CACHED_TOKENS, Unit::Plain),
    ("#new_token", metrics::BATCH_TOKENS, Unit::Plain),
    ("#remaining_req", metrics::REQUESTS_WAITING, Unit::Plain),
    ("#running_req", metrics::REQUESTS_RUNNING, Unit::Plain),
    ("tree_cache_hit_rate", metrics::PREFIX_CACHE_HIT_RATE, Unit::Percent),
];

/// The metrics of a batch line, kept in place up to 10 (a line has 5 to 10): a line is read on one thread and its
/// samples written on another, so a vector allocated per line was freed across threads (keeping them in place took 2%
/// off the time of a 1 GiB SGLang log, `docs/performance-history.md`, twenty-first pass).
pub(crate) type Values = smallvec::SmallVec<[(&'static str, f64); 10]>;

/// A parsed batch line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Batch<'a> {
    /// Canonical metric and value, in the order written.
    pub(crate) values: Values,
    /// Keys this parser does not know (newer fields, or wrapped lines); an empty one stands for text that is no
    /// `key: value` field (a line cut short).
    pub(crate) unknown: Vec<&'a str>,
    /// Keys whose value did not parse.
    pub(crate) unreadable: Vec<&'a str>,
}

static HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Prefill|Decode) batch(?:\(mixed #running-req: (?P<mixed>\d+)\))?(?: \[\d+\])?[.,] ")
        .expect("valid regex")
});

fn value(text: &str, unit: Unit) -> Option<f64> {
    let text = text.trim().trim_end_matches(['.', ',']);
    // 0.4.9 SWA allocators print `full=N, swa=M`: the full pool is the main KV cache.
    let text = text.strip_prefix("full=").unwrap_or(text);
    match unit {
        Unit::Plain => number(text),
        Unit::Percent => number(text.strip_suffix('%').unwrap_or(text)).map(|p| p / 100.0),
    }
}

/// `text.parse::<f64>()`, with the common case read directly: at most 15 digits with an optional `.` among them
/// (`4256`, `0.31`, `8171.12`). Its digits as an integer are exact in an `f64` (below 2^53), so is the power of ten
/// (up to 10^22), and one IEEE division rounds correctly: the correctly rounded value, which is what `parse` gives.
/// Anything else (signs, exponents, `inf`, more digits) goes to `parse`.
fn number(text: &str) -> Option<f64> {
    const POWERS: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    let (mut digits, mut fraction, mut point, mut value) = (0usize, 0usize, false, 0u64);
    for &b in text.as_bytes() {
        match b {
            b'0'..=b'9' if digits < 15 => {
                value = value * 10 + u64::from(b - b'0');
                digits += 1;
                fraction += usize::from(point);
            }
            b'.' if !point => point = true,
            _ => return text.parse().ok(),
        }
    }
    if digits == 0 {
        return text.parse().ok();
    }
    Some(value as f64 / POWERS[fraction])
}

/// Parses a scheduler message if it is a batch line of any generation.
pub(crate) fn parse(message: &str) -> Option<Batch<'_>> {
    let message = message.trim_end();
    if let Some(rest) = message.strip_prefix("new fill batch. ") {
        let mut batch = Batch::default();
        for item in rest.split(". ") {
            let Some((key, text)) = item.split_once(':') else { continue };
            let key = key.trim();
            match LEGACY_FIELDS.iter().find(|(k, _, _)| *k == key) {
                Some((_, metric, unit)) => match value(text, *unit) {
                    Some(v) => batch.values.push((metric, v)),
                    None => batch.unreadable.push(key),
                },
                None => batch.unknown.push(key),
            }
        }
        return Some(batch);
    }
    // The plain heads (`Prefill batch, ` / `Decode batch. `) without the regex; the rest goes through it.
    let plain = ["Prefill batch", "Decode batch"].iter().find_map(|head| {
        let rest = message.strip_prefix(head)?;
        rest.strip_prefix(", ").or_else(|| rest.strip_prefix(". "))
    });
    let (rest, mixed) = match plain.map(|rest| (rest, None)) {
        Some(found) => found,
        None => match HEAD.captures(message) {
            Some(c) => (
                &message[c.get(0).expect("matched").end()..],
                c.name("mixed").and_then(|m| m.as_str().parse::<f64>().ok()),
            ),
            // The head-less decode line of pre-0.3 releases.
            None if message.starts_with("#running-req: ") && message.contains("token usage: ") => (message, None),
            None => return None,
        },
    };
    // Up to ten values in place, a line of any release (0.5 prefill lines keep nine).
    let mut batch = Batch::default();
    if let Some(running) = mixed {
        batch.values.push((metrics::REQUESTS_RUNNING, running));
    }
    for_each_pair(rest, ':', |key, text| {
        if key.is_empty() {
            // `swa=M` of the 0.4.9 SWA form is known; text without a key is a line cut short.
            if !text.contains('=') {
                batch.unknown.push("");
            }
            return;
        }
        match FIELD_INDEX.get(key) {
            Some(&(Some(metric), unit)) => match value(text, unit) {
                Some(v) => batch.values.push((metric, v)),
                None => batch.unreadable.push(key),
            },
            Some((None, _)) => {}
            None => batch.unknown.push(key),
        }
    });
    Some(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_what_parse_gives() {
        for text in [
            "0",
            "4256",
            "0.31",
            "8171.12",
            "5.",
            ".5",
            "00012.50",
            "999999999999999",
            "9999999999999999",
            "0.000000000000001",
            "123456789012345.",
            "1.2.3",
            ".",
            "",
            "-1",
            "+2",
            "1e3",
            "inf",
            "NaN",
            "1_0",
            "٣",
            // Past 15 digits the digits as an integer are rounded before the division: these would round twice.
            "6.4708321257442331",
            "103.03515748823385",
        ] {
            assert_eq!(number(text).map(f64::to_bits), text.parse::<f64>().ok().map(f64::to_bits), "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn numbers_agree_with_parse(text in "[0-9]{0,18}[.]?[0-9]{0,18}|[0-9.eE+-]{0,8}") {
            proptest::prop_assert_eq!(number(&text).map(f64::to_bits), text.parse::<f64>().ok().map(f64::to_bits));
        }
    }

    fn values(message: &str) -> Vec<(&'static str, f64)> {
        let batch = parse(message).unwrap_or_else(|| panic!("not a batch line: {message}"));
        assert_eq!((batch.unknown.as_slice(), batch.unreadable.as_slice()), (&[][..], &[][..]), "{message}");
        batch.values.to_vec()
    }

    use metrics::*;

    #[test]
    fn prefill_lines_of_every_generation() {
        // One line per template of reference §2.2, values made up, expectations written from the templates.
        let cases: &[(&str, &[(&str, f64)])] = &[
            (
                "Prefill batch. #new-seq: 1, #new-token: 63, #cached-token: 1, cache hit rate: 1.41%, #running-req: 0, #queue-req: 2",
                &[
                    (BATCH_REQUESTS, 1.0),
                    (BATCH_TOKENS, 63.0),
                    (PREFILL_CACHED_TOKENS, 1.0),
                    (PREFIX_CACHE_HIT_RATE, 0.0141),
                    (REQUESTS_RUNNING, 0.0),
                    (REQUESTS_WAITING, 2.0),
                ],
            ),
            (
                "Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 8, #cached-token: 0, cache hit rate: 0.00%, token usage: 0.01, #queue-req: 0",
                &[
                    (REQUESTS_RUNNING, 3.0),
                    (BATCH_REQUESTS, 1.0),
                    (BATCH_TOKENS, 8.0),
                    (PREFILL_CACHED_TOKENS, 0.0),
                    (PREFIX_CACHE_HIT_RATE, 0.0),
                    (KV_CACHE_USAGE, 0.01),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "Prefill batch. #new-seq: 2, #new-token: 2, #cached-token: 8027, token usage: 0.26, #running-req: 28, #queue-req: 0, ",
                &[
                    (BATCH_REQUESTS, 2.0),
                    (BATCH_TOKENS, 2.0),
                    (PREFILL_CACHED_TOKENS, 8027.0),
                    (KV_CACHE_USAGE, 0.26),
                    (REQUESTS_RUNNING, 28.0),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "Prefill batch. #new-seq: 1, #new-token: 4, #cached-token: 0, token usage: 0.00, #running-req: 0, #unbootstrapped-req: 1, #queue-req: 0, #transferring-req: 2, time: 0.50 ",
                &[
                    (BATCH_REQUESTS, 1.0),
                    (BATCH_TOKENS, 4.0),
                    (PREFILL_CACHED_TOKENS, 0.0),
                    (KV_CACHE_USAGE, 0.0),
                    (REQUESTS_RUNNING, 0.0),
                    (REQUESTS_BOOTSTRAPPING, 1.0),
                    (REQUESTS_WAITING, 0.0),
                    (REQUESTS_TRANSFERRING, 2.0),
                ],
            ),
            (
                "Prefill batch. #new-seq: 1, #new-token: 4, #cached-token: 0, #token: full=100, swa=50, token usage: full=0.10, swa=0.05, #running-req: 1, #queue-req: 0",
                &[
                    (BATCH_REQUESTS, 1.0),
                    (BATCH_TOKENS, 4.0),
                    (PREFILL_CACHED_TOKENS, 0.0),
                    (KV_CACHE_TOKENS, 100.0),
                    (KV_CACHE_USAGE, 0.1),
                    (REQUESTS_RUNNING, 1.0),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "Prefill batch [42], #new-seq: 1, #new-token: 64, #cached-token: 128, full token usage: 0.20, mamba usage: 0.30, #running-req: 0, #queue-req: 0, #prealloc-req: 1, #inflight-req: 2, input throughput (token/s): 100.50, ",
                &[
                    (BATCH_REQUESTS, 1.0),
                    (BATCH_TOKENS, 64.0),
                    (PREFILL_CACHED_TOKENS, 128.0),
                    (KV_CACHE_USAGE, 0.2),
                    (MAMBA_CACHE_USAGE, 0.3),
                    (REQUESTS_RUNNING, 0.0),
                    (REQUESTS_WAITING, 0.0),
                    (REQUESTS_BOOTSTRAPPING, 1.0),
                    (REQUESTS_TRANSFERRING, 2.0),
                    (PROMPT_THROUGHPUT_TPS, 100.5),
                ],
            ),
            (
                "Prefill batch, #new-seq: 8, #new-token: 54400, #cached-token: 482304, token usage: 0.66, #running-req: 16, #queue-req: 2, #pending-token: 0, npu graph: False, input throughput (token/s): 2793.64",
                &[
                    (BATCH_REQUESTS, 8.0),
                    (BATCH_TOKENS, 54400.0),
                    (PREFILL_CACHED_TOKENS, 482304.0),
                    (KV_CACHE_USAGE, 0.66),
                    (REQUESTS_RUNNING, 16.0),
                    (REQUESTS_WAITING, 2.0),
                    (PENDING_TOKENS, 0.0),
                    (PROMPT_THROUGHPUT_TPS, 2793.64),
                ],
            ),
            (
                "Prefill batch, #new-seq: 1, #new-token: 10, #cached-token: 0, full token usage: 0.10, swa token usage: 0.20, #running-req: 1, #queue-req: 0, #pending-token: 5, #replay-token: 3, #bootstrap-req: 1, #inflight-req: 0, #optimistic-req: 0, waiting-image-req: 0, musa graph: True, input throughput (token/s): 1.00, est. prefill TFLOPS/s (per GPU): 12.30, fwd occupancy: 88.00%",
                &[
                    (BATCH_REQUESTS, 1.0),
                    (BATCH_TOKENS, 10.0),
                    (PREFILL_CACHED_TOKENS, 0.0),
                    (KV_CACHE_USAGE, 0.1),
                    (SWA_KV_CACHE_USAGE, 0.2),
                    (REQUESTS_RUNNING, 1.0),
                    (REQUESTS_WAITING, 0.0),
                    (PENDING_TOKENS, 5.0),
                    (REQUESTS_BOOTSTRAPPING, 1.0),
                    (REQUESTS_TRANSFERRING, 0.0),
                    (PROMPT_THROUGHPUT_TPS, 1.0),
                ],
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(values(line), expected.to_vec(), "{line}");
        }
    }

    #[test]
    fn decode_lines_of_every_generation() {
        let cases: &[(&str, &[(&str, f64)])] = &[
            (
                "Decode batch. #running-req: 2, #token: 4078, token usage: 0.00, gen throughput (token/s): 447.31, #queue-req: 0",
                &[
                    (REQUESTS_RUNNING, 2.0),
                    (KV_CACHE_TOKENS, 4078.0),
                    (KV_CACHE_USAGE, 0.0),
                    (GENERATION_THROUGHPUT_TPS, 447.31),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "Decode batch. #running-req: 1, #token: 9, token usage: 0.01, accept len: 2.50, gen throughput (token/s): 10.00, largest-len: 0, #queue-req: 0, ",
                &[
                    (REQUESTS_RUNNING, 1.0),
                    (KV_CACHE_TOKENS, 9.0),
                    (KV_CACHE_USAGE, 0.01),
                    (SPEC_ACCEPT_LENGTH, 2.5),
                    (GENERATION_THROUGHPUT_TPS, 10.0),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "Decode batch. #running-req: 1, #token: 137, token usage: 0.00, pre-allocated usage: 0.10, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 1.06, #queue-req: 0, ",
                &[
                    (REQUESTS_RUNNING, 1.0),
                    (KV_CACHE_TOKENS, 137.0),
                    (KV_CACHE_USAGE, 0.0),
                    (PREALLOCATED_KV_CACHE_USAGE, 0.1),
                    (REQUESTS_RETRACTED, 0.0),
                    (GENERATION_THROUGHPUT_TPS, 1.06),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "Decode batch [7], #running-req: 24, #full token: 100, full token usage: 0.66, #swa token: 50, swa token usage: 0.33, accept len: 3.05, accept rate: 0.68, npu graph: True, gen throughput (token/s): 239.06, #queue-req: 2",
                &[
                    (REQUESTS_RUNNING, 24.0),
                    (KV_CACHE_TOKENS, 100.0),
                    (KV_CACHE_USAGE, 0.66),
                    (SWA_KV_CACHE_USAGE, 0.33),
                    (SPEC_ACCEPT_LENGTH, 3.05),
                    (SPEC_ACCEPT_RATE, 0.68),
                    (GENERATION_THROUGHPUT_TPS, 239.06),
                    (REQUESTS_WAITING, 2.0),
                ],
            ),
            (
                "Decode batch, #running-req: 32, #token: 11179, token usage: 0.08, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 1, #host-receive-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0, est. decode TFLOPS/s (per GPU): 1.00, est. read BW (GB/s per GPU): 2.00, est. write BW (GB/s per GPU): 3.00",
                &[
                    (REQUESTS_RUNNING, 32.0),
                    (KV_CACHE_TOKENS, 11179.0),
                    (KV_CACHE_USAGE, 0.08),
                    (PREALLOCATED_KV_CACHE_USAGE, 0.0),
                    (REQUESTS_BOOTSTRAPPING, 0.0),
                    (REQUESTS_TRANSFERRING, 1.0),
                    (REQUESTS_RETRACTED, 0.0),
                    (GENERATION_THROUGHPUT_TPS, 1635.11),
                    (REQUESTS_WAITING, 0.0),
                ],
            ),
            (
                "#running-req: 2, #token: 10, token usage: 0.01, #queue-req: 0",
                &[(REQUESTS_RUNNING, 2.0), (KV_CACHE_TOKENS, 10.0), (KV_CACHE_USAGE, 0.01), (REQUESTS_WAITING, 0.0)],
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(values(line), expected.to_vec(), "{line}");
        }
    }

    #[test]
    fn legacy_fill_batch_and_broken_lines() {
        assert_eq!(
            values(
                "new fill batch. #seq: 1. #cached_token: 757. #new_token: 1. #remaining_req: 4. #running_req: 2. tree_cache_hit_rate: 80.83%."
            ),
            [
                (BATCH_REQUESTS, 1.0),
                (PREFILL_CACHED_TOKENS, 757.0),
                (BATCH_TOKENS, 1.0),
                (REQUESTS_WAITING, 4.0),
                (REQUESTS_RUNNING, 2.0),
                (PREFIX_CACHE_HIT_RATE, 0.8083)
            ]
        );
        // Terminal wrapping fused `#cached-token` and `#running-req`; the intact fields are still read.
        let broken = parse("Prefill batch, #new-seq: 1, #new-token: 896, #cached-tounning-req: 0, #queue-req: 28, #pending-token: 0, npu graph: False, input through").unwrap();
        assert_eq!(broken.unknown, ["#cached-tounning-req", ""], "`input through` has no value");
        assert_eq!(
            broken.values.as_slice(),
            [(BATCH_REQUESTS, 1.0), (BATCH_TOKENS, 896.0), (REQUESTS_WAITING, 28.0), (PENDING_TOKENS, 0.0)].as_slice()
        );
        assert_eq!(parse("Receive: obj=GenerateReqInput(...)"), None);
        let unreadable = parse("Decode batch. #running-req: many, #queue-req: 0").unwrap();
        assert_eq!(unreadable.unreadable, ["#running-req"]);
    }

    #[test]
    fn every_mapped_metric_is_canonical() {
        assert!(FIELDS.iter().filter_map(|(_, m, _)| *m).all(metrics::is_known));
        assert!(LEGACY_FIELDS.iter().all(|(_, m, _)| metrics::is_known(m)));
    }
}
