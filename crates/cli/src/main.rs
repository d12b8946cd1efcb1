//! `infertrace`: see `infertrace --help` and the README.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{self, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use infertrace::registry::{self, ADAPTERS, FormatArg};
use infertrace::summary::{self, INPUT_COUNTS_FROM, INPUT_HEADERS};
use infertrace::{NormalizeOptions, normalize};
use infertrace_adapter::time::parse_rfc3339;
use infertrace_adapter::{Adapter, ParseOptions, UtcOffset};
use infertrace_adapter_mapped::InputKind;

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
    /// Exit with status 1 when any input line produced a diagnostic (the dataset is still written).
    #[arg(long)]
    strict: bool,
    /// Replace the output directory if it exists.
    #[arg(long)]
    force: bool,
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
                parse: ParseOptions { year: args.year, utc_offset: args.utc_offset, start_ns: args.start },
                force: args.force,
            };
            let progress = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}")
                    .expect("valid template"),
            );
            let report = normalize(&options, &progress)?;
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
            if args.strict && report.diagnostics() > 0 {
                eprintln!("error: {} diagnostics and --strict was given", summary::count(report.diagnostics()));
                return Ok(ExitCode::from(1));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
