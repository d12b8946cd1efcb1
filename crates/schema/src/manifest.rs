//! `manifest.json`: what a dataset was made from and under which assumptions.
//!
//! It holds no wall-clock time and no absolute path, and every map in it is ordered, so that the same inputs and
//! options give byte-identical manifests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::vocab::ClockDomain;

/// The manifest of one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Version of the canonical schema the tables follow ([`crate::SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The program that wrote the dataset.
    pub producer: Producer,
    /// Assumptions applied to inputs that do not carry the information themselves.
    pub assumptions: Assumptions,
    /// One entry per input file, in processing order.
    pub inputs: Vec<InputEntry>,
    /// Files found in an input directory that no adapter recognised, in walk order (named files never are:
    /// an unrecognised named file is an error).
    #[serde(default)]
    pub skipped: Vec<SkippedInput>,
    /// How `infertrace merge` joined the datasets this one was made from; absent from normalized datasets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeRecord>,
    /// What `infertrace cache-sim` simulated to fill the cache columns; absent from other datasets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_sim: Option<CacheSimRecord>,
    /// The Hive partition key of the tables (`date`, `source` or `instance`): each table is a directory
    /// `<table>/<key>=<value>/part-0.parquet` rather than `<table>.parquet`; absent when unpartitioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_by: Option<String>,
    /// How prefix and block hashes were keyed by `--hash-salt`; absent when they were not. Never the salt itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_salt: Option<HashSalt>,
    /// How `infertrace capture` wrote the dataset part by part; absent from other datasets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureRecord>,
    /// Rows per table in the whole dataset.
    pub rows: RowCounts,
}

impl Manifest {
    /// The manifest of a dataset of the current schema version written by `producer` from no input file (a
    /// generated dataset), with `assumptions`; rows are counted by the writer.
    pub fn generated(producer: Producer, assumptions: Assumptions) -> Self {
        Self {
            schema_version: crate::SCHEMA_VERSION,
            producer,
            assumptions,
            inputs: Vec::new(),
            skipped: Vec::new(),
            merge: None,
            cache_sim: None,
            partition_by: None,
            hash_salt: None,
            capture: None,
            rows: RowCounts::default(),
        }
    }
}

/// How `normalize --hash-salt` keyed the hashes of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HashSalt {
    /// Every `prefix_hashes` element and every `block_hash` and `parent_hash` became `xxh3_64(h as little-endian
    /// bytes, seed xxh3_64(salt))`: equal within the dataset, unrelated to any other salt's.
    #[serde(rename = "keyed")]
    Keyed,
}

/// How a capture wrote its dataset: parts renamed into place as they were finished, this manifest replaced after
/// each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// Whether the capture ended and wrote its last part; false while it runs, and after it was killed.
    pub complete: bool,
    /// Parts written so far.
    pub parts: u64,
}

/// What `infertrace cache-sim` did: the dataset it read, the cache it simulated and what that cache served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheSimRecord {
    /// The dataset simulated, as given on the command line.
    pub dataset: String,
    /// Replacement policy: `lru`, `fifo` or `lfu`.
    pub policy: String,
    /// Placement across tiers: `exclusive` or `inclusive`.
    pub placement: String,
    /// The tiers, fastest first.
    pub tiers: Vec<CacheSimTier>,
    /// The model whose KV bytes per token turned byte capacities into tokens; absent for capacities in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<CacheSimModel>,
    /// Request rows simulated (having `prefix_hashes` and `block_size`).
    pub requests: u64,
    /// Request rows left out; their cache columns are null.
    pub rows_without_hashes: u64,
    /// Σ`input_tokens` of the simulated rows (blocks × `block_size` where null).
    pub input_tokens: u64,
    /// Σ`cached_tokens` written.
    pub hit_tokens: u64,
}

/// One simulated tier.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheSimTier {
    /// The tier: `gpu`, `cpu`, `disk` or `remote`.
    pub tier: String,
    /// Its capacity as given (`2M`, `80GB`).
    pub capacity: String,
    /// Its capacity in tokens.
    pub capacity_tokens: u64,
    /// Σ`cached_tokens_<tier>` written.
    pub hit_tokens: u64,
    /// Blocks it evicted (demoted to the next tier or dropped).
    pub evictions: u64,
}

/// How byte capacities became tokens: `tokens = ⌊bytes × kappa / kv_bytes_per_token⌋`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheSimModel {
    /// Catalog model id.
    pub id: String,
    /// Bytes per KV element.
    pub dtype_bytes: f64,
    /// KV compression ratio.
    pub kappa: f64,
    /// Uncompressed KV bytes per token of the model at `dtype_bytes`.
    pub kv_bytes_per_token: f64,
}

