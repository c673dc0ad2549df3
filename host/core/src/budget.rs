//! Bounded host memory: what a plugin makes the host hold through its imports is charged to the
//! plugin's budget, and released when the host drops it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One plugin's budget of host memory.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
}

/// A charge was refused: the budget would be exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    /// The budget, in bytes.
    pub limit: usize,
    /// Bytes held when the charge was asked for.
    pub used: usize,
    /// Bytes asked for.
    pub asked: usize,
}

/// Bytes held for a plugin; dropping the charge gives them back.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<MemoryBudget>,
    bytes: usize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Charges `bytes`, or refuses if the budget would be exceeded.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Result<Charge, OverBudget> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .map(|_| Charge {
                budget: self.clone(),
                bytes,
            })
            .map_err(|used| OverBudget {
                limit: self.limit,
                used,
                asked: bytes,
            })
    }
}

impl Charge {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_add_up_refuse_past_the_limit_and_release_on_drop() {
        let budget = MemoryBudget::new(100);
        let a = budget.charge(60).unwrap();
        assert_eq!(
            budget.charge(41).unwrap_err(),
            OverBudget {
                limit: 100,
                used: 60,
                asked: 41
            }
        );
        let b = budget.charge(40).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert!(budget.charge(usize::MAX).is_err());
    }
}
