//! `cargo xtask bench --scale`: the analysis commands on generated datasets of a million requests and more, timed
//! with their peak memory, and the same figures computed by DuckDB on the same files (issue #42).
//!
//! Each dataset is written straight through `DatasetWriter` (no text to parse): requests of multi-turn sessions at
//! 1,000 a second, 64 instances, two models, 20 prefix blocks of 16 tokens on average (a session's turn repeats the
//! blocks of the turn before, so prefixes are reused), every instant and duration filled, 3% of outcomes failed.
//! It is written as two halves, `a/` (the first half of the arrivals) and `b/`, which every command reads together
//! except `cache-sim` and `mrc`, which take one dataset and read `a/`; `merge` joins the two.
//!
//! A command is stopped when its resident memory passes `--max-rss` (default 20 GiB) or it runs past `--timeout`, and
//! reported as such: at the sizes the commands cannot yet reach, the bench still finishes and the machine stays up.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use infertrace_schema::{Assumptions, DatasetWriter, Manifest, Producer, RequestRow, Status, WorkloadClass};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng as _, SeedableRng as _};

/// Sessions open at once: a request continues one of them, chosen at random.
const OPEN_SESSIONS: u64 = 10_000;
/// Tokens per prefix block.
const BLOCK_SIZE: u32 = 16;
/// Instances requests are served by (a session keeps its instance).
const INSTANCES: u64 = 64;
/// The arrival rate, requests per second.
const RATE: i64 = 1_000;

/// What `--scale` runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScaleOptions {
    /// Dataset sizes, requests.
    pub(crate) sizes: Vec<u64>,
    /// Runs per command; the median is reported.
    pub(crate) runs: usize,
    /// Resident memory past which a command is stopped, KiB.
    pub(crate) max_rss_kib: u64,
    /// Time past which a command is stopped.
    pub(crate) timeout: Duration,
    /// Whether DuckDB runs beside `metrics` (needs `python3 -m pip install duckdb`).
    pub(crate) duckdb: bool,
}

impl Default for ScaleOptions {
    fn default() -> Self {
        Self {
            sizes: vec![1_000_000, 10_000_000, 100_000_000],
            runs: 3,
            max_rss_kib: 20 << 20,
            timeout: Duration::from_secs(1800),
            duckdb: true,
        }
    }
}

impl ScaleOptions {
    /// Parses the options after `bench --scale`.
    pub(crate) fn parse(args: &[&str]) -> Result<Self> {
        let mut options = Self::default();
        let mut i = 0;
        while i < args.len() {
            let value = |i: usize| args.get(i + 1).copied().with_context(|| format!("{} needs a value", args[i]));
            match args[i] {
                "--requests" => {
                    options.sizes = value(i)?.split(',').map(parse_count).collect::<Result<_>>()?;
                    i += 1;
                }
                "--runs" => {
                    options.runs = value(i)?.parse().context("--runs takes a whole number")?;
                    if options.runs == 0 {
                        bail!("--runs must be at least 1");
                    }
                    i += 1;
                }
                "--max-rss-gib" => {
                    options.max_rss_kib = value(i)?.parse::<u64>().context("--max-rss-gib takes a whole number")? << 20;
                    i += 1;
                }
                "--timeout-s" => {
                    options.timeout =
                        Duration::from_secs(value(i)?.parse().context("--timeout-s takes a whole number")?);
                    i += 1;
                }
                "--no-duckdb" => options.duckdb = false,
                other => bail!(
                    "unknown --scale option {other}; expected --requests N[,N…], --runs N, --max-rss-gib N, \
                     --timeout-s N, --no-duckdb"
                ),
            }
            i += 1;
        }
        Ok(options)
    }
}

/// `1000000`, `1M`, `10M`, `100k`.
fn parse_count(text: &str) -> Result<u64> {
    let (digits, factor) = match text.as_bytes().last() {
        Some(b'k' | b'K') => (&text[..text.len() - 1], 1_000),
        Some(b'M') => (&text[..text.len() - 1], 1_000_000),
        _ => (text, 1),
    };
    let n: u64 = digits.parse().with_context(|| format!("--requests takes counts such as 1M or 500k, not {text}"))?;
    if n == 0 {
        bail!("--requests takes counts of at least 1");
    }
    Ok(n * factor)
}

/// One session open in the generator.
#[derive(Debug, Clone)]
struct Session {
    id: u64,
    turn: u32,
    turns: u32,
    /// The blocks of its last request.
    blocks: Vec<u64>,
}

/// The requests of a generated dataset of `requests` rows, in arrival order, from `seed`.
struct Requests {
    rng: ChaCha8Rng,
    open: Vec<Session>,
    next_session: u64,
    index: u64,
}

