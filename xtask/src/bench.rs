//! `cargo xtask bench`: how fast `infertrace normalize` is on large generated inputs, against anchors on the same files
//! — `wc -l` (the I/O floor), `openssl dgst -sha256` (the hash the manifest records of every input: the floor of
//! reading it and hashing it once) and the straightforward Python normalizer of `bench/baseline/` (what a user would
//! write: regexes and pyarrow).
//!
//! Inputs are written once into `target/bench/` (at other sizes than the defaults, a directory under it named by the
//! sizes: see [`BenchOptions::dir`]) by the adapters' own generators (seeded, so every run measures the same bytes): a
//! vLLM 0.14 log (stats lines, `Received request` with prompt token ids of 500–30,000 tokens in DEBUG lines, `Added`
//! lines), an SGLang 0.5.10 log (batch lines and request lines) and a Mooncake trace of `--rows` rows. Each command
//! runs `--runs` times (default 3) and the median is reported, with MB/s (input bytes, 10⁶), rows/s (rows written), the
//! peak resident memory of the normalize process (from `/proc/<pid>/status` `VmHWM`, polled; `-` where unavailable),
//! the output's size as a share of the input's, and the anchors' medians and ratios. The vLLM and SGLang logs are then
//! timed again as users keep rotated logs, gzip'd (level 6, logrotate's `compress`) and zstd'd (level 3, the `zstd`
//! command's default), against their plain runs and the `gzip -dc` and `zstd -dc` commands alone (the decompression
//! floor; `-` where the command is missing), and as a fleet's log shipper leaves them, a directory of gzip'd parts of 4
//! MiB of text, against the one plain file. Every input is then timed with `--partition-by date` against its plain run.
//! The release binary is built first. Not part of CI: it takes minutes and needs disk.

use std::fs::{self, File};
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// The bench's log size by default: 1 GiB.
const LOG_BYTES: u64 = 1 << 30;
/// The Mooncake trace's rows by default.
const TRACE_ROWS: u64 = 10_000_000;
/// `--formats`' input size by default: twenty-odd inputs, a quarter of [`LOG_BYTES`] each.
const FORMATS_LOG_BYTES: u64 = 256 << 20;

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct BenchOptions {
    /// Runs per command.
    pub(crate) runs: usize,
    /// Target size of each generated log, bytes.
    pub(crate) log_bytes: u64,
    /// Rows of the Mooncake trace.
    pub(crate) trace_rows: u64,
    /// Skip the Python baseline.
    pub(crate) no_python: bool,
    /// Bench every other line-oriented format instead (`bench_formats.rs`), at `log_bytes` each.
    pub(crate) formats: bool,
    /// `--threads` for every `normalize` of the bench (its plain, compressed and fleet inputs): peak memory
    /// grows with the thread count, and a user's machine has more cores than the bench's.
    pub(crate) threads: Option<usize>,
}

impl BenchOptions {
    pub(crate) fn parse(args: &[&str]) -> Result<Self> {
        let mut options = Self {
            runs: 3,
            log_bytes: LOG_BYTES,
            trace_rows: TRACE_ROWS,
            no_python: false,
            formats: false,
            threads: None,
        };
        let mut log_given = false;
        let mut i = 0;
        while i < args.len() {
            let value = |i: usize| args.get(i + 1).copied().with_context(|| format!("{} needs a value", args[i]));
            match args[i] {
                "--runs" => options.runs = value(i)?.parse().context("--runs takes a whole number")?,
                "--log-mb" => {
                    options.log_bytes = value(i)?.parse::<u64>().context("--log-mb takes a whole number")? << 20;
                    log_given = true;
                }
                "--rows" => options.trace_rows = value(i)?.parse().context("--rows takes a whole number")?,
                "--threads" => {
                    options.threads = Some(value(i)?.parse().context("--threads takes a whole number")?);
                }
                "--no-python" => {
                    options.no_python = true;
                    i += 1;
                    continue;
                }
                "--formats" => {
                    options.formats = true;
                    i += 1;
                    continue;
                }
                other => bail!(
                    "unknown bench option {other}; expected --runs N, --log-mb N, --rows N, --threads N, --no-python, --formats"
                ),
            }
            i += 2;
        }
        if options.runs == 0 {
            bail!("--runs must be at least 1");
        }
        if options.formats && options.threads.is_some() {
            bail!("--threads is for the issue's bench; --formats runs each format with one thread and with all");
        }
        if options.formats && !log_given {
            options.log_bytes = FORMATS_LOG_BYTES;
        }
        Ok(options)
    }

