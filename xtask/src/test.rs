//! `cargo xtask test`: the whole test suite on a fresh machine.
//!
//! The tests need more than the Rust toolchain: Python packages (pyarrow for the interop and metrics checks,
//! xxhash for the benchmark baseline's check, DuckDB and Polars for the partitioned-dataset test, AIPerf for the
//! check of `export`'s files by AIPerf's own loaders) and headless
//! Chromium (the report's browser tests). This installs what is missing, then runs every test binary, reporting
//! every failure rather than stopping at the first failing binary.
//!
//! - The Python packages, pinned in [`PYTHON_PACKAGES`], go to `target/python/` (`pip install --target`), never
//!   into the machine's Python: that works where the system Python is externally managed (PEP 668), and is put
//!   first on the tests' `PYTHONPATH`. They are installed again only when the pins change.
//! - Chromium comes from apt, as root or through password-less `sudo`. Where neither is possible the browser tests
//!   are skipped, each named on one line with the command that would run them; under `CI` that is an error.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// The Python packages the tests import, pinned.
const PYTHON_PACKAGES: &[&str] =
    &["pyarrow==26.0.1", "duckdb==2.0.1", "polars==2.1.0", "xxhash==4.1.0", "aiperf==0.13.0"];

/// The Debian packages of the browser tests: Chromium and a font to render text with.
const APT_PACKAGES: &[&str] = &["chromium", "fonts-dejavu-core"];

/// Names Chromium goes by on `PATH` (as `crates/report/tests/browser.rs` looks for it).
const CHROMIUM_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome"];

/// Installs what the tests need and runs `cargo test --workspace --no-fail-fast`, passing `args` on to it.
pub(crate) fn test(root: &Path, args: &[String]) -> Result<()> {
    let ci = env::var_os("CI").is_some_and(|v| !v.is_empty());
    let python = python_packages(root, ci)?;
    let browser = chromium(ci)?;
    let mut cargo = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.current_dir(root).args(["test", "--workspace", "--no-fail-fast"]).args(args);
    let mut path = OsString::from(&python);
    if let Some(existing) = env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(existing);
    }
    cargo.env("PYTHONPATH", path);
    if !browser {
        cargo.env("INFERTRACE_SKIP_BROWSER_TESTS", "1");
    }
    eprintln!("running: cargo test --workspace --no-fail-fast {}", args.join(" "));
    let status = cargo.status().context("cannot run cargo test")?;
    if !browser {
        skipped_browser_tests(root);
    }
    if !status.success() {
        bail!("some tests failed (each failing test is listed above, under `failures:`)");
    }
    Ok(())
}

/// Installs [`PYTHON_PACKAGES`] into `target/python/` unless the pins there are current, and returns that
/// directory.
fn python_packages(root: &Path, ci: bool) -> Result<PathBuf> {
    let dir = root.join("target/python");
    let stamp = dir.join(".pins");
    let pins = PYTHON_PACKAGES.join("\n");
    if fs::read_to_string(&stamp).is_ok_and(|s| s == pins) {
        return Ok(dir);
    }
    eprintln!("installing the tests' Python packages into target/python/: {}", PYTHON_PACKAGES.join(" "));
    // A partly installed directory from an interrupted run would mix versions.
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-script-location"])
        .arg("--target")
        .arg(&dir)
        .args(PYTHON_PACKAGES)
        .status();
    match status {
        Ok(s) if s.success() => {
            fs::write(&stamp, pins).with_context(|| format!("cannot write {}", stamp.display()))?;
        }
        _ if ci => bail!("cannot install the tests' Python packages with pip; CI needs them"),
        _ => eprintln!(
            "WARNING: cannot install the tests' Python packages (python3 -m pip install --target target/python {}); \
             the tests that need them say `skipped`",
            PYTHON_PACKAGES.join(" ")
        ),
    }
    Ok(dir)
}

/// Whether Chromium is there for the browser tests, installing it with apt when it is missing and this may.
fn chromium(ci: bool) -> Result<bool> {
    if has_chromium() {
        return Ok(true);
    }
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let sudo = !root && Command::new("sudo").args(["-n", "true"]).output().is_ok_and(|o| o.status.success());
    if root || sudo {
        eprintln!("installing {} with apt-get for the report's browser tests", APT_PACKAGES.join(" "));
        let apt = |args: &[&str]| {
            let mut command = if sudo { Command::new("sudo") } else { Command::new("env") };
            if sudo {
                command.arg("-n").arg("env");
            }
            command.arg("DEBIAN_FRONTEND=noninteractive").arg("apt-get").args(args);
            command.status().is_ok_and(|s| s.success())
        };
        let installed = apt(&["update", "-qq"])
            && apt(&[&["install", "-y", "-qq", "--no-install-recommends"], APT_PACKAGES].concat());
        if installed && has_chromium() {
            return Ok(true);
        }
    }
    if ci {
        bail!("no Chromium for the report's browser tests, and it cannot be installed: apt-get install chromium");
    }
    Ok(false)
}

fn has_chromium() -> bool {
    if env::var_os("INFERTRACE_CHROMIUM").is_some_and(|p| Path::new(&p).is_file()) {
        return true;
    }
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path).any(|dir| CHROMIUM_NAMES.iter().any(|name| dir.join(name).is_file()))
}

/// Names each browser test that was skipped, on a line of its own, with the command that runs them.
fn skipped_browser_tests(root: &Path) {
    let listed = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(root)
        .args(["test", "--quiet", "-p", "infertrace-report", "--test", "browser", "--", "--list"])
        .output();
    let names: Vec<String> = listed
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.strip_suffix(": test"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for name in &names {
        eprintln!("SKIPPED: infertrace-report browser::{name} (no Chromium)");
    }
    eprintln!(
        "SKIPPED {} browser test(s): no Chromium, and no root or password-less sudo to install it. To run them: \
         sudo apt-get install chromium fonts-dejavu-core && cargo xtask test",
        names.len()
    );
}
