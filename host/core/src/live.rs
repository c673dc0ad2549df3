//! Host-wide counts of live things, so that callers and tests can prove quiescence.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counters shared by every part of a host.
#[derive(Debug, Default)]
pub struct LiveCounts {
    runs: AtomicUsize,
    instances: AtomicUsize,
    processes: AtomicUsize,
    /// Woken each time a process is reaped.
    reaped: tokio::sync::Notify,
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

    /// Agent processes (ACP providers) spawned and not yet reaped.
    pub fn processes(&self) -> usize {
        self.processes.load(Ordering::SeqCst)
    }

    /// Returns once no process counts: every one spawned has been reaped (those of runs
    /// already disposed end in the background; this waits for them).
    pub async fn processes_reaped(&self) {
        loop {
            let reaped = self.reaped.notified();
            tokio::pin!(reaped);
            // Registered before the count is read, so a reap in between is not missed.
            reaped.as_mut().enable();
            if self.processes() == 0 {
                return;
            }
            reaped.await;
        }
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

    /// Counts a child process for as long as the returned guard lives; its owner drops it only
    /// once the process has been reaped.
    pub fn process_guard(self: &Arc<Self>) -> ProcessGuard {
        self.processes.fetch_add(1, Ordering::SeqCst);
        ProcessGuard(self.clone())
    }
}

/// Decrements the live-process count when dropped.
#[derive(Debug)]
pub struct ProcessGuard(Arc<LiveCounts>);

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.0.processes.fetch_sub(1, Ordering::SeqCst);
        self.0.reaped.notify_waiters();
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
