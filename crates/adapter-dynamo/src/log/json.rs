//! A JSON record's top-level fields in one buffer: what the fold asks a JSONL record for, without a
//! `serde_json::Map` of its own allocations per key and value.
//!
//! Records are parsed on the pool and folded on another thread; a `Map` is dozens of allocations, and freeing them
//! on the fold's thread made a JSONL log 30% slower on two threads than on one. A `JsonRecord` is two allocations.
//! It answers every question a `Map<String, Value>` of the same text answers the way the fold asks it (a property
//! test compares them): a repeated key's last value wins, strings are unescaped, numbers are `serde_json::Number`s
//! read by the same deserializer, and nested arrays and objects are only known to be there.

use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

/// The top-level fields of one JSON object.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JsonRecord {
    /// Every key and string value, unescaped, one after another.
    text: String,
    /// Each field in the order written: its key's bytes in `text` and its value.
    fields: Vec<(Range<usize>, JsonValue)>,
}

/// One field's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsonValue {
    /// A string: its bytes in the record's text.
    Str(Range<usize>),
    Number(Number),
    Bool(bool),
    /// `null`, an array or an object.
    Other,
}

impl JsonRecord {
    /// Parses one JSON object (white space around it allowed), with `serde_json::from_str`'s errors.
    pub(crate) fn parse(text: &str) -> Result<Self, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let record = deserializer.deserialize_map(RecordVisitor)?;
        deserializer.end()?;
        Ok(record)
    }

    /// The value of `key` (the last one, when the key is repeated).
    pub(crate) fn get(&self, key: &str) -> Option<&JsonValue> {
        self.fields.iter().rev().find(|(k, _)| &self.text[k.clone()] == key).map(|(_, v)| v)
    }

    /// The string value of `key`, if it is a string.
    pub(crate) fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            JsonValue::Str(range) => Some(&self.text[range.clone()]),
            _ => None,
        }
    }

    /// The text of a string value of this record.
    pub(crate) fn text(&self, range: &Range<usize>) -> &str {
        &self.text[range.clone()]
    }
}

struct RecordVisitor;

impl<'de> Visitor<'de> for RecordVisitor {
    type Value = JsonRecord;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonRecord, A::Error> {
        let mut record = JsonRecord::default();
        while let Some(key) = map.next_key_seed(Append(&mut record.text))? {
            let value = map.next_value_seed(Field(&mut record.text))?;
            record.fields.push((key, value));
        }
        Ok(record)
    }
}

/// Appends a string to the record's text, giving its bytes there.
struct Append<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for Append<'_> {
    type Value = Range<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Range<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Append<'_> {
    type Value = Range<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E>(self, text: &str) -> Result<Range<usize>, E> {
        Ok(append(self.0, text))
    }
}

fn append(buffer: &mut String, text: &str) -> Range<usize> {
    let start = buffer.len();
    buffer.push_str(text);
    start..buffer.len()
}

