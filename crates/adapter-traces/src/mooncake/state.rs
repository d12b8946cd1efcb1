//! The bounded memory a Mooncake parse keeps across lines: open sessions (the shared [`Sessions`] table) and the
//! arrivals of recent requests.
//!
//! Both tables forget an entry past a cap, so memory does not grow with the input: sessions the least recently
//! used, requests the oldest inserted. Both are keyed by [`Digest`](crate::sessions::Digest)s of the ids, computed
//! where the line is parsed (see [`crate::sessions`]). Lookups only: iteration order never reaches an output.

use std::collections::VecDeque;

use crate::sessions::{Key, Table, table};

/// The session table of a Mooncake parse.
pub(super) type Sessions = crate::sessions::Sessions<Session>;

/// At most this many request arrivals are remembered for `dependencies` and `wait_for`; past it the oldest goes.
pub(super) const MAX_REQUESTS: usize = 100_000;

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
        Self { cap, map: table(), order: VecDeque::new() }
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

    /// [`Sessions::look_ahead`](crate::sessions::Sessions::look_ahead) for the request table: `keys` as
    /// [`Requests::insert`] reads them, and the next `n` requests it will forget.
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
    use crate::sessions::{Digest, test_key as key};

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

    proptest! {
        /// The request table forgets exactly what an `lru::LruCache` that is never read forgets (a queue in
        /// first-insertion order), whatever the sequence of inserts, and its queue stays as long as its map.
        #[test]
        fn requests_match_a_first_in_first_out_queue(
            cap in 1usize..6,
            ops in proptest::collection::vec((0u8..12, any::<u32>()), 0..400),
        ) {
            let mut requests = Requests::new(cap);
            let mut fifo = lru::LruCache::<Key, Timing>::new(NonZeroUsize::new(cap).unwrap());
            for (id, ms) in ops {
                let k = key(id);
                let timing = Timing { arrival: Some(i64::from(ms)), service: None };
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
                // Looking ahead reads the keys' slots and, once the table is full, those of the oldest `n`, every
                // one present.
                let probes = || (0..12).map(key);
                let known = probes().filter(|k| fifo.contains(k)).count();
                let oldest = if fifo.len() >= cap { cap.min(3) } else { 0 };
                prop_assert_eq!(requests.look_ahead(probes(), 3), known + oldest);
                prop_assert_eq!(requests.order.len(), requests.map.len());
            }
        }
    }
}