    /// Where this run's inputs and outputs go, under `bench` (`target/bench/`): `bench` itself at the default sizes
    /// (`bench/formats/` with `--formats`), a directory named by the sizes otherwise, so that a quick run at other
    /// sizes (`--log-mb 64 --rows 500000`) does not write over the full-size inputs, which take minutes to write
    /// again.
    pub(crate) fn dir(&self, bench: &Path) -> PathBuf {
        let mib = self.log_bytes >> 20;
        if self.formats {
            if self.log_bytes == FORMATS_LOG_BYTES {
                bench.join("formats")
            } else {
                bench.join(format!("formats-{mib}mib"))
            }
        } else if (self.log_bytes, self.trace_rows) == (LOG_BYTES, TRACE_ROWS) {
            bench.to_path_buf()
        } else {
            bench.join(format!("log-{mib}mib-rows-{}", self.trace_rows))
        }
    }
}

/// One generated input.
struct Input {
    name: &'static str,
    path: PathBuf,
    format: &'static str,
}

/// Writes `path` with `write(n)` sized so the file reaches about `bytes`: a small sample measures bytes per unit
/// first. Reuses an existing file of the same target.
pub(crate) fn generate(
    path: &Path,
    bytes: u64,
    mut write: impl FnMut(&mut dyn std::io::Write, u64) -> std::io::Result<()>,
) -> Result<()> {
    let marker = path.with_extension("target");
    if path.exists() && fs::read_to_string(&marker).ok().as_deref() == Some(&bytes.to_string()) {
        return Ok(());
    }
    let mut sample = Vec::new();
    write(&mut sample, 200).context("generating a sample")?;
    let units = (bytes as f64 / (sample.len() as f64 / 200.0)).ceil().max(1.0) as u64;
    let mut out = BufWriter::with_capacity(
        1 << 20,
        File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    write(&mut out, units).with_context(|| format!("cannot write {}", path.display()))?;
    out.flush()?;
    fs::write(&marker, bytes.to_string())?;
    Ok(())
}

fn inputs(dir: &Path, options: &BenchOptions) -> Result<Vec<Input>> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let vllm = dir.join("vllm-0.14.log");
    eprintln!("generating {} …", vllm.display());
    generate(&vllm, options.log_bytes, |out, requests| {
        let options = infertrace_adapter_vllm::generate::LogOptions { requests, prompt_tokens: (500, 30_000), seed: 7 };
        infertrace_adapter_vllm::generate::write_log(
            &mut IoAdapter(out),
            infertrace_adapter_vllm::generate::Generation::V0_14,
            options,
        )
        .map(drop)
    })?;
    let sglang = dir.join("sglang-0.5.10.log");
    eprintln!("generating {} …", sglang.display());
    generate(&sglang, options.log_bytes, |out, batches| {
        infertrace_adapter_sglang::generate::write_log(
            &mut IoAdapter(out),
            infertrace_adapter_sglang::generate::Generation::V0_5_10,
            batches,
            7,
        )
        .map(drop)
    })?;
    let mooncake = dir.join("mooncake.jsonl");
    eprintln!("generating {} …", mooncake.display());
    let rows = options.trace_rows;
    let marker = mooncake.with_extension("target");
    // Names the generator's session layout too, so that a file written by an older layout is written again.
    let marker_text = format!("rows {rows}, {} sessions open", infertrace_adapter_traces::generate::OPEN_SESSIONS);
    if !(mooncake.exists() && fs::read_to_string(&marker).ok().as_deref() == Some(marker_text.as_str())) {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&mooncake)?);
        // Sessions of 10 turns, at most `OPEN_SESSIONS` open at once.
        infertrace_adapter_traces::generate::write_mooncake(&mut out, rows.div_ceil(10), 10, false, 7)
            .with_context(|| format!("cannot write {}", mooncake.display()))?;
        out.flush()?;
        fs::write(&marker, &marker_text)?;
    }
    Ok(vec![
        Input { name: "vLLM 0.14 log", path: vllm, format: "vllm" },
        Input { name: "SGLang 0.5.10 log", path: sglang, format: "sglang" },
        Input { name: "Mooncake trace", path: mooncake, format: "mooncake" },
    ])
}

