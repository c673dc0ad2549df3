//! Per-store plugin state: a default-deny WASI context, resource limits, and the run or tool
//! call the store was created for.
//!
//! A plugin gets no preopened directories, no environment, no arguments, no network and no name
//! lookup unless its config entry grants them ([`Grants`]); stdin is empty, and stdout and
//! stderr are captured into `tracing` with the plugin id. Every store has a memory, table and
//! instance cap and a CPU budget per call ([`Limits`]).

mod entry;
mod gate;
mod grants;
mod limits;
mod output;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

pub use entry::{parse_grants, parse_limits};
pub use grants::{DirGrant, Granted, Grants, SandboxError, DIR_KEYS, GRANT_KEYS};
pub use limits::{
    Limit, LimitHit, LimitOverrides, Limits, OnConcurrency, LIMIT_KEYS, MAX_MEMORY_MB,
};
pub use output::{LOG_BUDGET, MAX_LINE};

use crate::live::{InstanceGuard, LiveCounts};
use crate::plugin::agents::RunEnv;
use crate::plugin::tool::ToolCall;
pub(crate) use gate::{blocks_size, request_size, Denied, LimitedProvider, RunGate};
use limits::PluginLimiter;
pub(crate) use output::LogBudget;
use output::{GuestOutput, Stdio};

/// Everything a plugin's stores are made with: its limits and its grants.
#[derive(Debug, Clone)]
pub struct Sandbox {
    limits: Limits,
    grants: Arc<Granted>,
    /// The engine's epoch tick, which turns the CPU budget into ticks.
    epoch_tick: Duration,
}

impl Sandbox {
    /// A sandbox with these limits and grants, for an engine ticking every `epoch_tick`.
    pub fn new(limits: Limits, grants: Granted, epoch_tick: Duration) -> Self {
        Self {
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
}

impl From<Limits> for Sandbox {
    /// Limits and no grants at all, for an engine with the default epoch tick.
    fn from(limits: Limits) -> Self {
        Self::new(
            limits,
            Granted::default(),
            crate::engine::EngineOptions::default().epoch_tick,
        )
    }
}

/// What a store is for.
pub(crate) enum Role {
    /// Reading a descriptor or binding at load.
    Describe,
    /// Delivering one event to an observer.
    Observe,
    /// One provider run.
    Run(RunEnv),
    /// One tool call.
    Call(ToolCall),
}

/// The data of every plugin store.
pub(crate) struct PluginState {
    pub(crate) plugin: Arc<str>,
    pub(crate) role: Role,
    /// Shared by stdout, stderr and `host.log`.
    pub(crate) log_budget: Arc<LogBudget>,
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: PluginLimiter,
    /// Epoch ticks during which this store's guest code was running.
    ticks: u64,
    _live: InstanceGuard,
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl PluginState {
    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

/// Creates a store for `plugin` with a WASI context holding only what `sandbox` grants, and its
/// limits.
///
/// Every store yields to the async executor at each epoch tick, so a guest that never calls the
/// host still lets the host cancel it (by dropping the store) and keeps other runs moving. The
/// same ticks measure the guest's CPU time: the callback only runs while guest code does, so
/// time spent blocked in a host import costs at most one tick per import call.
pub(crate) fn new_store(
    engine: &Engine,
    live: &Arc<LiveCounts>,
    plugin: Arc<str>,
    role: Role,
    sandbox: &Sandbox,
) -> Store<PluginState> {
    let log_budget = LogBudget::new(plugin.clone());
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(GuestOutput::new(Stdio::Stdout, log_budget.clone()))
        .stderr(GuestOutput::new(Stdio::Stderr, log_budget.clone()));
    sandbox.grants.apply(&plugin, &mut builder);
    let limits = &sandbox.limits;
    let state = PluginState {
        limiter: PluginLimiter::new(plugin.clone(), limits),
        plugin,
        role,
        log_budget,
        wasi: builder.build(),
        table: ResourceTable::new(),
        ticks: 0,
        _live: live.instance_guard(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    // A new store's deadline is 0: without this the first epoch check would trap.
    store.set_epoch_deadline(1);
    let budget = ticks_for(limits.cpu_per_call, sandbox.epoch_tick);
    let cpu = limits.cpu_per_call;
    store.epoch_deadline_callback(move |mut ctx| {
        let state = ctx.data_mut();
        state.ticks += 1;
        if state.ticks > budget {
            let hit = LimitHit::new(&state.plugin, Limit::Cpu { budget: cpu });
            tracing::warn!(plugin = %state.plugin, limit = hit.limit.key(), "{hit}");
            return Err(wasmtime::Error::new(hit));
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

/// How many ticks make `budget` (at least one).
fn ticks_for(budget: Duration, tick: Duration) -> u64 {
    let tick = tick.as_micros().max(1);
    u64::try_from(budget.as_micros().div_ceil(tick))
        .unwrap_or(u64::MAX)
        .max(1)
}
