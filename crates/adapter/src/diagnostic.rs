//! Per-line diagnostics: what an adapter could not use, and why, without the line's content.

use std::fmt;

/// What kind of problem a line had. The kebab-case name is what the manifest counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// The line is not valid UTF-8.
    InvalidUtf8,
    /// The line is not valid JSON, or not the JSON shape the format has.
    MalformedJson,
    /// A CSV record has the wrong number of fields or cannot be read.
    MalformedCsv,
    /// A field the row needs is absent.
    MissingField,
    /// A field is present but its value is unusable (wrong type, out of range, unparsable time).
    InvalidValue,
    /// The line matches nothing this format writes.
    UnrecognizedLine,
    /// The line is not a record of this format at all (a comment, a traceback, another program's output).
    NotARecord,
    /// The line is a record of a kind this format writes, but cut short or of an unknown variant.
    MalformedRecord,
    /// The row was kept, but its fields contradict each other or the format's rules.
    Inconsistent,
    /// The line is longer than the line length limit; it was skipped up to its newline without being read whole.
    LineTooLong,
    /// A live source could not be read for a while (a scrape failed, a followed file was missing); what it held
    /// meanwhile is lost. The line is where its next text would have started.
    SourceUnavailable,
}

impl DiagnosticKind {
    /// The stable name counted in the manifest.
    pub const fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::InvalidUtf8 => "invalid-utf8",
            DiagnosticKind::MalformedJson => "malformed-json",
            DiagnosticKind::MalformedCsv => "malformed-csv",
            DiagnosticKind::MissingField => "missing-field",
            DiagnosticKind::InvalidValue => "invalid-value",
            DiagnosticKind::UnrecognizedLine => "unrecognized-line",
            DiagnosticKind::NotARecord => "not-a-record",
            DiagnosticKind::MalformedRecord => "malformed-record",
            DiagnosticKind::Inconsistent => "inconsistent",
            DiagnosticKind::LineTooLong => "line-too-long",
            DiagnosticKind::SourceUnavailable => "source-unavailable",
        }
    }
}

impl fmt::Display for DiagnosticKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line an adapter could not use, or used with a caveat.
///
/// Messages name fields and positions, never quote the line: logs carry users' prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line (or record) number in the input.
    pub line: u64,
    /// What kind of problem.
    pub kind: DiagnosticKind,
    /// What was wrong.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic for `line`.
    pub fn new(line: u64, kind: DiagnosticKind, message: impl Into<String>) -> Self {
        Self { line, kind, message: message.into() }
    }
}
