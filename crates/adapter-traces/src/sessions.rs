//! The bounded per-session state the trace readers keep across lines (Mooncake, BurstGPT, RAGPulse, TraceLab),
//! and the keys their tables share.
//!
//! A table forgets an entry past its cap, so memory does not grow with the input: [`Sessions`] the least recently
//! used. Lookups only: iteration order never reaches an output.
//!
//! Ids are not stored: an entry is keyed by a 128-bit digest of its id made of two `ahash` hashes keyed at random
//! per parse ([`Digest`], computed where the line is parsed, on any thread). Storing no string saves an allocation
//! per row and per session and keeps the tables small enough to stay in cache; two different ids share a digest
//! with probability about 2⁻¹²⁸ per pair, and since the keys are random a hostile input cannot plan such a pair
//! (nor a flood of collisions in the tables, which use the digest's low 64 bits as their hash).
//!
//! Each table is a flat hash map, entries stored in place, plus a queue of keys in eviction order: one probe per
//! lookup where a linked LRU list (the `lru` crate) followed a pointer to a node and then rewrote its neighbours,
//! each a cache miss in a 100,000-entry table (the Mooncake fold spent a fifth of its time there, BurstGPT's and
//! RAGPulse's a sixth, when they kept the ids as strings).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use ahash::RandomState;
use infertrace_adapter::{Diagnostic, DiagnosticKind, Sink};

/// At most this many sessions are remembered; past it the least recently used one is forgotten.
pub(crate) const MAX_SESSIONS: usize = 100_000;

/// What a forgotten session that comes back loses, where a session's rows are numbered by turn.
pub(crate) const RESTARTS_AT_TURN_0: &str = "a later turn of one restarts at turn 0";

/// The digest of an id that entries are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key(pub(crate) u128);

/// Makes [`Key`]s, with keys of its own drawn at random. One per parse, shared by the threads that parse lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct Digest(RandomState, RandomState);

impl Digest {
    pub(crate) fn key(&self, id: &str) -> Key {
        Key(u128::from(self.0.hash_one(id)) << 64 | u128::from(self.1.hash_one(id)))
    }
}

/// Hashes a [`Key`] to its low 64 bits: the key is already a keyed random digest.
#[derive(Debug, Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used (`Key` derives `Hash` over one `u128`); fold anything else in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

/// A flat hash map by [`Key`].
pub(crate) type Table<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;

/// An empty [`Table`]. It grows as entries come (up to its user's cap), so that a small file does not pay for
/// the room of 100,000 entries.
pub(crate) fn table<V>() -> Table<V> {
    HashMap::with_hasher(BuildHasherDefault::default())
}

/// A value per session by key, least recently used first out.
///
/// Every use appends `(key, tick)` to `uses`; the map holds each session's latest tick, so an entry of `uses`
/// whose tick is not its session's is stale. The oldest entry that is not stale names the least recently used
/// session. Stale entries are dropped when they reach the front, and all at once when `uses` holds twice the cap,
/// so it stays within `2 × cap` entries and each use costs O(1) amortized.
#[derive(Debug)]
pub(crate) struct Sessions<V> {
    cap: usize,
    map: Table<(V, u64)>,
    uses: VecDeque<(Key, u64)>,
    tick: u64,
    /// Sessions forgotten to respect the cap.
    pub(crate) evicted: u64,
    /// Distinct sessions started (a forgotten session that comes back counts again).
    pub(crate) started: u64,
    /// Whether [`touch_reporting`](Self::touch_reporting) has reported an eviction.
    reported: bool,
}

impl<V: Clone + Default> Sessions<V> {
    /// A table that remembers at most `cap` sessions (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self { cap, map: table(), uses: VecDeque::new(), tick: 0, evicted: 0, started: 0, reported: false }
    }

    /// The value of session `key` (`None` for a session not seen, or forgotten, which starts with the default
    /// value), marked as just used, and whether an older session had to be forgotten to make room for it.
    pub(crate) fn touch(&mut self, key: Key) -> (Option<V>, bool) {
        self.tick += 1;
        let tick = self.tick;
        let found = match self.map.get_mut(&key) {
            Some((value, used)) => {
                *used = tick;
                (Some(value.clone()), false)
            }
            None => {
                self.started += 1;
                let evicted = self.map.len() >= self.cap;
                if evicted {
                    self.forget_least_recent();
                    self.evicted += 1;
                }
                self.map.insert(key, (V::default(), tick));
                (None, evicted)
            }
        };
        self.uses.push_back((key, tick));
        if self.uses.len() > 2 * self.cap {
            let map = &self.map;
            self.uses.retain(|(key, tick)| map.get(key).is_some_and(|(_, used)| used == tick));
        }
        found
    }

    /// [`touch`](Self::touch), and at the parse's first eviction one `inconsistent` diagnostic at `line` saying
    /// what a forgotten session that comes back loses (`consequence`); later evictions are counted in
    /// [`evicted`](Self::evicted) only.
    pub(crate) fn touch_reporting(&mut self, key: Key, line: u64, consequence: &str, sink: &mut dyn Sink) -> Option<V> {
        let (value, evicted) = self.touch(key);
        if evicted && !self.reported {
            self.reported = true;
            let message =
                format!("more than {} sessions open: the least recently used are forgotten ({consequence})", self.cap);
            sink.diagnostic(Diagnostic::new(line, DiagnosticKind::Inconsistent, message));
        }
        value
    }

    /// Stores the value of session `key` (just read with [`touch`](Self::touch)).
    pub(crate) fn set(&mut self, key: Key, value: V) {
        if let Some((slot, _)) = self.map.get_mut(&key) {
            *slot = value;
        }
    }

    /// Whether each of `keys` is open, read as [`Sessions::touch`] reads it, and the slots of the next `n` sessions
    /// to forget when the table is full: a hint for the cache (see the Mooncake parser's `look_ahead`), which
    /// changes nothing.
    pub(crate) fn look_ahead(&self, keys: impl Iterator<Item = Key>, n: usize) -> usize {
        let mut found = keys.filter(|key| self.map.contains_key(key)).count();
        if self.map.len() >= self.cap {
            found += self.uses.iter().take(n).filter(|(key, _)| self.map.contains_key(key)).count();
        }
        found
    }

    fn forget_least_recent(&mut self) {
        while let Some((key, tick)) = self.uses.pop_front() {
            if let Entry::Occupied(entry) = self.map.entry(key)
                && entry.get().1 == tick
            {
                entry.remove();
                return;
            }
        }
    }
}