/// `&mut dyn Write` as a sized writer, for generators taking `impl Write`.
pub(crate) struct IoAdapter<'a>(pub(crate) &'a mut dyn std::io::Write);

impl std::io::Write for IoAdapter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Wall time and peak RSS (KiB, when `/proc` tells) of one run of `command`, which must succeed.
pub(crate) fn measure(command: &mut Command) -> Result<(Duration, Option<u64>)> {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().context("cannot start")?;
    let mut peak = None;
    loop {
        peak = peak_kib(child.id()).max(peak);
        if let Some(status) = child.try_wait()? {
            let elapsed = started.elapsed();
            if !status.success() {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    std::io::Read::read_to_string(&mut e, &mut stderr)?;
                }
                bail!("{command:?} failed: {}", stderr.lines().last().unwrap_or(""));
            }
            return Ok((elapsed, peak));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The peak resident set of process `pid` so far, KiB (`VmHWM`), while `/proc` tells.
pub(crate) fn peak_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// A peak resident set in KiB as whole MiB, `-` when unknown.
pub(crate) fn mib(kib: Option<u64>) -> String {
    kib.map_or("-".to_owned(), |kib| format!("{:.0}", kib as f64 / 1024.0))
}

pub(crate) fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir).map_or(0, |entries| {
        entries.filter_map(|e| e.ok()?.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
    })
}

/// Builds the release binary and returns its path.
pub(crate) fn release_binary(root: &Path) -> Result<PathBuf> {
    eprintln!("building the release binary …");
    let built = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "infertrace"])
        .current_dir(root)
        .status()
        .context("cannot run cargo")?;
    if !built.success() {
        bail!("cargo build --release -p infertrace failed");
    }
    Ok(root.join("target/release/infertrace"))
}