impl Requests {
    fn new(seed: u64) -> Self {
        let mut generator = Self { rng: ChaCha8Rng::seed_from_u64(seed), open: Vec::new(), next_session: 0, index: 0 };
        generator.open = (0..OPEN_SESSIONS).map(|_| generator.new_session()).collect();
        generator
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }

    fn new_session(&mut self) -> Session {
        let id = self.next_session;
        self.next_session += 1;
        // 1 to 8 turns, 4.5 on average.
        let turns = 1 + self.below(8) as u32;
        Session { id, turn: 0, turns, blocks: Vec::new() }
    }

    fn next_row(&mut self) -> RequestRow {
        let slot = self.below(OPEN_SESSIONS) as usize;
        let mut session = self.open[slot].clone();
        // A turn repeats the blocks of the one before and adds 3 to 7 (a first turn: one of 16 system prompts, 4
        // blocks, and 3 to 7 of its own): about 20 blocks a request.
        if session.turn == 0 {
            let system = self.below(16);
            session.blocks = (0..4).map(|j| mix(0xfeed_0000 + system * 8 + j)).collect();
        }
        let added = 3 + self.below(5);
        let start = session.blocks.len() as u64;
        session.blocks.extend((start..start + added).map(|j| mix(session.id << 16 | j)));
        let cached = if session.turn == 0 { 4 * BLOCK_SIZE } else { (start as u32) * BLOCK_SIZE };
        let input = session.blocks.len() as u32 * BLOCK_SIZE - self.below(u64::from(BLOCK_SIZE)) as u32;
        let output = 20 + self.below(980) as u32;
        let arrival =
            1_767_225_600_000_000_000 + self.index as i64 * (1_000_000_000 / RATE) + self.below(1_000_000) as i64;
        let queue = self.below(50_000_000) as i64;
        let prefill = 20_000_000 + i64::from(input - cached.min(input)) * 50_000;
        let tpot = 20_000_000 + self.below(40_000_000) as i64;
        let scheduled = arrival + queue;
        let first_token = scheduled + prefill;
        let last_token = first_token + i64::from(output - 1) * tpot;
        let roll = self.below(100);
        let status = match roll {
            0 | 1 => Status::Error,
            2 => Status::Aborted,
            _ => Status::Ok,
        };
        let mut row = RequestRow {
            request_id: format!("req-{}", self.index),
            source: "scale".into(),
            model: Some(if session.id.is_multiple_of(3) { "Llama-3.1-70B" } else { "Llama-3.1-8B" }.into()),
            session_id: Some(format!("s-{}", session.id)),
            turn: Some(session.turn),
            instance: Some(format!("worker-{:02}", session.id % INSTANCES)),
            arrival_time: Some(arrival),
            scheduled_time: Some(scheduled),
            first_token_time: Some(first_token),
            prefill_end_time: Some(first_token),
            decode_start_time: Some(first_token),
            last_token_time: Some(last_token),
            completion_time: Some(last_token + 1_000_000),
            kv_transfer_s: Some(0.0),
            input_tokens: Some(input),
            cached_tokens: Some(cached.min(input)),
            cached_tokens_gpu: Some(cached.min(input)),
            cached_tokens_cpu: Some(0),
            cached_tokens_disk: Some(0),
            cached_tokens_remote: Some(0),
            output_tokens: Some(output),
            reasoning_tokens: session.id.is_multiple_of(5).then_some(output / 2),
            prefix_hashes: Some(session.blocks.clone()),
            block_size: Some(BLOCK_SIZE),
            workload_class: Some(if session.turns > 4 { WorkloadClass::Agent } else { WorkloadClass::Chat }),
            status,
            ..RequestRow::default()
        };
        let _ = row.fill_durations();
        session.turn += 1;
        self.open[slot] = if session.turn == session.turns { self.new_session() } else { session };
        self.index += 1;
        row
    }
}

/// SplitMix64's finalizer: block hashes that look random.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn manifest() -> Manifest {
    let producer = Producer { name: "xtask bench --scale".into(), version: env!("CARGO_PKG_VERSION").into() };
    Manifest::generated(
        producer,
        Assumptions { year: None, utc_offset: "+00:00".into(), start: "1970-01-01T00:00:00Z".into(), block_size: None },
    )
}

