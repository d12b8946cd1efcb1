//! `infertrace`: see `infertrace --help` and the README.
#![allow(clippy::print_stdout, clippy::print_stderr)]

/// mimalloc rather than the system allocator: `normalize` allocates rows on the threads that prepare lines and frees
/// them on the thread that writes them, and glibc's per-thread arenas turn that into lock contention (a Mooncake
/// trace on two threads spent 12% of its time in futex calls and ran slower than on one). Built with `no_thp`: no
/// huge pages asked for, so fresh memory is not zeroed 2 MiB at a time (`docs/performance.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{self, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use infertrace::metrics;
use infertrace::registry::{self, ADAPTERS, FormatArg};
use infertrace::report::{self, ReportOptions};
use infertrace::sql::{SqlFormat, SqlOptions, sql};
use infertrace::summary::{self, INPUT_COUNTS_FROM, INPUT_HEADERS};
use infertrace::{NormalizeOptions, NormalizeReport, ServegenOptions, normalize, synth_servegen};
use infertrace_adapter::time::parse_rfc3339;
use infertrace_adapter::{Adapter, DecompressionLimits, ParseOptions, UtcOffset};
use infertrace_adapter_mapped::InputKind;
use infertrace_cache::{Placement, Policy, Sampling};
use infertrace_engine::{GroupBy, MetricsOptions, Slo};
use infertrace_query::QueryOptions;
use infertrace_schema::{CacheTier, PartitionKey};