/// Runs the benchmark and prints its table.
pub(crate) fn bench(root: &Path, options: &BenchOptions) -> Result<()> {
    let binary = release_binary(root)?;
    let dir = options.dir(&root.join("target/bench"));
    if options.formats {
        return crate::bench_formats::bench_formats(&binary, &dir, options.log_bytes, options.runs);
    }
    let inputs = inputs(&dir, options)?;
    let baseline = root.join("bench/baseline/normalize.py");
    // The manifest records every input's SHA-256, so hashing the input once is a floor as well as reading it:
    // `openssl dgst` uses the CPU's SHA extensions as `normalize` does (coreutils' `sha256sum` does not).
    let has_openssl = installed("openssl", "version");
    let mut table = Vec::new();
    for input in &inputs {
        let bytes = fs::metadata(&input.path)?.len();
        let out = dir.join(format!("{}-out", input.format));
        let (mut ours, mut wc, mut sha, mut python) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut peak, mut python_peak) = (None, None);
        for run in 0..options.runs {
            eprintln!("{} run {}/{} …", input.name, run + 1, options.runs);
            let (time, rss) = measure(
                normalize_command(&binary, options.threads).arg(&input.path).arg("-o").arg(&out).arg("--force"),
            )?;
            ours.push(time);
            peak = rss.max(peak);
            wc.push(measure(Command::new("wc").arg("-l").arg(&input.path))?.0);
            if has_openssl {
                sha.push(measure(Command::new("openssl").args(["dgst", "-sha256"]).arg(&input.path))?.0);
            }
            if !options.no_python {
                let target = dir.join(format!("{}-python.parquet", input.format));
                let (time, rss) =
                    measure(Command::new("python3").arg(&baseline).arg(input.format).arg(&input.path).arg(&target))?;
                python.push(time);
                python_peak = rss.max(python_peak);
            }
        }
        let manifest: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join("manifest.json"))?)?;
        let rows =
            ["requests", "samples", "cache_events"].iter().filter_map(|t| manifest["rows"][t].as_u64()).sum::<u64>();
        let output = dir_bytes(&out);
        let t = median(ours).as_secs_f64();
        let w = median(wc).as_secs_f64();
        let h = (!sha.is_empty()).then(|| median(sha).as_secs_f64());
        let p = (!python.is_empty()).then(|| median(python).as_secs_f64());
        table.push(vec![
            input.name.to_owned(),
            format!("{:.0}", bytes as f64 / 1e6),
            rows.to_string(),
            format!("{t:.2}"),
            format!("{:.0}", bytes as f64 / 1e6 / t),
            format!("{:.0}", rows as f64 / t),
            mib(peak),
            format!("{:.2}%", output as f64 * 100.0 / bytes as f64),
            format!("{:.2}", t / w),
            format!("{w:.2}"),
            h.map_or("-".to_owned(), |h| format!("{:.2}", t / h)),
            h.map_or("-".to_owned(), |h| format!("{h:.2}")),
            p.map_or("-".to_owned(), |p| format!("{p:.1}")),
            p.map_or("-".to_owned(), |p| format!("{:.1}", p / t)),
            mib(python_peak),
        ]);
    }
    let headers = [
        "input",
        "MB",
        "rows",
        "median s",
        "MB/s",
        "rows/s",
        "peak RSS MiB",
        "output/input",
        "× wc -l",
        "wc -l s",
        "× SHA-256",
        "SHA-256 s",
        "python s",
        "python ÷ ours",
        "python RSS MiB",
    ];
    print_table(&headers, table);
    let threads = options.threads.map_or("one per CPU".to_owned(), |n| n.to_string());
    println!("medians of {} runs; MB = 10^6 bytes; inputs in {}; threads: {threads}", options.runs, dir.display());
    println!("SHA-256: `openssl dgst -sha256` on the input, the hash the manifest records (`-`: no openssl)");
    compressed(&binary, &dir, &inputs[..2], options.runs, options.threads)?;
    fleet(&binary, &dir, &inputs[..2], options.runs, options.threads)?;
    partitioned(&binary, &dir, &inputs, options.runs, options.threads)?;
    simulations(root, &binary, &dir, options.runs)
}

/// Whether `program` runs here (`program arg` succeeds): an anchor whose command is missing is shown as `-`.
fn installed(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).output().is_ok_and(|o| o.status.success())
}

/// `infertrace normalize`, with `--threads` when the bench was given it.
fn normalize_command(binary: &Path, threads: Option<usize>) -> Command {
    let mut command = Command::new(binary);
    command.arg("normalize");
    if let Some(threads) = threads {
        command.arg("--threads").arg(threads.to_string());
    }
    command
}

/// How a compressed copy of a bench input is written, and the command that only decompresses it.
struct Codec {
    name: &'static str,
    extension: &'static str,
    /// The command and its flags that write the decompressed bytes to stdout.
    floor: [&'static str; 2],
    compress: fn(&mut dyn std::io::Read, &mut dyn std::io::Write) -> std::io::Result<()>,
}

const CODECS: [Codec; 2] = [
    Codec {
        name: "gzip -6",
        extension: "gz",
        floor: ["gzip", "-dc"],
        compress: |text, out| {
            let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::new(6));
            std::io::copy(text, &mut gz)?;
            gz.finish().map(drop)
        },
    },
    Codec {
        name: "zstd -3",
        extension: "zst",
        floor: ["zstd", "-dc"],
        compress: |text, out| zstd::stream::copy_encode(text, out, 3),
    },
];

