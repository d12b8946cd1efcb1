//! What an input held that its adapter does not know, and how its records were wrapped: the drift report.
//!
//! Engines add a field to their statistics lines every few releases, and deployments wrap the engine's lines in
//! their own logging. A log adapter reads the fields it knows wherever they stand on a line and counts the rest by
//! name, and names the envelopes it found around the records; the manifest keeps both per input
//! (`unknown_fields`, `envelopes`), and `infertrace normalize --explain` prints them. Names only, never values.

use std::collections::BTreeMap;

/// The most distinct unknown field names kept per input; past it, names are counted under [`OTHER_FIELDS`].
pub const MAX_UNKNOWN_FIELDS: usize = 64;

/// The name the unknown fields past [`MAX_UNKNOWN_FIELDS`] are counted under.
pub const OTHER_FIELDS: &str = "(other names)";

/// The longest text taken as a field name.
const MAX_NAME_BYTES: usize = 64;

/// An input's drift report. Counts only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// Fields of records the adapter otherwise read, by name, that it does not know (a newer release's fields).
    pub unknown_fields: BTreeMap<String, u64>,
    /// Records by the envelope found around them (`plain` when none), by name.
    pub envelopes: BTreeMap<&'static str, u64>,
    /// Records whose time came from the engine's own stamp (`record`) or from a prefix wrapped around it
    /// (`prefix`), when the two disagree in what they carry (a year, a zone).
    pub times_from: BTreeMap<&'static str, u64>,
    /// Lines that made a row (or part of one), when the adapter counts them.
    pub lines_used: Option<u64>,
}

impl From<Drift> for infertrace_schema::DriftSummary {
    /// The manifest's form of a drift report: the same counts, names as owned strings.
    fn from(drift: Drift) -> Self {
        Self {
            lines_used: drift.lines_used,
            envelopes: drift.envelopes.into_iter().map(|(name, n)| (name.to_owned(), n)).collect(),
            times_from: drift.times_from.into_iter().map(|(name, n)| (name.to_owned(), n)).collect(),
            unknown_fields: drift.unknown_fields,
        }
    }
}

impl Drift {
    /// Counts one unknown field. `name` must be a field name ([`field_name`]): its text reaches the manifest.
    pub fn unknown_field(&mut self, name: &str) {
        if let Some(count) = self.unknown_fields.get_mut(name) {
            *count += 1;
        } else if self.unknown_fields.len() < MAX_UNKNOWN_FIELDS {
            self.unknown_fields.insert(name.to_owned(), 1);
        } else {
            *self.unknown_fields.entry(OTHER_FIELDS.to_owned()).or_default() += 1;
        }
    }

    /// Counts `n` records in envelope `name`.
    pub fn envelope(&mut self, name: &'static str, n: u64) {
        if n > 0 {
            *self.envelopes.entry(name).or_default() += n;
        }
    }
}

/// Records counted by the set of envelopes found around each (a bit per envelope), for adapters that find several
/// envelopes on one line: one increment a record, spread over the envelopes when the report is made.
#[derive(Debug, Clone)]
pub struct EnvelopeSets {
    by_bits: Vec<u64>,
}

impl EnvelopeSets {
    /// Counts for `envelopes` envelopes (at most 16).
    pub fn new(envelopes: usize) -> Self {
        Self { by_bits: vec![0; 1 << envelopes.min(16)] }
    }

    /// Counts one record found in the envelopes whose bits are set in `bits`.
    pub fn count(&mut self, bits: u16) {
        let mask = self.by_bits.len() - 1;
        self.by_bits[usize::from(bits) & mask] += 1;
    }

    /// Adds the counts to `drift`: records in no envelope as `plain`, and each envelope by its name in `names`
    /// (bit `i` is `names[i]`).
    pub fn report(&self, names: &[&'static str], drift: &mut Drift) {
        drift.envelope("plain", self.by_bits[0]);
        for (i, name) in names.iter().enumerate() {
            let n = self.by_bits.iter().enumerate().filter(|(bits, _)| bits >> i & 1 == 1).map(|(_, n)| n).sum();
            drift.envelope(name, n);
        }
    }
}

/// `key` (trimmed) when it has the shape of a field name an engine writes (`MFU`, `Max iteration time`,
/// `#running-req`, `gen throughput (token/s)`, `Avg time/tok`): at most 64 bytes of ASCII letters, digits, spaces
/// and `#/()%._+-`, starting with a letter or `#`. Anything else is not a name, and is never counted as one, so
/// that no value (a prompt cut into a statistics line, say) reaches the manifest as a name.
pub fn field_name(key: &str) -> Option<&str> {
    let key = key.trim();
    let first = *key.as_bytes().first()?;
    let allowed = |b: &u8| b.is_ascii_alphanumeric() || b" #/()%._+-".contains(b);
    (key.len() <= MAX_NAME_BYTES
        && (first.is_ascii_alphabetic() || first == b'#')
        && key.bytes().all(|b| allowed(&b))
        && key.bytes().any(|b| b.is_ascii_alphabetic()))
    .then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_shapes_engines_write_and_nothing_else() {
        for name in ["MFU", "Max iteration time", "#running-req", "gen throughput (token/s)", "Avg time/tok", "p99.9"] {
            assert_eq!(field_name(name), Some(name));
        }
        assert_eq!(field_name("  MFU "), Some("MFU"));
        for not in ["", "12", "'prompt", "a\"b", "x=y", "ü", "-x", &"a".repeat(65), "[0;36m"] {
            assert_eq!(field_name(not), None, "{not}");
        }
    }

    #[test]
    fn unknown_names_are_bounded() {
        let mut drift = Drift::default();
        for i in 0..MAX_UNKNOWN_FIELDS + 10 {
            drift.unknown_field(&format!("k{i}"));
        }
        drift.unknown_field("k0");
        assert_eq!(drift.unknown_fields.len(), MAX_UNKNOWN_FIELDS + 1);
        assert_eq!(drift.unknown_fields["k0"], 2);
        assert_eq!(drift.unknown_fields[OTHER_FIELDS], 10);
    }

    #[test]
    fn envelope_sets_are_spread_over_their_envelopes() {
        let mut sets = EnvelopeSets::new(3);
        for bits in [0, 0b001, 0b011, 0b110, 0b011] {
            sets.count(bits);
        }
        let mut drift = Drift::default();
        sets.report(&["a", "b", "c"], &mut drift);
        // a: 0b001, 0b011 twice; b: 0b011 twice, 0b110; c: 0b110.
        assert_eq!(drift.envelopes, BTreeMap::from([("plain", 1), ("a", 3), ("b", 3), ("c", 1)]));
    }
}
