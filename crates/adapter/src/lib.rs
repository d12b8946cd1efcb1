//! The adapter boundary of infertrace: what every input format implements, and the helpers they share.
//!
//! An [`Adapter`] has an id, a cheap [`detect_head`](Adapter::detect_head) over the first 4 KiB of an input, and a
//! streaming [`parse`](Adapter::parse) that pushes canonical rows and per-line [`Diagnostic`]s into a [`Sink`]
//! (ripgrep's `Sink` push model). Parsing never fails on content: a line an adapter cannot use becomes a diagnostic with its
//! line number, never a panic and never a silent drop. `Err` from `parse` means I/O failed, nothing else.
//!
//! The trait is object-safe and adapters are used as `&dyn Adapter`, so the CLI's registry is a plain static list.
//! This crate also opens inputs (plain, gzip or zstd by magic bytes, hashing the stored bytes on the way), splits
//! lines, parses timestamps, parses the `key=value` and Python-repr fragments that engine logs are full of, reads
//! Prometheus scrapes, and hashes token blocks into chained prefix hashes.
//!
//! It deliberately does not walk directories, print, or decide where output goes: that is the CLI's job.

mod diagnostic;
pub mod drift;
pub mod fragments;
pub mod hash;
mod input;
pub mod json;
pub mod kv_events;
mod lines;
pub mod otlp;
pub mod parallel;
pub mod prometheus;
mod shared;
mod sink;
mod spare;
pub mod testing;
pub mod time;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, BufRead};

pub use diagnostic::{Diagnostic, DiagnosticKind};
pub use drift::Drift;
pub use input::{
    Compression, DecompressionLimits, HEAD_BYTES, Input, InputDigest, Progress, RATIO_GRACE_BYTES, recorded_text_bytes,
};
pub use lines::{LineReader, MAX_LINE_BYTES, utf8, utf8_line};
pub use shared::SharedText;
pub use sink::{CollectSink, Sink};
pub use time::{ParseOptions, UtcOffset};

/// The request id of a row a trace does not name: `stem:number` (the input's stem and the line, or the index).
///
/// One allocation and an integer write rather than `format!`, whose formatting machinery was 6–9% of reading an
/// Azure or BurstGPT trace (one id per row).
pub fn line_id(stem: &str, number: u64) -> String {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(number);
    let mut id = String::with_capacity(stem.len() + 1 + digits.len());
    id.push_str(stem);
    id.push(':');
    id.push_str(digits);
    id
}

use infertrace_schema::{ClockDomain, DatasetError, YearAssumption};

/// How sure an adapter is that it can parse an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    /// The head looks compatible but is not specific to this format.
    Low,
    /// The head carries this format's signature (a header line, a distinctive key set).
    High,
}

/// Where the rows of one parse come from and under which assumptions.
#[derive(Debug, Clone, Copy)]
pub struct ParseContext<'a> {
    /// The input path as it should appear in outputs (relative, as given).
    pub source_file: &'a str,
    /// Assumptions for inputs that lack them.
    pub options: &'a ParseOptions,
    /// The input file's modification time (UTC nanoseconds): the last resort for inputs whose times lack a year
    /// or are missing altogether.
    pub modified: Option<i64>,
    /// The files beside the input, for an adapter that takes context from them (where a simulator's run clock
    /// starts); `None` for standard input and in tests of a single file.
    pub sidecars: Option<&'a dyn Sidecars>,
}

/// Files beside an input, read by their path relative to the input's directory (`meta.json`,
/// `../vllm/meta.json`): the adapter names the file, never sees where it is.
pub trait Sidecars: std::fmt::Debug + Sync {
    /// The decompressed content of the file at `relative` (plain, gzip or zstd), or `None` when there is none, it
    /// cannot be read, or it is larger than the caller allows.
    fn read(&self, relative: &str) -> Option<Vec<u8>>;
}

impl ParseContext<'_> {
    /// The UTC year of [`modified`](Self::modified).
    pub fn modified_year(&self) -> Option<i32> {
        self.modified.map(|ns| chrono::Datelike::year(&chrono::DateTime::from_timestamp_nanos(ns)))
    }

    /// The file name of `source_file` without directories and compression or format extensions,
    /// used to make request ids for sources that have none.
    pub fn source_stem(&self) -> &str {
        let name = self.source_file.rsplit(['/', '\\']).next().unwrap_or(self.source_file);
        let name = name.strip_suffix(".gz").or_else(|| name.strip_suffix(".zst")).unwrap_or(name);
        name.rsplit_once('.').map_or(name, |(stem, _)| stem)
    }
}

/// What a parse found besides rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseReport {
    /// Format generation detected, when the format has several.
    pub format_version: Option<String>,
    /// How the input's times were made absolute.
    pub clock_domain: ClockDomain,
    /// The year given to year-less timestamps, for formats that have them.
    pub year: Option<YearAssumption>,
    /// Lines read, blank ones included.
    pub lines: u64,
    /// Format-specific facts about the whole input, copied into the manifest.
    pub details: BTreeMap<String, serde_json::Value>,
}

/// Why a parse stopped. Content never causes one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Reading the input failed.
    #[error("reading input failed")]
    Read(#[from] io::Error),
    /// Writing rows failed.
    #[error("writing output failed")]
    Write(#[from] DatasetError),
}

/// The first [`HEAD_BYTES`] (or fewer) decompressed bytes of an input, as detection reads them: the bytes, and the
/// same bytes as text, decoded once for all the adapters that are asked (each decoded them on its own before: a
/// quarter of the time of a run over 8,000 files of 6 KB went to detection, and a third of that to the decoding).
#[derive(Debug, Clone)]
pub struct Head<'a> {
    bytes: &'a [u8],
    text: Cow<'a, str>,
}

impl<'a> Head<'a> {
    /// The head `bytes`, decoded.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, text: String::from_utf8_lossy(bytes) }
    }

    /// The bytes as read.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The bytes as text: each sequence that is not UTF-8 (a character cut at the end of the head included) replaced
    /// by U+FFFD, as [`String::from_utf8_lossy`] does.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// One input format.
pub trait Adapter: Send + Sync + std::fmt::Debug {
    /// Stable format id, used by `--format` and stored in `source` and the manifest.
    fn id(&self) -> &'static str;

    /// One line for `infertrace formats`: what the format is and which versions are covered.
    fn description(&self) -> &'static str;

    /// Whether `head`, the first [`HEAD_BYTES`] (or fewer) decompressed bytes of an input, looks like this format.
    /// Must be cheap and must not assume `head` ends on a line boundary. The CLI asks every adapter about one
    /// [`Head`], so its text is decoded once.
    fn detect_head(&self, head: &Head<'_>) -> Option<Confidence>;

    /// [`detect_head`](Self::detect_head) of the head `head`, for asking one adapter. Not meant to be overridden.
    fn detect(&self, head: &[u8]) -> Option<Confidence> {
        self.detect_head(&Head::new(head))
    }

    /// Parses the whole input, pushing rows and diagnostics into `sink`.
    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError>;
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_ids_are_stem_colon_number() {
        assert_eq!(super::line_id("azure_code_2023", 2), "azure_code_2023:2");
        assert_eq!(super::line_id("", 0), ":0");
        assert_eq!(super::line_id("t", u64::MAX), "t:18446744073709551615");
    }
}