/// Times `normalize` on gzip'd and zstd'd copies of `inputs` (written once, next to them, and again whenever their
/// source is newer), against the same input uncompressed and the decompression commands alone. The plain input is
/// timed again here, in the same rounds as its copies, so that "× plain" compares runs minutes apart at most: this
/// kind of machine's speed drifts by more than the difference measured.
fn compressed(binary: &Path, dir: &Path, inputs: &[Input], runs: usize, threads: Option<usize>) -> Result<()> {
    let mut table = Vec::new();
    for input in inputs {
        let bytes = fs::metadata(&input.path)?.len();
        let mut paths = Vec::new();
        for codec in &CODECS {
            let path = PathBuf::from(format!("{}.{}", input.path.display(), codec.extension));
            let stale = |p: &Path| -> Result<bool> {
                Ok(!p.exists() || fs::metadata(p)?.modified()? < fs::metadata(&input.path)?.modified()?)
            };
            if stale(&path)? {
                eprintln!("compressing {} ({}) …", input.path.display(), codec.name);
                let mut text = std::io::BufReader::with_capacity(
                    1 << 20,
                    File::open(&input.path).with_context(|| format!("cannot read {}", input.path.display()))?,
                );
                let mut out = BufWriter::with_capacity(
                    1 << 20,
                    File::create(&path).with_context(|| format!("cannot create {}", path.display()))?,
                );
                (codec.compress)(&mut text, &mut out).with_context(|| format!("cannot write {}", path.display()))?;
                out.flush()?;
            }
            paths.push(path);
        }
        let normalize = |path: &Path, out: &Path| {
            measure(normalize_command(binary, threads).arg(path).arg("-o").arg(out).arg("--force"))
        };
        let floor_exists = |codec: &Codec| installed(codec.floor[0], "--version");
        let mut plain = Vec::new();
        // Per codec: normalize's times, the floor's, and the peak resident memory.
        let mut timed: Vec<(Vec<Duration>, Vec<Duration>, Option<u64>)> =
            vec![(Vec::new(), Vec::new(), None); CODECS.len()];
        for run in 0..runs {
            eprintln!("{} plain, gzip'd and zstd'd, round {}/{} …", input.name, run + 1, runs);
            plain.push(normalize(&input.path, &dir.join(format!("{}-out", input.format)))?.0);
            for ((codec, path), (ours, floor, peak)) in CODECS.iter().zip(&paths).zip(&mut timed) {
                let (time, rss) = normalize(path, &dir.join(format!("{}-{}-out", input.format, codec.extension)))?;
                ours.push(time);
                *peak = rss.max(*peak);
                if floor_exists(codec) {
                    floor.push(measure(Command::new(codec.floor[0]).arg(codec.floor[1]).arg(path))?.0);
                }
            }
        }
        let plain = median(plain).as_secs_f64();
        for ((codec, path), (ours, floor, peak)) in CODECS.iter().zip(&paths).zip(timed) {
            let stored = fs::metadata(path)?.len();
            let t = median(ours).as_secs_f64();
            let f = (!floor.is_empty()).then(|| median(floor).as_secs_f64());
            table.push(vec![
                format!("{} ({})", input.name, codec.name),
                format!("{:.0}", stored as f64 / 1e6),
                format!("{:.0}", bytes as f64 / 1e6),
                format!("{t:.2}"),
                format!("{:.0}", bytes as f64 / 1e6 / t),
                mib(peak),
                format!("{plain:.2}"),
                format!("{:.2}", t / plain),
                f.map_or("-".to_owned(), |f| format!("{f:.2}")),
                f.map_or("-".to_owned(), |f| format!("{:.2}", t / f)),
            ]);
        }
    }
    println!();
    let headers = [
        "compressed input",
        "stored MB",
        "MB",
        "median s",
        "MB/s",
        "peak RSS MiB",
        "plain s",
        "× plain",
        "decompress s",
        "× decompress",
    ];
    print_table(&headers, table);
    println!("MB and MB/s count decompressed bytes; plain s: the same log uncompressed, timed in the same rounds");
    Ok(())
}

/// Bytes of log text per file of [`fleet`]'s directories.
const FLEET_PART_BYTES: u64 = 4 << 20;