/// What `infertrace merge` did: its inputs, options and how many rows it joined, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The merged datasets, as given on the command line.
    pub datasets: Vec<String>,
    /// Largest arrival-time difference of two rows joined by time, in nanoseconds.
    pub tolerance_ns: u64,
    /// Largest difference of token counts of two rows joined by time.
    pub token_slack: u32,
    /// Sources taken as client-observed (their TTFT and e2e take precedence), sorted.
    pub client_sources: Vec<String>,
    /// Request rows read, per source.
    pub rows_in: BTreeMap<String, u64>,
    /// Rows joined to a request of another source by `request_id`.
    pub matched_by_id: u64,
    /// Rows joined to a request of another source by arrival time and token counts.
    pub matched_by_time: u64,
    /// Of `matched_by_time`, rows that had more than one candidate within the tolerance (the nearest was taken).
    pub ambiguous: u64,
    /// Output rows built from two or more sources.
    pub merged_requests: u64,
    /// Rows left on their own, per source (every source listed).
    pub unmatched: BTreeMap<String, u64>,
    /// For the merged rows: how many took each column from each source, by column then source.
    pub columns: BTreeMap<String, BTreeMap<String, u64>>,
}

/// An input that was not normalized: a file of an input directory no adapter claims, or a repeat of an earlier input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedInput {
    /// Its path, as `inputs[].path` would have recorded it.
    pub path: String,
    /// Why: `unrecognised` (no adapter claims it), `ambiguous: a, b` (several claim it equally) or `same content as
    /// PATH` (an earlier input, read instead).
    pub reason: String,
}

/// The program that wrote a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    /// Program name.
    pub name: String,
    /// Program version.
    pub version: String,
}

/// Assumptions applied while normalizing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assumptions {
    /// Year given to timestamps that lack one (`--year`); null when none was given.
    pub year: Option<i32>,
    /// UTC offset of timestamps that carry no zone (`--utc-offset`), as `+HH:MM`.
    pub utc_offset: String,
    /// Instant that relative trace times count from (`--start`), RFC 3339.
    pub start: String,
    /// Tokens per `hash_ids` block of Mooncake-style traces, whose lines do not say (`--block-size`); absent when
    /// none was given (512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
}

/// What one input file contributed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputEntry {
    /// Path as given on the command line (relative), or below the directory given.
    pub path: String,
    /// Size of the file as stored (compressed if it is).
    pub bytes: u64,
    /// SHA-256 of the file as stored, lower-case hex.
    pub sha256: String,
    /// Compression detected from the magic bytes: `none`, `gzip` or `zstd`.
    pub compression: String,
    /// Format id of the adapter that parsed it.
    pub format: String,
    /// Format generation detected, when the format has several.
    pub format_version: Option<String>,
    /// How the input's times relate to UTC.
    pub clock_domain: ClockDomain,
    /// Year given to timestamps written without one, and where it came from; null when the format needs none.
    pub year: Option<YearAssumption>,
    /// Lines read, blank ones included.
    pub lines: u64,
    /// Rows emitted per table.
    pub records: RowCounts,
    /// Lines that could not be used, by kind.
    pub diagnostics: DiagnosticSummary,
    /// Format-specific facts about the input as a whole (a benchmark run's summary, a clock alignment), by name.
    pub details: BTreeMap<String, serde_json::Value>,
    /// What the input held that its adapter does not know, and how its records were wrapped (log formats); absent
    /// when the adapter reports nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftSummary>,
}

/// An input's drift report: how its records were wrapped and what on them was new. Counts and names, no values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftSummary {
    /// Lines that made a row or part of one, when the adapter counts them.
    pub lines_used: Option<u64>,
    /// Records by the envelope found around them (`plain`: none), by envelope name.
    pub envelopes: BTreeMap<String, u64>,
    /// Records by where their time came from: `record` (the engine's own stamp) or `prefix` (a wrapper's fuller one).
    pub times_from: BTreeMap<String, u64>,
    /// Fields this version does not know on records it read otherwise, by field name, with how often each was seen.
    pub unknown_fields: BTreeMap<String, u64>,
}

/// The year an adapter gave to year-less timestamps (vLLM's `MM-DD HH:MM:SS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct YearAssumption {
    /// The year of the first timestamp; a `12-31` → `01-01` roll-over inside the input advances it.
    pub year: i32,
    /// Where it came from.
    pub source: YearSource,
}

/// Where an assumed year came from, in order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum YearSource {
    /// `--year`.
    #[serde(rename = "option")]
    Option,
    /// A prefix wrapped around the records that carries a year (docker `--timestamps`, a `[YYYY-MM-DD …]` wrapper).
    #[serde(rename = "prefix")]
    Prefix,
    /// The records themselves carry their year (vLLM's JSON records).
    #[serde(rename = "record")]
    Record,
    /// The input file's modification time (UTC year).
    #[serde(rename = "file-modified")]
    FileModified,
    /// Nothing said: 1970 was used and a diagnostic asks for `--year`.
    #[serde(rename = "none")]
    Unknown,
}

