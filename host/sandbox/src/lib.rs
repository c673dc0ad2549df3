//! Sandbox policy: what a plugin is granted and the limits it runs under.
//!
//! A plugin gets no preopened directories, no environment, no arguments, no network and no name
//! lookup unless its config entry grants them ([`Grants`]); stdin is empty, and stdout and
//! stderr are captured into `tracing` with the plugin id (within [`LOG_BUDGET`]). Every store has a memory,
//! table and instance cap and a CPU budget per call, and every run a concurrency slot, a wall
//! clock and an output cap ([`Limits`], [`gate`]). This module decides; `crate::store` builds
//! the stores that enforce it.

pub mod connections;
mod entry;
pub mod gate;
mod grants;
pub mod http_guard;
mod limits;
pub mod trusted_dir;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use seam_core::budget::MemoryBudget;

use connections::Connections;

pub use entry::{header_values, parse_grants, parse_limits, EntryError};
pub use grants::{narrowed_dirs, Denial, SocketWatch};
pub use grants::{
    DirGrant, Granted, Grants, HttpOrigin, OriginError, Removal, Removed, SandboxError, DIR_KEYS,
    GRANT_KEYS,
};
pub use limits::{
    key, Limit, LimitHit, LimitOverrides, Limits, OnConcurrency, LIMIT_KEYS, LOG_BUDGET, MAX_LINE,
    MAX_MEMORY_MB,
};

/// Everything a plugin's stores are made with: its limits and its grants.
#[derive(Debug, Clone)]
pub struct Sandbox {
    limits: Limits,
    grants: Arc<Granted>,
    /// The engine's epoch tick, which turns the CPU budget into ticks.
    epoch_tick: Duration,
    /// The plugin's host-memory budget, shared by all its stores.
    host_memory: Arc<MemoryBudget>,
    /// What the plugin wrote and created through its grants, shared by all its stores.
    disk: Arc<DiskQuota>,
    /// The plugin's open connections, shared by all its stores.
    connections: Arc<Connections>,
    /// The cap on what each run its calls start may spend (a tool entry's `config.budget`).
    budget: Option<seam_core::spend::Budget>,
    /// What each run its calls start may reach (a tool entry's `config.scope`).
    scope: Option<seam_core::scope::Scope>,
    /// Whether its tools' calls need a yes first (a tool entry's `config.approve`).
    approve: Option<seam_core::approval::EntryPolicy>,
    /// Who answers the requests below each run its calls start (a tool entry's
    /// `config.approver`).
    approver: Option<seam_core::approval::Approver>,
    /// Whether its stores are recorded and replayed (an entry's `config.record`).
    record: bool,
    /// The most runs one instance serves at once, when instances are shared (an entry's
    /// `config.share_instance`); `None`: an instance per run.
    shared_runs: Option<usize>,
}

impl Sandbox {
    /// A sandbox with these limits and grants, for an engine ticking every `epoch_tick`.
    pub fn new(limits: Limits, grants: Granted, epoch_tick: Duration) -> Self {
        Self {
            host_memory: MemoryBudget::new(limits.host_memory_bytes),
            disk: Arc::new(DiskQuota::new(&limits)),
            connections: Arc::new(Connections::new(limits.max_http_connections)),
            limits,
            grants: Arc::new(grants),
            epoch_tick,
            budget: None,
            scope: None,
            approve: None,
            approver: None,
            record: true,
            shared_runs: None,
        }
    }

    /// The sandbox with `scope` narrowing what each run its calls start may reach.
    pub fn with_scope(mut self, scope: Option<seam_core::scope::Scope>) -> Self {
        self.scope = scope;
        self
    }

    /// What each run its calls start may reach, if its entry narrowed it.
    pub fn scope(&self) -> Option<&seam_core::scope::Scope> {
        self.scope.as_ref()
    }

    /// The sandbox with `approve` saying which of its tools' calls need a yes first.
    pub fn with_approve(mut self, approve: Option<seam_core::approval::EntryPolicy>) -> Self {
        self.approve = approve;
        self
    }

