//! The bounded memory a Mooncake parse keeps across lines: open sessions and the arrivals of recent requests.
//!
//! Both tables forget an entry past a cap, so memory does not grow with the input: sessions the least recently
//! used, requests the oldest inserted. Both are `lru` caches (a hash map threaded by a linked list: every operation
//! is one hash lookup). Lookups only: iteration order never reaches an output.
//!
//! Ids are not stored: an entry is keyed by a 128-bit digest of its id made of two `ahash` hashes keyed at random
//! per process. Storing no string saves an allocation per request and per session and keeps the tables small
//! enough to stay in cache; two different ids share a digest with probability about 2⁻¹²⁸ per pair, and since the
//! keys are random a hostile input cannot plan such a pair (nor a flood of collisions in the maps' own hashing).

use std::num::NonZeroUsize;

use ahash::RandomState;
use lru::LruCache;

/// At most this many sessions are remembered; past it the least recently used one is forgotten.
pub(super) const MAX_SESSIONS: usize = 100_000;
/// At most this many request arrivals are remembered for `dependencies` and `wait_for`; past it the oldest goes.
pub(super) const MAX_REQUESTS: usize = 100_000;

/// The digest of an id that entries are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key(u128);

/// Makes [`Key`]s, with keys of its own drawn at random.
#[derive(Debug, Default)]
struct Digest(RandomState, RandomState);

impl Digest {
    fn key(&self, id: &str) -> Key {
        Key(u128::from(self.0.hash_one(id)) << 64 | u128::from(self.1.hash_one(id)))
    }
}

fn cache<V>(cap: usize) -> LruCache<Key, V, RandomState> {
    LruCache::with_hasher(NonZeroUsize::new(cap).unwrap_or(NonZeroUsize::MIN), RandomState::new())
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

/// Sessions by id, least recently used first out.
#[derive(Debug)]
pub(super) struct Sessions {
    digest: Digest,
    map: LruCache<Key, Session, RandomState>,
    /// Sessions forgotten to respect the cap.
    pub(super) evicted: u64,
    /// Distinct sessions started (a forgotten session that comes back counts again).
    pub(super) started: u64,
}

impl Sessions {
    pub(super) fn new(cap: usize) -> Self {
        Self { digest: Digest::default(), map: cache(cap), evicted: 0, started: 0 }
    }

    /// The key of session `id`, for [`get`](Self::get) and [`set`](Self::set).
    pub(super) fn key(&self, id: &str) -> Key {
        self.digest.key(id)
    }

    /// The state of the session (a fresh one if unknown), marked as just used. Returns whether an older session
    /// had to be forgotten to make room.
    pub(super) fn get(&mut self, key: Key) -> (Session, bool) {
        if let Some(session) = self.map.get(&key) {
            return (*session, false);
        }
        self.started += 1;
        // The key is new, so `push` returns an entry only when it pushed out the least recently used one.
        let evicted = self.map.push(key, Session::default()).is_some();
        self.evicted += u64::from(evicted);
        (Session::default(), evicted)
    }

    /// Stores the state of the session after a turn (the session was just read with [`get`](Self::get)).
    pub(super) fn set(&mut self, key: Key, session: Session) {
        if let Some(slot) = self.map.peek_mut(&key) {
            *slot = session;
        }
    }
}

/// When a recent request arrived and how long the source says it took, by request id, oldest out first.
#[derive(Debug)]
pub(super) struct Requests {
    digest: Digest,
    /// Read with `peek` only, so the least recently used entry is the oldest inserted.
    map: LruCache<Key, Timing, RandomState>,
}

/// Arrival and recorded service time of one request, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Timing {
    pub(super) arrival: Option<i64>,
    pub(super) service: Option<i64>,
}

impl Requests {
    pub(super) fn new(cap: usize) -> Self {
        Self { digest: Digest::default(), map: cache(cap) }
    }

    /// Records `id`'s timing. A repeated id takes the new timing but keeps its place in the order.
    pub(super) fn insert(&mut self, id: &str, timing: Timing) {
        let key = self.digest.key(id);
        match self.map.peek_mut(&key) {
            Some(slot) => *slot = timing,
            None => {
                self.map.push(key, timing);
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<Timing> {
        self.map.peek(&self.digest.key(id)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_forget_the_least_recently_used() {
        let mut s = Sessions::new(2);
        let [a, b, c] = ["a", "b", "c"].map(|id| s.key(id));
        assert_eq!(a, s.key(&String::from("a")), "the key depends on the text only");
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
        let mut r = Requests::new(2);
        let t = |ms| Timing { arrival: Some(ms), service: None };
        r.insert("x", t(1));
        r.insert("y", t(2));
        r.insert("x", t(3));
        assert_eq!(r.get("x"), Some(t(3)), "a repeated id takes the new timing");
        r.insert("z", t(4));
        assert_eq!(r.get("x"), None, "x keeps its first place, so it goes first");
        assert_eq!(r.get("y"), Some(t(2)));
        assert_eq!(r.get("z"), Some(t(4)));
    }
}