/// Rows per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowCounts {
    /// Rows of `requests`.
    pub requests: u64,
    /// Rows of `samples`.
    pub samples: u64,
    /// Rows of `cache_events`.
    pub cache_events: u64,
}

impl RowCounts {
    /// All rows.
    pub fn total(&self) -> u64 {
        self.requests + self.samples + self.cache_events
    }
}

impl std::ops::AddAssign for RowCounts {
    fn add_assign(&mut self, other: Self) {
        self.requests += other.requests;
        self.samples += other.samples;
        self.cache_events += other.cache_events;
    }
}

/// Diagnostics of one input, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticSummary {
    /// All diagnostics.
    pub total: u64,
    /// Per kind (`malformed-json`, `missing-field`, …), ordered by name.
    pub by_kind: BTreeMap<String, KindSummary>,
}

/// Diagnostics of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindSummary {
    /// How many.
    pub count: u64,
    /// The first few, in line order.
    pub first: Vec<DiagnosticSample>,
}

/// One diagnostic kept as an example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticSample {
    /// 1-based line (or record) number.
    pub line: u64,
    /// What was wrong, without the line's content.
    pub message: String,
}

impl DiagnosticSummary {
    /// How many examples of each kind are kept.
    pub const EXAMPLES_PER_KIND: usize = 5;

    /// Counts one diagnostic, keeping it as an example while fewer than [`Self::EXAMPLES_PER_KIND`] are kept.
    pub fn record(&mut self, kind: &str, line: u64, message: impl Into<String>) {
        self.total += 1;
        let entry = self.by_kind.entry(kind.to_owned()).or_default();
        entry.count += 1;
        if entry.first.len() < Self::EXAMPLES_PER_KIND {
            entry.first.push(DiagnosticSample { line, message: message.into() });
        }
    }
}