/// Normalize LLM serving logs, benchmark exports and production traces into one canonical Parquet trace.
#[derive(Debug, Parser)]
#[command(name = "infertrace", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Normalize inputs (files or directories; plain, gzip or zstd) into one dataset directory.
    Normalize(NormalizeArgs),
    /// Capture a live deployment into a dataset: scrape Prometheus endpoints (vLLM, SGLang, Dynamo,
    /// dcgm-exporter, node_exporter) and follow logs, until --duration or Ctrl-C.
    ///
    /// The dataset is written in parts as it goes (`<table>/date=<day>/part-<n>-<k>.parquet`, every --part-every or
    /// --part-rows), and every command reads it while it grows: a reader sees complete parts only. Ctrl-C (or
    /// SIGTERM) ends each source at its current end and writes the last part; a second Ctrl-C exits at once, and so
    /// does a kill, leaving the parts already written.
    Capture(CaptureArgs),
    /// Sample a per-request dataset from published workload statistics.
    #[command(subcommand)]
    Synth(SynthCommand),
    /// Summarise datasets: status counts, latency distributions, throughput, goodput, cache hit and reuse rates,
    /// reasoning depth, KV-cache usage and queue depth per instance, and the energy measured by power or energy
    /// samples.
    Metrics(MetricsArgs),
    /// Write a self-contained HTML report of datasets: latency CDFs and latency over time, KV-cache usage and queue
    /// depth per instance (and accelerator power, memory and PCIe/NVLink traffic where sampled), cache hit rate
    /// per tier, TTFT under load, measured energy and the summary tables.
    Report(ReportArgs),
    /// Compare the metrics of two datasets (measured vs replayed, before vs after): every figure of A and B with
    /// B − A and (B − A) / |A|.
    Compare(CompareArgs),
    /// Join datasets that several sources made of one run (a server log, a client export) into one dataset.
    ///
    /// Rows of the same request are joined by request_id, else by arrival time within --tolerance and equal token
    /// counts. Each column comes from the source that observes it best: clients for arrival, TTFT, e2e and
    /// outcome, servers for queue, prefill, decode, token and cache counts; `column_sources` records which.
    /// Unmatched rows are kept. Samples and cache events are concatenated.
    Merge(MergeCliArgs),
    /// Simulate KV-cache tiers on a dataset's prefix hashes: requests in arrival order, each hitting the longest
    /// contiguous prefix of its blocks found in any tier (fastest first), then inserting all of them.
    ///
    /// Prints the token-weighted hit ratio per tier and overall and the evictions per tier; -o writes the dataset
    /// with cached_tokens and cached_tokens_<tier> replaced by the simulated values. The exact semantics are in
    /// the infertrace-cache crate documentation.
    CacheSim(CacheSimArgs),
    /// The LRU hit ratio of a dataset at every capacity, from stack distances in one pass: what one cache-sim tier
    /// of each capacity would find. Sizes HBM, DRAM or flash from a trace.
    Mrc(MrcArgs),
    /// Evaluate the cost model: expected prefill cost under the cache tiers, cost per successful answer,
    /// tokens per $ and per kWh, retrieve-vs-recompute breakeven per tier, disaggregation and compression.
    ///
    /// Parameters come from the model's defaults, then datasets (--from), then a TOML file, then --set, each
    /// overriding the one before; names and equations are in docs/model.md. The worked example of the
    /// articles: `infertrace model examples/model/coding-agent.toml`.
    Model(ModelArgs),
    /// Evaluate the model over a grid of one or two parameters and write the cost surface.
    Sweep(SweepArgs),
    /// Number of prefill, decode or collocated accelerators a workload needs under SLOs, from the roofline.
    Size(SizeArgs),
    /// Replay a trace against a serving configuration (discrete-event simulation on a roofline) and write the
    /// result as a dataset (source `replay`) for `metrics`, `compare` and `report`.
    Replay(ReplayArgs),
    /// Fit a configuration's efficiency factors (mfu, mbu, step overhead) so that its replay of a measured run
    /// matches the run's mean TTFT and TPOT.
    Calibrate(CalibrateArgs),
    /// Run a SQL query over the tables `requests`, `samples` and `cache_events` of datasets (all the datasets
    /// given, as one table each) and print the result as a table, or write it as CSV, JSON lines or Parquet.
    ///
    /// Columns are those of `infertrace schema`; times are UTC timestamps, durations seconds. Rows come in no
    /// particular order without ORDER BY. Sorts, joins and aggregations spill to disk past --memory-limit.
    Sql(SqlArgs),
    /// Export a segment of datasets in a load generator's format, to replay it for real against a deployment:
    /// Mooncake trace JSONL (Dynamo, vLLM timed_trace, SGLang), AIPerf's mooncake_trace and multi_turn, vLLM's
    /// custom dataset.
    ///
    /// Timestamps are milliseconds from the segment's start, hash_ids dense integers at --block-size, and the
    /// formats that need text get synthetic prompts that share text where the dataset's prefix hashes are shared.
    /// No user content is in a dataset, so none can leave it. A manifest, FILE.manifest.json, records the segment,
    /// the options and what was left out or clipped.
    Export(ExportCliArgs),
    /// List the input formats, one per line.
    Formats,
    /// Print the canonical schema (Markdown, or JSON with --json).
    Schema {
        /// Print JSON instead of Markdown.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
struct NormalizeArgs {
    /// Input files or directories (walked recursively in sorted order, hidden entries skipped).
    #[arg(required = true, value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// Dataset directory to write: requests.parquet, samples.parquet, cache_events.parquet, manifest.json.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Input format; `auto` picks one per file from its first bytes; `csv` and `jsonl` need --map.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// Mapping of a per-request log's columns to canonical ones (TOML), for --format csv or jsonl.
    #[arg(long, value_name = "FILE")]
    map: Option<PathBuf>,
    /// Year for timestamps written without one.
    #[arg(long, value_name = "YYYY", value_parser = clap::value_parser!(i32).range(1970..=2261))]
    year: Option<i32>,
    /// UTC offset of timestamps written without a zone.
    #[arg(long, value_name = "+HH:MM", default_value = "+00:00", allow_hyphen_values = true, value_parser = parse_offset)]
    utc_offset: UtcOffset,
    /// Instant that relative trace times (Mooncake `timestamp`) count from, RFC 3339.
    #[arg(long, value_name = "RFC3339", default_value = "1970-01-01T00:00:00Z", value_parser = parse_start)]
    start: i64,
    /// Tokens per hash_ids block of Mooncake-style traces, whose lines do not say: 512 by default, as in
    /// Mooncake's; a trace made at another size (`infertrace export --block-size`, vLLM timed_trace's 16) needs it.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(1..))]
    block_size: Option<u32>,
    /// Exit with status 1 when any input line produced a diagnostic (the dataset is still written).
    #[arg(long)]
    strict: bool,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    /// Key every prefix and block hash with this secret, so that datasets of different tenants cannot be
    /// correlated by their hashes; equal hashes stay equal within the dataset. The salt is not stored.
    #[arg(long, value_name = "SALT")]
    hash_salt: Option<String>,
    /// Print the first bytes of the first offending input lines to stderr (never into the dataset).
    #[arg(long)]
    show_lines: bool,
    /// After the summary, print each input's drift report: the envelopes found around its records, where its
    /// times came from, how many lines made rows, and the fields this version does not know, with counts.
    #[arg(long)]
    explain: bool,
    /// Most bytes one compressed input may decompress to (K, M, G, T suffixes, powers of 1024).
    #[arg(long, value_name = "SIZE", default_value = "1T", value_parser = parse_size)]
    max_decompressed: u64,
    /// Most decompressed bytes per compressed byte, checked after the first 64 MiB.
    #[arg(long, value_name = "RATIO", default_value_t = 1000)]
    max_ratio: u64,
    /// Write each table as Hive-style partitions, `<table>/<key>=<value>/part-0.parquet`, that Spark, Trino,
    /// DuckDB and Polars read as one table: by the UTC day of the row's time, its source, or its instance.
    #[arg(long, value_enum, value_name = "KEY")]
    partition_by: Option<PartitionArg>,
    /// Threads that parse input lines; 0 uses one per CPU. The output is the same byte for byte whatever the
    /// number. (Each table is also encoded on a thread of its own.)
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
}

#[derive(Debug, clap::Args)]
struct CaptureArgs {
    /// A Prometheus text endpoint to scrape every --interval, as URL, FORMAT=URL (FORMAT a format id such as
    /// dcgm-exporter; detected from the first scrape otherwise) or NAME@… (NAME goes before the instance of every
    /// row, so that two pods' `engine-0` stay apart). Plain http:// only. Repeatable.
    #[arg(long = "scrape", value_name = "[NAME@][FORMAT=]URL")]
    scrapes: Vec<String>,
    /// A log being written, followed as `tail -F` follows it (appends, rotation, truncation), as FILE, FORMAT=FILE
    /// or NAME@…; `-` is standard input (`kubectl logs -f … | infertrace capture --follow vllm-log=-`).
    /// Repeatable.
    #[arg(long = "follow", value_name = "[NAME@][FORMAT=]FILE")]
    follows: Vec<String>,
    /// Dataset directory to write.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Time between two scrapes of an endpoint (`5s`, `500ms`, `1m`).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = parse_duration)]
    interval: std::time::Duration,
    /// Stop after this long (`1h`, `90m`); without it, the capture runs until Ctrl-C or SIGTERM.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    duration: Option<std::time::Duration>,
    /// Longest time a part stays open before it is written.
    #[arg(long, value_name = "TIME", default_value = "1m", value_parser = parse_duration)]
    part_every: std::time::Duration,
    /// Most rows (all tables together) in one part.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    part_rows: u64,
    /// Format of every source given without FORMAT=; `auto` detects each from its first text.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// Read followed files from their start, not only what is appended after the capture starts.
    #[arg(long)]
    from_start: bool,
    /// Key every prefix and block hash with this secret, as `normalize --hash-salt` does. Not stored.
    #[arg(long, value_name = "SALT")]
    hash_salt: Option<String>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    /// Year for timestamps written without one (default: the current year's, from the clock of the records).
    #[arg(long, value_name = "YYYY", value_parser = clap::value_parser!(i32).range(1970..=2261))]
    year: Option<i32>,
    /// UTC offset of timestamps written without a zone.
    #[arg(long, value_name = "+HH:MM", default_value = "+00:00", allow_hyphen_values = true, value_parser = parse_offset)]
    utc_offset: UtcOffset,
}

/// `250ms`, `5s`, `1.5s`, `15m`, `6h`, `2d` (a bare number is seconds).
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let error = || "expected a time such as 500ms, 5s, 15m, 6h or 2d".to_owned();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor = match unit {
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(error()),
    };
    let seconds = number.parse::<f64>().map_err(|_| error())? * factor;
    std::time::Duration::try_from_secs_f64(seconds).ok().filter(|d| !d.is_zero()).ok_or_else(error)
}

