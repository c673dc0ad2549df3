//! The Seam interfaces the host implements, one module per WIT interface of the latest version,
//! each implemented on a store's `PluginCtxView` (`crate::store::view`) and with its own
//! `add_to_linker`: [`log`] (`host` and the shared `types`), [`run_context`], [`runs`],
//! [`agents`], [`subagents`]. Older versions' imports convert and call these.

pub mod agents;
pub mod log;
pub mod run_context;
pub mod runs;
pub mod subagents;

use seam_core::PluginKind;
use wasmtime::component::Linker;

use crate::store::view::PluginView;

/// Adds the interfaces `kind`'s world imports in the latest version (WASI is added by the
/// caller).
pub fn add_to_linker<T: PluginView + 'static>(
    linker: &mut Linker<T>,
    kind: PluginKind,
) -> wasmtime::Result<()> {
    log::add_to_linker(linker)?;
    match kind {
        PluginKind::Provider => {
            run_context::add_to_linker(linker)?;
            runs::add_to_linker(linker)?;
            agents::add_to_linker(linker)?;
            subagents::add_to_linker(linker)
        }
        PluginKind::Tool => subagents::add_to_linker(linker),
        PluginKind::Observer => Ok(()),
    }
}