/// Field documentation of `manifest.json`, in the order of the generated reference: dotted path and meaning.
/// A test checks it against the fields the manifest really serializes.
pub const MANIFEST_FIELDS: &[(&str, &str)] = &[
    ("schema_version", "Version of the canonical schema the tables follow."),
    ("producer.name", "Program that wrote the dataset."),
    ("producer.version", "Its version."),
    ("assumptions.year", "Year given to timestamps that lack one (`--year`), or null."),
    ("assumptions.utc_offset", "UTC offset applied to timestamps without a zone (`--utc-offset`), `+HH:MM`."),
    ("assumptions.start", "Instant relative trace times count from (`--start`), RFC 3339."),
    (
        "assumptions.block_size",
        "Tokens per `hash_ids` block of Mooncake-style traces (`--block-size`); absent when not given (512).",
    ),
    ("inputs[].path", "Input path as given on the command line, or below the directory given; never absolute."),
    ("inputs[].bytes", "Size of the file as stored."),
    ("inputs[].sha256", "SHA-256 of the file as stored, hex."),
    ("inputs[].compression", "`none`, `gzip` or `zstd`, from the magic bytes."),
    ("inputs[].format", "Format id of the adapter that parsed the file."),
    ("inputs[].format_version", "Format generation detected, or null."),
    ("inputs[].clock_domain", "`utc`, `assumed-offset` or `relative`: how the file's times were made absolute."),
    (
        "inputs[].year.year",
        "Year given to timestamps written without one (the first one's; roll-overs advance it), or null.",
    ),
    ("inputs[].year.source", "Where that year came from: `option`, `prefix`, `record`, `file-modified` or `none`."),
    ("inputs[].lines", "Lines read, blank ones included."),
    ("inputs[].records.requests", "Request rows emitted from the file."),
    ("inputs[].records.samples", "Sample rows emitted from the file."),
    ("inputs[].records.cache_events", "Cache-event rows emitted from the file."),
    ("inputs[].diagnostics.total", "Lines that could not be used, or were used with a caveat."),
    ("inputs[].diagnostics.by_kind.<kind>.count", "Diagnostics of that kind."),
    ("inputs[].diagnostics.by_kind.<kind>.first[].line", "Line of one of the first few."),
    ("inputs[].diagnostics.by_kind.<kind>.first[].message", "What was wrong, without the line's content."),
    (
        "inputs[].details.<key>",
        "Format-specific facts about the whole input, such as a benchmark run's summary (`vllm-bench`).",
    ),
    (
        "inputs[].drift.lines_used",
        "Lines that made a row or part of one, or null when the adapter does not count them.",
    ),
    (
        "inputs[].drift.envelopes.<envelope>",
        "Records found inside that envelope: `plain` (none), `docker-timestamps`, `compose`, `journald`, \
         `date-wrapper`, `process-prefix`, `colour-codes`, `lost-escapes`, `custom-prefix`, `re-emitted`, …",
    ),
    (
        "inputs[].drift.times_from.<from>",
        "Records timed by `record` (the engine's own stamp) or `prefix` (a wrapper's stamp, which has the year or \
         zone the engine's lacks).",
    ),
    (
        "inputs[].drift.unknown_fields.<name>",
        "How often a field this version does not know was seen on records it otherwise read (names only).",
    ),
    (
        "skipped[].path",
        "A file of an input directory that no adapter recognised (named files must be recognised), or an input whose \
         content equals an earlier input's (the same file named twice, a directory and a file in it, a copy).",
    ),
    (
        "skipped[].reason",
        "`unrecognised` or `ambiguous: <format ids>` (pass `--format` to read it), or `same content as <path>`: \
         the earlier input's recorded path, whose rows are written once.",
    ),
    ("merge.datasets[]", "Datasets merged by `infertrace merge`, as given (absent unless the dataset is a merge)."),
    ("merge.tolerance_ns", "Largest arrival-time difference of rows joined by time (`--tolerance`), ns."),
    ("merge.token_slack", "Largest token-count difference of rows joined by time (`--token-slack`)."),
    ("merge.client_sources[]", "Sources taken as client-observed: their TTFT and e2e take precedence."),
    ("merge.rows_in.<source>", "Request rows read from the merged datasets, per source."),
    ("merge.matched_by_id", "Rows joined to a request of another source by `request_id`."),
    ("merge.matched_by_time", "Rows joined to a request of another source by arrival time and token counts."),
    ("merge.ambiguous", "Rows joined by time that had more than one candidate (the nearest arrival won)."),
    ("merge.merged_requests", "Output rows built from two or more sources."),
    ("merge.unmatched.<source>", "Rows left on their own, per source."),
    ("merge.columns.<column>.<source>", "Merged rows that took that column from that source."),
    ("cache_sim.dataset", "Dataset simulated by `infertrace cache-sim`, as given (absent unless simulated)."),
    ("cache_sim.policy", "Replacement policy: `lru`, `fifo` or `lfu`."),
    ("cache_sim.placement", "Placement across tiers: `exclusive` or `inclusive`."),
    ("cache_sim.tiers[].tier", "A simulated tier, fastest first: `gpu`, `cpu`, `disk` or `remote`."),
    ("cache_sim.tiers[].capacity", "Its capacity as given (`2M` tokens, or bytes such as `80GB` with `--model`)."),
    ("cache_sim.tiers[].capacity_tokens", "Its capacity in tokens."),
    ("cache_sim.tiers[].hit_tokens", "Σ`cached_tokens_<tier>` written for it."),
    ("cache_sim.tiers[].evictions", "Blocks it evicted (demoted to the next tier, or dropped)."),
    ("cache_sim.model.id", "Catalog model whose KV size turned byte capacities into tokens (absent for tokens)."),
    ("cache_sim.model.dtype_bytes", "Bytes per KV element (`--dtype-bytes`)."),
    ("cache_sim.model.kappa", "KV compression ratio (`--kappa`): tokens = ⌊bytes × κ / KV bytes per token⌋."),
    ("cache_sim.model.kv_bytes_per_token", "The model's uncompressed KV bytes per token."),
    ("cache_sim.requests", "Request rows simulated (having `prefix_hashes` and `block_size`)."),
    ("cache_sim.rows_without_hashes", "Request rows left out; their cache columns are null."),
    ("cache_sim.input_tokens", "Σ`input_tokens` of the simulated rows (blocks × `block_size` where null)."),
    ("cache_sim.hit_tokens", "Σ`cached_tokens` written."),
    (
        "partition_by",
        "Hive partition key of the tables: `date`, `source` or `instance` (each table a directory \
         `<table>/<key>=<value>/part-0.parquet`); absent when unpartitioned.",
    ),
    (
        "hash_salt",
        "`keyed` when `--hash-salt` keyed every prefix and block hash (the salt is never stored); absent otherwise.",
    ),
    (
        "capture.complete",
        "`infertrace capture` only: whether the capture ended and wrote its last part (false while it runs, and \
         after it was killed: the parts listed are complete, later text was lost).",
    ),
    ("capture.parts", "`infertrace capture` only: parts written so far, `<table>/date=<day>/part-<n>-<k>.parquet`."),
    ("rows.requests", "Rows of `requests.parquet`."),
    ("rows.samples", "Rows of `samples.parquet`."),
    ("rows.cache_events", "Rows of `cache_events.parquet`."),
];