/// `--partition-by` keys.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PartitionArg {
    Date,
    Source,
    Instance,
}

impl PartitionArg {
    fn key(self) -> PartitionKey {
        match self {
            PartitionArg::Date => PartitionKey::Date,
            PartitionArg::Source => PartitionKey::Source,
            PartitionArg::Instance => PartitionKey::Instance,
        }
    }
}

#[derive(Debug, clap::Args)]
struct MetricsArgs {
    /// Dataset directories written by `infertrace normalize` or `synth`; their rows are taken together.
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<PathBuf>,
    /// Print the JSON object described by schemas/metrics.schema.json instead of tables.
    #[arg(long)]
    json: bool,
    /// Bounds for goodput: comma-separated name=duration with names ttft, tpot, e2e, queue, prefill, decode,
    /// kv_transfer and durations in us, ms, s or m.
    #[arg(long, value_name = "NAME=TIME,…", value_parser = parse_slo)]
    slo: Option<Slo>,
    /// Break every figure down by the values of this column; `workload_class` groups inferred classes apart
    /// (`agent (inferred)`).
    #[arg(long, value_enum, value_name = "COLUMN")]
    by: Option<ByColumn>,
    /// Cost profile (TOML: [accelerator], [storage], [tokens]) for cost per successful answer and tokens per $
    /// and per kWh; see examples/cost/.
    #[arg(long, value_name = "FILE")]
    cost: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct SqlArgs {
    /// The query (DataFusion's SQL dialect), such as `SELECT count(*) FROM requests`.
    #[arg(value_name = "QUERY")]
    query: String,
    /// Dataset directories, plain or partitioned; each table is the union of that table in all of them.
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<PathBuf>,
    /// How to write the result.
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    format: SqlFormat,
    /// Write the result to this file (replaced if it exists) instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Rows the table format shows; the rest are counted.
    #[arg(long, value_name = "N", default_value_t = 100)]
    max_rows: usize,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct ExportCliArgs {
    /// Dataset directories; their requests are exported as one table.
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<PathBuf>,
    /// mooncake (whole prompts, arrival order: Dynamo replay, vLLM bench timed_trace, SGLang bench_serving),
    /// aiperf-mooncake (AIPerf mooncake_trace, sessions as growing conversations), aiperf-multi-turn (AIPerf
    /// multi_turn, synthetic text), vllm-custom (vLLM bench custom, synthetic text), or dataset: the segment's
    /// rows unchanged, as a dataset directory, for `compare` against the replay.
    #[arg(long, value_name = "FORMAT", value_parser = infertrace::export::parse_format)]
    format: infertrace::export::Target,
    /// The file to write; its manifest goes beside it (a directory for --format dataset).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Replace the output if it exists.
    #[arg(long)]
    force: bool,
    /// Start of the segment: an RFC 3339 instant, or an offset from the first arrival (90s, 15m, 1.5h).
    /// Timestamps count from it. Default: the first arrival.
    #[arg(long, value_name = "WHEN", value_parser = infertrace::export::parse_bound)]
    from: Option<infertrace::export::Bound>,
    /// End of the segment (excluded), as --from. Default: after the last arrival.
    #[arg(long, value_name = "WHEN", value_parser = infertrace::export::parse_bound)]
    to: Option<infertrace::export::Bound>,
    /// Keep N whole sessions, chosen by a seeded hash of their names (a request without a session is a session
    /// of its own), so that the reuse inside each session is kept.
    #[arg(long, value_name = "N", conflicts_with = "sample", value_parser = clap::value_parser!(u64).range(1..))]
    sessions: Option<u64>,
    /// Keep this share (0 to 1) of whole sessions, chosen by a seeded hash of their names.
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    sample: Option<f64>,
    /// Multiply the times from the segment's start, and the delays, by this factor: 0.5 replays twice as fast.
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0, value_parser = parse_positive)]
    time_scale: f64,
    /// Keep the first N tokens of longer prompts (the target model's context); counted in the manifest.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_input_tokens: Option<u32>,
    /// Tokens per hash_ids block (mooncake, aiperf-mooncake). Give the load generator the same: AIPerf
    /// --isl-block-size, vLLM --timed-trace-chunk-hash-size.
    #[arg(long, value_name = "TOKENS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    block_size: u32,
    /// Seed of the sampling and of the text of blocks the dataset did not hash.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

/// A share from 0 to 1.
fn parse_fraction(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| format!("{text:?} is not a number from 0 to 1"))
}

/// A finite number above 0.
fn parse_positive(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{text:?} is not a number above 0"))
}

/// How the query engine uses the machine.
#[derive(Debug, clap::Args)]
struct EngineArgs {
    /// Memory that sorts, joins and aggregations may hold before they spill to disk (K, M, G, T suffixes, powers
    /// of 1024).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    memory_limit: u64,
    /// Directory for spills; the system's temporary directory by default.
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<PathBuf>,
    /// Threads that run the query; 0 uses one per CPU.
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
}

