//! The bounded memory a Mooncake parse keeps across lines: open sessions and the arrivals of recent requests.
//!
//! Both tables forget an entry past a cap, so memory does not grow with the input: sessions the least recently
//! used, requests the oldest inserted. Lookups only: iteration order never reaches an output.
//!
//! Ids are not stored: an entry is keyed by a 128-bit digest of its id made of two `ahash` hashes keyed at random
//! per process ([`Digest`], computed where the line is parsed, on any thread). Storing no string saves an
//! allocation per request and per session and keeps the tables small enough to stay in cache; two different ids
//! share a digest with probability about 2⁻¹²⁸ per pair, and since the keys are random a hostile input cannot plan
//! such a pair (nor a flood of collisions in the tables, which use the digest's low 64 bits as their hash).
//!
//! Each table is a flat hash map, entries stored in place, plus a queue of keys in eviction order: one probe per
//! lookup where a linked LRU list (the `lru` crate, used before) followed a pointer to a node and then rewrote its
//! neighbours, each a cache miss in a 100,000-entry table (the Mooncake fold spent a fifth of its time there).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use ahash::RandomState;

/// At most this many sessions are remembered; past it the least recently used one is forgotten.
pub(super) const MAX_SESSIONS: usize = 100_000;
/// At most this many request arrivals are remembered for `dependencies` and `wait_for`; past it the oldest goes.
pub(super) const MAX_REQUESTS: usize = 100_000;

/// The digest of an id that entries are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key(u128);

/// Makes [`Key`]s, with keys of its own drawn at random. One per parse, shared by the threads that parse lines.
#[derive(Debug, Clone, Default)]
pub(super) struct Digest(RandomState, RandomState);

impl Digest {
    pub(super) fn key(&self, id: &str) -> Key {
        Key(u128::from(self.0.hash_one(id)) << 64 | u128::from(self.1.hash_one(id)))
    }
}

/// Hashes a [`Key`] to its low 64 bits: the key is already a keyed random digest.
#[derive(Debug, Default)]
pub(super) struct KeyHasher(u64);

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

type Table<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;

fn table<V>(cap: usize) -> Table<V> {
    HashMap::with_capacity_and_hasher(cap, BuildHasherDefault::default())
}

/// What a session's next turn needs from its previous ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Session {
    /// Turns seen so far (the next turn's index).
    pub(super) turns: u32,
    /// Arrival of the latest turn.
    pub(super) arrival: Option<i64>,
    /// mooncake-delta: tokens of the latest turn's prompt plus its output, the context the next delta extends.
    pub(super) context: Option<u64>,
}

/// Sessions by key, least recently used first out.
///
/// Every use appends `(key, tick)` to `uses`; the map holds each session's latest tick, so an entry of `uses`
/// whose tick is not its session's is stale. The oldest entry that is not stale names the least recently used
/// session. Stale entries are dropped when they reach the front, and all at once when `uses` holds twice the cap,
/// so it stays within `2 × cap` entries and each use costs O(1) amortized.
#[derive(Debug)]
pub(super) struct Sessions {
    cap: usize,
    map: Table<(Session, u64)>,
    uses: VecDeque<(Key, u64)>,
    tick: u64,
    /// Sessions forgotten to respect the cap.
    pub(super) evicted: u64,
    /// Distinct sessions started (a forgotten session that comes back counts again).
    pub(super) started: u64,
}

impl Sessions {
    pub(super) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self { cap, map: table(cap), uses: VecDeque::new(), tick: 0, evicted: 0, started: 0 }
    }

    /// The state of the session (a fresh one if unknown), marked as just used. Returns whether an older session
    /// had to be forgotten to make room.
    pub(super) fn get(&mut self, key: Key) -> (Session, bool) {
        self.tick += 1;
        let tick = self.tick;
        let (session, evicted) = match self.map.get_mut(&key) {
            Some((session, used)) => {
                *used = tick;
                (*session, false)
            }
            None => {
                self.started += 1;
                let evicted = self.map.len() >= self.cap;
                if evicted {
                    self.forget_least_recent();
                    self.evicted += 1;
                }
                self.map.insert(key, (Session::default(), tick));
                (Session::default(), evicted)
            }
        };
        self.uses.push_back((key, tick));
        if self.uses.len() > 2 * self.cap {
            let map = &self.map;
            self.uses.retain(|(key, tick)| map.get(key).is_some_and(|(_, used)| used == tick));
        }
        (session, evicted)
    }

    /// Whether `key` is open, read as [`Sessions::get`] reads it, and the slots of the next `n` sessions to forget
    /// when the table is full: a hint for the cache (see [`Parser::look_ahead`](super::Parser)), which changes nothing.
    pub(super) fn look_ahead(&self, keys: impl Iterator<Item = Key>, n: usize) -> usize {
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

    /// Stores the state of the session after a turn (the session was just read with [`get`](Self::get)).
    pub(super) fn set(&mut self, key: Key, session: Session) {
        if let Some((slot, _)) = self.map.get_mut(&key) {
            *slot = session;
        }
    }
}

/// When a recent request arrived and how long the source says it took, by request key, oldest out first.
#[derive(Debug)]
pub(super) struct Requests {
    cap: usize,
    map: Table<Timing>,
    /// Keys in the order they were first inserted: a repeated id keeps its place.
    order: VecDeque<Key>,
}

/// Arrival and recorded service time of one request, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Timing {
    pub(super) arrival: Option<i64>,
    pub(super) service: Option<i64>,
}

