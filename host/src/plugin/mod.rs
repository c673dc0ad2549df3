//! Components as plugins: a provider component behind the [`crate::subagent::Provider`] trait,
//! a tool component behind [`crate::tool::Tool`], and the host imports each world needs.

pub(crate) mod agents;
pub(crate) mod observer;
pub(crate) mod provider;
pub(crate) mod tool;

use crate::bindings::provider::seam::plugin::host::{Host as LogHost, LogLevel};
use crate::bindings::provider::seam::plugin::types::Host as TypesHost;
use crate::sandbox::PluginState;

/// Longest log line a plugin may send; the rest is cut so a guest cannot flood the log.
const MAX_LOG_LINE: usize = 4096;

impl TypesHost for PluginState {}

impl LogHost for PluginState {
    async fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        let message = truncate(&message, MAX_LOG_LINE);
        // The same per-store budget as the guest's stdout and stderr.
        if !self.log_budget.take(message.len().max(1)) {
            return Ok(());
        }
        let plugin = &*self.plugin;
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Renders a wasmtime error (often a trap wrapped in a backtrace) as one readable line.
pub(crate) fn guest_fault(e: &wasmtime::Error) -> String {
    // A limit hit names the plugin and the limit; say that rather than "wasm trap".
    if let Some(hit) = crate::sandbox::LimitHit::find(e) {
        return hit.to_string();
    }
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        if *trap == wasmtime::Trap::StackOverflow {
            return format!("{trap} (the guest exceeded the wasm stack limit)");
        }
        return trap.to_string();
    }
    let text = format!("{e:#}");
    text.lines().next().unwrap_or("guest fault").to_string()
}