/// Keys from small numbers, so that a test's random operations hit the same entries again.
#[cfg(test)]
pub(crate) fn test_key(n: u8) -> Key {
    Key(u128::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sessions_forget_the_least_recently_used() {
        let digest = Digest::default();
        let mut s = Sessions::<u32>::new(2);
        let [a, b, c] = ["a", "b", "c"].map(|id| digest.key(id));
        assert_eq!(a, digest.key(&String::from("a")), "the key depends on the text only");
        assert_ne!(a, b);
        assert_ne!(a, Digest::default().key("a"), "each digest draws keys of its own");
        assert_eq!(s.touch(a), (None, false));
        s.set(a, 1);
        assert_eq!(s.touch(b), (None, false));
        assert_eq!(s.touch(a), (Some(1), false), "a is now the most recent");
        assert_eq!(s.touch(c), (None, true), "b goes");
        assert_eq!((s.evicted, s.started), (1, 3));
        assert_eq!(s.touch(a), (Some(1), false));
        assert_eq!(s.touch(b), (None, true), "b starts over and pushes out c");
        assert_eq!(s.touch(c), (None, true), "c was forgotten, and a goes to make room");
        assert_eq!((s.evicted, s.started), (3, 5));
    }

    #[test]
    fn a_cap_of_zero_keeps_one_session() {
        let digest = Digest::default();
        let mut s = Sessions::<u32>::new(0);
        let [a, b] = ["a", "b"].map(|id| digest.key(id));
        assert_eq!(s.touch(a), (None, false));
        s.set(a, 7);
        assert_eq!(s.touch(a), (Some(7), false));
        assert_eq!(s.touch(b), (None, true));
    }

    #[test]
    fn the_first_eviction_is_reported_once() {
        let digest = Digest::default();
        let mut s = Sessions::<u32>::new(2);
        let mut sink = infertrace_adapter::CollectSink::default();
        for (line, id) in [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "d"), (6, "c")] {
            s.touch_reporting(digest.key(id), line, "it starts over", &mut sink);
        }
        // "c" at line 4 pushes out "b", "d" at line 5 pushes out "a": two evictions, one diagnostic.
        assert_eq!(s.evicted, 2);
        let found: Vec<_> = sink.diagnostics.iter().map(|d| (d.line, d.kind.as_str(), d.message.as_str())).collect();
        assert_eq!(
            found,
            [(4, "inconsistent", "more than 2 sessions open: the least recently used are forgotten (it starts over)")]
        );
    }

    proptest! {
        /// The table forgets exactly what the `lru` crate's `LruCache` forgets (used as the model: a linked list
        /// whose every use moves the entry to the front), whatever the sequence of uses, and its queue stays
        /// within its bound.
        #[test]
        fn sessions_match_a_linked_lru(
            cap in 1usize..6,
            ops in proptest::collection::vec((0u8..12, any::<u32>()), 0..400),
        ) {
            let mut sessions = Sessions::<u32>::new(cap);
            let mut model = lru::LruCache::<Key, u32>::new(NonZeroUsize::new(cap).unwrap());
            for (id, value) in ops {
                let k = test_key(id);
                let expected = match model.get(&k) {
                    Some(value) => (Some(*value), false),
                    None => (None, model.push(k, 0).is_some()),
                };
                prop_assert_eq!(sessions.touch(k), expected);
                sessions.set(k, value);
                if let Some(slot) = model.peek_mut(&k) {
                    *slot = value;
                }
                prop_assert!(sessions.uses.len() <= 2 * cap);
                prop_assert_eq!(sessions.map.len(), model.len());
                // Looking ahead reads the keys' slots and, once the table is full, those of the first `n` uses
                // queued, of which the live ones are present.
                let probes = || (0..12).map(test_key);
                let open = probes().filter(|k| model.contains(k)).count();
                let full = model.len() >= cap;
                let live = sessions.uses.iter().take(3).filter(|(k, _)| model.contains(k)).count();
                prop_assert_eq!(sessions.look_ahead(probes(), 3), open + if full { live } else { 0 });
            }
            for probe in 0..12 {
                let k = test_key(probe);
                prop_assert_eq!(sessions.map.get(&k).map(|(v, _)| *v), model.peek(&k).copied());
            }
        }
    }
}