impl Requests {
    pub(super) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self { cap, map: table(cap), order: VecDeque::with_capacity(cap) }
    }

    /// Records the timing of the request keyed `key`. A repeated id takes the new timing but keeps its place in
    /// the order.
    pub(super) fn insert(&mut self, key: Key, timing: Timing) {
        if let Some(slot) = self.map.get_mut(&key) {
            *slot = timing;
            return;
        }
        if self.map.len() >= self.cap
            && let Some(oldest) = self.order.pop_front()
        {
            self.map.remove(&oldest);
        }
        self.map.insert(key, timing);
        self.order.push_back(key);
    }

    /// [`Sessions::look_ahead`] for the request table: `keys` as [`Requests::insert`] reads them, and the next `n`
    /// requests it will forget.
    pub(super) fn look_ahead(&self, keys: impl Iterator<Item = Key>, n: usize) -> usize {
        let mut found = keys.filter(|key| self.map.contains_key(key)).count();
        if self.map.len() >= self.cap {
            found += self.order.iter().take(n).filter(|key| self.map.contains_key(key)).count();
        }
        found
    }

    pub(super) fn get(&self, key: Key) -> Option<Timing> {
        self.map.get(&key).copied()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn sessions_forget_the_least_recently_used() {
        let digest = Digest::default();
        let mut s = Sessions::new(2);
        let [a, b, c] = ["a", "b", "c"].map(|id| digest.key(id));
        assert_eq!(a, digest.key(&String::from("a")), "the key depends on the text only");
        assert_ne!(a, b);
        assert_eq!(s.get(a), (Session::default(), false));
        s.set(a, Session { turns: 1, arrival: Some(5), context: None });
        s.get(b);
        assert_eq!(s.get(a).0.turns, 1, "a is now the most recent");
        assert!(s.get(c).1, "b goes");
        assert_eq!((s.evicted, s.started), (1, 3));
        assert_eq!(s.get(a).0.turns, 1);
        assert_eq!(s.get(b), (Session::default(), true), "b starts over and pushes out c");
    }

    #[test]
    fn requests_forget_the_oldest() {
        let digest = Digest::default();
        let mut r = Requests::new(2);
        let [x, y, z] = ["x", "y", "z"].map(|id| digest.key(id));
        let t = |ms| Timing { arrival: Some(ms), service: None };
        r.insert(x, t(1));
        r.insert(y, t(2));
        r.insert(x, t(3));
        assert_eq!(r.get(x), Some(t(3)), "a repeated id takes the new timing");
        r.insert(z, t(4));
        assert_eq!(r.get(x), None, "x keeps its first place, so it goes first");
        assert_eq!(r.get(y), Some(t(2)));
        assert_eq!(r.get(z), Some(t(4)));
    }

    /// Keys from small numbers, so that random operations hit the same sessions again.
    fn key(n: u8) -> Key {
        Key(u128::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
    }

    proptest! {
        /// The tables forget exactly what the `lru` crate's `LruCache` forgets (used as the model: a linked list
        /// whose every use moves the entry to the front), whatever the sequence of uses, and their queues stay
        /// within their bounds.
        #[test]
        fn sessions_and_requests_match_a_linked_lru(
            cap in 1usize..6,
            ops in proptest::collection::vec((0u8..12, any::<u32>()), 0..400),
        ) {
            let mut sessions = Sessions::new(cap);
            let mut model = lru::LruCache::<Key, Session>::new(NonZeroUsize::new(cap).unwrap());
            let mut requests = Requests::new(cap);
            let mut fifo = lru::LruCache::<Key, Timing>::new(NonZeroUsize::new(cap).unwrap());
            for (id, turns) in ops {
                let k = key(id);
                let expected = match model.get(&k) {
                    Some(session) => (*session, false),
                    None => (Session::default(), model.push(k, Session::default()).is_some()),
                };
                prop_assert_eq!(sessions.get(k), expected);
                let next = Session { turns, arrival: Some(i64::from(turns)), context: None };
                sessions.set(k, next);
                if let Some(slot) = model.peek_mut(&k) {
                    *slot = next;
                }
                prop_assert!(sessions.uses.len() <= 2 * cap);
                prop_assert_eq!(sessions.map.len(), model.len());

                let timing = Timing { arrival: Some(i64::from(turns)), service: None };
                requests.insert(k, timing);
                match fifo.peek_mut(&k) {
                    Some(slot) => *slot = timing,
                    None => {
                        fifo.push(k, timing);
                    }
                }
                for probe in 0..12 {
                    prop_assert_eq!(requests.get(key(probe)), fifo.peek(&key(probe)).copied());
                }
                // Looking ahead reads the keys' slots and, once a table is full, those of the next to forget:
                // for requests the oldest `n`, every one present; for sessions the first `n` uses queued, of
                // which the live ones are present.
                let probes = || (0..12).map(key);
                let open = probes().filter(|k| model.contains(k)).count();
                let full = model.len() >= cap;
                let live = sessions.uses.iter().take(3).filter(|(k, _)| model.contains(k)).count();
                prop_assert_eq!(sessions.look_ahead(probes(), 3), open + if full { live } else { 0 });
                let known = probes().filter(|k| fifo.contains(k)).count();
                prop_assert_eq!(requests.look_ahead(probes(), 3), known + if fifo.len() >= cap { cap.min(3) } else { 0 });
                prop_assert_eq!(requests.order.len(), requests.map.len());
            }
            for probe in 0..12 {
                let k = key(probe);
                prop_assert_eq!(sessions.map.get(&k).map(|(s, _)| *s), model.peek(&k).copied());
            }
        }
    }
}
