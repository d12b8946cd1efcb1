//! The vLLM release a log comes from, told by the `file:lineno` of its statistics records (reference §1.6: the
//! line of the logging call moves between releases). Patched forks print other numbers and get the envelope's
//! generation instead.

use super::envelope::Record;

/// `file:lineno` of the statistics record → releases that log it there (checked wheels; `–` spans releases).
const STATS_LINES: &[(&str, u32, &str)] = &[
    ("llm_engine.py", 706, "0.2.7"),
    ("metrics.py", 213, "0.3.3"),
    ("metrics.py", 218, "0.4.0.post1"),
    ("metrics.py", 229, "0.4.1"),
    ("metrics.py", 334, "0.4.2"),
    ("metrics.py", 341, "0.4.3–0.5.0.post1"),
    ("metrics.py", 396, "0.5.3"),
    ("metrics.py", 351, "0.5.5–0.6.0"),
    ("metrics.py", 345, "0.6.3"),
    ("metrics.py", 467, "0.6.6.post1"),
    ("metrics.py", 453, "0.7.0"),
    ("metrics.py", 455, "0.7.3"),
    ("loggers.py", 78, "0.7.3"),
    ("metrics.py", 481, "0.8.0"),
    ("loggers.py", 80, "0.8.0"),
    ("loggers.py", 87, "0.8.2–0.8.4"),
    ("metrics.py", 486, "0.8.5–0.9.0"),
    ("loggers.py", 111, "0.8.5"),
    ("loggers.py", 116, "0.9.0"),
    ("metrics.py", 417, "0.9.2"),
    ("loggers.py", 118, "0.9.2"),
    ("metrics.py", 386, "0.10.0–0.10.1.1"),
    ("loggers.py", 122, "0.10.0"),
    ("loggers.py", 123, "0.10.1.1–0.10.2"),
    ("metrics.py", 398, "0.10.2–0.11.0"),
    ("loggers.py", 127, "0.11.0"),
    ("loggers.py", 236, "0.11.1–0.12.0"),
    ("loggers.py", 248, "0.13.0"),
    ("loggers.py", 257, "0.14.0–0.15.1"),
    ("loggers.py", 259, "0.16.0–0.19.1"),
    ("loggers.py", 271, "0.20.2–0.23.0"),
    ("loggers.py", 273, "0.24.0–0.25.1"),
    ("loggers.py", 310, "0.26.0–0.29.0"),
    ("loggers.py", 315, "0.30.0"),
    ("loggers.py", 320, "0.31.0"),
    ("loggers.py", 335, "0.32.0–0.33.0"),
];

/// Files only vLLM logs from, for detection.
const VLLM_FILES: &[&str] = &[
    "llm_engine.py",
    "async_llm_engine.py",
    "async_llm.py",
    "loggers.py",
    "metrics.py",
    "api_server.py",
    "logger.py",
    "request_logger.py",
    "gpu_model_runner.py",
    "gpu_worker.py",
    "core.py",
    "scheduler.py",
];

/// Whether `file` (a basename, or a DEBUG relative path) is one vLLM logs from.
pub(crate) fn is_vllm_file(file: &str) -> bool {
    let base = file.rsplit('/').next().unwrap_or(file);
    VLLM_FILES.contains(&base)
}

/// What the records seen so far say about the release.
#[derive(Debug, Default)]
pub(crate) struct Fingerprint {
    release: Option<&'static str>,
    bracketed: bool,
    unbracketed: bool,
}

impl Fingerprint {
    /// Takes note of one record.
    pub(crate) fn observe(&mut self, record: &Record<'_>) {
        if self.release.is_none() {
            self.release = STATS_LINES
                .iter()
                .find(|(file, line, _)| *file == record.file && *line == record.lineno)
                .map(|(_, _, release)| *release)
                .filter(|_| record.message.contains("throughput:"));
        }
        // `[file:line]` brackets arrived in 0.8.0.
        if record.bracketed {
            self.bracketed = true;
        } else {
            self.unbracketed = true;
        }
    }

    /// The release, when a fingerprint matched; otherwise the envelope generation.
    pub(crate) fn version(&self) -> Option<String> {
        match (self.release, self.bracketed, self.unbracketed) {
            (Some(release), _, _) => Some(release.to_owned()),
            (None, true, false) => Some("0.8.0+".to_owned()),
            (None, false, true) => Some("0.2.7–0.7.3".to_owned()),
            _ => None,
        }
    }
}
