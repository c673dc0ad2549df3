//! A store's resource limiter: the sandbox's memory, table and instance caps, enforced with a
//! trap that names the plugin and the limit.

use wasmtime::ResourceLimiter;

use crate::sandbox::{Limit, LimitHit, Limits};

/// The store's resource limiter: like wasmtime's `StoreLimits` with `trap_on_grow_failure`, but
/// a refused growth traps with a [`LimitHit`] naming the plugin and the limit.
pub struct PluginLimiter {
    plugin: std::sync::Arc<str>,
    memory_bytes: usize,
    table_elements: usize,
    instances: usize,
}

impl PluginLimiter {
    /// The limiter of one of `plugin`'s stores, from its memory, table and instance limits.
    pub fn new(plugin: std::sync::Arc<str>, limits: &Limits) -> Self {
        Self {
            plugin,
            memory_bytes: limits.memory_bytes,
            table_elements: limits.table_elements,
            instances: limits.instances,
        }
    }

    fn hit(&self, limit: Limit) -> wasmtime::Error {
        wasmtime::Error::new(LimitHit::logged(&self.plugin, limit))
    }
}

impl ResourceLimiter for PluginLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            // A trap rather than `memory.grow` returning -1: a Rust guest would abort with an
            // anonymous `unreachable`, and the limit would go unnamed.
            return Err(self.hit(Limit::Memory {
                max: self.memory_bytes,
                desired,
            }));
        }
        // Past the module's own declared maximum: an ordinary failed `memory.grow`.
        Ok(maximum.is_none_or(|m| desired <= m))
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // The engine could not grow within our cap (the pool slot is smaller): still a trap.
        Err(error.context(format!(
            "plugin `{}`: memory growth failed below its limit",
            self.plugin
        )))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return Err(self.hit(Limit::TableElements {
                max: self.table_elements,
                desired,
            }));
        }
        Ok(maximum.is_none_or(|m| desired <= m))
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context(format!(
            "plugin `{}`: table growth failed below its limit",
            self.plugin
        )))
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        // A component's core instances share few tables; the instance cap bounds the rest.
        self.instances.saturating_mul(4)
    }

    fn memories(&self) -> usize {
        self.instances.saturating_mul(2)
    }
}
