//! Describing JSON errors without quoting the input.
//!
//! serde_json's own messages quote offending values (`invalid type: string "…"`), and a value in a log line can be
//! a user's prompt, so diagnostics are built from the error's category and column only.

use serde_json::error::Category;

/// A diagnostic message for `error` that names no input content (field names are kept, values are not).
pub fn error_message(error: &serde_json::Error) -> String {
    let column = error.column();
    match error.classify() {
        Category::Syntax => format!("invalid JSON syntax at column {column}"),
        Category::Eof => format!("JSON ends early at column {column}"),
        Category::Io => "JSON could not be read".to_owned(),
        Category::Data => {
            let text = error.to_string();
            // `missing field `x`` and `unknown field `x`` name only the field, which is safe to repeat.
            match text.split_once(" at line ") {
                Some((message, _))
                    if message.starts_with("missing field") || message.starts_with("duplicate field") =>
                {
                    format!("{message} (column {column})")
                }
                _ => format!("a field has the wrong type or an out-of-range value (column {column})"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Probe {
        n: u32,
    }

    fn message(text: &str) -> String {
        error_message(&serde_json::from_str::<Probe>(text).unwrap_err())
    }

    #[test]
    fn messages_never_quote_values() {
        assert_eq!(
            message(r#"{"n": "secret prompt"}"#),
            "a field has the wrong type or an out-of-range value (column 21)"
        );
        assert_eq!(message(r#"{"n": 99999999999}"#), "a field has the wrong type or an out-of-range value (column 17)");
        assert_eq!(message(r#"{"m": 1}"#), "missing field `n` (column 8)");
        assert_eq!(message(r#"{"n": 1"#), "JSON ends early at column 7");
        assert_eq!(message("secret prompt"), "invalid JSON syntax at column 1");
    }
}
