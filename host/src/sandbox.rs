//! Per-store plugin state: a default-deny WASI context, resource limits, and the run or tool
//! call the store was created for.
//!
//! A plugin gets no preopened directories, no environment, no arguments, no network and no
//! inherited stdio: its stdout and stderr are discarded, and it talks to the host only through
//! Seam's own imports.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::live::{InstanceGuard, LiveCounts};
use crate::plugin::tool::ToolCall;
use crate::subagent::RunContext;

/// Resource limits applied to every store of a plugin.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest size of one linear memory, in bytes.
    pub memory_bytes: usize,
    /// Most table elements per table.
    pub table_elements: usize,
    /// Most component/core instances per store.
    pub instances: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            table_elements: 20_000,
            instances: 64,
        }
    }
}

/// What a store is for.
pub(crate) enum Role {
    /// Reading a descriptor or binding at load.
    Describe,
    /// One provider run.
    Run(RunContext),
    /// One tool call.
    Call(ToolCall),
}

/// The data of every plugin store.
pub(crate) struct PluginState {
    pub(crate) plugin: Arc<str>,
    pub(crate) role: Role,
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
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

/// Creates a store for `plugin` with a default-deny WASI context and the given limits.
///
/// Every store yields to the async executor at each epoch tick, so a guest that never calls the
/// host still lets the host cancel it (by dropping the store) and keeps other runs moving.
pub(crate) fn new_store(
    engine: &Engine,
    live: &Arc<LiveCounts>,
    plugin: Arc<str>,
    role: Role,
    limits: &Limits,
) -> Store<PluginState> {
    let wasi = WasiCtxBuilder::new().build();
    let store_limits = StoreLimitsBuilder::new()
        .memory_size(limits.memory_bytes)
        .table_elements(limits.table_elements)
        .instances(limits.instances)
        .trap_on_grow_failure(true)
        .build();
    let state = PluginState {
        plugin,
        role,
        wasi,
        table: ResourceTable::new(),
        limits: store_limits,
        _live: live.instance_guard(),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    // A new store's deadline is 0: without this the first epoch check would trap.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|_| Ok(UpdateDeadline::Yield(1)));
    store
}