/// Writes the two halves of a dataset of `requests` rows into `dir/a` and `dir/b`, unless a finished one is there.
fn write_datasets(dir: &Path, requests: u64) -> Result<()> {
    // Names the generator's layout too, so that a dataset an older generator wrote is written again.
    let (marker, marker_text) = (dir.join("done"), format!("requests {requests}, {OPEN_SESSIONS} sessions open"));
    if fs::read_to_string(&marker).ok().as_deref() == Some(marker_text.as_str()) {
        return Ok(());
    }
    eprintln!("writing {} ({requests} requests) …", dir.display());
    let mut generator = Requests::new(7);
    for (half, rows) in [("a", requests / 2), ("b", requests - requests / 2)] {
        let path = dir.join(half);
        let mut writer =
            DatasetWriter::create(&path, true).with_context(|| format!("cannot create {}", path.display()))?;
        for _ in 0..rows {
            writer.push_request(&generator.next_row())?;
        }
        writer.finish(manifest()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    fs::write(&marker, marker_text)?;
    Ok(())
}

/// How one run of a command ended.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Finished: wall time and peak RSS (KiB).
    Done(Duration, u64),
    /// Stopped past the memory bound.
    OverMemory,
    /// Stopped past the time bound.
    OverTime,
    /// Exited with an error.
    Failed,
}

/// Runs `command`, stopping it past `options`' bounds.
fn run_bounded(command: &mut Command, options: &ScaleOptions) -> Result<Outcome> {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().context("cannot start")?;
    let mut peak = 0;
    loop {
        peak = peak.max(crate::bench::peak_kib(child.id()).unwrap_or(0));
        if let Some(status) = child.try_wait()? {
            return Ok(if status.success() { Outcome::Done(started.elapsed(), peak) } else { Outcome::Failed });
        }
        if peak > options.max_rss_kib || started.elapsed() > options.timeout {
            child.kill()?;
            child.wait()?;
            return Ok(if peak > options.max_rss_kib { Outcome::OverMemory } else { Outcome::OverTime });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The median of `runs` runs, or the first run's failure.
fn median_of(runs: usize, mut run: impl FnMut() -> Result<Outcome>) -> Result<Outcome> {
    let mut done = Vec::new();
    for _ in 0..runs {
        match run()? {
            Outcome::Done(t, peak) => done.push((t, peak)),
            other => return Ok(other),
        }
    }
    done.sort();
    let (t, peak) = done[done.len() / 2];
    Ok(Outcome::Done(t, peak))
}

/// The SQL DuckDB runs for the figures `metrics` computes from the requests table: counts by status, the
/// quantiles of every duration, the throughput's span and token sums, and the unbounded prefix reuse (a block hits
/// when its hash was seen in an earlier request, or earlier in the same request: with one block size, every access
/// but the first of each hash).
const DUCKDB_SQL: &str = "
SELECT status, count(*) FROM requests GROUP BY status;
SELECT count(ttft_s), avg(ttft_s), quantile_cont(ttft_s, [0.5, 0.9, 0.95, 0.99]), max(ttft_s),
       count(tpot_s), avg(tpot_s), quantile_cont(tpot_s, [0.5, 0.9, 0.95, 0.99]), max(tpot_s),
       count(e2e_s), avg(e2e_s), quantile_cont(e2e_s, [0.5, 0.9, 0.95, 0.99]), max(e2e_s),
       count(queue_s), avg(queue_s), quantile_cont(queue_s, [0.5, 0.9, 0.95, 0.99]), max(queue_s),
       count(prefill_s), avg(prefill_s), quantile_cont(prefill_s, [0.5, 0.9, 0.95, 0.99]), max(prefill_s),
       count(decode_s), avg(decode_s), quantile_cont(decode_s, [0.5, 0.9, 0.95, 0.99]), max(decode_s),
       min(arrival_time), max(completion_time), sum(input_tokens), sum(output_tokens)
FROM requests;
SELECT count(*) AS blocks, count(*) - count(DISTINCT h) AS hit_blocks
FROM (SELECT unnest(prefix_hashes) AS h FROM requests);
";

/// Runs the bench and prints its table.
pub(crate) fn bench(binary: &Path, dir: &Path, options: &ScaleOptions) -> Result<()> {
    println!("| requests | command | median s | peak MiB |");
    println!("|---|---|---|---|");
    for &requests in &options.sizes {
        let data = dir.join(format!("scale-{requests}"));
        write_datasets(&data, requests)?;
        let (a, b) = (data.join("a"), data.join("b"));
        let merged = data.join("merged");
        let report = data.join("report.html");
        let path = |p: &PathBuf| p.clone().into_os_string();
        let commands: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
            ("metrics --json", vec!["metrics".into(), path(&a), path(&b), "--json".into()]),
            ("report", vec!["report".into(), path(&a), path(&b), "-o".into(), path(&report)]),
            (
                "cache-sim, 3 tiers",
                vec![
                    "cache-sim".into(),
                    path(&a),
                    "--tier".into(),
                    "gpu=3M".into(),
                    "--tier".into(),
                    "cpu=30M".into(),
                    "--tier".into(),
                    "disk=300M".into(),
                ],
            ),
            ("mrc, sampled 1%", vec!["mrc".into(), path(&a), "--sample".into(), "0.01".into()]),
            (
                "merge of two halves",
                vec!["merge".into(), path(&a), path(&b), "-o".into(), path(&merged), "--force".into()],
            ),
            (
                "sql: count, quantiles",
                vec![
                    "sql".into(),
                    "SELECT status, count(*), percentile_cont(0.99) WITHIN GROUP (ORDER BY ttft_s), \
                     percentile_cont(0.5) WITHIN GROUP (ORDER BY e2e_s) FROM requests GROUP BY status"
                        .into(),
                    path(&a),
                    path(&b),
                ],
            ),
        ];
        for (name, args) in commands {
            let outcome = median_of(options.runs, || run_bounded(Command::new(binary).args(&args), options))?;
            print_row(requests, name, outcome, options);
        }
        if options.duckdb {
            let script = format!(
                "import duckdb\ncon = duckdb.connect()\ncon.execute(\"SET memory_limit = '2GB'\")\n\
                 con.execute(\"CREATE VIEW requests AS SELECT * FROM read_parquet(['{}', '{}'])\")\n\
                 for q in {:?}.split(';'):\n    q = q.strip()\n    if q: con.execute(q).fetchall()\n",
                a.join("requests.parquet").display(),
                b.join("requests.parquet").display(),
                DUCKDB_SQL
            );
            let outcome =
                median_of(options.runs, || run_bounded(Command::new("python3").args(["-c", &script]), options))?;
            print_row(requests, "DuckDB: the same figures", outcome, options);
        }
    }
    Ok(())
}

fn print_row(requests: u64, name: &str, outcome: Outcome, options: &ScaleOptions) {
    let (time, peak) = match outcome {
        Outcome::Done(t, peak) => (format!("{:.2}", t.as_secs_f64()), format!("{:.0}", peak as f64 / 1024.0)),
        Outcome::OverMemory => ("-".into(), format!("stopped past {} GiB", options.max_rss_kib >> 20)),
        Outcome::OverTime => (format!("stopped past {} s", options.timeout.as_secs()), "-".into()),
        Outcome::Failed => ("failed".into(), "-".into()),
    };
    println!("| {requests} | {name} | {time} | {peak} |");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let defaults = ScaleOptions::parse(&[]).unwrap();
        assert_eq!(defaults.sizes, [1_000_000, 10_000_000, 100_000_000]);
        let given = ScaleOptions::parse(&["--requests", "500k,2M,7", "--runs", "1", "--no-duckdb"]).unwrap();
        assert_eq!((given.sizes.as_slice(), given.runs, given.duckdb), (&[500_000, 2_000_000, 7][..], 1, false));
        assert!(ScaleOptions::parse(&["--requests", "0"]).is_err());
        assert!(ScaleOptions::parse(&["--requests", "ten"]).unwrap_err().to_string().contains("not ten"));
    }

    /// The generated rows have what the issue asks of them: about 20 blocks each, every duration, sessions of
    /// several turns whose blocks extend the turn before, 64 instances, failures.
    #[test]
    fn generated_requests_have_sessions_blocks_and_durations() {
        let mut generator = Requests::new(7);
        let rows: Vec<RequestRow> = (0..50_000).map(|_| generator.next_row()).collect();
        let blocks: usize = rows.iter().map(|r| r.prefix_hashes.as_ref().unwrap().len()).sum();
        let mean = blocks as f64 / rows.len() as f64;
        assert!((15.0..25.0).contains(&mean), "{mean} blocks a request");
        for row in &rows {
            let durations = [row.queue_s, row.prefill_s, row.ttft_s, row.tpot_s, row.decode_s, row.e2e_s];
            assert!(durations.iter().all(Option::is_some), "{row:?}");
            assert!(row.input_tokens.unwrap() >= row.cached_tokens.unwrap());
        }
        let instances: std::collections::BTreeSet<_> = rows.iter().map(|r| r.instance.clone()).collect();
        assert_eq!(instances.len(), 64);
        assert!(rows.iter().any(|r| r.status == Status::Error) && rows.iter().any(|r| r.status == Status::Aborted));
        // A later turn of a session starts with the blocks of its earlier turn.
        let second = rows.iter().find(|r| r.turn == Some(1)).unwrap();
        let first = rows.iter().find(|r| r.session_id == second.session_id && r.turn == Some(0)).unwrap();
        let (earlier, later) = (first.prefix_hashes.as_ref().unwrap(), second.prefix_hashes.as_ref().unwrap());
        assert_eq!(&later[..earlier.len()], &earlier[..]);
        assert!(later.len() > earlier.len());
        // Arrivals increase by a millisecond on average.
        let span = rows.last().unwrap().arrival_time.unwrap() - rows[0].arrival_time.unwrap();
        assert!((49.0..51.0).contains(&(span as f64 / 1e9)), "{span}");
    }
}