/// Writes `input` again as a directory of gzip'd parts of about [`FLEET_PART_BYTES`] of text each, cut at line
/// ends, as log shippers leave a fleet's logs (Fluent Bit's S3 output, CloudWatch exports); reused while newer than
/// `input` and of the same part size.
fn write_fleet(input: &Path, parts: &Path) -> Result<()> {
    // Beside the directory, not in it: `normalize` would skip it there with a warning.
    let marker = parts.with_extension("target");
    let fresh =
        fs::metadata(&marker).and_then(|m| Ok(m.modified()? >= fs::metadata(input)?.modified()?)).unwrap_or(false);
    if fresh && fs::read_to_string(&marker).ok().as_deref() == Some(&FLEET_PART_BYTES.to_string()) {
        return Ok(());
    }
    eprintln!("splitting {} into gzip'd parts …", input.display());
    if parts.exists() {
        fs::remove_dir_all(parts).with_context(|| format!("cannot remove {}", parts.display()))?;
    }
    fs::create_dir_all(parts).with_context(|| format!("cannot create {}", parts.display()))?;
    let mut text = std::io::BufReader::with_capacity(
        1 << 20,
        File::open(input).with_context(|| format!("cannot read {}", input.display()))?,
    );
    let mut line = Vec::new();
    let mut part = 0;
    loop {
        let path = parts.join(format!("part-{part:04}.log.gz"));
        let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut gz =
            flate2::write::GzEncoder::new(BufWriter::with_capacity(1 << 20, file), flate2::Compression::new(6));
        let mut written = 0;
        while written < FLEET_PART_BYTES {
            line.clear();
            if std::io::BufRead::read_until(&mut text, b'\n', &mut line)? == 0 {
                break;
            }
            gz.write_all(&line)?;
            written += line.len() as u64;
        }
        gz.finish()?.flush()?;
        if written == 0 {
            // The text ended with the part before: no empty part, which no adapter would recognise.
            fs::remove_file(&path)?;
        }
        if written < FLEET_PART_BYTES {
            break;
        }
        part += 1;
    }
    fs::write(&marker, FLEET_PART_BYTES.to_string())?;
    Ok(())
}

/// Times `normalize` on each of `inputs` cut into a directory of gzip'd parts (see [`write_fleet`]) against the
/// same input as one plain file, in the same rounds: how a fleet's many files compare with one large one.
fn fleet(binary: &Path, dir: &Path, inputs: &[Input], runs: usize, threads: Option<usize>) -> Result<()> {
    let mut table = Vec::new();
    for input in inputs {
        let parts = dir.join(format!("{}-fleet", input.format));
        write_fleet(&input.path, &parts)?;
        let files =
            fs::read_dir(&parts)?.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "gz"));
        let (count, stored) = files.fold((0u64, 0u64), |(n, b), e| (n + 1, b + e.metadata().map_or(0, |m| m.len())));
        let bytes = fs::metadata(&input.path)?.len();
        let out = dir.join(format!("{}-fleet-out", input.format));
        let what = format!("as {count} gzip'd files");
        let normalize = || normalize_command(binary, threads);
        let (t, p, peak) = against_plain(&normalize, dir, input, runs, &what, &out, |command| command.arg(&parts))?;
        let mut row = vec![input.name.to_owned(), count.to_string(), format!("{:.0}", stored as f64 / 1e6)];
        row.extend(timing_cells(bytes, t, p, peak));
        table.push(row);
    }
    println!();
    let headers =
        ["as gzip'd parts", "files", "stored MB", "MB", "median s", "MB/s", "peak RSS MiB", "one file s", "× one file"];
    print_table(&headers, table);
    println!(
        "each log cut into parts of {} MiB of text, gzip -6; one file s: the plain log, timed in the same rounds",
        FLEET_PART_BYTES >> 20
    );
    Ok(())
}

/// Medians of `runs` rounds of a variant of `normalize` (what `variant` makes of a `normalize()` command: its inputs
/// and options), written to `out`, and of `input` normalized plain (into `dir`), timed in the same rounds, in
/// seconds, and the variant's peak memory.
fn against_plain(
    normalize: &dyn Fn() -> Command,
    dir: &Path,
    input: &Input,
    runs: usize,
    what: &str,
    out: &Path,
    variant: impl Fn(&mut Command) -> &mut Command,
) -> Result<(f64, f64, Option<u64>)> {
    let plain_out = dir.join(format!("{}-out", input.format));
    let (mut ours, mut plain, mut peak) = (Vec::new(), Vec::new(), None);
    for run in 0..runs {
        eprintln!("{} {what}, and plain, round {}/{} …", input.name, run + 1, runs);
        let (time, rss) = measure(variant(&mut normalize()).arg("-o").arg(out).arg("--force"))?;
        ours.push(time);
        peak = rss.max(peak);
        plain.push(measure(normalize().arg(&input.path).arg("-o").arg(&plain_out).arg("--force"))?.0);
    }
    Ok((median(ours).as_secs_f64(), median(plain).as_secs_f64(), peak))
}

