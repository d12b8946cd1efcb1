//! JSON log records (0.32+, `--logging-config.formatter json`): python-json-logger with
//! `JSON_FORMAT = "%(asctime)s %(levelname)s %(name)s %(processName)s %(process)d %(message)s"` and no `datefmt`,
//! so `asctime` is `YYYY-MM-DD HH:MM:SS,mmm` in local time (year and milliseconds included).
//! The key set is inferred from the format string (reference: UNCONFIRMED); unknown keys are ignored.

use serde::Deserialize;

/// One JSON record, owning its message (JSON escapes are resolved).
#[derive(Debug, Deserialize)]
pub(crate) struct JsonRecord {
    pub(crate) asctime: String,
    #[serde(rename = "processName")]
    pub(crate) process_name: Option<String>,
    pub(crate) message: String,
}

/// `Some(Ok)` for a JSON record, `Some(Err)` for a line that starts like one but is not, `None` for other lines.
pub(crate) fn parse(line: &str) -> Option<Result<JsonRecord, &'static str>> {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('{') || !trimmed.contains("\"levelname\"") {
        return None;
    }
    Some(serde_json::from_str(trimmed).map_err(|_| "a JSON log record that is cut short or lacks asctime/message"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_with_escaped_messages() {
        let line = r#"{"asctime": "2026-05-12 08:01:39,331", "levelname": "INFO", "name": "vllm.v1.engine.async_llm", "processName": "APIServer", "process": 1, "message": "Added request \"q\"."}"#;
        let record = parse(line).unwrap().unwrap();
        assert_eq!(record.asctime, "2026-05-12 08:01:39,331");
        assert_eq!(record.process_name.as_deref(), Some("APIServer"));
        assert_eq!(record.message, "Added request \"q\".");
        assert!(parse(r#"{"levelname": "INFO", "message": "#).unwrap().is_err());
        assert!(parse(r#"{"timestamp": 0}"#).is_none());
        assert!(parse("INFO 05-12 08:01:39 [a.py:1] x").is_none());
    }
}
