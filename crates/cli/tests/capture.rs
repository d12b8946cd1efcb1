//! `infertrace capture` against real HTTP servers on loopback serving changing scrapes (made by the generators in
//! the shapes of vLLM, SGLang, Dynamo, dcgm-exporter and node_exporter), and a log appended to and rotated while it
//! is followed.
#![allow(clippy::print_stderr)]

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::array::{Array as _, AsArray};
use arrow::datatypes::Int64Type;
use infertrace_schema::{CacheEvent, Dataset, EngineSample, RequestRow, read_manifest, read_table};

/// The body of scrape `k` of an endpoint, without the time line the generators put first (a server writes none).
type Body = Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync>;

fn without_time_line(text: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8(text).unwrap();
    text.lines().filter(|l| !l.starts_with("20")).map(|l| format!("{l}\n")).collect::<String>().into_bytes()
}

/// The five exporters, each with the canonical samples one scrape of it holds.
fn exporters() -> Vec<(&'static str, Body, u64)> {
    let vllm: Body = Arc::new(|k| {
        let mut out = Vec::new();
        infertrace_adapter_vllm::generate::write_metrics(&mut out, 1, 2, k).unwrap();
        without_time_line(out)
    });
    let sglang: Body = Arc::new(|k| {
        let mut out = Vec::new();
        infertrace_adapter_sglang::generate::write_metrics(&mut out, 1, 2, k).unwrap();
        without_time_line(out)
    });
    let dynamo: Body = Arc::new(|k| {
        let mut out = Vec::new();
        infertrace_adapter_dynamo::generate::metrics::write_metrics(&mut out, 1, 2, k).unwrap();
        without_time_line(out)
    });
    let dcgm: Body = Arc::new(|k| {
        let mut out = Vec::new();
        infertrace_adapter_telemetry::generate::write_dcgm(&mut out, k, 1, 2, 3).unwrap();
        without_time_line(out)
    });
    let node: Body = Arc::new(|k| {
        let mut out = Vec::new();
        infertrace_adapter_telemetry::generate::write_node(&mut out, k, 1, 4, 3).unwrap();
        without_time_line(out)
    });
    let samples = |generate: &dyn Fn(&mut Vec<u8>) -> u64| generate(&mut Vec::new());
    vec![
        (
            "vllm-metrics",
            vllm,
            samples(&|o| infertrace_adapter_vllm::generate::write_metrics(o, 1, 2, 0).unwrap().samples),
        ),
        (
            "sglang-metrics",
            sglang,
            samples(&|o| infertrace_adapter_sglang::generate::write_metrics(o, 1, 2, 0).unwrap().samples),
        ),
        (
            "dynamo-metrics",
            dynamo,
            samples(&|o| infertrace_adapter_dynamo::generate::metrics::write_metrics(o, 1, 2, 0).unwrap().samples),
        ),
        (
            "dcgm-exporter",
            dcgm,
            samples(&|o| infertrace_adapter_telemetry::generate::write_dcgm(o, 0, 1, 2, 3).unwrap().samples),
        ),
        (
            "node-exporter",
            node,
            samples(&|o| infertrace_adapter_telemetry::generate::write_node(o, 0, 1, 4, 3).unwrap().samples),
        ),
    ]
}

/// An HTTP server on loopback answering every GET with the next body; `served` counts the bodies written whole.
struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(listener: TcpListener, body: Body, served: Arc<AtomicU64>) -> Self {
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &body, &served),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { stop, thread: Some(thread) }
    }

    /// Stops accepting and closes the listening socket.
    fn shut(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
    }
}

fn answer(stream: TcpStream, body: &Body, served: &AtomicU64) {
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    // The request line and headers, up to the blank line.
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    let k = served.load(Ordering::SeqCst);
    let body = body(k);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = &stream;
    if stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body)).and_then(|()| stream.flush()).is_ok() {
        served.fetch_add(1, Ordering::SeqCst);
    }
}

fn loopback() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").unwrap()
}

