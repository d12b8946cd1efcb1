//! Large byte buffers kept for the next input, whichever thread parses it.
//!
//! With several threads, [`map_lines`](crate::parallel::map_lines) copies an input's lines into chunks of up to
//! 256 KiB on the thread that folds it, and the CLI folds the files it reads ahead together on the pool's threads,
//! a different one from file to file. Made afresh for each input and freed at its end, these buffers made the
//! resident memory grow with the thread count: mimalloc starts each thread's search for free memory at a
//! different place in its arena and keeps freed memory resident for a second (`purge_delay`) before handing it
//! back to the system, so what one thread freed was seldom what the next allocated. Handed back here at the end of
//! an input and taken by the next, the same buffers serve every input on every thread.
//!
//! A bin holds at most `budget` bytes of capacity, and never a buffer larger than `largest` (one grown for an
//! unusually long line is freed, not kept), for as long as the process runs: memory the allocator would have held
//! for a second after each input, held a little longer.

use std::sync::{Mutex, PoisonError};

/// Buffers handed back, for reuse.
#[derive(Debug)]
pub(crate) struct SpareBuffers {
    /// The buffers, all empty, and the sum of their capacities.
    held: Mutex<(Vec<Vec<u8>>, usize)>,
    budget: usize,
    largest: usize,
}

impl SpareBuffers {
    /// A bin that keeps at most `budget` bytes of capacity in buffers of at most `largest` bytes each.
    pub(crate) const fn new(budget: usize, largest: usize) -> Self {
        Self { held: Mutex::new((Vec::new(), 0)), budget, largest }
    }

    /// A buffer handed back earlier (empty, of some capacity), or a new empty one.
    pub(crate) fn take(&self) -> Vec<u8> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.0.pop() {
            Some(buffer) => {
                held.1 -= buffer.capacity();
                buffer
            }
            None => Vec::new(),
        }
    }

    /// Keeps `buffer` (emptied) for a later [`SpareBuffers::take`], unless it is larger than this bin's largest or
    /// the bin is full; then it is freed.
    pub(crate) fn give(&self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if capacity == 0 || capacity > self.largest {
            return;
        }
        buffer.clear();
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.1 + capacity <= self.budget {
            held.1 += capacity;
            held.0.push(buffer);
        }
    }

    /// Bytes of capacity held.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_up_to_the_budget_and_the_largest() {
        let bin = SpareBuffers::new(10, 6);
        assert_eq!(bin.take().capacity(), 0, "an empty bin makes a new buffer");
        let mut first = Vec::with_capacity(4);
        first.extend_from_slice(b"abc");
        bin.give(first);
        bin.give(Vec::with_capacity(7)); // larger than the largest: freed
        bin.give(Vec::with_capacity(6)); // 4 + 6 = 10: kept
        bin.give(Vec::with_capacity(1)); // past the budget: freed
        bin.give(Vec::new()); // nothing to keep
        assert_eq!(bin.held_bytes(), 10);
        let taken = bin.take();
        assert_eq!((taken.len(), taken.capacity()), (0, 6), "the last one kept comes first");
        let taken = bin.take();
        assert_eq!((taken.len(), taken.capacity()), (0, 4), "handed back emptied");
        assert_eq!(bin.held_bytes(), 0);
        assert_eq!(bin.take().capacity(), 0);
    }
}
