//! The bounded memory a Mooncake parse keeps across lines: open sessions and the arrivals of recent requests.
//!
//! Both tables forget their least recently used entry past a cap, so memory does not grow with the input. Lookups
//! only: iteration order never reaches an output. The maps hash with `ahash` (keyed at random per process, like the
//! standard library's SipHash, so a hostile input cannot plan collisions; several times faster on short ids).

use std::collections::{BTreeMap, VecDeque};

use ahash::HashMap;

/// At most this many sessions are remembered; past it the least recently used one is forgotten.
pub(super) const MAX_SESSIONS: usize = 100_000;
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

/// Sessions by id, least recently used first out.
#[derive(Debug)]
pub(super) struct Sessions {
    cap: usize,
    map: HashMap<String, (Session, u64)>,
    order: BTreeMap<u64, String>,
    tick: u64,
    /// Sessions forgotten to respect the cap.
    pub(super) evicted: u64,
    /// Distinct sessions started (a forgotten session that comes back counts again).
    pub(super) started: u64,
}

impl Sessions {
    pub(super) fn new(cap: usize) -> Self {
        Self { cap: cap.max(1), map: HashMap::default(), order: BTreeMap::new(), tick: 0, evicted: 0, started: 0 }
    }

    /// The state of session `id` (a fresh one if unknown), marked as just used. Returns whether an older session
    /// had to be forgotten to make room.
    pub(super) fn get(&mut self, id: &str) -> (Session, bool) {
        self.tick += 1;
        if let Some((session, used)) = self.map.get_mut(id) {
            // The id's string moves to its new place in the order rather than being copied again.
            let key = self.order.remove(used).unwrap_or_else(|| id.to_owned());
            *used = self.tick;
            self.order.insert(self.tick, key);
            return (*session, false);
        }
        self.started += 1;
        let mut evicted = false;
        if self.map.len() >= self.cap
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.map.remove(&oldest);
            self.evicted += 1;
            evicted = true;
        }
        self.map.insert(id.to_owned(), (Session::default(), self.tick));
        self.order.insert(self.tick, id.to_owned());
        (Session::default(), evicted)
    }

    /// Stores the state of session `id` after a turn (the session was just read with [`get`](Self::get)).
    pub(super) fn set(&mut self, id: &str, session: Session) {
        if let Some((slot, _)) = self.map.get_mut(id) {
            *slot = session;
        }
    }
}

/// When a recent request arrived and how long the source says it took, by request id, oldest out first.
#[derive(Debug)]
pub(super) struct Requests {
    cap: usize,
    map: HashMap<String, Timing>,
    order: VecDeque<String>,
}

/// Arrival and recorded service time of one request, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Timing {
    pub(super) arrival: Option<i64>,
    pub(super) service: Option<i64>,
}

impl Requests {
    pub(super) fn new(cap: usize) -> Self {
        Self { cap: cap.max(1), map: HashMap::default(), order: VecDeque::new() }
    }

    pub(super) fn insert(&mut self, id: String, timing: Timing) {
        if self.map.insert(id.clone(), timing).is_none() {
            self.order.push_back(id);
            while self.order.len() > self.cap {
                if let Some(oldest) = self.order.pop_front() {
                    self.map.remove(&oldest);
                }
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<Timing> {
        self.map.get(id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_forget_the_least_recently_used() {
        let mut s = Sessions::new(2);
        assert_eq!(s.get("a"), (Session::default(), false));
        s.set("a", Session { turns: 1, arrival: Some(5), context: None });
        s.get("b");
        assert_eq!(s.get("a").0.turns, 1, "a is now the most recent");
        assert!(s.get("c").1, "b goes");
        assert_eq!((s.evicted, s.started), (1, 3));
        assert_eq!(s.get("a").0.turns, 1);
        assert_eq!(s.get("b"), (Session::default(), true), "b starts over and pushes out c");
    }

    #[test]
    fn requests_forget_the_oldest() {
        let mut r = Requests::new(2);
        let t = |ms| Timing { arrival: Some(ms), service: None };
        r.insert("x".into(), t(1));
        r.insert("y".into(), t(2));
        r.insert("x".into(), t(3));
        r.insert("z".into(), t(4));
        assert_eq!(r.get("x"), None);
        assert_eq!(r.get("y"), Some(t(2)));
        assert_eq!(r.get("z"), Some(t(4)));
    }
}
