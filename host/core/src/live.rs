//! Host-wide counts of live things, so that callers and tests can prove quiescence.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counters shared by every part of a host.
#[derive(Debug, Default)]
pub struct LiveCounts {
    runs: AtomicUsize,
    instances: AtomicUsize,
}

impl LiveCounts {
    /// Runs started and not yet disposed.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Component instances (stores) alive, across all plugins.
    pub fn instances(&self) -> usize {
        self.instances.load(Ordering::SeqCst)
    }

    /// Counts a run as started (the subagent service calls this).
    pub fn run_started(&self) {
        self.runs.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a run as disposed.
    pub fn run_disposed(&self) {
        self.runs.fetch_sub(1, Ordering::SeqCst);
    }

    /// Counts an instance for as long as the returned guard lives (it sits in the store's data,
    /// so dropping the store is what ends the count).
    pub fn instance_guard(self: &Arc<Self>) -> InstanceGuard {
        self.instances.fetch_add(1, Ordering::SeqCst);
        InstanceGuard(self.clone())
    }
}

/// Decrements the live-instance count when dropped.
#[derive(Debug)]
pub struct InstanceGuard(Arc<LiveCounts>);

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        self.0.instances.fetch_sub(1, Ordering::SeqCst);
    }
}
