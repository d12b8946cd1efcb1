//! Shared text for the repeated columns of high-volume rows.
//!
//! An SGLang log writes several `samples` rows per batch line, each naming its source, instance, metric and file.
//! Allocating those four strings per row, and freeing them once the row is written, was a large share of the parse.
//! [`SharedText`] hands out one [`Arc<str>`] per distinct value instead, so a row costs four reference-count
//! increments.

use std::sync::Arc;

use ahash::HashSet;

/// Distinct values kept at most; past it a value is still returned, just not remembered (so an input with a new
/// instance name on every line cannot grow memory).
const MAX_VALUES: usize = 4096;

/// One [`Arc<str>`] per distinct value seen by a parse.
#[derive(Debug, Default)]
pub struct SharedText {
    values: HashSet<Arc<str>>,
}

impl SharedText {
    /// The shared copy of `text`.
    pub fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(value) = self.values.get(text) {
            return Arc::clone(value);
        }
        let value: Arc<str> = Arc::from(text);
        if self.values.len() < MAX_VALUES {
            self.values.insert(Arc::clone(&value));
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_text_is_one_allocation_and_memory_is_bounded() {
        let mut shared = SharedText::default();
        let a = shared.get("num_running_reqs");
        let b = shared.get(&String::from("num_running_reqs"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "num_running_reqs");
        assert!(!Arc::ptr_eq(&a, &shared.get("num_queue_reqs")));
        for i in 0..MAX_VALUES + 10 {
            assert_eq!(&*shared.get(&i.to_string()), i.to_string());
        }
        assert_eq!(shared.values.len(), MAX_VALUES);
        let (x, y) = (shared.get("past the bound"), shared.get("past the bound"));
        assert_eq!((&*x, Arc::ptr_eq(&x, &y)), ("past the bound", false), "returned, not remembered");
    }
}
