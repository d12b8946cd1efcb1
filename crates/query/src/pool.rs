//! The session's memory pool: DataFusion's fair spill pool, less a share kept for the memory that cannot spill.
//!
//! In DataFusion 55 an external sort that spills gives back the workspace it reserved for merging, then asks the
//! pool for it again (apache/datafusion#24739, fixed upstream by #24740). With a fair pool and two sorts running
//! side by side, the other sort's fair share has grown into the workspace meanwhile, the request fails, and the
//! query stops with "resources exhausted" however large the budget: `metrics` at 100 M requests failed so at 1 GiB
//! and at 2 GiB. Here consumers that can spill share only the pool less a headroom (a quarter of it; an eighth was
//! too little for the merges of TTFT under load at 100 M), so that the merges, which cannot spill, find room. Otherwise it is [`FairSpillPool`]'s rule: each consumer that can
//! spill may hold its fraction of what the others that cannot have left.
//!
//! [`FairSpillPool`]: datafusion::execution::memory_pool::FairSpillPool

use std::sync::Mutex;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation};

/// A fair spill pool of `size` bytes whose spilling consumers share `size − size / 4` at most.
#[derive(Debug)]
pub(crate) struct HeadroomPool {
    size: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Consumers that can spill.
    spillers: usize,
    spillable: usize,
    unspillable: usize,
}

impl HeadroomPool {
    pub(crate) fn new(size: usize) -> Self {
        Self { size, state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl MemoryPool for HeadroomPool {
    fn name(&self) -> &str {
        "fair with headroom"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.state().spillers += 1;
        }
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            let mut state = self.state();
            state.spillers = state.spillers.saturating_sub(1);
        }
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        let mut state = self.state();
        if reservation.consumer().can_spill() {
            state.spillable += additional;
        } else {
            state.unspillable += additional;
        }
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        let mut state = self.state();
        if reservation.consumer().can_spill() {
            state.spillable = state.spillable.saturating_sub(shrink);
        } else {
            state.unspillable = state.unspillable.saturating_sub(shrink);
        }
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        let mut state = self.state();
        let (available, total) = if reservation.consumer().can_spill() {
            let shared = (self.size - self.size / 4).saturating_sub(state.unspillable);
            (shared / state.spillers.max(1), reservation.size() + additional)
        } else {
            (self.size.saturating_sub(state.unspillable + state.spillable), additional)
        };
        if total > available {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "Failed to allocate additional {additional} bytes for {} with {} bytes already allocated for this \
                 reservation - {available} bytes available to it in the pool of {} bytes",
                reservation.consumer().name(),
                reservation.size(),
                self.size
            )));
        }
        if reservation.consumer().can_spill() {
            state.spillable += additional;
        } else {
            state.unspillable += additional;
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        let state = self.state();
        state.spillable + state.unspillable
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.size)
    }
}

impl std::fmt::Display for HeadroomPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}(pool_size: {})", self.name(), self.size)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn spillers_leave_a_quarter_to_the_rest() {
        let pool: Arc<dyn MemoryPool> = Arc::new(HeadroomPool::new(800));
        let a = MemoryConsumer::new("a").with_can_spill(true).register(&pool);
        let b = MemoryConsumer::new("b").with_can_spill(true).register(&pool);
        let merge = MemoryConsumer::new("merge").register(&pool);
        // Two spillers share 600 bytes: 300 each.
        a.try_grow(300).unwrap();
        assert!(a.try_grow(1).is_err());
        b.try_grow(300).unwrap();
        // What cannot spill still finds the last 200.
        merge.try_grow(200).unwrap();
        assert!(merge.try_grow(1).is_err());
        assert_eq!(pool.reserved(), 800);
        // Once it holds memory, the spillers' shares are of what is left: (600 − 200) / 2 = 200.
        a.free();
        assert!(a.try_grow(201).is_err());
        a.try_grow(200).unwrap();
        drop((a, b, merge));
        assert_eq!(pool.reserved(), 0);
    }
}
