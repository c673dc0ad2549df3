//! The `host` interface (`log`) and the shared `types` interface, which every world imports.

use wasmtime::component::Linker;

use crate::store::view::{HasPlugin, PluginCtxView, PluginView};
use crate::versions::convert::SubagentFailure;
use crate::versions::latest::provider_world::seam::plugin::host::{self as wit_host, LogLevel};
use crate::versions::latest::provider_world::seam::plugin::types as wit_types;

/// Longest log line a plugin may send; the rest is cut so a guest cannot flood the log.
const MAX_LOG_LINE: usize = 4096;

/// Adds `types` and `host` to a linker.
pub fn add_to_linker<T: PluginView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit_types::add_to_linker::<_, HasPlugin>(linker, T::plugin)?;
    wit_host::add_to_linker::<_, HasPlugin>(linker, T::plugin)
}

impl wit_types::Host for PluginCtxView<'_> {
    fn convert_subagent_error(
        &mut self,
        err: SubagentFailure,
    ) -> wasmtime::Result<wit_types::SubagentError> {
        err.guest()
    }
}

impl wit_host::Host for PluginCtxView<'_> {
    async fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        let message = truncate(&message, MAX_LOG_LINE);
        // The same per-store budget as the guest's stdout and stderr.
        if !self.log_budget.take(message.len().max(1)) {
            return Ok(());
        }
        let plugin = self.plugin;
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
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