fn capture(args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .arg("capture")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn interrupt(child: &Child) {
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

/// Waits for `child` to exit, at most a minute.
fn finished(mut child: Child) -> (i32, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            return (status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned());
        }
        assert!(Instant::now() < deadline, "capture did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `check` holds, at most 20 s.
fn wait_for(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Mooncake trace line whose input length names it.
fn trace_line(i: u64) -> String {
    format!(
        "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": 7, \"hash_ids\": [{i}]}}\n",
        i * 100,
        1000 + i
    )
}

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// Every Parquet file under the dataset's tables.
fn parts(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for table in ["requests", "samples", "cache_events"] {
        let Ok(partitions) = std::fs::read_dir(dir.join(table)) else { continue };
        for partition in partitions {
            for file in std::fs::read_dir(partition.unwrap().path()).unwrap() {
                found.push(file.unwrap().path());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_sample_and_request_arrives_once_and_sigint_finishes_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let mut servers = Vec::new();
    let mut args: Vec<String> = Vec::new();
    for (format, body, per_scrape) in exporters() {
        let listener = loopback();
        let url = format!("http://127.0.0.1:{}/metrics", listener.local_addr().unwrap().port());
        let served = Arc::new(AtomicU64::new(0));
        // Detected from the first scrape, except SGLang's, given; vLLM's named as a pod would be.
        let (arg, path) = match format {
            "sglang-metrics" => (format!("sglang-metrics={url}"), url.clone()),
            "vllm-metrics" => (format!("pod-a@{url}"), format!("pod-a@{url}")),
            _ => (url.clone(), url.clone()),
        };
        servers.push((format, path, served.clone(), per_scrape, Server::start(listener, body, served)));
        args.push("--scrape".into());
        args.push(arg);
    }
    let out = dir.path().join("live");
    args.extend(["--follow".into(), format!("mooncake={}", log.display()), "--from-start".into()]);
    args.extend(["--interval", "100ms", "--part-every", "300ms", "-o"].map(String::from));
    args.push(out.display().to_string());
    let child = capture(&args);

    // 60 trace lines, 30 before a rotation (renamed away, a new file created) and 30 after.
    let lines = 60;
    for i in 0..lines {
        if i == lines / 2 {
            std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
        }
        append(&log, &trace_line(i));
        std::thread::sleep(Duration::from_millis(15));
    }
    // A reader sees complete parts while the capture runs.
    wait_for("two parts", || read_manifest(&out).is_ok_and(|m| m.capture.is_some_and(|c| c.parts >= 2)));
    let live = Dataset::open(&out).unwrap();
    assert!(!live.manifest.capture.unwrap().complete);
    assert_eq!(live.samples.num_rows() as u64, live.manifest.rows.samples);
    wait_for("ten scrapes of each", || servers.iter().all(|s| s.2.load(Ordering::SeqCst) >= 10));
    interrupt(&child);
    let (code, stderr) = finished(child);
    assert_eq!(code, 0, "{stderr}");
    let served: Vec<(&str, String, u64, u64)> = servers
        .into_iter()
        .map(|(f, url, n, per, server)| {
            server.shut();
            (f, url, n.load(Ordering::SeqCst), per)
        })
        .collect();

    let dataset = Dataset::open(&out).unwrap();
    let manifest = &dataset.manifest;
    assert!(manifest.capture.unwrap().complete, "{manifest:?}");
    assert!(manifest.capture.unwrap().parts >= 3);
    // The followed file is recorded as `normalize` records paths: never absolute.
    assert!(manifest.inputs.iter().any(|i| i.path.ends_with("app.log")));
    assert!(manifest.inputs.iter().all(|i| !i.path.starts_with('/')), "{:?}", manifest.inputs);
    // Every scrape served became exactly its samples, in its source's format.
    for (format, url, scrapes, per_scrape) in &served {
        let input = manifest.inputs.iter().find(|i| &i.path == url).unwrap();
        assert_eq!(input.format, *format);
        assert_eq!(input.records.samples, scrapes * per_scrape, "{format}: {scrapes} scrapes of {per_scrape}");
        assert_eq!(input.diagnostics.total, 0, "{format}: {:?}", input.diagnostics);
    }
    let sources: Vec<String> = {
        let column =
            arrow::compute::cast(dataset.samples.column_by_name("source").unwrap(), &arrow::datatypes::DataType::Utf8)
                .unwrap();
        column.as_string::<i32>().iter().map(|s| s.unwrap().to_owned()).collect()
    };
    for (format, _, scrapes, per_scrape) in &served {
        assert_eq!(sources.iter().filter(|s| s == format).count() as u64, scrapes * per_scrape, "{format}");
    }
    assert_eq!(dataset.samples.num_rows() as u64, manifest.rows.samples);
    // The named source's instances carry its name: `pod-a engine-0`, `pod-a engine-1`.
    let instances: BTreeSet<String> = {
        let column = dataset.samples.column_by_name("instance").unwrap();
        let column = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8).unwrap();
        let column = column.as_string::<i32>();
        (0..sources.len()).filter(|&i| sources[i] == "vllm-metrics").map(|i| column.value(i).to_owned()).collect()
    };
    assert_eq!(instances, BTreeSet::from(["pod-a engine-0".to_owned(), "pod-a engine-1".to_owned()]));
    // Every appended line, across the rotation, is one request.
    let inputs: Vec<i64> = {
        let column = dataset.requests.column_by_name("input_tokens").unwrap();
        let column = arrow::compute::cast(column, &arrow::datatypes::DataType::Int64).unwrap();
        column.as_primitive::<Int64Type>().values().to_vec()
    };
    assert_eq!(inputs.len() as u64, lines);
    assert_eq!(inputs.iter().copied().collect::<BTreeSet<_>>(), (1000..1000 + lines as i64).collect::<BTreeSet<_>>());
    // The parts are what every command reads.
    let metrics =
        Command::new(env!("CARGO_BIN_EXE_infertrace")).args(["metrics", "--json"]).arg(&out).output().unwrap();
    assert!(metrics.status.success(), "{}", String::from_utf8_lossy(&metrics.stderr));
    let json: serde_json::Value = serde_json::from_slice(&metrics.stdout).unwrap();
    assert_eq!(json["overall"]["requests"], lines);
    assert!(json["energy"]["instances"].as_array().is_some_and(|i| i.len() == 3), "two GPUs and a host's CPUs");
}

#[test]
fn a_server_that_goes_away_and_comes_back_is_a_diagnostic_not_an_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (_, body, per_scrape) = exporters().remove(3);
    let listener = loopback();
    let address = listener.local_addr().unwrap();
    let served = Arc::new(AtomicU64::new(0));
    let server = Server::start(listener, body.clone(), served.clone());
    let out = dir.path().join("live");
    let url = format!("http://{address}/metrics");
    let child = capture(&[
        "--scrape".into(),
        url.clone(),
        "--interval".into(),
        "100ms".into(),
        "--part-every".into(),
        "200ms".into(),
        "-o".into(),
        out.display().to_string(),
    ]);
    wait_for("five scrapes", || served.load(Ordering::SeqCst) >= 5);
    server.shut();
    // Down for at least three scrape times.
    std::thread::sleep(Duration::from_millis(500));
    let server = Server::start(TcpListener::bind(address).unwrap(), body, served.clone());
    let before = served.load(Ordering::SeqCst);
    wait_for("five more scrapes", || served.load(Ordering::SeqCst) >= before + 5);
    interrupt(&child);
    let (code, stderr) = finished(child);
    server.shut();
    assert_eq!(code, 0, "{stderr}");
    let manifest = read_manifest(&out).unwrap();
    let input = &manifest.inputs[0];
    assert!(manifest.capture.unwrap().complete);
    let failed = input.diagnostics.by_kind.get("source-unavailable").map_or(0, |k| k.count);
    assert!(failed >= 3, "{:?}", input.diagnostics);
    assert_eq!(input.diagnostics.total, failed);
    assert_eq!(input.records.samples, served.load(Ordering::SeqCst) * per_scrape);
    assert!(stderr.contains("source-unavailable"), "{stderr}");
}

#[test]
fn sigkill_at_random_points_leaves_only_readable_parts() {
    // Kill points from a fixed seed: the same test every run.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (_, body, _) = exporters().remove(0);
    let listener = loopback();
    let url = format!("http://127.0.0.1:{}/metrics", listener.local_addr().unwrap().port());
    let server = Server::start(listener, body, Arc::new(AtomicU64::new(0)));
    for round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        std::fs::write(&log, "").unwrap();
        let out = dir.path().join("live");
        let mut child = capture(&[
            "--scrape".into(),
            url.clone(),
            "--follow".into(),
            format!("mooncake={}", log.display()),
            "--interval".into(),
            "50ms".into(),
            "--part-every".into(),
            "100ms".into(),
            "-o".into(),
            out.display().to_string(),
        ]);
        let until = Instant::now() + Duration::from_millis(300 + next() % 1700);
        let mut i = 0;
        while Instant::now() < until {
            append(&log, &trace_line(i));
            i += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Every part in place reads, and so does the dataset as a whole, whatever the kill interrupted.
        for part in parts(&out) {
            assert!(part.extension().is_some_and(|e| e == "parquet"), "round {round}: {}", part.display());
        }
        let manifest = read_manifest(&out).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(!manifest.capture.unwrap().complete);
        read_table::<RequestRow>(&out).unwrap_or_else(|e| panic!("round {round}: {e}"));
        read_table::<EngineSample>(&out).unwrap_or_else(|e| panic!("round {round}: {e}"));
        read_table::<CacheEvent>(&out).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let metrics =
            Command::new(env!("CARGO_BIN_EXE_infertrace")).args(["metrics", "--json"]).arg(&out).output().unwrap();
        assert!(metrics.status.success(), "round {round}: {}", String::from_utf8_lossy(&metrics.stderr));
        // A new capture into the same place starts clean with --force.
        eprintln!("round {round}: {} parts after {i} lines", parts(&out).len());
    }
    server.shut();
}

#[test]
fn a_salted_capture_keys_hashes_as_normalize_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trace.jsonl");
    let text: String = (0..5).map(trace_line).collect();
    std::fs::write(&log, &text).unwrap();
    let live = dir.path().join("live");
    let follow = format!("mooncake={}", log.display());
    let args = ["--follow", &follow, "--from-start", "--duration", "1500ms", "--hash-salt", "tenant-7", "-o"];
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    args.push(live.display().to_string());
    let (code, stderr) = finished(capture(&args));
    assert_eq!(code, 0, "{stderr}");
    let normalized = dir.path().join("normalized");
    let output = Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["normalize", "--hash-salt", "tenant-7", "-o"])
        .arg(&normalized)
        .arg(&log)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let hashes = |dir: &Path| {
        let requests = read_table::<RequestRow>(dir).unwrap();
        let column = requests.column_by_name("prefix_hashes").unwrap();
        let list = column.as_list::<i32>();
        (0..list.len())
            .map(|i| arrow::compute::cast(&list.value(i), &arrow::datatypes::DataType::UInt64).unwrap())
            .map(|v| v.as_primitive::<arrow::datatypes::UInt64Type>().values().to_vec())
            .collect::<Vec<Vec<u64>>>()
    };
    let (captured, salted) = (hashes(&live), hashes(&normalized));
    assert_eq!(captured.len(), 5);
    assert_eq!(captured, salted);
    // Unsalted, the first block hashes differ.
    let plain = dir.path().join("plain");
    common_normalize(&log, &plain);
    assert!(hashes(&plain).iter().zip(&captured).all(|(a, b)| a != b));
    let manifest = read_manifest(&live).unwrap();
    assert_eq!(manifest.hash_salt, Some(infertrace_schema::HashSalt::Keyed));
}

fn common_normalize(input: &Path, output: &Path) {
    let status = Command::new(env!("CARGO_BIN_EXE_infertrace"))
        .args(["normalize", "-o"])
        .arg(output)
        .arg(input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}
