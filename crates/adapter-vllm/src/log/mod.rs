//! `vllm-log`: vLLM server and engine text logs, 0.2.7 to 0.33.
//!
//! Two stages, as in every adapter: [`envelope`] and [`line`] turn one line into a typed, borrowing value with pure
//! functions; [`events`] folds those into rows. Statistics lines become `samples` (percentages as fractions, with
//! `instance` naming the engine or process); `Received`/`Added`/`Finished`/`Aborted` lines become one `requests` row
//! per request, joined on the request id (the internal `-<8 hex>` suffix of 0.14+ stripped). Prompts are never
//! copied: when token ids are logged, only their count and chained 16-token block hashes are kept.
//!
//! Decided where the reference is silent: a request without an end line (every V1 request) is written ten minutes
//! of log time after it was first seen, or at the end of the input, with status `unknown`; uvicorn access lines
//! carry no request id and no time, so they are recognised but not joined to requests yet.

mod envelope;
mod events;
mod fingerprint;
mod line;

use std::io::BufRead;

use infertrace_adapter::{
    Adapter, Confidence, Diagnostic, DiagnosticKind, LineReader, ParseContext, ParseError, ParseReport, Sink, utf8_line,
};

use envelope::Envelope;
use events::{Clock, Event, Instances, OpenRequests, SampleSource};
use line::Line;

/// The vLLM text log adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct VllmLog;

impl VllmLog {
    /// Format id.
    pub const ID: &'static str = "vllm-log";
}

impl Adapter for VllmLog {
    fn id(&self) -> &'static str {
        Self::ID
    }

    fn description(&self) -> &'static str {
        "vLLM server/engine text log, 0.2.7-0.33: stats lines to samples, Received/Added/Finished/Aborted to requests"
    }

    fn detect(&self, head: &[u8]) -> Option<Confidence> {
        let text = String::from_utf8_lossy(head);
        let mut records = 0;
        let mut vllm_specific = false;
        for raw in text.lines().take(64) {
            let clean = envelope::strip_ansi(raw);
            if envelope::has_vllm_process_prefix(&clean) {
                records += 1;
                vllm_specific = true;
            }
            let parsed = envelope::parse(&clean);
            if let Envelope::Access { path, .. } = parsed {
                // uvicorn access lines of an OpenAI-compatible server: vLLM's, or another engine's.
                records += usize::from(path.starts_with("/v1/"));
            }
            if let Envelope::Record(record) = parsed {
                records += 1;
                vllm_specific |= fingerprint::is_vllm_file(record.file)
                    || record.message.contains("Avg prompt throughput:")
                    || record.message.starts_with("Received request ")
                    || record.message.contains("vLLM");
            }
        }
        match (records, vllm_specific) {
            (0, _) => None,
            (_, true) => Some(Confidence::High),
            (_, false) => Some(Confidence::Low),
        }
    }

    fn parse(
        &self,
        input: &mut dyn BufRead,
        ctx: &ParseContext<'_>,
        sink: &mut dyn Sink,
    ) -> Result<ParseReport, ParseError> {
        let mut lines = LineReader::new(input);
        let mut clock = Clock::new(ctx);
        let mut requests = OpenRequests::default();
        let mut version = fingerprint::Fingerprint::default();
        let mut instances = Instances::default();
        while let Some((line_no, bytes)) = lines.next_bytes()? {
            let Some(text) = utf8_line(line_no, bytes, sink) else { continue };
            if text.trim_ascii().is_empty() {
                continue;
            }
            let clean = envelope::strip_ansi(text);
            let mut rest: &str = &clean;
            // Records pasted together without a newline are split and handled one after the other.
            loop {
                let envelope = envelope::parse(rest);
                let Envelope::Record(mut record) = envelope else {
                    if rest.len() == clean.len() && !matches!(envelope, Envelope::Access { .. }) {
                        sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::NotARecord, "not a vLLM log record"));
                    }
                    break;
                };
                let glued = envelope::glued_record(record.message);
                let next = glued.map(|at| &record.message[at..]);
                if let Some(at) = glued {
                    record.message = &record.message[..at];
                }
                version.observe(&record);
                let time = clock.instant(&record, line_no, sink);
                if let Some(now) = time {
                    requests.expire(now, line_no, sink)?;
                }
                match line::parse_message(record.message) {
                    Line::Stats(stats) => match time {
                        Some(time) => {
                            let at =
                                SampleSource { source: Self::ID, ctx, process: record.process, line: line_no, time };
                            events::emit_stats(&stats, &at, &mut instances, sink)?;
                        }
                        None => sink.diagnostic(Diagnostic::new(
                            line_no,
                            DiagnosticKind::InvalidValue,
                            "statistics without a usable time were skipped",
                        )),
                    },
                    Line::Received { id, fields } | Line::Details { id, fields } => {
                        requests.apply(Event::Received, id, Some(&fields), time, line_no, ctx, sink)?;
                    }
                    Line::Added { id } => requests.apply(Event::Added, id, None, time, line_no, ctx, sink)?,
                    Line::Finished { id } => requests.apply(Event::Finished, id, None, time, line_no, ctx, sink)?,
                    Line::Aborted { ids } => {
                        for id in ids {
                            requests.apply(Event::Aborted, id, None, time, line_no, ctx, sink)?;
                        }
                    }
                    Line::Malformed { what } => {
                        sink.diagnostic(Diagnostic::new(line_no, DiagnosticKind::MalformedRecord, what));
                    }
                    Line::Other => {}
                }
                match next {
                    Some(next) => rest = next,
                    None => break,
                }
            }
        }
        requests.finish(sink)?;
        Ok(ParseReport {
            format_version: version.version(),
            clock_domain: clock.clock_domain(),
            year: clock.year(),
            lines: lines.lines_read(),
            details: Default::default(),
        })
    }
}