/// The cells of a row of [`against_plain`]'s figures for an input of `bytes`: MB, median s, MB/s, peak RSS, plain s
/// and the ratio.
fn timing_cells(bytes: u64, t: f64, p: f64, peak: Option<u64>) -> [String; 6] {
    let mb = bytes as f64 / 1e6;
    [
        format!("{mb:.0}"),
        format!("{t:.2}"),
        format!("{:.0}", mb / t),
        mib(peak),
        format!("{p:.2}"),
        format!("{:.2}", t / p),
    ]
}

/// Times `normalize --partition-by date` on each of `inputs` against the plain run, in the same rounds: what writing
/// Hive partitions costs (each table is split as it is written).
fn partitioned(binary: &Path, dir: &Path, inputs: &[Input], runs: usize, threads: Option<usize>) -> Result<()> {
    let mut table = Vec::new();
    for input in inputs {
        let bytes = fs::metadata(&input.path)?.len();
        let out = dir.join(format!("{}-partitioned-out", input.format));
        let normalize = || normalize_command(binary, threads);
        let (t, p, peak) = against_plain(&normalize, dir, input, runs, "with --partition-by date", &out, |command| {
            command.arg(&input.path).args(["--partition-by", "date"])
        })?;
        let partitions = ["requests", "samples", "cache_events"]
            .iter()
            .filter_map(|table| fs::read_dir(out.join(table)).ok())
            .flat_map(|entries| entries.filter_map(Result::ok).map(|e| e.file_name()))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let mut row = vec![input.name.to_owned(), partitions.to_string()];
        row.extend(timing_cells(bytes, t, p, peak));
        table.push(row);
    }
    println!();
    let headers = ["--partition-by date", "partitions", "MB", "median s", "MB/s", "peak RSS MiB", "plain s", "× plain"];
    print_table(&headers, table);
    println!(
        "partitions: directories of all tables, days and rows without a time; plain s: the same input unpartitioned, timed in the same rounds"
    );
    Ok(())
}

/// Prints `table` under `headers`, every column right-aligned to its widest cell.
pub(crate) fn print_table(headers: &[&str], table: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line =
        |cells: Vec<String>| cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect::<Vec<_>>().join("  ");
    println!("{}", line(headers.iter().map(|h| (*h).to_owned()).collect()));
    for row in table {
        println!("{}", line(row));
    }
}

/// Requests of the Mooncake conversation trace in `testdata/`, which the simulations replay.
const CONVERSATION_REQUESTS: f64 = 12_031.0;
/// Requests per second Dynamo's mocker replays (`docs/replay.md`), the anchor for `replay`.
const MOCKER_REQUESTS_PER_S: f64 = 770.0;