impl EngineArgs {
    fn options(&self) -> QueryOptions {
        QueryOptions {
            memory_limit: usize::try_from(self.memory_limit).unwrap_or(usize::MAX),
            spill_dir: self.spill_dir.clone(),
            threads: self.threads,
        }
    }
}

#[derive(Debug, clap::Args)]
struct MergeCliArgs {
    /// Datasets written by `infertrace normalize` (or merge).
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<PathBuf>,
    /// Output dataset directory.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Largest arrival-time difference of two rows joined by time (us, ms, s or m).
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_tolerance)]
    tolerance: f64,
    /// Largest difference of input (and of output) token counts of two rows joined by time.
    #[arg(long, value_name = "N", default_value_t = 0)]
    token_slack: u32,
    /// A source to take as client-observed, besides vllm-bench, sglang-bench, aiperf and genai-perf (repeatable).
    #[arg(long, value_name = "SOURCE")]
    client_source: Vec<String>,
    /// Replace the output if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct ByteArgs {
    /// Read capacities as bytes (80GB, 1.5TiB, 2e9) of KV of this catalog model (see `infertrace model --list`).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// KV compression ratio: a byte of storage holds kappa bytes of KV.
    #[arg(long, value_name = "κ", default_value_t = 1.0, requires = "model")]
    kappa: f64,
    /// Bytes per KV element.
    #[arg(long, value_name = "N", default_value_t = 2.0, requires = "model")]
    dtype_bytes: f64,
}

impl ByteArgs {
    fn capacity(&self) -> Result<Option<infertrace::cache::ByteCapacity>> {
        self.model.as_deref().map(|m| infertrace::cache::ByteCapacity::new(m, self.dtype_bytes, self.kappa)).transpose()
    }
}