/// Reads one field's value, as `serde_json::Value` would see it.
struct Field<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for Field<'_> {
    type Value = JsonValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsonValue, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = JsonValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<JsonValue, E> {
        Ok(JsonValue::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<JsonValue, E> {
        Ok(JsonValue::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<JsonValue, E> {
        Ok(JsonValue::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<JsonValue, E> {
        // As `serde_json::Value`: a float without a JSON form is `null`.
        Ok(Number::from_f64(value).map_or(JsonValue::Other, JsonValue::Number))
    }

    fn visit_str<E>(self, text: &str) -> Result<JsonValue, E> {
        Ok(JsonValue::Str(append(self.0, text)))
    }

    fn visit_unit<E>(self) -> Result<JsonValue, E> {
        Ok(JsonValue::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonValue, A::Error> {
        while seq.next_element_seed(Nested)?.is_some() {}
        Ok(JsonValue::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonValue, A::Error> {
        while map.next_key_seed(Nested)?.is_some() {
            map.next_value_seed(Nested)?;
        }
        Ok(JsonValue::Other)
    }
}

/// A value inside an array or object: read as a `serde_json::Value` would be read (every string's escapes, every
/// number's range, the nesting limit: serde's `IgnoredAny` checks none of them, and a record it accepted was
/// refused before), then dropped.
struct Nested;

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nested {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Nested)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Nested)?.is_some() {
            map.next_value_seed(Nested)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    use super::*;

    /// What the fold reads of a field, from a `Map` and from a `JsonRecord`.
    fn seen_in_map(map: &Map<String, Value>, key: &str) -> (bool, Option<String>, Option<u64>, Option<f64>) {
        let get = match map.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        };
        let number = match map.get(key) {
            Some(Value::Number(n)) => Some(n),
            _ => None,
        };
        (map.contains_key(key), get, number.and_then(Number::as_u64), number.and_then(Number::as_f64))
    }

    fn seen_in_record(record: &JsonRecord, key: &str) -> (bool, Option<String>, Option<u64>, Option<f64>) {
        let value = record.get(key);
        let get = match value {
            Some(JsonValue::Str(range)) => Some(record.text(range).to_owned()),
            Some(JsonValue::Number(n)) => Some(n.to_string()),
            Some(JsonValue::Bool(b)) => Some(b.to_string()),
            _ => None,
        };
        let number = match value {
            Some(JsonValue::Number(n)) => Some(n),
            _ => None,
        };
        (value.is_some(), get, number.and_then(Number::as_u64), number.and_then(Number::as_f64))
    }

    fn agree(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let map = serde_json::from_str::<Map<String, Value>>(text);
        let record = JsonRecord::parse(text);
        match (&map, &record) {
            (Ok(map), Ok(record)) => {
                for key in ["a", "b", "time", "message", "é", "k\"", ""] {
                    proptest::prop_assert_eq!(seen_in_map(map, key), seen_in_record(record, key), "{} {}", text, key);
                }
            }
            (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string(), "{}", text),
            _ => proptest::prop_assert!(false, "{text}: {map:?} against {record:?}"),
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Objects with repeated keys, escapes, every kind of value (integers past 2^53 and below zero, floats,
        /// nested values, `null`), and broken ones.
        #[test]
        fn records_read_what_a_map_reads(
            text in " ?\\{( ?\"(a|b|time|message|\u{e9}|k\\\\\"|)\" ?: ?(\"[a-z\u{e9}\\\\\"\\\\n]{0,3}\"|\"\\\\u00e9\"|-?[0-9]{1,20}(\\.[0-9]{1,3})?(e-?[0-9]{1,3})?|true|false|null|\\[1, ?\\{\"a\":2\\}\\]|\\{\"a\": ?[1,2]\\}|\\[\"\\\\ud800\"\\]|\\[\"\\\\ud83d\\\\ude00\"\\]|\\[1e400\\]|\\{\"a\": ?-1e999\\}|\\{\"\\\\ud800\": ?1\\}|\\[\\[1,\\]\\]|\\[\\{\"a\":1,\\}\\]|\\[{120,140}|\\[|nul|\"x) ?,?){0,5}\\}? ?x?"
        ) {
            agree(&text)?;
        }
    }

    #[test]
    fn nested_values_are_refused_where_a_map_refuses_them() {
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(130), "]".repeat(130));
        let shallow = format!(r#"{{"a":{}1{}}}"#, "[".repeat(100), "]".repeat(100));
        for text in [
            r#"{"message":"x","o":["\ud800"]}"#,
            r#"{"o":[1e400]}"#,
            r#"{"o":{"a":-1e999}}"#,
            r#"{"o":{"\ud800":1}}"#,
            r#"{"o":[[1,]]}"#,
            deep.as_str(),
        ] {
            let expected = serde_json::from_str::<Map<String, Value>>(text).unwrap_err().to_string();
            assert_eq!(JsonRecord::parse(text).unwrap_err().to_string(), expected, "{text}");
        }
        assert_eq!(JsonRecord::parse(&shallow).unwrap().get("a"), Some(&JsonValue::Other));
        assert_eq!(JsonRecord::parse(r#"{"o":["\ud83d\ude00"]}"#).unwrap().get("o"), Some(&JsonValue::Other));
    }

    #[test]
    fn repeated_keys_keep_the_last_value_and_numbers_stay_exact() {
        let record = JsonRecord::parse(
            r#" {"a":"x","worker_id":7587888160958627596,"a":2.5,"n":null,"o":{"a":1},"s":[1],"t":true,"e":"\u00e9\n"} "#,
        )
        .unwrap();
        assert_eq!(record.get("a"), Some(&JsonValue::Number(Number::from_f64(2.5).unwrap())));
        assert_eq!(record.get("worker_id"), Some(&JsonValue::Number(7_587_888_160_958_627_596_u64.into())));
        assert_eq!(
            (record.get("n"), record.get("o"), record.get("s")),
            (Some(&JsonValue::Other), Some(&JsonValue::Other), Some(&JsonValue::Other))
        );
        assert_eq!(record.get("t"), Some(&JsonValue::Bool(true)));
        assert_eq!((record.str("e"), record.str("a"), record.get("missing")), (Some("é\n"), None, None));
        assert_eq!(
            JsonRecord::parse(r#"{"a":1} x"#).unwrap_err().to_string(),
            serde_json::from_str::<Map<String, Value>>(r#"{"a":1} x"#).unwrap_err().to_string()
        );
    }
}
