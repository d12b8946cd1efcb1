//! A bounded table of per-session state, shared by the RAGPulse and TraceLab readers.
//!
//! Past its cap the least recently used session is forgotten, so memory does not grow with the input. Lookups
//! only: iteration order never reaches an output.

use std::collections::{BTreeMap, HashMap};

/// At most this many sessions are remembered.
pub(crate) const MAX_SESSIONS: usize = 100_000;

/// Sessions by id with a value each, least recently used first out.
#[derive(Debug)]
pub(crate) struct Sessions<V> {
    cap: usize,
    map: HashMap<String, (V, u64)>,
    order: BTreeMap<u64, String>,
    tick: u64,
    /// Sessions forgotten to respect the cap.
    pub(crate) evicted: u64,
    /// Distinct sessions started (a forgotten session that comes back counts again).
    pub(crate) started: u64,
}

impl<V: Clone + Default> Sessions<V> {
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap: cap.max(1), map: HashMap::new(), order: BTreeMap::new(), tick: 0, evicted: 0, started: 0 }
    }

    /// The value of session `id` (`None` for a session not seen, or forgotten), marked as just used, and whether an
    /// older session had to be forgotten to make room for it.
    pub(crate) fn touch(&mut self, id: &str) -> (Option<V>, bool) {
        self.tick += 1;
        if let Some((value, used)) = self.map.get_mut(id) {
            self.order.remove(used);
            *used = self.tick;
            self.order.insert(self.tick, id.to_owned());
            return (Some(value.clone()), false);
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
        self.map.insert(id.to_owned(), (V::default(), self.tick));
        self.order.insert(self.tick, id.to_owned());
        (None, evicted)
    }

    /// Stores the value of session `id` (just read with [`touch`](Self::touch)).
    pub(crate) fn set(&mut self, id: &str, value: V) {
        if let Some((slot, _)) = self.map.get_mut(id) {
            *slot = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_least_recently_used() {
        let mut sessions = Sessions::<u32>::new(2);
        assert_eq!(sessions.touch("a"), (None, false));
        sessions.set("a", 1);
        assert_eq!(sessions.touch("b"), (None, false));
        assert_eq!(sessions.touch("a"), (Some(1), false));
        // `b` is now the least recently used one.
        assert_eq!(sessions.touch("c"), (None, true));
        assert_eq!(sessions.touch("b"), (None, true), "b was forgotten, and a goes to make room");
        assert_eq!((sessions.started, sessions.evicted), (4, 2));
    }
}
