//! SIGKILL at random points of `normalize` leaves the previous dataset or the complete new one, never a part.
//!
//! The binary is killed after seeded random delays spread over a whole run, for a fresh output and for `--force`
//! over an existing one; after every kill the output is checked: absent (fresh), the previous dataset (force), or
//! the complete new one. A replacement killed between its two renames leaves the previous dataset aside, which the
//! next run puts back: that state counts as "previous" once the next run has restored it.
#![allow(clippy::print_stderr)]

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infertrace_schema::Dataset;

/// Mooncake lines: one request row each.
fn write_input(path: &Path, lines: u64) {
    let text: String = (0..lines)
        .map(|i| {
            format!(
                "{{\"timestamp\": {i}, \"input_length\": {}, \"output_length\": 10, \"hash_ids\": [{}, {}]}}\n",
                i % 4000 + 16,
                i % 7,
                i
            )
        })
        .collect();
    fs::write(path, text).unwrap();
}

fn command(input: &Path, output: &Path, force: bool) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_infertrace"));
    command.args(["normalize", input.to_str().unwrap(), "-o", output.to_str().unwrap()]);
    if force {
        command.arg("--force");
    }
    command.stdout(Stdio::null()).stderr(Stdio::null());
    command
}

/// The requests of the complete dataset at `dir`: opens every table and checks the manifest's counts against them.
fn complete_rows(dir: &Path) -> u64 {
    let dataset = Dataset::open(dir).unwrap_or_else(|e| panic!("{} is not a complete dataset: {e}", dir.display()));
    let rows = dataset.manifest.rows;
    assert_eq!(rows.requests, dataset.requests.num_rows() as u64);
    assert_eq!(rows.samples, dataset.samples.num_rows() as u64);
    assert_eq!(rows.cache_events, dataset.cache_events.num_rows() as u64);
    rows.requests
}

/// A tiny deterministic generator (SplitMix64): the delays are the same on every run.
struct Delays(u64);

impl Delays {
    fn next(&mut self, max: Duration) -> Duration {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        max.mul_f64((z >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// Starts a run and kills it after `delay`; returns whether it had already finished (successfully).
fn run_and_kill(mut command: Command, delay: Duration) -> bool {
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + delay;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "an uninterrupted run succeeds");
            return true;
        }
        if Instant::now() >= deadline {
            child.kill().unwrap(); // SIGKILL on Unix.
            child.wait().unwrap();
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn sigkill_at_random_points_leaves_the_previous_or_the_complete_new_dataset() {
    const NEW: u64 = 40_000;
    const PREVIOUS: u64 = 5;
    let dir = tempfile::tempdir().unwrap();
    let (input, previous_input) = (dir.path().join("new.jsonl"), dir.path().join("previous.jsonl"));
    write_input(&input, NEW);
    write_input(&previous_input, PREVIOUS);
    let out = dir.path().join("out");

    // One whole run sets the range of the delays: up to 20 % past it, so that some runs complete.
    let start = Instant::now();
    assert!(command(&input, &out, false).status().unwrap().success());
    let whole = start.elapsed();
    assert_eq!(complete_rows(&out), NEW);
    let max = whole.mul_f64(1.2);
    let mut delays = Delays(0x5eed);
    let (mut killed, mut finished) = (0, 0);

    // A fresh output: absent, or complete.
    for _ in 0..20 {
        fs::remove_dir_all(&out).ok();
        if run_and_kill(command(&input, &out, false), delays.next(max)) {
            finished += 1;
        } else {
            killed += 1;
        }
        if out.exists() {
            assert_eq!(complete_rows(&out), NEW);
        }
    }

    // Over an existing output with --force: the previous dataset, or the complete new one.
    for _ in 0..20 {
        fs::remove_dir_all(&out).ok();
        assert!(command(&previous_input, &out, true).status().unwrap().success());
        if run_and_kill(command(&input, &out, true), delays.next(max)) {
            finished += 1;
        } else {
            killed += 1;
        }
        let aside = dir.path().join(".out.infertrace-old");
        if !out.exists() {
            // Killed between the two renames: the previous dataset is aside, complete, and the next run (even one
            // that refuses to replace) puts it back.
            assert_eq!(complete_rows(&aside), PREVIOUS);
            assert!(!command(&input, &out, false).status().unwrap().success());
        }
        match complete_rows(&out) {
            PREVIOUS | NEW => {}
            other => panic!("{other} rows: neither the previous nor the new dataset"),
        }
    }
    assert!(killed >= 20, "{killed} of 40 runs were interrupted (a run takes {whole:?})");
    eprintln!("{killed} runs killed, {finished} finished; a whole run takes {whole:?}");
}

#[test]
fn an_existing_output_is_not_replaced_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let (input, out) = (dir.path().join("in.jsonl"), dir.path().join("out"));
    write_input(&input, 3);
    assert!(command(&input, &out, false).status().unwrap().success());
    let before = fs::read(out.join("manifest.json")).unwrap();
    write_input(&input, 4);
    let output = command(&input, &out, false).stderr(Stdio::piped()).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!("error: output {} already exists; pass --force to replace it\n", out.display())
    );
    assert_eq!(fs::read(out.join("manifest.json")).unwrap(), before);
    assert!(command(&input, &out, true).status().unwrap().success());
    assert_eq!(complete_rows(&out), 4);
}
