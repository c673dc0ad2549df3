//! Sandbox policy: what a plugin is granted and the limits it runs under.
//!
//! A plugin gets no preopened directories, no environment, no arguments, no network and no name
//! lookup unless its config entry grants them ([`Grants`]); stdin is empty, and stdout and
//! stderr are captured into `tracing` with the plugin id ([`output`]). Every store has a memory,
//! table and instance cap and a CPU budget per call, and every run a concurrency slot, a wall
//! clock and an output cap ([`Limits`], [`gate`]). This module decides; `plugin::state` builds
//! the stores that enforce it.

mod entry;
pub(crate) mod gate;
mod grants;
mod limits;
pub(crate) mod output;

use std::sync::Arc;
use std::time::Duration;

use seam_core::budget::MemoryBudget;

pub use entry::{parse_grants, parse_limits};
pub use grants::{DirGrant, Granted, Grants, SandboxError, DIR_KEYS, GRANT_KEYS};
pub(crate) use limits::PluginLimiter;
pub use limits::{
    key, Limit, LimitHit, LimitOverrides, Limits, OnConcurrency, LIMIT_KEYS, MAX_MEMORY_MB,
};
pub use output::{LOG_BUDGET, MAX_LINE};

/// Everything a plugin's stores are made with: its limits and its grants.
#[derive(Debug, Clone)]
pub struct Sandbox {
    limits: Limits,
    grants: Arc<Granted>,
    /// The engine's epoch tick, which turns the CPU budget into ticks.
    epoch_tick: Duration,
    /// The plugin's host-memory budget, shared by all its stores.
    host_memory: Arc<MemoryBudget>,
}

impl Sandbox {
    /// A sandbox with these limits and grants, for an engine ticking every `epoch_tick`.
    pub fn new(limits: Limits, grants: Granted, epoch_tick: Duration) -> Self {
        Self {
            host_memory: MemoryBudget::new(limits.host_memory_bytes),
            limits,
            grants: Arc::new(grants),
            epoch_tick,
        }
    }

    /// The plugin's resource limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What the plugin is granted.
    pub fn grants(&self) -> &Granted {
        &self.grants
    }

    /// The plugin's host-memory budget (`host_memory_mb`), shared by all its stores.
    pub fn host_memory(&self) -> &Arc<MemoryBudget> {
        &self.host_memory
    }

    /// How many epoch ticks make the CPU budget of one call (at least one).
    pub fn cpu_ticks(&self) -> u64 {
        let tick = self.epoch_tick.as_micros().max(1);
        u64::try_from(self.limits.cpu_per_call.as_micros().div_ceil(tick))
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_budget_is_at_least_one_tick_and_rounds_up() {
        let limits = |ms| Limits {
            cpu_per_call: Duration::from_millis(ms),
            ..Limits::default()
        };
        let tick = Duration::from_millis(10);
        assert_eq!(
            Sandbox::new(limits(0), Granted::default(), tick).cpu_ticks(),
            1
        );
        assert_eq!(
            Sandbox::new(limits(25), Granted::default(), tick).cpu_ticks(),
            3
        );
        assert_eq!(
            Sandbox::new(limits(1000), Granted::default(), tick).cpu_ticks(),
            100
        );
    }
}