    /// The sandbox with `approver` answering the requests below each run its calls start.
    pub fn with_approver(mut self, approver: Option<seam_core::approval::Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// The sandbox whose stores are recorded and replayed (`true`, the default) or kept live
    /// (an entry's `config.record = false`).
    pub fn with_record(mut self, record: bool) -> Self {
        self.record = record;
        self
    }

    /// The sandbox whose provider serves up to `runs` runs from one instance (an entry's
    /// `config.share_instance`), or one instance per run (`None`).
    pub fn with_shared_runs(mut self, runs: Option<usize>) -> Self {
        self.shared_runs = runs;
        self
    }

    /// The most runs one instance serves at once, when its entry shares instances.
    pub fn shared_runs(&self) -> Option<usize> {
        self.shared_runs
    }

    /// Whether its stores' clock, random and HTTP are recorded and replayed.
    pub fn records(&self) -> bool {
        self.record
    }

    /// Who answers the requests below each run its calls start, if its entry named one.
    pub fn approver(&self) -> Option<seam_core::approval::Approver> {
        self.approver
    }

    /// Whether a call of its tool `name` needs a yes first.
    pub fn approve(&self, name: &str) -> seam_core::approval::Policy {
        self.approve
            .as_ref()
            .map_or(seam_core::approval::Policy::Allow, |p| p.for_tool(name))
    }

    /// The sandbox with `budget` as the cap of each run its calls start.
    pub fn with_budget(mut self, budget: Option<seam_core::spend::Budget>) -> Self {
        self.budget = budget;
        self
    }

    /// The cap of each run its calls start, if its entry set one.
    pub fn budget(&self) -> Option<seam_core::spend::Budget> {
        self.budget
    }

    /// The plugin's resource limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What the plugin is granted.
    pub fn grants(&self) -> &Granted {
        &self.grants
    }

    /// What the plugin is granted, shared (each store's `wasi:http` hooks hold it).
    pub fn granted(&self) -> &Arc<Granted> {
        &self.grants
    }

    /// The plugin's host-memory budget (`host_memory_mb`), shared by all its stores.
    pub fn host_memory(&self) -> &Arc<MemoryBudget> {
        &self.host_memory
    }

    /// The plugin's disk quota (`max_write_mb`, `max_files`), shared by all its stores.
    pub fn disk(&self) -> &Arc<DiskQuota> {
        &self.disk
    }

    /// The plugin's open connections (`max_http_connections`), shared by all its stores.
    pub fn connections(&self) -> &Arc<Connections> {
        &self.connections
    }

    /// How many epoch ticks make the CPU budget of one call (at least one).
    pub fn cpu_ticks(&self) -> u64 {
        self.ticks(self.limits.cpu_per_call)
    }

    /// How many epoch ticks make the CPU budget of one `describe` or `bind` (at least one).
    pub fn describe_cpu_ticks(&self) -> u64 {
        self.ticks(self.limits.describe_cpu)
    }

    fn ticks(&self, budget: std::time::Duration) -> u64 {
        let tick = self.epoch_tick.as_micros().max(1);
        u64::try_from(budget.as_micros().div_ceil(tick))
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// A plugin's disk quota: bytes written and files created through its writable grants, counted
/// over all its stores for as long as its entry is loaded. The counts only grow: deleting or
/// truncating files gives nothing back, so a plugin cannot churn past the quota.
#[derive(Debug)]
pub struct DiskQuota {
    max_bytes: u64,
    max_files: u64,
    bytes: AtomicU64,
    files: AtomicU64,
    /// Whether a refusal was logged: only the first is, the guest sees every one.
    logged: AtomicBool,
}

impl DiskQuota {
    fn new(limits: &Limits) -> Self {
        Self {
            max_bytes: limits.max_write_bytes,
            max_files: limits.max_files,
            bytes: AtomicU64::new(0),
            files: AtomicU64::new(0),
            logged: AtomicBool::new(false),
        }
    }

    /// Counts `asked` more bytes, or counts nothing and says which limit refuses them.
    pub fn charge_bytes(&self, asked: u64) -> Result<(), Limit> {
        self.bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(asked)
                    .filter(|&total| total <= self.max_bytes)
            })
            .map(drop)
            .map_err(|used| Limit::WriteBytes {
                max: self.max_bytes,
                used,
                asked,
            })
    }

    /// Counts one more created file, or counts nothing and says which limit refuses it.
    pub fn charge_file(&self) -> Result<(), Limit> {
        self.files
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used + 1).filter(|&total| total <= self.max_files)
            })
            .map(drop)
            .map_err(|_| Limit::Files {
                max: self.max_files,
            })
    }

    /// Gives back `bytes` counted for an operation that did not write them.
    pub fn refund_bytes(&self, bytes: u64) {
        if bytes > 0 {
            self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Gives back a file counted for an operation that did not create it.
    pub fn refund_file(&self) {
        self.files.fetch_sub(1, Ordering::AcqRel);
    }

    /// Bytes counted so far.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// Whether this is the first refusal (the one to log).
    pub fn first_refusal(&self) -> bool {
        !self.logged.swap(true, Ordering::AcqRel)
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

    #[test]
    fn the_disk_quota_refuses_past_its_limits_and_counts_nothing_refused() {
        let quota = DiskQuota::new(&Limits {
            max_write_bytes: 100,
            max_files: 2,
            ..Limits::default()
        });
        assert!(quota.charge_bytes(60).is_ok());
        assert_eq!(
            quota.charge_bytes(41),
            Err(Limit::WriteBytes {
                max: 100,
                used: 60,
                asked: 41
            })
        );
        assert!(quota.charge_bytes(40).is_ok());
        assert!(quota.charge_bytes(u64::MAX).is_err());
        assert_eq!(quota.bytes(), 100);
        assert!(quota.charge_file().is_ok());
        assert!(quota.charge_file().is_ok());
        assert_eq!(quota.charge_file(), Err(Limit::Files { max: 2 }));
        assert!(quota.first_refusal());
        assert!(!quota.first_refusal());
    }
}