/// Times `cache-sim`, `mrc` and `replay` (whole commands, wall time) on the Mooncake conversation trace of
/// `testdata/`, the runs `docs/replay.md` describes, and prints simulated requests per second.
fn simulations(root: &Path, binary: &Path, dir: &Path, runs: usize) -> Result<()> {
    let trace = root.join("testdata/mooncake/fast25/conversation_trace.jsonl.zst");
    let dataset = dir.join("conversation");
    measure(
        Command::new(binary)
            .arg("normalize")
            .arg(&trace)
            .args(["--start", "2024-01-01T00:00:00Z", "--force", "-o"])
            .arg(&dataset),
    )?;
    let config = dir.join("h100x8.toml");
    fs::write(
        &config,
        "[hardware]\nmodel = \"Llama-3.1-8B\"\naccelerator = \"H100\"\n[cluster]\ninstances = 8\nrouting = \"least-loaded\"\n",
    )?;
    let replayed = dir.join("conversation-replay");
    let commands: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "cache-sim, 3 tiers",
            vec![
                "cache-sim".into(),
                dataset.clone().into(),
                "--tier".into(),
                "gpu=500k".into(),
                "--tier".into(),
                "cpu=3M".into(),
                "--tier".into(),
                "disk=20M".into(),
            ],
        ),
        ("mrc, exact", vec!["mrc".into(), dataset.clone().into(), "--exact".into()]),
        (
            "replay, 8 × H100",
            vec![
                "replay".into(),
                dataset.clone().into(),
                "--config".into(),
                config.into(),
                "-o".into(),
                replayed.into(),
                "--force".into(),
            ],
        ),
    ];
    println!();
    println!("{:>20}  {:>8}  {:>14}  {:>12}", "simulation", "median s", "requests/s", "÷ mocker");
    for (name, args) in commands {
        let mut times = Vec::new();
        for _ in 0..runs {
            times.push(measure(Command::new(binary).args(&args))?.0);
        }
        let t = median(times).as_secs_f64();
        let rate = CONVERSATION_REQUESTS / t;
        let versus =
            if name.starts_with("replay") { format!("{:.0}", rate / MOCKER_REQUESTS_PER_S) } else { "-".into() };
        println!("{name:>20}  {t:>8.2}  {rate:>14.0}  {versus:>12}");
    }
    println!("the Mooncake conversation trace ({CONVERSATION_REQUESTS} requests), whole commands including I/O");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_defaults_and_errors() {
        let defaults = BenchOptions::parse(&[]).unwrap();
        assert_eq!(
            (defaults.runs, defaults.log_bytes, defaults.trace_rows, defaults.no_python, defaults.formats),
            (3, 1 << 30, 10_000_000, false, false)
        );
        let formats = BenchOptions::parse(&["--formats"]).unwrap();
        assert_eq!((formats.formats, formats.log_bytes), (true, 256 << 20));
        assert_eq!(BenchOptions::parse(&["--formats", "--log-mb", "64"]).unwrap().log_bytes, 64 << 20);
        let given = BenchOptions::parse(&["--runs", "5", "--log-mb", "256", "--rows", "2000", "--no-python"]).unwrap();
        assert_eq!((given.runs, given.log_bytes, given.trace_rows, given.no_python), (5, 256 << 20, 2000, true));
        assert_eq!(given.threads, None);
        assert_eq!(BenchOptions::parse(&["--threads", "8"]).unwrap().threads, Some(8));
        assert!(BenchOptions::parse(&["--threads", "eight"]).unwrap_err().to_string().contains("whole number"));
        let formats = BenchOptions::parse(&["--formats", "--threads", "8"]).unwrap_err().to_string();
        assert!(formats.starts_with("--threads is for the issue's bench"), "{formats}");
        assert!(BenchOptions::parse(&["--runs", "0"]).unwrap_err().to_string().contains("at least 1"));
        assert!(BenchOptions::parse(&["--runs"]).unwrap_err().to_string().contains("needs a value"));
        assert!(BenchOptions::parse(&["--fast"]).unwrap_err().to_string().starts_with("unknown bench option --fast"));
    }

    #[test]
    fn other_sizes_get_their_own_directory() {
        let bench = Path::new("target/bench");
        let dir = |args: &[&str]| BenchOptions::parse(args).unwrap().dir(bench);
        assert_eq!(dir(&[]), Path::new("target/bench"));
        assert_eq!(dir(&["--log-mb", "1024", "--rows", "10000000", "--runs", "1"]), Path::new("target/bench"));
        assert_eq!(dir(&["--log-mb", "64", "--rows", "500000"]), Path::new("target/bench/log-64mib-rows-500000"));
        // Either size alone moves the run, since every input and output shares the directory.
        assert_eq!(dir(&["--rows", "2000"]), Path::new("target/bench/log-1024mib-rows-2000"));
        assert_eq!(dir(&["--log-mb", "8"]), Path::new("target/bench/log-8mib-rows-10000000"));
        assert_eq!(dir(&["--formats"]), Path::new("target/bench/formats"));
        assert_eq!(dir(&["--formats", "--log-mb", "256"]), Path::new("target/bench/formats"));
        assert_eq!(dir(&["--formats", "--log-mb", "64"]), Path::new("target/bench/formats-64mib"));
    }

    #[test]
    fn medians_take_the_middle_run() {
        let ms = |v: u64| Duration::from_millis(v);
        assert_eq!(median(vec![ms(30), ms(10), ms(20)]), ms(20));
        assert_eq!(median(vec![ms(5)]), ms(5));
    }
}
