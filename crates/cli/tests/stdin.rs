//! `-` reads standard input: to its end, or to Ctrl-C while the writer still holds the pipe open (following a live
//! log), and a SIGKILL leaves no dataset at the output path.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use arrow::array::AsArray;
use arrow::datatypes::UInt32Type;
use infertrace_schema::{Dataset, request};

/// Three Mooncake lines: input lengths 10, 20 and 30 tokens, one block each.
const LINES: &str = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n\
                     {\"timestamp\": 100, \"input_length\": 20, \"output_length\": 5, \"hash_ids\": [2]}\n\
                     {\"timestamp\": 200, \"input_length\": 30, \"output_length\": 5, \"hash_ids\": [3]}\n";

fn spawn(output: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["normalize", "-", "--format", "mooncake", "-o", output.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// Writes `LINES` and waits until the binary says it reads standard input (its Ctrl-C handler is then in place).
fn feed(child: &mut Child) -> ChildStdin {
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(LINES.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("reading standard input"), "{line}");
    // The rest of stderr is drained on a thread, so the binary never blocks writing its summary.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    stdin
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill").args([name, &child.id().to_string()]).status().unwrap();
    assert!(sent.success());
}

fn input_tokens(dir: &Path) -> Vec<u32> {
    let dataset = Dataset::open(dir).unwrap();
    assert_eq!(dataset.manifest.inputs.len(), 1);
    assert_eq!(dataset.manifest.inputs[0].path, "-");
    assert_eq!(dataset.manifest.inputs[0].format, "mooncake");
    let column = dataset.requests.column_by_name(request::INPUT_TOKENS).unwrap();
    column.as_primitive::<UInt32Type>().iter().map(Option::unwrap).collect()
}

#[test]
fn the_end_of_input_finishes_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("ds");
    let mut child = spawn(&output);
    drop(feed(&mut child));
    assert!(child.wait().unwrap().success());
    assert_eq!(input_tokens(&output), [10, 20, 30]);
}

#[test]
fn ctrl_c_while_the_log_is_still_open_finishes_the_dataset_with_the_rows_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("ds");
    let mut child = spawn(&output);
    // Held open, as `kubectl logs -f` holds it: the input never ends by itself.
    let stdin = feed(&mut child);
    std::thread::sleep(std::time::Duration::from_millis(300));
    signal(&child, "-INT");
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(status.success(), "{status}");
    assert_eq!(input_tokens(&output), [10, 20, 30]);
}

#[test]
fn sigkill_leaves_no_dataset_and_the_next_run_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("ds");
    let mut child = spawn(&output);
    let stdin = feed(&mut child);
    signal(&child, "-KILL");
    child.wait().unwrap();
    drop(stdin);
    assert!(!output.exists(), "a killed run left something at the output path");
    let mut child = spawn(&output);
    drop(feed(&mut child));
    assert!(child.wait().unwrap().success());
    assert_eq!(input_tokens(&output), [10, 20, 30]);
}

#[test]
fn standard_input_needs_a_format_and_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("ds");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_infertrace"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("the binary runs");
        assert!(!out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let o = output.to_str().unwrap();
    assert!(run(&["normalize", "-", "-o", o]).contains("reading standard input (-) needs --format"));
    assert!(
        run(&["normalize", "-", "-", "--format", "mooncake", "-o", o]).contains("standard input (-) is given twice")
    );
    assert!(!output.exists());
}