#[derive(Debug, clap::Args)]
struct CacheSimArgs {
    /// Dataset directory written by `infertrace normalize` (or any other command).
    #[arg(value_name = "DATASET")]
    dataset: PathBuf,
    /// A tier and its capacity: gpu=2M (tokens; k, M, G, T multiply by 1000), or bytes with --model (cpu=512GB,
    /// disk=4TiB). Tiers are gpu, cpu, disk, remote, searched in that order whatever the order given. Repeatable.
    #[arg(long = "tier", value_name = "TIER=CAPACITY", required = true, value_parser = infertrace::cache::parse_tier)]
    tiers: Vec<(CacheTier, String)>,
    /// Replacement policy of every tier: lru, fifo, or lfu (least frequently used, least recent on ties).
    #[arg(long, value_name = "POLICY", default_value = "lru", value_parser = parse_policy)]
    policy: Policy,
    /// exclusive: blocks move to the fastest tier and victims down one tier; inclusive: every tier caches every
    /// block and evicts on its own.
    #[arg(long, value_name = "PLACEMENT", default_value = "exclusive", value_parser = parse_placement)]
    placement: Placement,
    #[command(flatten)]
    bytes: ByteArgs,
    /// Print the JSON object described in the infertrace-cache crate documentation instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the dataset with the simulated cached_tokens columns to this directory.
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Replace the output if it exists.
    #[arg(long, requires = "output")]
    force: bool,
    /// Print the time spent opening, simulating and writing to stderr.
    #[arg(long)]
    timing: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct MrcArgs {
    /// Dataset directory.
    #[arg(value_name = "DATASET")]
    dataset: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the curve as a standalone SVG line chart.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Capacities to list, comma-separated (tokens, or bytes with --model); default: powers of two up to where
    /// the curve is flat.
    #[arg(long, value_name = "C,…", value_delimiter = ',')]
    points: Option<Vec<String>>,
    /// Sample blocks at this rate (SHARDS, 0 < R ≤ 1); default: exact up to 10 M block accesses, 0.01 above.
    #[arg(long, value_name = "R", conflicts_with = "exact")]
    sample: Option<f64>,
    /// Exact stack distances whatever the trace's size.
    #[arg(long)]
    exact: bool,
    #[command(flatten)]
    bytes: ByteArgs,
    /// Print the time spent opening and computing to stderr.
    #[arg(long)]
    timing: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

fn parse_policy(text: &str) -> Result<Policy, String> {
    Policy::ALL.iter().copied().find(|p| p.as_str() == text).ok_or_else(|| "expected lru, fifo or lfu".to_owned())
}

fn parse_placement(text: &str) -> Result<Placement, String> {
    Placement::ALL
        .iter()
        .copied()
        .find(|p| p.as_str() == text)
        .ok_or_else(|| "expected exclusive or inclusive".to_owned())
}

fn parse_tolerance(text: &str) -> Result<f64, String> {
    infertrace_engine::slo::parse_duration(text).map_err(|e| e.to_string())
}

#[derive(Debug, clap::Args)]
struct ParamArgs {
    /// Parameter file (TOML; see docs/model.md and examples/model/).
    #[arg(value_name = "PARAMS")]
    file: Option<PathBuf>,
    /// Measure R, u, hit rates, lengths, the prefill fit, decode time and success rate from datasets.
    #[arg(long, value_name = "DATASET")]
    from: Vec<PathBuf>,
    /// Set one parameter by name or alias (R=12, u=0.9, h.hbm=0.25, L.external=0.9, kappa=2, …); repeatable.
    #[arg(long, value_name = "NAME=VALUE", value_parser = infertrace::model::parse_set)]
    set: Vec<(String, f64)>,
    /// Catalog model for the roofline (see --list).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// Catalog accelerator for the roofline (see --list).
    #[arg(long, value_name = "ID")]
    accelerator: Option<String>,
    /// A catalog of accelerators and models adding to (or replacing entries of) the built-in one.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// The hit-ratio curve of the compressed tier: the output of `infertrace mrc --json` (with --from, the
    /// datasets' own curve is used unless this is given).
    #[arg(long, value_name = "FILE")]
    hit_curve: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct ModelArgs {
    #[command(flatten)]
    params: ParamArgs,
    /// Print JSON: the parameters as used, the measurements and every figure.
    #[arg(long)]
    json: bool,
    /// List the catalog's accelerators and models and exit.
    #[arg(long)]
    list: bool,
}

#[derive(Debug, clap::Args)]
struct SweepArgs {
    #[command(flatten)]
    params: ParamArgs,
    /// NAME=FROM..TO[:STEPS] (default 11 steps); once or twice.
    #[arg(long, value_name = "NAME=FROM..TO[:STEPS]", required = true)]
    vary: Vec<String>,
    /// The cost surface: .csv, else Parquet.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// An SVG chart of the surface: lines for one parameter, a heat map for two.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct SizeArgs {
    #[command(flatten)]
    params: ParamArgs,
    /// Arrival rate, requests per second.
    #[arg(long, value_name = "REQ/S")]
    rate: f64,
    /// SLOs on the mean TTFT and the TPOT, such as ttft=2s,tpot=50ms (both needed).
    #[arg(long, value_name = "NAME=TIME,…", value_parser = parse_slo)]
    slo: Slo,
    /// Highest utilization of an instance.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.9)]
    max_utilization: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl ParamArgs {
    fn sources(&self) -> infertrace::model::ParamSources {
        // Strings cannot go through --set: the model and accelerator are applied by `load`.
        infertrace::model::ParamSources {
            file: self.file.clone(),
            from: self.from.clone(),
            set: self.set.clone(),
            catalog: self.catalog.clone(),
            hit_curve: self.hit_curve.clone(),
        }
    }

    fn load(&self) -> Result<infertrace::model::Loaded> {
        let mut loaded = infertrace::model::load(&self.sources())?;
        if self.model.is_some() || self.accelerator.is_some() {
            let hardware = loaded.params.hardware.get_or_insert_with(Default::default);
            if let Some(model) = &self.model {
                hardware.model.clone_from(model);
            }
            if let Some(accelerator) = &self.accelerator {
                hardware.accelerator.clone_from(accelerator);
            }
        }
        Ok(loaded)
    }
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// Dataset directories written by `infertrace normalize` or `synth`; their rows are taken together.
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<PathBuf>,
    /// The HTML file to write (replaced if it exists).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Bounds for goodput, as for `metrics`.
    #[arg(long, value_name = "NAME=TIME,…", value_parser = parse_slo)]
    slo: Option<Slo>,
    /// Page title; by default the dataset paths as given.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Cost profile (as for `metrics`): adds the cost section.
    #[arg(long, value_name = "FILE")]
    cost: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// Datasets whose requests are replayed (taken together).
    #[arg(required = true, value_name = "DATASET")]
    datasets: Vec<PathBuf>,
    /// Cluster configuration (TOML; see docs/replay.md and examples/replay/).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Output dataset directory.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Multiply the arrival rate (divide the offsets between arrivals).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    rate_scale: f64,
    /// Seconds of simulated time between engine samples.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    sample_interval: f64,
    /// A catalog extending the built-in one.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// Replace the output if it exists.
    #[arg(long)]
    force: bool,
    /// Print the simulation's wall time (reading and writing excluded) to stderr.
    #[arg(long)]
    timing: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct CalibrateArgs {
    /// Datasets of the measured run.
    #[arg(required = true, value_name = "MEASURED_DATASET")]
    datasets: Vec<PathBuf>,
    /// Cluster configuration of the run.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Write the configuration with the fitted factors here.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// A catalog extending the built-in one.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// The reference dataset directory.
    #[arg(value_name = "A")]
    a: PathBuf,
    /// The dataset compared with it.
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Print a JSON array of {path, a, b, delta, relative} instead of a table.
    #[arg(long)]
    json: bool,
    /// Bounds for goodput, as for `metrics`.
    #[arg(long, value_name = "NAME=TIME,…", value_parser = parse_slo)]
    slo: Option<Slo>,
    /// Compare the figures of each value of this column too.
    #[arg(long, value_enum, value_name = "COLUMN")]
    by: Option<ByColumn>,
    /// Also list the figures that are equal on both sides.
    #[arg(long)]
    all: bool,
    /// Cost profile, as for `metrics`: both datasets are priced with it.
    #[arg(long, value_name = "FILE")]
    cost: Option<PathBuf>,
}

/// The columns `--by` accepts, spelled as the columns are.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ByColumn {
    #[value(name = "source")]
    Source,
    #[value(name = "model")]
    Model,
    #[value(name = "instance")]
    Instance,
    #[value(name = "workload_class")]
    WorkloadClass,
    #[value(name = "session_id")]
    SessionId,
    #[value(name = "status")]
    Status,
}

impl From<ByColumn> for GroupBy {
    fn from(by: ByColumn) -> Self {
        match by {
            ByColumn::Source => GroupBy::Source,
            ByColumn::Model => GroupBy::Model,
            ByColumn::Instance => GroupBy::Instance,
            ByColumn::WorkloadClass => GroupBy::WorkloadClass,
            ByColumn::SessionId => GroupBy::SessionId,
            ByColumn::Status => GroupBy::Status,
        }
    }
}

fn parse_slo(text: &str) -> Result<Slo, String> {
    Slo::parse(text).map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
enum SynthCommand {
    /// Sample requests from one model directory of ServeGen statistics (Alibaba Bailian): arrivals from each
    /// client's per-window Gamma/Weibull fits, lengths from its token distributions. Deterministic for a seed.
    Servegen(ServegenArgs),
}

#[derive(Debug, clap::Args)]
struct ServegenArgs {
    /// A model directory of ServeGen's data/ (chunk-<i>-trace.csv and chunk-<i>-dataset.json per client).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Dataset directory to write: requests.parquet, samples.parquet, cache_events.parquet, manifest.json.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Length of the trace: seconds, or a number with s, m, h or d.
    #[arg(long, value_name = "TIME", value_parser = parse_seconds)]
    duration: u64,
    /// Seed of the random streams; the same statistics, options and seed give the same dataset.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,
    /// Where in the statistics the trace begins (seconds from their first window, or with s, m, h or d).
    #[arg(long, value_name = "TIME", default_value = "0", value_parser = parse_seconds)]
    from: u64,
    /// Factor applied to every client's rate.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    rate_scale: f64,
    /// Clients to include, by the <i> of their file names (comma-separated); default: all.
    #[arg(long, value_name = "I,J,…", value_delimiter = ',')]
    clients: Option<Vec<u64>>,
    /// Instant the trace begins at (statistics time --from), RFC 3339.
    #[arg(long, value_name = "RFC3339", default_value = "1970-01-01T00:00:00Z", value_parser = parse_start)]
    start: i64,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
    /// Print the simulation's wall time (reading and writing excluded) to stderr.
    #[arg(long)]
    timing: bool,
}

/// `90`, `90s`, `15m`, `6h`, `2d` → seconds.
fn parse_seconds(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err("expected whole seconds, or a whole number with s, m, h or d (such as 6h)".to_owned()),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| "expected whole seconds, or a whole number with s, m, h or d (such as 6h)".to_owned())
}

fn parse_size(text: &str) -> Result<u64, String> {
    let upper = text.trim().to_ascii_uppercase();
    let digits = upper.trim_end_matches(['K', 'M', 'G', 'T', 'I', 'B']);
    let shift = match &upper[digits.len()..] {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err("expected a size such as 500M, 20G or 1T".to_owned()),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| "expected a size such as 500M, 20G or 1T".to_owned())
}

fn parse_offset(text: &str) -> Result<UtcOffset, String> {
    text.parse().map_err(|e| format!("{e}"))
}

fn parse_start(text: &str) -> Result<i64, String> {
    parse_rfc3339(text).map_err(|_| "expected an RFC 3339 instant such as 2024-05-10T00:00:00Z".to_owned())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|e| e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}

fn run(cli: Cli) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    match cli.command {
        Command::Formats => {
            let formats = ADAPTERS.iter().map(|a| (a.id(), a.description()));
            let formats: Vec<_> = formats.chain(InputKind::ALL.iter().map(|k| (k.id(), k.description()))).collect();
            let width = formats.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
            for (id, description) in formats {
                writeln!(out, "{id:width$}  {description}")?;
            }
        }
        Command::Schema { json } => {
            let text =
                if json { infertrace_schema::docs::schema_json() } else { infertrace_schema::docs::schema_markdown() };
            out.write_all(text.as_bytes())?;
        }
        Command::Normalize(args) => {
            // An adapter built from --map lives here, for the whole run.
            let mapped;
            let format: Option<&dyn Adapter> = match (args.format.mapped(), &args.map) {
                (Some(kind), Some(path)) => {
                    mapped = registry::mapped_adapter(kind, path)?;
                    Some(&mapped)
                }
                (Some(kind), None) => bail!("--format {} needs --map <FILE>, the mapping of its columns", kind.id()),
                (None, Some(path)) => bail!("--map {} needs --format csv or --format jsonl", path.display()),
                (None, None) => args.format.adapter(),
            };
            let options = NormalizeOptions {
                inputs: args.inputs,
                output: args.output,
                format,
                parse: ParseOptions {
                    year: args.year,
                    utc_offset: args.utc_offset,
                    start_ns: args.start,
                    block_size: args.block_size,
                },
                force: args.force,
                partition_by: args.partition_by.map(PartitionArg::key),
                hash_salt: args.hash_salt,
                show_lines: args.show_lines,
                limits: DecompressionLimits { max_bytes: args.max_decompressed, max_ratio: args.max_ratio },
                threads: args.threads,
            };
            let progress = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}")
                    .expect("valid template"),
            );
            let report = normalize(&options, &progress)?;
            print_summary(&mut out, &report)?;
            if args.explain {
                out.write_all(summary::explain(&report.manifest).as_bytes())?;
                out.flush()?;
            }
            if args.strict && report.diagnostics() > 0 {
                eprintln!("error: {} diagnostics and --strict was given", summary::count(report.diagnostics()));
                return Ok(ExitCode::from(1));
            }
        }
        Command::Capture(args) => {
            if args.format.mapped().is_some() {
                bail!("capture reads the formats the registry detects; csv and jsonl need normalize --map");
            }
            let mut sources = Vec::new();
            for (texts, scrape) in [(&args.scrapes, true), (&args.follows, false)] {
                for text in texts {
                    let mut source = infertrace::capture::Source::parse(text, scrape)?;
                    source.format = source.format.or(args.format.adapter());
                    sources.push(source);
                }
            }
            let options = infertrace::capture::CaptureOptions {
                output: args.output,
                sources,
                interval: args.interval,
                duration: args.duration,
                part_every: args.part_every,
                part_rows: args.part_rows.max(1),
                from_start: args.from_start,
                force: args.force,
                hash_salt: args.hash_salt,
                parse: ParseOptions { year: args.year, utc_offset: args.utc_offset, ..ParseOptions::default() },
            };
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "capturing {} sources into {}; Ctrl-C writes the last part and ends",
                    options.sources.len(),
                    options.output.display()
                );
            }
            let report = infertrace::capture::capture(&options)?;
            let normalized = NormalizeReport {
                manifest: report.manifest,
                output: options.output.clone(),
                shown_lines: Vec::new(),
                parsed_twice: 0,
            };
            print_summary(&mut out, &normalized)?;
            writeln!(out, "{} parts", report.parts)?;
        }
        Command::Metrics(args) => {
            let cost = args.cost.as_deref().map(metrics::read_cost_profile).transpose()?;
            let options = MetricsOptions { slo: args.slo.unwrap_or_default(), by: args.by.map(GroupBy::from), cost };
            let computed = metrics::metrics_with(&args.datasets, &options, &args.engine.options())?;
            let text = if args.json { metrics::metrics_json(&computed) } else { metrics::render_metrics(&computed) };
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Command::Sql(args) => {
            let options = SqlOptions {
                query: args.query,
                datasets: args.datasets,
                format: args.format,
                output: args.output,
                max_rows: args.max_rows,
                query_options: args.engine.options(),
            };
            sql(&options, &mut out)?;
            out.flush()?;
        }
        Command::Export(args) => {
            use infertrace::export::{ExportArgs, Sample, Target};
            let sample = match (args.sessions, args.sample) {
                (Some(n), _) => Sample::Sessions(n),
                (None, Some(share)) => Sample::Fraction(share),
                (None, None) => Sample::All,
            };
            let export_args = ExportArgs {
                datasets: args.datasets,
                output: args.output,
                force: args.force,
                from: args.from,
                to: args.to,
                sample,
                dataset: args.format == Target::Dataset,
                options: infertrace_export::Options {
                    format: match args.format {
                        Target::Trace(format) => format,
                        Target::Dataset => infertrace_export::Format::Mooncake,
                    },
                    block_size: args.block_size,
                    time_scale: args.time_scale,
                    max_input_tokens: args.max_input_tokens,
                    start_ns: 0,
                    seed: args.seed,
                },
                query: args.engine.options(),
            };
            let manifest = infertrace::export::export(&export_args)?;
            out.write_all(infertrace::export::render_export(&manifest, &export_args.output).as_bytes())?;
            out.flush()?;
        }
        Command::Merge(args) => {
            let merge_args = infertrace::MergeArgs {
                datasets: args.datasets,
                output: args.output,
                tolerance_s: args.tolerance,
                token_slack: args.token_slack,
                client_sources: args.client_source,
                force: args.force,
                query: args.engine.options(),
            };
            let manifest = infertrace::merge(&merge_args)?;
            out.write_all(infertrace::render_merge(&manifest, &merge_args.output).as_bytes())?;
            out.flush()?;
        }
        Command::CacheSim(args) => {
            let bytes = args.bytes.capacity()?;
            let sim_args = infertrace::cache::CacheSimArgs {
                dataset: args.dataset,
                tiers: args.tiers,
                policy: args.policy,
                placement: args.placement,
                bytes,
                output: args.output,
                force: args.force,
                query: args.engine.options(),
            };
            let (sim, timing) = infertrace::cache::cache_sim(&sim_args)?;
            let bytes = sim_args.bytes.as_ref();
            let text = if args.json {
                infertrace::cache::cache_sim_json(&sim, bytes)
            } else {
                infertrace::cache::render_cache_sim(&sim, bytes)
            };
            out.write_all(text.as_bytes())?;
            if let (Some(output), false) = (&sim_args.output, args.json) {
                writeln!(out, "wrote {}", output.display())?;
            }
            out.flush()?;
            if args.timing {
                eprintln!("{}", timing.line("simulate"));
            }
        }
        Command::Mrc(args) => {
            let sampling = match (args.sample, args.exact) {
                (Some(rate), _) => Sampling::Rate(rate),
                (None, true) => Sampling::Exact,
                (None, false) => Sampling::Auto,
            };
            let mrc_args = infertrace::cache::MrcArgs {
                dataset: args.dataset,
                sampling,
                points: args.points,
                bytes: args.bytes.capacity()?,
                query: args.engine.options(),
            };
            let (curve, report, timing) = infertrace::cache::mrc(&mrc_args)?;
            let bytes = mrc_args.bytes.as_ref();
            if let Some(svg) = &args.svg {
                std::fs::write(svg, infertrace::cache::mrc_svg(&curve, &report))
                    .with_context(|| format!("cannot write {}", svg.display()))?;
            }
            let text = if args.json {
                infertrace::cache::mrc_json(&report, bytes)
            } else {
                infertrace::cache::render_mrc(&report, bytes)
            };
            out.write_all(text.as_bytes())?;
            out.flush()?;
            if args.timing {
                eprintln!("{}", timing.line("curve"));
            }
        }
        Command::Model(args) => {
            let loaded = args.params.load()?;
            if args.list {
                for a in &loaded.catalog.accelerators {
                    writeln!(
                        out,
                        "accelerator {:<11} {} — {} TFLOP/s bf16 dense, {} GB at {} GB/s, {} W, ${}/h",
                        a.id,
                        a.name,
                        a.bf16_dense_tflops,
                        a.hbm_gb,
                        a.memory_bandwidth_gbs,
                        a.power_watts,
                        a.price_per_hour
                    )?;
                }
                for m in &loaded.catalog.models {
                    writeln!(
                        out,
                        "model       {:<14} {} layers, {} KV heads × {}, {:?}, {} B parameters ({} B active), {} KV bytes/token (bf16)",
                        m.id,
                        m.layers,
                        m.kv_heads,
                        m.head_dim,
                        m.attention,
                        m.parameters / 1e9,
                        m.active_parameters / 1e9,
                        m.kv_bytes_per_token(2.0)
                    )?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            let evaluation = infertrace_model::evaluate(&loaded.params, &loaded.catalog)?;
            let text = if args.json {
                infertrace::model::model_json(&loaded, &evaluation)
            } else {
                infertrace::model::render_model(&loaded, &evaluation)
            };
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Command::Sweep(args) => {
            let loaded = args.params.load()?;
            let axes = args
                .vary
                .iter()
                .map(|v| infertrace_model::sweep::Axis::parse(v).map_err(|e| anyhow::anyhow!("--vary {v}: {e}")))
                .collect::<Result<Vec<_>>>()?;
            let surface = infertrace_model::sweep::sweep(&loaded.params, &loaded.catalog, axes)?;
            infertrace::model::write_surface(&surface, &args.output)?;
            if let Some(svg) = &args.svg {
                std::fs::write(svg, infertrace::model::surface_svg(&surface))
                    .with_context(|| format!("cannot write {}", svg.display()))?;
            }
            out.write_all(infertrace::model::render_sweep(&surface).as_bytes())?;
            writeln!(out, "wrote {}", args.output.display())?;
            out.flush()?;
        }
        Command::Size(args) => {
            let loaded = args.params.load()?;
            infertrace::model::require_hardware(&loaded.params)?;
            let (Some(ttft), Some(tpot)) = (
                args.slo.bounds.get(&infertrace_engine::Latency::Ttft),
                args.slo.bounds.get(&infertrace_engine::Latency::Tpot),
            ) else {
                bail!("--slo needs both ttft and tpot, such as --slo ttft=2s,tpot=50ms");
            };
            let request = infertrace_model::size::SizeRequest {
                requests_per_s: args.rate,
                ttft_s: *ttft,
                tpot_s: *tpot,
                max_utilization: args.max_utilization,
            };
            let sizing = infertrace_model::size::size(&loaded.params, &loaded.catalog, &request)?;
            let text = if args.json {
                let mut t = serde_json::to_string_pretty(&sizing)?;
                t.push('\n');
                t
            } else {
                infertrace::model::render_size(&sizing)
            };
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Command::Report(args) => {
            let options = ReportOptions {
                datasets: args.datasets,
                output: args.output,
                slo: args.slo.unwrap_or_default(),
                title: args.title,
                cost: args.cost.as_deref().map(metrics::read_cost_profile).transpose()?,
                query: args.engine.options(),
            };
            report::report(&options)?;
            writeln!(out, "wrote {}", options.output.display())?;
            out.flush()?;
        }
        Command::Replay(args) => {
            let catalog = infertrace::replay::catalog(args.catalog.as_deref())?;
            let options = infertrace_replay::ReplayOptions {
                rate_scale: args.rate_scale,
                sample_interval_s: args.sample_interval,
            };
            let replayed = infertrace::replay::replay_to(
                &args.datasets,
                &args.config,
                &catalog,
                &options,
                &args.output,
                args.force,
                args.timing,
                &args.engine.options(),
            )?;
            out.write_all(infertrace::replay::render_replay(&replayed, &args.output).as_bytes())?;
            out.flush()?;
        }
        Command::Calibrate(args) => {
            let catalog = infertrace::replay::catalog(args.catalog.as_deref())?;
            let (fitted, calibration) =
                infertrace::replay::calibrate_from(&args.datasets, &args.config, &catalog, &args.engine.options())?;
            if let Some(path) = &args.output {
                let text = toml::to_string(&fitted).context("the configuration serializes")?;
                std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
            }
            let text = if args.json {
                let mut t = serde_json::to_string_pretty(&calibration)?;
                t.push('\n');
                t
            } else {
                infertrace::replay::render_calibration(&calibration)
            };
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Command::Compare(args) => {
            let cost = args.cost.as_deref().map(metrics::read_cost_profile).transpose()?;
            let options = MetricsOptions { slo: args.slo.unwrap_or_default(), by: args.by.map(GroupBy::from), cost };
            let a = metrics::metrics(std::slice::from_ref(&args.a), &options)?;
            let b = metrics::metrics(std::slice::from_ref(&args.b), &options)?;
            let rows: Vec<_> =
                infertrace_engine::compare(&a, &b).into_iter().filter(|d| args.all || d.a != d.b).collect();
            let text = if args.json { metrics::compare_json(&rows) } else { metrics::render_compare(&rows) };
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
        Command::Synth(SynthCommand::Servegen(args)) => {
            let options = ServegenOptions {
                dir: args.dir,
                output: args.output,
                clients: args.clients,
                seed: args.seed,
                from_s: args.from,
                duration_s: args.duration,
                rate_scale: args.rate_scale,
                start_ns: args.start,
                force: args.force,
            };
            let report = synth_servegen(&options)?;
            print_summary(&mut out, &report)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The per-input table and a total on stdout, then warnings for skipped files and diagnostics on stderr.
fn print_summary(out: &mut impl io::Write, report: &NormalizeReport) -> Result<()> {
    let mut rows = summary::input_rows(&report.manifest);
    let totals = report.manifest.rows;
    rows.push(vec![
        "total".to_owned(),
        String::new(),
        String::new(),
        summary::count(report.manifest.inputs.iter().map(|i| i.lines).sum()),
        summary::count(totals.requests),
        summary::count(totals.samples),
        summary::count(totals.cache_events),
        summary::count(report.diagnostics()),
    ]);
    out.write_all(summary::render_table(INPUT_HEADERS, &rows, INPUT_COUNTS_FROM).as_bytes())?;
    writeln!(out, "wrote {}", report.output.display())?;
    out.flush()?;
    let mut lines = summary::skipped_lines(&report.manifest);
    lines.extend(summary::diagnostics_lines(&report.manifest));
    for line in &lines {
        eprintln!("warning: {line}");
    }
    for shown in &report.shown_lines {
        // Control characters escaped, so that a line cannot drive the terminal.
        let text: String = shown
            .text
            .chars()
            .map(|c| if c.is_control() { c.escape_debug().to_string() } else { c.to_string() })
            .collect();
        eprintln!("line {}:{} ({}): {text}", shown.path, shown.line, shown.kind);
    }
    Ok(())
}
